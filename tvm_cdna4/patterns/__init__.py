"""``T.rocm.tile.apply(T.amdgcn[opcode], *operands, scope=..., **params)`` for every CDNA4 opcode of the catalog.

``register_patterns()`` (idempotent) adds the ROCm thread scopes and lane axes, the
``tirx.rocm.tile.apply`` op and the ``T.rocm`` / ``T.amdgcn`` script namespaces. ``tvm_cdna4.register()``
(``rocm.build.register``) runs it and then installs the ROCm build hooks; the patterns know nothing
of the build. ``check_target`` is the target rule the lowering and ``rocm.analysis`` share. Family
contracts: ``patterns.mfma`` and ``patterns.ds_read_tr`` (module docstrings), docs/patterns.md.
"""

from __future__ import annotations

from types import SimpleNamespace

from ..errors import ContractError
from ..isa import DsReadTrOp, lookup
from ..isa.hardware import GFX950, TARGET_SPELLING
from ..isa.llvm_helpers import PREFIX
from . import origins

_REGISTERED: dict = {}


class Opcode(str):
    """An opcode of ``T.amdgcn[...]``: the catalog name (stored in IR as a string)."""

    @property
    def record(self):
        return lookup(str(self))


class AmdgcnNamespace:
    """``T.amdgcn["mfma_f32_16x16x32_f16"]``: accepts the catalog name, the ``__builtin_amdgcn_*``
    spelling and an unambiguous gfx950 mnemonic; always yields the catalog name."""

    def __getitem__(self, name) -> Opcode:
        name = getattr(name, "value", name)
        try:
            return Opcode(lookup(str(name)).name)
        except KeyError as err:
            raise KeyError(f"T.amdgcn[{name!r}]: {err.args[0]}") from None

    def __getattr__(self, name: str) -> Opcode:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as err:
            raise AttributeError(str(err)) from None


def _family(record):
    """The pattern module of an opcode's family (``lower(record, args, params, sctx)``, ``operand_names``)."""
    from . import ds_read_tr, mfma

    return ds_read_tr if isinstance(record, DsReadTrOp) else mfma


def as_target(target):
    """``target`` as a TIRx ``Target`` (a ``Target``, its dict, or a target string)."""
    from tvm_tirx.target import Target

    return target if isinstance(target, Target) else Target(target)


def check_target(what: str, target) -> None:
    """A CDNA4 instruction (or a ``tvm_cdna4_`` helper) compiles only for ``mcpu`` gfx950."""
    target = as_target(target)
    mcpu = target.attrs.get("mcpu")
    if target.kind.name == "rocm" and mcpu == GFX950:
        return
    found = f"kind {target.kind.name!r}" + (f", mcpu {str(mcpu)!r}" if mcpu else ", no mcpu")
    kind = "helper" if what.startswith(PREFIX) else "instruction"
    raise ContractError(
        f"a gfx950 (CDNA4) {kind} compiles only for mcpu gfx950", opcode=what,
        expected="kind 'rocm', mcpu 'gfx950'", found=found,
        suggestion=f"compile with target={TARGET_SPELLING} (TIRx compiles a rocm target that names no mcpu "
                   f"for gfx900, where LLVM cannot select it)",
        check="target",
    )


def _lower(view, sctx):
    from .common import unpacked

    opcode, args, params = unpacked(view)
    record = lookup(opcode)
    try:
        check_target(record.name, sctx.target)
        lowered = _family(record).lower(record, args, params, sctx)
    except ContractError as err:
        err.location = str(view.call)
        raise
    if isinstance(record, DsReadTrOp):  # the LDS check quotes the call as written (patterns.origins)
        origins.note(lowered, view.call, record.name)
    return lowered


