"""The kernels' shared vocabulary: the words every family and every target uses, defined once.

- ``Extent``: a size that is an int, or a TIR expression (a dynamic M); ``ceil_div`` and
  ``extent_record`` (an extent as JSON data) over it.
- ``Param``: one tensor parameter of a kernel (name, shape, TIR dtype); every plan lists its kernel's
  parameters as these, in signature order.
- ``plan_record`` / ``PlanRecord``: a frozen plan as plain JSON data, and the mixin that gives every
  plan record ``to_record()`` and ``to_json()`` (what ``--emit config`` prints; a target adds its
  summary, such as the cost model's estimate, by overriding ``summary()``).
- ``Target`` / ``Family``: a family's table of targets. A row names the module that implements the
  family's verbs on that target (``plan``, ``choose``, ``emit``, ``build``, ``execute``); the family's
  own functions of the same names dispatch through it, so a new target is a folder and one row.
- ``check_config``: a config of the target's record class whose fields hold values of their declared types (a
  ContractError naming the field first: ``"128"`` for an int, ``"no"`` for a bool), before any rule reads them.
- ``option`` / ``refused_options``: a config field's CLI option as typed (``--stages 40``) and a refusal of the
  options given as one line, those options first: every target's ``config_from_options`` and the attention
  CLI's config fields word their refusals through them.

Pure Python (attrs): no TIRx, no numpy.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import numbers
from typing import Union

import attrs

Extent = Union[int, "PrimExpr"]  # noqa: F821 (a TIR expression: a symbolic M)


def ceil_div(x, d: int):
    """``ceil(x / d)`` of a non-negative extent: Python's for an int; for a TIR expression (of a dynamic
    M, which is at least 1) ``truncdiv(x + d - 1, d)``. Not ``-(-x // d)``: TIR lowers a floor division
    whose dividend's sign it cannot prove into let-bound remainders and a select, which CUDA codegen
    then prints as statements inside an address expression (NVRTC rejects the kernel)."""
    if isinstance(x, int):
        return -(-x // d)
    from tvm_tirx import tirx

    return tirx.truncdiv(x + (d - 1), d)


def extent_record(value):
    """An extent as record data: an int as it is, a TIR expression as its text (``M``, ...)."""
    if type(value).__module__.startswith("tvm_tirx"):
        return str(value)
    return value


def option(name: str, value=True) -> str:
    """The command-line option that sets field ``name`` to ``value``, as typed: ``--stages 40``; a switch alone
    (``--swap-ab`` for True, the default: the flag's name; ``--no-persistent`` for False)."""
    flag = f"--{'no-' if value is False else ''}{name.replace('_', '-')}"
    return flag if isinstance(value, bool) else f"{flag} {value}"


def refused_options(options, error: Exception) -> ValueError:
    """``error``, a refusal of what ``options`` (each as ``option`` types it) asked for, as one line: those
    options first, then the error's first line (``--stages 40: operand stages: ...``)."""
    return ValueError(f"{', '.join(dict.fromkeys(options))}: {str(error).splitlines()[0]}")


FIELD_TYPES = {"int": (lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool), "an int"),
               "bool": (lambda v: isinstance(v, bool), "True or False"),
               "str": (lambda v: isinstance(v, str), "a string")}
"""The declared field types ``check_config`` checks (each ``| None`` too): the test and the words of its refusal."""


def check_config(config, classes: tuple, what: str) -> None:
    """``config`` (None passes) an instance of one of ``classes`` whose every field of a ``FIELD_TYPES`` type
    holds a value of it: a ContractError naming ``config`` (another target's config) or the field (``block_m="128"``,
    ``stages=3.0``, ``lds_dma="no"``), before the config's own rules read the values. ``what``: the record's words
    (``"sm80 GEMM config"``)."""
    from ..errors import ContractError

    if config is None:
        return
    if not isinstance(config, classes):
        names = " or ".join(c.__name__ for c in classes)
        raise ContractError(f"{what}: a config of this target", operand="config", check="parameters",
                            expected=f"a {names} (or None: the cost model's)", found=f"a {type(config).__name__}")
    for name, declared, base, optional in _typed_fields(type(config)):
        value = getattr(config, name)
        if not (optional and value is None) and not FIELD_TYPES[base][0](value):
            raise ContractError(f"{what} {name}: a field of type {declared}", operand=name, check="parameters",
                                expected=FIELD_TYPES[base][1] + (" or None" if optional else ""), found=repr(value))


@functools.cache
def _typed_fields(cls) -> tuple:
    """``(name, declared, base, optional)`` of each field of the config class ``cls`` whose declared type (``| None``
    or not) is one of ``FIELD_TYPES``: read once a class (``check_config`` runs on every config the cost models build)."""
    out = []
    for f in attrs.fields(cls) if attrs.has(cls) else dataclasses.fields(cls):
        declared = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        base = declared.removesuffix(" | None")
        if base in FIELD_TYPES:
            out.append((f.name, declared, base, declared.endswith(" | None")))
    return tuple(out)


@attrs.frozen
class Param:
    """One tensor parameter of a kernel: ``name`` (the PrimFunc's), ``shape`` (``Extent`` entries) and
    TIR ``dtype``. Every plan of every target lists its kernel's parameters as these, in signature order."""

    name: str
    shape: tuple[Extent, ...]
    dtype: str


def plan_record(p) -> dict:
    """A plan as plain JSON data: every record a dict of its fields, tuples as lists, extents as
    ``extent_record``. Two plans give the same record exactly when every field is equal: the
    build-cache key of every target (``cache_key``)."""
    if attrs.has(type(p)):
        return {f.name: plan_record(getattr(p, f.name)) for f in attrs.fields(type(p))}
    if dataclasses.is_dataclass(p) and not isinstance(p, type):
        return {f.name: plan_record(getattr(p, f.name)) for f in dataclasses.fields(p)}
    if isinstance(p, tuple | list):
        return [plan_record(v) for v in p]
    if isinstance(p, dict):
        return {k: plan_record(v) for k, v in p.items()}
    return extent_record(p)


def cache_key(target: str, plan, digest: str, **extra) -> dict:
    """The one build-cache key scheme of every target and family: the target, the plan record's type
    and its every field (``plan_record``: a new plan field changes the key), the digest of the sources
    the kernel comes from, and what else the build depends on (``extra``: a CUDA arch, a compiler)."""
    return {"target": target, "plan": type(plan).__name__, "fields": plan_record(plan), "schedule": digest, **extra}


def target_of(record) -> str:
    """The target whose folder a record's class lives in (``tvm_cdna4.kernels.<target>.*``)."""
    parts = type(record).__module__.split(".")
    if parts[:2] != ["tvm_cdna4", "kernels"] or len(parts) < 4:
        raise ValueError(f"{type(record).__name__} is not a plan of a target folder (tvm_cdna4.kernels.<target>)")
    return parts[2]


class PlanRecord:
    """What every frozen plan record has: ``to_record()`` (all its fields as JSON data) and
    ``to_json()``, the one JSON object ``--emit config`` prints: ``summary()``, the target's
    ``<family>_target.summary(plan)`` (what a user asks of a plan: the tiling, the split, the launch,
    the estimate). A record names its family where it is declared:
    ``class GemmPlan(PlanRecord, family="gemm")``."""

    family = ""

    def __init_subclass__(cls, family: str = "", **kwargs):
        super().__init_subclass__(**kwargs)
        if family:
            cls.family = family

    def to_record(self) -> dict:
        return plan_record(self)

    def summary(self) -> dict:
        module = importlib.import_module(f"tvm_cdna4.kernels.{target_of(self)}.{self.family}_target")
        return module.summary(self)

    def to_json(self) -> str:
        return json.dumps(self.summary(), default=str)


@attrs.frozen
class Target:
    """One row of a family's table: the target's name, the module (dotted, absolute) that implements
    the family's verbs there, imported on first use (planning for one target never imports another's
    emitter), and other spellings of the name the CLI accepts (``aliases``: ``sm_80``)."""

    name: str
    module: str
    aliases: tuple[str, ...] = ()

    def verb(self, name: str):
        module = importlib.import_module(self.module)
        try:
            return getattr(module, name)
        except AttributeError:
            raise NotImplementedError(f"{self.module} (target {self.name}) has no {name}()") from None


def row(table: dict[str, Target], family: str, target: str) -> Target:
    """``table[target]``; a ValueError naming the family, the targets and what was found."""
    if target not in table:
        raise ValueError(f"{family} target: expected one of {tuple(table)}, found {target!r}")
    return table[target]


__all__ = ["FIELD_TYPES", "Extent", "Param", "PlanRecord", "Target", "cache_key", "ceil_div", "check_config",
           "extent_record", "plan_record", "row", "target_of"]
