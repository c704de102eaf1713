"""Lane, wave and barrier helpers for gfx950 kernels, exposed as ``T.rocm.*``.

- ``T.rocm.lane_id()``: lane in the 64-lane wave (``mbcnt_hi(-1, mbcnt_lo(-1, 0))``).
- ``T.rocm.wave_id()``: wave index in the workgroup (``threadIdx.x // 64``, made wave-uniform with
  ``readfirstlane``), for 1-D workgroups.
- ``T.rocm.workgroup_barrier()``: LDS writes of every wave complete, then ``s_barrier`` (HIP's
  ``__syncthreads``). Prefer it to ``T.gpu_storage_sync("shared")``, which on gfx950 emits a bare
  ``s_barrier`` with no wait for earlier LDS writes.
- ``T.rocm.buffer_load(ptr, num_bytes, voffset, soffset, dtype)``: a 16-byte vector
  (``buffer_load_dwordx4``) or a 32-bit word (``buffer_load_dword``) from global memory at byte
  ``voffset + soffset`` of the buffer at ``ptr`` (``soffset`` should be wave-uniform). The buffer
  holds ``num_bytes`` (< 2**31); a lane whose ``voffset`` is at least ``num_bytes`` reads zeros
  (use ``BUFFER_OOB``). Contract: every lane is either wholly inside (``voffset + soffset + size
  <= num_bytes``) or masked that way, and 4-byte aligned (the emulator checks both).
- ``T.rocm.s_waitcnt_lgkmcnt(n)``: wait until at most ``n`` LDS/scalar-memory operations are
  outstanding.
"""

from __future__ import annotations

from tvm_tirx.script.ir_builder.base import auto_emit_void_call
from tvm_tirx.tirx import op as _op

from ..errors import ContractError
from ..rocm.helpers import BARRIER, buffer_load_helper

BUFFER_OOB = 0x7FFFFFFF  # a voffset no buffer of < 2**31 bytes contains: the lane reads zeros


def lane_id():
    lo = _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.lo", _op.const(-1, "int32"), _op.const(0, "int32"), ty="int32")
    return _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.hi", _op.const(-1, "int32"), lo, ty="int32")


def wave_id():
    tid = _op.call_llvm_pure_intrin("llvm.amdgcn.workitem.id.x", ty="int32")
    return _op.call_llvm_pure_intrin("llvm.amdgcn.readfirstlane", tid // 64, ty="int32")


def waitcnt_lgkmcnt_imm(n: int) -> int:
    """gfx9 ``s_waitcnt`` immediate waiting only on lgkmcnt (vmcnt=63, expcnt=7 mean "don't care")."""
    if not 0 <= n <= 15:
        raise ContractError("the lgkmcnt counter is 4 bits on gfx950", opcode=f"s_waitcnt lgkmcnt({n})",
                            expected="0..15", found=n)
    return 0xC07F & ~(0xF << 8) | (n << 8)


def buffer_load(ptr, num_bytes, voffset, soffset, dtype: str):
    if not 0 < int(num_bytes) < 2**31:
        raise ContractError(f"num_bytes {int(num_bytes)} must be in [1, 2**31)", opcode="T.rocm.buffer_load",
                            suggestion="split a buffer of 2 GiB or more into several")
    return _op.call_extern(buffer_load_helper(dtype), ptr, _op.const(int(num_bytes), "int32"), voffset, soffset, ty=dtype)


@auto_emit_void_call
def s_waitcnt_lgkmcnt(n: int = 0):
    return _op.call_llvm_intrin("llvm.amdgcn.s.waitcnt", _op.const(waitcnt_lgkmcnt_imm(n), "int32"), ty="void")


@auto_emit_void_call
def s_barrier():
    return _op.call_llvm_intrin("llvm.amdgcn.s.barrier", ty="void")


@auto_emit_void_call
def workgroup_barrier():
    return _op.call_extern(BARRIER, ty="void")