TILE_APPLY_DOC = """``T.rocm.tile.apply(instruction, *operands, scope="wave", **parameters)``: one CDNA4 matrix
instruction (MFMA, scaled MFMA, ds_read_tr) applied over register / LDS tiles, repeated over
their repeat axes.

- ``instruction``: the opcode, ``T.amdgcn["mfma_f32_16x16x32_f16"]`` (the catalog name, the
  ``__builtin_amdgcn_*`` name or an unambiguous gfx950 mnemonic; docs/catalog.md lists all).
- ``operands``: regions ``(*group, *repeat, *atom)`` of tensors, in the family's order:
  MFMA ``D, A, B, C`` (``local`` registers; ``C`` a tensor or a scalar such as
  ``T.float32(0)``), scaled MFMA ``D, A, B, C, scale_a, scale_b``, ds_read_tr ``dst, src``
  (``local`` registers, a ``shared`` LDS tile). Element counts, not bytes, throughout;
  ``patterns.layouts.mfma_fragment`` / ``tr_fragment`` build register layouts that pass.
- ``scope``: ``"wave"`` (each wave its own instance) or ``"workgroup"`` (a leading wave axis
  on every operand: wave ``w`` works on slice ``w``; the launch has exactly that many waves).
- ``parameters``: the instruction's immediates, checked against the catalog's ranges: MFMA
  ``cbsz``, ``abid``, ``blgp``; scaled MFMA ``cbsz`` / ``blgp`` (A / B format codes: 0 fp8,
  1 bf8, 2 fp6, 3 bf6, 4 fp4), ``op_sel_a`` / ``op_sel_b`` (the E8M0 byte of a 32-bit scale
  register; not with ``uint8`` scale tiles); the ds_read_tr operand form ``mfma=`` (the
  MFMA opcode it feeds) and ``operand="A"`` / ``"B"``.

Lowers to the catalog's exact ``llvm.amdgcn.*`` intrinsic per repeat (``v_mfma_*``,
``v_mfma_scale_*``, ``ds_read_b64_tr_b16`` ...), after checking every operand against the
catalog's lane maps (a ``ContractError`` names the opcode, operand and rule). Waits: none to
write for the instruction itself (LLVM inserts the MFMA hazard ``s_nop``s and the
``lgkmcnt`` wait before a ds_read_tr result is used), but the LDS a ds_read_tr reads must
have been written and published first: ``T.rocm.workgroup_barrier()`` after the writes
(after ``T.rocm.s_waitcnt_vmcnt(n)`` for direct-to-LDS loads). MFMA and ds_read_tr are
wave-collective: no lane-varying branch around them (``rocm.analysis``).

Example: ``T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], D, A, B, T.float32(0), scope="wave")``
"""


def register_patterns() -> dict:
    """Register the patterns once; returns ``{"rocm": T.rocm namespace, "amdgcn": T.amdgcn}``."""
    if _REGISTERED:
        return _REGISTERED
    from tvm_tirx.ir import StringImm
    from tvm_tirx.script.ir_builder.base import auto_emit_void_call
    from tvm_tirx.tirx.script.ir_builder import op as builder_op
    from tvm_tirx.tirx.tile.instruction import Instruction, Operand

    from .. import tirx_private
    from . import atomic, wave
    from .common import SCOPES, check_operands, check_scope, printed_call

    tirx_private.register_rocm_axes()
    construct = Instruction(
        "tirx.rocm.tile.apply",
        "amdgcn_pattern",
        (Operand("instruction"), Operand("operands"), Operand("parameters", default=None)),
        SCOPES,
        lower=_lower,
    ).register()
    amdgcn = AmdgcnNamespace()

    def apply(instruction, *operands, scope="wave", **parameters):  # the docstring: TILE_APPLY_DOC
        if isinstance(instruction, StringImm):
            instruction = instruction.value
        operands, parameters = printed_call(operands, parameters)
        opcode = amdgcn[instruction]
        check_scope(opcode, scope)
        if not operands:  # TIRx refuses an empty operand tuple with a TypeError of its own
            check_operands(opcode, _family(opcode.record).operand_names(opcode.record), operands)
        ctor = {k: parameters.pop(k) for k in ("attrs", "ty", "ty_args", "loc") if k in parameters}
        packed = tuple((k, v) for k, v in sorted(parameters.items()))
        return construct(opcode, operands, packed, scope=scope, **ctor)

    apply.__doc__ = TILE_APPLY_DOC
    rocm = SimpleNamespace(
        tile=SimpleNamespace(apply=auto_emit_void_call(apply)),
        lane_id=wave.lane_id,
        wave_id=wave.wave_id,
        workgroup_barrier=wave.workgroup_barrier,
        s_barrier=wave.s_barrier,
        s_waitcnt_lgkmcnt=wave.s_waitcnt_lgkmcnt,
        buffer_load=wave.buffer_load,
        buffer_load_lds=wave.buffer_load_lds,
        s_waitcnt_vmcnt=wave.s_waitcnt_vmcnt,
        wave_reduce=wave.wave_reduce,
        global_atomic_add_f32=atomic.global_atomic_add_f32,
        global_atomic_add_u32=atomic.global_atomic_add_u32,
        fence_release=atomic.fence_release,
        fence_acquire=atomic.fence_acquire,
    )
    builder_op.register_script_namespace("rocm", rocm)
    builder_op.register_script_namespace("amdgcn", amdgcn)
    _REGISTERED.update(rocm=rocm, amdgcn=amdgcn)
    import sys

    half_made = sys.modules.get(__name__ + ".wgmma")
    if half_made is not None and not hasattr(half_made, "register"):  # TIRx's autoload inside wgmma's first import
        half_made.REGISTER_WHEN_WHOLE = _REGISTERED  # wgmma.py's last lines register it into this dict
        return _REGISTERED
    from . import wgmma as _wgmma

    _REGISTERED.update(_wgmma.register())  # T.sm90.tile.apply(T.wgmma[...]): Hopper, beside T.rocm
    return _REGISTERED
