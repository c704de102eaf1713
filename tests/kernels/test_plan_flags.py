"""The guard of the torch ops' cache keys (``kernels.flags``): each family's ``PLAN_FLAGS`` lists every module-level
switch of the modules its build imports, so a switch added without its family's tuple fails here (a toggled value
would reuse kernels planned under the other), and a listed name that is no switch fails too.

A switch: an UPPERCASE top-level name of a ``tvm_cdna4.kernels`` module assigned a bool, or a str that is one of
the choices a module of the closure lists (an UPPERCASE tuple of strs: ``GROUPED_WALK``'s ``"prefix"``,
``RESIDUAL_CHOICE``'s ``"global"``), but for ``VALUES`` (data, not a choice). The closure: the modules the entry
imports (at the top or in a function), and theirs, but an import of UPPERCASE names only (constants: no code of that
module runs) and ``NOT_PLANNING``'s edges (helpers of the build path that plan nothing)."""

from __future__ import annotations

import ast
import functools
import importlib
import pathlib

import pytest

import tvm_cdna4
from tvm_cdna4.kernels import flags

ROOT = pathlib.Path(tvm_cdna4.__file__).parent.parent
FAMILIES = {  # the entry the torch op builds through: the module whose PLAN_FLAGS it keys
    "sm90 GEMM (dense, grouped)": "sm90.gemm_target",
    "sm80 GEMM (dense, grouped, decode)": "sm80.gemm",
    "the decode kernel (in both GEMMs')": "sm80.decode_plan",
    "sm90 attention": "sm90.attention_target",
    "sm80 attention": "sm80.attention_target",
    "sm80 paged decode": "sm80.paged_target",
    "sm90 paged decode": "sm90.paged_target",
}
KEYED_BY = {"sm80.paged_target": "sm80.paged_decode_rule", "sm90.paged_target": "sm80.paged_decode_rule"}
"""The module holding the ``PLAN_FLAGS`` the op keys, where not the entry (``tvm_cdna4.torch_paged``: both rows key
``paged_decode_rule.plan_flags``)."""
NOT_PLANNING = {
    ("sm90.attention_target", "sm90.gemm_target"): "digest_of: the build cache key's source digest",
    ("sm80.attention", "sm80.gemm"): "schedule_digest, cached_build, _check_compiler: the build path",
    ("sm80.paged_target", "sm80.gemm"): "schedule_digest, cached_build, _check_compiler: the build path (not "
                                        "decode_plan.WEIGH_WIDE_DECODE: no paged plan reads it)",
    ("sm90.paged_decode_emit", "sm90.gemm_emit"): "tensor_map_lines: a tensor map's host lines (not gemm_plan / "
                                                  "gemm_shift's switches: they choose GEMM plans)",
}
VALUES = {("gemm.dynamic_m", "VAR_NAME"): "the M variable's name", ("attention.paged", "INDEX"): "the index dtype"}
KERNELS = "tvm_cdna4.kernels"


def _path(module: str) -> pathlib.Path | None:
    p = ROOT.joinpath(*module.split("."))
    return p / "__init__.py" if (p / "__init__.py").exists() else (p.with_suffix(".py") if p.with_suffix(".py").exists()
                                                                    else None)


@functools.cache
def _tree(module: str) -> ast.Module:
    """``module``'s parsed source, once (every family's closure walks the same modules)."""
    return ast.parse(_path(module).read_text())


@functools.cache
def _imports(module: str) -> tuple:
    return tuple(_each_import(module))


def _each_import(module: str):
    """``(imported module, name or None)`` of every import of ``module`` in the package (any depth)."""
    path = _path(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names if source.startswith("tvm_cdna4") else ():
                sub = f"{source}.{alias.name}"
                yield (sub, None) if _path(sub) else (source, alias.name)
        elif isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.startswith("tvm_cdna4") and _path(a.name))


