"""Global atomics for gfx950 kernels, exposed as ``T.rocm.*``: what split-K GEMMs reduce with.

- ``T.rocm.global_atomic_add_f32(dst, index, value)``: ``dst[index] += value`` as one
  ``global_atomic_add_f32`` (no return value), at **agent scope** (every workgroup of the device
  sees one order of the additions to an address) with relaxed ordering: it orders nothing else.
  Contract: ``dst`` is a float32 tensor in global memory (a kernel parameter or a view of one),
  ``value`` a float32 scalar, the element 4-byte aligned (a float32 element of a 4-byte-aligned
  buffer), coarse-grained memory (``hipMalloc``; not fine-grained host memory) and target gfx950.
  Violations visible before the kernel runs are ``ContractError`` (dtype, scope: here; target:
  ``rocm.analysis``). Additions to one address from many lanes and workgroups happen one at a
  time in some order, so a sum is exact up to f32 reassociation; a plain store to an address that
  an atomic of the same launch updates is a race (the emulator raises ``EmulationError`` for it,
  whichever comes first), and so is reading such an address in the same launch.
"""

from __future__ import annotations

from tvm_tirx.script.ir_builder.base import auto_emit_void_call
from tvm_tirx.tirx import op as _op

from ..errors import ContractError
from ..isa.llvm_helpers import GLOBAL_ATOMIC_ADD_F32, GLOBAL_ATOMIC_ADD_F32_MNEMONIC


def _dtype(x) -> str:
    ty = getattr(x, "ty", None)
    return str(getattr(ty, "dtype", getattr(x, "dtype", "")))


@auto_emit_void_call
def global_atomic_add_f32(dst, index, value):
    opcode = GLOBAL_ATOMIC_ADD_F32_MNEMONIC
    elem = str(getattr(dst, "dtype", ""))
    if elem != "float32":
        raise ContractError("global_atomic_add_f32 adds to float32 elements", opcode=opcode, operand="dst",
                            expected="a float32 tensor in global memory", found=f"{getattr(dst, 'name', dst)} ({elem or 'not a tensor'})",
                            suggestion="reduce 16-bit outputs in an f32 workspace, then convert")
    scope = str(getattr(getattr(dst, "ty", None), "scope", "global") or "global")
    if scope != "global":
        raise ContractError("global_atomic_add_f32 needs a global-memory destination", opcode=opcode, operand="dst",
                            expected="scope 'global'", found=f"scope {scope!r}")
    if _dtype(value) != "float32":
        raise ContractError("global_atomic_add_f32 adds a float32 value", opcode=opcode, operand="value",
                            expected="float32", found=_dtype(value) or repr(value))
    return _op.call_extern(GLOBAL_ATOMIC_ADD_F32, dst.data, index, value, ty="void")
