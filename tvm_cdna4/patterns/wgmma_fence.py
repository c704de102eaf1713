"""The register fence of ``wgmma`` (``patterns.wgmma``): an empty ``asm volatile`` that takes one
accumulator (or RS A) register BY REFERENCE, CUTLASS's ``warpgroup_fence_operand(reg)``
(``cute/arch/mma_sm90_gmma.hpp``: ``asm volatile("" : "+f"(reg) :: "memory")``).

Why. ``wgmma.mma_async`` writes D asynchronously, but the compiler sees the instruction's asm as
writing D at once; the ``wgmma.fence`` / ``wait_group`` asm clobber "memory", which says nothing
about registers. Without a fence that names D, the compiler may move a read of D above the
``wgmma.wait_group`` that retires it (or a write of D below the ``wgmma`` that reads it). An asm that
reads and writes the register itself (``"+f"``) cannot be reordered with the volatile wait, and every
later read of D depends on it. It emits no instruction.

TIRx's ``T.cuda.wgmma.noop_barrier(reg)`` is not that fence: its helper ``ptx_wgmma_fence_float(float
reg)`` takes the register BY VALUE, so the asm ties up a copy and the accumulator element is
unaffected (tests/patterns/test_wgmma_fence.py shows the generated signature). ``fence_operand``
emits its own helper through the public ``T.cuda.func_call`` (the helper's C source travels with
the call): ``tvm_cdna4_fence_operand_f32(float& reg)`` / ``tvm_cdna4_fence_operand_u32(uint32_t&
reg)``, called on the register element itself (``Dr[3]``), so no TIRx op is added or changed.

Public: ``fence_operand(reg)`` (also ``T.sm90.fence_operand``, for a kernel that waits with its own
``T.ptx["wgmma.wait_group.sync.aligned"](n)``: fence every accumulator register after the wait,
before reading it).
"""

from __future__ import annotations

from tvm_tirx.ir import Evaluate, For, ForKind, IntImm, SeqStmt, Var
from tvm_tirx.script import tirx as T

from ..errors import ContractError
from .common import substitute

# TIR dtype -> (helper name, C type, asm constraint); the helpers the emulator accepts as no-ops
FENCE_HELPERS = {
    "float32": ("tvm_cdna4_fence_operand_f32", "float", "f"),
    "uint32": ("tvm_cdna4_fence_operand_u32", "uint32_t", "r"),
}
FENCE_NAMES = tuple(name for name, _, _ in FENCE_HELPERS.values())


def _source(name: str, ctype: str, constraint: str) -> str:
    return (f"\n__forceinline__ __device__ void {name}({ctype}& reg) {{\n"
            f'  asm volatile("" : "+{constraint}"(reg) :: "memory");\n}}\n')


def fence_operand(reg):
    """``Evaluate``-able call fencing one ``float32`` accumulator or ``uint32`` RS A register element
    (a load of a ``local`` tensor: ``acc[r]``) against compiler reordering (module docstring). Inside
    a ``@T.function`` it emits itself. A ContractError (check ``dtype`` / ``operands``) for another
    dtype or for a value that is not a register element."""
    dtype = str(getattr(getattr(reg, "ty", None), "dtype", ""))
    if dtype not in FENCE_HELPERS:
        raise ContractError("fence_operand fences one 32-bit register of a wgmma operand", opcode="fence_operand",
                            operand="reg", expected=" or ".join(FENCE_HELPERS), found=dtype or type(reg).__name__,
                            check="dtype")
    if not hasattr(reg, "indices"):
        raise ContractError("fence_operand takes the register element itself (a load such as acc[r]), by "
                            "reference", opcode="fence_operand", operand="reg", expected="a tensor element",
                            found=type(reg).__name__, check="operands")
    name, ctype, constraint = FENCE_HELPERS[dtype]
    return T.cuda.func_call(name, reg, _source(name, ctype, constraint))


def fenced(ctx, axes, registers):
    """One fence per register of ``registers`` (expressions of the repeat variables ``axes`` of
    ``ctx``), in unrolled loops over those repeat axes (fresh loop variables)."""
    fresh = {i: Var(f"fence_{ctx.repeat[i].name}", "int32") for i in axes}
    body = []
    for reg in registers:
        for i, var in fresh.items():
            reg = substitute(reg, ctx.repeat[i], var)
        body.append(Evaluate(fence_operand(reg)))
    stmt = SeqStmt(body)
    for i in reversed(axes):
        stmt = For(fresh[i], 0, ctx.repeat_shape[i], IntImm("int32", 1), ForKind.UNROLLED, stmt)
    return stmt


__all__ = ["FENCE_HELPERS", "FENCE_NAMES", "fence_operand", "fenced"]