def closure(entry: str) -> set:
    """The modules (dotted from ``tvm_cdna4.kernels``) whose code building ``entry``'s kernels may run."""
    skip = {(f"{KERNELS}.{a}", f"{KERNELS}.{b}") for a, b in NOT_PLANNING}
    seen, todo = set(), [f"{KERNELS}.{entry}"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(m for m, name in _imports(module) if not (name and name.isupper()) and (module, m) not in skip)
    return {m.removeprefix(f"{KERNELS}.") for m in seen if m.startswith(f"{KERNELS}.")}


def _constants(module: str):
    for node in _tree(f"{KERNELS}.{module}").body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    yield target.id, node.value


def _resolved(module: str):
    """``_constants(module)``, a value that names another constant of the module (``SHIFT_TMA = HALF``) as that
    constant's value: a switch set to a named choice."""
    values = dict(_constants(module))
    for name, value in values.items():
        if isinstance(value, ast.Name) and isinstance(values.get(value.id), ast.Constant):
            yield name, values[value.id], True
        else:
            yield name, value, False


def switches(modules: set) -> set:
    """``{(module, name)}``: the switches of ``modules`` (module docstring; a constant set to another constant of its
    module that is a str is a switch too: ``gemm_shift.SHIFT_TMA = HALF``)."""
    choices = {e.value for m in modules for _, value in _constants(m) if isinstance(value, ast.Tuple)
               for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return {(m, name) for m in modules for name, value, named in _resolved(m)
            if isinstance(value, ast.Constant) and (isinstance(value.value, bool) or value.value in choices
                                                    or (named and isinstance(value.value, str)))
            and (m, name) not in VALUES}


@pytest.mark.parametrize("family", FAMILIES)
def test_plan_flags_list_every_switch_the_familys_build_imports(family):
    entry = importlib.import_module(f"{KERNELS}.{KEYED_BY.get(FAMILIES[family], FAMILIES[family])}")
    assert sorted(set(entry.PLAN_FLAGS)) == sorted(switches(closure(FAMILIES[family]))), family
    assert len(set(entry.PLAN_FLAGS)) == len(entry.PLAN_FLAGS)
    if entry.__name__.endswith("decode_plan"):  # no op keys it alone: the GEMM families hold its tuple
        for gemm in ("sm90.gemm_target", "sm80.gemm"):
            assert set(entry.PLAN_FLAGS) <= set(importlib.import_module(f"{KERNELS}.{gemm}").PLAN_FLAGS)
        return
    assert entry.plan_flags.flags == entry.PLAN_FLAGS
    values = entry.plan_flags()
    assert values == tuple(getattr(importlib.import_module(f"{KERNELS}.{m}"), n) for m, n in entry.PLAN_FLAGS)


def test_the_guard_sees_the_switches_and_the_builds_it_must():
    """What the guard rests on: the sm90 build reaches the grouped planner, the cost models, the decode kernel; the
    enum-like switches count; a new bool in a planner's module would be a switch (the closure holds the module)."""
    sm90, sm80 = closure("sm90.gemm_target"), closure("sm80.gemm")
    assert {"sm90.grouped_plan", "sm90.gemm_cost", "sm90.gemm_dynamic", "sm80.decode_plan"} <= sm90
    assert {"sm80.gemm_plan", "sm80.gemm_cost", "sm80.decode_plan"} <= sm80
    assert {("sm90.gemm_cost", "GROUPED_WALK"), ("sm90.gemm_plan", "RESIDUAL_CHOICE")} <= switches(sm90)
    assert ("sm90.gemm_shift", "HALF") not in switches(sm90)  # a value SHIFT_TMA takes, not a switch
    assert ("sm90.gemm_shift", "SHIFT_TMA") in switches(sm90)  # set to it by name: SHIFT_TMA = HALF
    assert {"sm90.attention_cost", "sm90.attention_plan"} <= closure("sm90.attention_target")
    assert "sm80.attention_plan" in closure("sm80.attention_target")
    assert {"sm80.paged_decode_plan", "sm80.paged_decode_rule", "sm80.paged_decode_pdl", "sm80.paged_decode_emit",
            "sm90.paged_decode_plan", "sm90.paged_decode_emit"} <= closure("sm90.paged_target")
    assert {"sm80.decode_plan", "sm90.gemm_plan", "sm90.gemm_shift"}.isdisjoint(closure("sm90.paged_target"))
    for entry in FAMILIES.values():
        for module in closure(entry):  # the closure names real modules (a wrong dotting would drop some)
            assert _path(f"{KERNELS}.{module}") is not None, module


def test_a_flag_set_drops_every_kept_value_and_tells_the_listeners(monkeypatch):
    from tvm_cdna4.kernels.sm90 import attention_cost
    from tvm_cdna4.kernels.sm90.attention_target import plan_flags

    heard = []
    monkeypatch.setattr(flags, "_LISTENERS", [lambda: heard.append(1)])
    first = plan_flags()
    monkeypatch.setattr(attention_cost, "ITEM_OVERLAP_CLOCKS", 1)  # not a flag: nothing happens
    assert plan_flags() is first and heard == []
    monkeypatch.setattr(attention_cost, "WEIGH_WALKS", not attention_cost.WEIGH_WALKS)
    assert heard == [1] and plan_flags() != first


def test_a_flag_set_during_a_read_is_not_lost(monkeypatch):
    """A set of a flag while another thread reads the set's values (here: the set runs inside the read, after the
    value was read) leaves no value of before the set kept: the next read sees the set."""
    from tvm_cdna4.kernels.sm90 import attention_cost

    monkeypatch.setattr(flags, "_SETS", list(flags._SETS))  # the set made here goes with the test
    flag_set = flags.FlagSet((("sm90.attention_cost", "WEIGH_WALKS"),))
    before = flag_set()
    flag_set.values = None
    read = flag_set._read

    def racing():
        values = read()
        monkeypatch.setattr(attention_cost, "WEIGH_WALKS", not before[0])  # the other thread's set, mid-read
        return values

    flag_set._read = racing
    assert flag_set() == before  # what was read, returned ...
    flag_set._read = read
    assert flag_set() == (not before[0],)  # ... but not kept past the set


def test_a_reload_of_the_flags_module_keeps_its_watches_sets_and_listeners(monkeypatch):
    """``importlib.reload(kernels.flags)``: the modules watched so far still report their flags' sets, the sets read
    so far drop their values, the listeners (``tvm_cdna4.torch``'s) are still called."""
    from tvm_cdna4.kernels.sm90 import attention_cost
    from tvm_cdna4.kernels.sm90.attention_target import plan_flags

    heard = []
    for name in ("_WATCHED", "_SETS"):
        monkeypatch.setattr(flags, name, getattr(flags, name))  # put back after the test, whatever the reload does
    monkeypatch.setattr(flags, "_LISTENERS", [lambda: heard.append(1)])
    first = plan_flags()
    importlib.reload(flags)
    assert isinstance(attention_cost, flags._Watched)  # the reloaded class
    monkeypatch.setattr(attention_cost, "WEIGH_WALKS", not attention_cost.WEIGH_WALKS)
    assert heard == [1] and plan_flags() != first
