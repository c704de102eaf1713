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
- ``T.rocm.buffer_load_lds(ptr, num_bytes, voffset, soffset, lds_dst, size)``: gfx950's
  direct-to-LDS load, ``buffer_load_dword`` / ``_dwordx3`` / ``_dwordx4 ... lds`` (``size`` 4, 12
  or 16 bytes per lane), with no VGPR staging. Contract:

  * global side as ``T.rocm.buffer_load``: lane ``l`` reads ``size`` bytes at byte
    ``voffset + soffset`` of the ``num_bytes``-byte buffer at ``ptr`` (``voffset`` per lane,
    ``soffset`` wave-uniform), 4-byte aligned, wholly inside or masked out (``voffset >=
    num_bytes``, e.g. ``BUFFER_OOB``). A masked lane writes ``size`` zero bytes to LDS.
  * LDS side: ``lds_dst`` (an element of an LDS tensor, ``S[i, j]``, or its ``T.address_of``) is
    the wave's base, wave-uniform (it goes to ``M0``) and 4-byte aligned. The layout is the
    hardware's, not the kernel's: lane ``l`` writes bytes ``[base + l*size, base + (l+1)*size)``,
    one contiguous ``64*size``-byte block per wave and instruction. ``dma.lane_sources`` gives the
    per-lane global chunk that makes this placement produce a padded or swizzled tile.
  * completion: asynchronous. The bytes are written when the wave's ``s_waitcnt vmcnt(n)``
    (``T.rocm.s_waitcnt_vmcnt``) leaves at most ``n`` newer vector-memory loads outstanding; an LDS
    access before that (by any wave; a barrier does not wait) is a race. LLVM inserts no wait for
    it (``llvm.amdgcn.raw.ptr.buffer.load.async.lds``); the emulator checks it.

  Violations that are visible before the kernel runs are ``ContractError``: a size other than 4,
  12, 16; a destination that is not in LDS; a target other than gfx950 (``rocm.analysis``); a
  lane-varying or provably misaligned destination (``rocm.analysis``, rule ``wave-uniform operand`` /
  ``LDS alignment``).
- ``T.rocm.wave_reduce(combine, value, lanes, axis="row")``: ``value`` (f32) combined with ``"max"``
  or ``"sum"`` over each group of lanes; every lane of a group gets the same bits. ``lanes``: a
  group width (2, 4, ..., 64: aligned groups of consecutive lanes) or an MFMA opcode, meaning the
  lanes that hold one row (``axis="row"``) or one column (``"col"``) of its accumulator
  (``isa.lanes.acc_lane_mask``: 32x32 rows: the 32 lanes of a wave half, columns: lanes ``c`` and
  ``c + 32``; 16x16 rows: 16 lanes, columns: 4 lanes 16 apart), so a row max of an accumulator
  register, or a column max after the lane's own registers of the column, is one call.
  gfx950 code (``isa.lanes.WAVE_REDUCE_STEPS``; llc-22): ``v_max_f32_dpp`` / ``v_add_f32_dpp`` with
  ``quad_perm:[1,0,3,2]``, ``quad_perm:[2,3,0,1]``, ``row_half_mirror``, ``row_mirror`` (up to 16
  lanes), then ``v_permlane16_swap_b32`` (lane bit 4) and ``v_permlane32_swap_b32`` (bit 5), each
  followed by the combine: 4 VALU instructions for 16 lanes, 7 for 32, 3 for a 32x32 column. Contract: wave-collective (every lane of the
  wave runs it: ``rocm.analysis`` refuses it under lane-varying control, rule ``wave-uniform
  control``; the emulator under partly active waves); a NaN input gives an unspecified ``max``.
  ``ContractError`` (opcode ``T.rocm.wave_reduce``) for another combine, a width that is not one of
  those, an opcode without an accumulator or whose row/column is one lane, another axis, a value
  that is not a float32 expression.
- ``T.rocm.s_waitcnt_lgkmcnt(n)``: wait until at most ``n`` LDS/scalar-memory operations are
  outstanding.
- ``T.rocm.s_waitcnt_vmcnt(n)``: wait until at most ``n`` vector-memory loads of the wave (buffer
  loads, direct-to-LDS loads included) are outstanding.
"""

from __future__ import annotations

from tvm_tirx.script.ir_builder.base import auto_emit_void_call
from tvm_tirx.tirx import op as _op

from ..errors import ContractError
from ..isa import lanes as _lanes
from ..isa.hardware import WAITCNT_MAX, waitcnt_imm
from ..isa import lookup
from ..isa.llvm_helpers import (BARRIER, BUFFER_LOAD_LDS_MNEMONICS, WAVE_REDUCE_COMBINES, buffer_load_helper,
                                buffer_load_lds_helper, wave_reduce_helper)

BUFFER_OOB = 0x7FFFFFFF  # a voffset no buffer of < 2**31 bytes contains: the lane reads zeros


def lane_id():
    lo = _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.lo", _op.const(-1, "int32"), _op.const(0, "int32"), ty="int32")
    return _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.hi", _op.const(-1, "int32"), lo, ty="int32")


def wave_id():
    tid = _op.call_llvm_pure_intrin("llvm.amdgcn.workitem.id.x", ty="int32")
    return _op.call_llvm_pure_intrin("llvm.amdgcn.readfirstlane", tid // 64, ty="int32")


def waitcnt_lgkmcnt_imm(n: int) -> int:
    """gfx9 ``s_waitcnt`` immediate waiting only on lgkmcnt (vmcnt=63, expcnt=7 mean "don't care")."""
    if not 0 <= n <= WAITCNT_MAX["lgkmcnt"]:
        raise ContractError("the lgkmcnt counter is 4 bits on gfx950", opcode=f"s_waitcnt lgkmcnt({n})",
                            expected=f"0..{WAITCNT_MAX['lgkmcnt']}", found=n, check="modifier range")
    return waitcnt_imm(lgkmcnt=n)


def waitcnt_vmcnt_imm(n: int) -> int:
    """gfx9 ``s_waitcnt`` immediate waiting only on vmcnt (6 bits: 3:0 and 15:14; lgkmcnt=15, expcnt=7
    mean "don't care"; ``isa.hardware.waitcnt_imm``)."""
    if not 0 <= n <= WAITCNT_MAX["vmcnt"]:
        raise ContractError("the vmcnt counter is 6 bits on gfx950", opcode=f"s_waitcnt vmcnt({n})",
                            expected=f"0..{WAITCNT_MAX['vmcnt']}", found=n, check="modifier range")
    return waitcnt_imm(vmcnt=n)


def _num_bytes(num_bytes, opcode: str):
    """The buffer resource's size operand: a constant in [1, 2**31), or a run-time int32 expression (a
    dynamic-M operand's size, which its planner bounds below 2**31)."""
    if not isinstance(num_bytes, int) and not hasattr(num_bytes, "value"):
        if str(num_bytes.ty) != "int32":
            raise ContractError("a run-time buffer size is an int32 expression", opcode=opcode, operand="num_bytes",
                                expected="int32", found=str(num_bytes.ty), check="dtype")
        return num_bytes
    if not 0 < int(num_bytes) < 2**31:
        raise ContractError(f"num_bytes {int(num_bytes)} must be in [1, 2**31)", opcode=opcode, operand="num_bytes",
                            suggestion="split a buffer of 2 GiB or more into several", check="modifier range")
    return _op.const(int(num_bytes), "int32")


def buffer_load(ptr, num_bytes, voffset, soffset, dtype: str):
    return _op.call_extern(buffer_load_helper(dtype), ptr, _num_bytes(num_bytes, "T.rocm.buffer_load"), voffset,
                           soffset, ty=dtype)


def _lds_address(lds_dst, opcode: str):
    """``T.address_of`` of an LDS tensor element (given as the element or its address)."""
    from tvm_tirx.ir import Call, TensorLoad

    load = lds_dst
    if isinstance(lds_dst, Call) and getattr(lds_dst.op, "name", "") == "tirx.address_of":
        load = lds_dst.args[0]
    scope = str(getattr(getattr(getattr(load, "source", None), "ty", None), "scope", "")) \
        if isinstance(load, TensorLoad) else ""
    if not scope.startswith("shared"):
        raise ContractError("the destination of a direct-to-LDS load is an element of an LDS (shared) tensor",
                            opcode=opcode, operand="lds_dst", expected="S[i, ...] or T.address_of(S[i, ...]) "
                            "with S in scope 'shared'", found=f"{lds_dst}" + (f" (scope {scope!r})" if scope else ""),
                            suggestion="allocate the tile with T.alloc_tensor(..., scope='shared')", check="storage scope")
    return _op.address_of(load)


@auto_emit_void_call
def buffer_load_lds(ptr, num_bytes, voffset, soffset, lds_dst, size: int = 16):
    size = int(getattr(size, "value", size))
    if size not in BUFFER_LOAD_LDS_MNEMONICS:
        raise ContractError("gfx950 loads 4, 12 or 16 bytes per lane directly to LDS (buffer_load_dword, _dwordx3, "
                            "_dwordx4 ... lds)", opcode="T.rocm.buffer_load_lds", operand="size",
                            expected=sorted(BUFFER_LOAD_LDS_MNEMONICS), found=size, check="parameters")
    opcode = f"{BUFFER_LOAD_LDS_MNEMONICS[size]} ... lds"
    return _op.call_extern(buffer_load_lds_helper(size), ptr, _num_bytes(num_bytes, opcode), voffset, soffset,
                           _lds_address(lds_dst, opcode), ty="void")


WAVE_REDUCE = "T.rocm.wave_reduce"


def reduce_mask(lanes, axis="row") -> int:
    """``T.rocm.wave_reduce``'s lane mask (``isa.lanes.reduce_steps``): of a group width, or of the
    lanes sharing an accumulator row or column (``axis``) of an MFMA opcode."""
    lanes, axis = getattr(lanes, "value", lanes), getattr(axis, "value", axis)
    if isinstance(lanes, str):
        try:
            op = lookup(lanes)
        except KeyError as err:
            raise ContractError(f"lanes names no MFMA opcode ({err.args[0]})", opcode=WAVE_REDUCE, operand="lanes",
                                expected="an MFMA opcode or a group width", found=lanes, check="parameters") from None
        if not op.kind.startswith("mfma"):
            raise ContractError("lanes names an instruction without an accumulator", opcode=WAVE_REDUCE,
                                operand="lanes", expected="an MFMA opcode", found=op.name, check="parameters")
        if axis not in ("row", "col"):
            raise ContractError("the accumulator axis whose lanes a wave reduction combines", opcode=WAVE_REDUCE,
                                operand="axis", expected="'row' or 'col'", found=axis, check="parameters")
        mask = _lanes.acc_lane_mask(op, axis)
        if not mask:
            raise ContractError(f"one lane holds a whole accumulator {axis} of {op.name}: there is nothing to combine "
                                "across lanes", opcode=WAVE_REDUCE, operand="lanes", expected="lanes sharing a "
                                f"{axis}", found=op.name, suggestion=f"combine the {axis} in registers",
                                check="parameters")
        return mask
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes not in _lanes.REDUCE_WIDTHS:
        raise ContractError("a wave reduction combines aligned groups of a power of two of lanes", opcode=WAVE_REDUCE,
                            operand="lanes", expected=f"one of {_lanes.REDUCE_WIDTHS} or an MFMA opcode", found=lanes,
                            check="parameters")
    return lanes - 1


def wave_reduce(combine, value, lanes, axis="row"):
    combine = getattr(combine, "value", combine)
    if combine not in WAVE_REDUCE_COMBINES:
        raise ContractError("the combine of a wave reduction", opcode=WAVE_REDUCE, operand="combine",
                            expected=sorted(WAVE_REDUCE_COMBINES), found=combine, check="parameters")
    dtype = str(getattr(value, "ty", type(value).__name__))
    if dtype != "float32":
        raise ContractError("a wave reduction combines float32 values", opcode=WAVE_REDUCE, operand="value",
                            expected="a float32 expression", found=dtype,
                            suggestion="cast the value to float32 (T.float32(...), T.cast(x, 'float32'))", check="dtype")
    return _op.call_extern(wave_reduce_helper(combine, reduce_mask(lanes, axis)), value, ty="float32")


@auto_emit_void_call
def s_waitcnt_vmcnt(n: int = 0):
    return _op.call_llvm_intrin("llvm.amdgcn.s.waitcnt", _op.const(waitcnt_vmcnt_imm(n), "int32"), ty="void")


@auto_emit_void_call
def s_waitcnt_lgkmcnt(n: int = 0):
    return _op.call_llvm_intrin("llvm.amdgcn.s.waitcnt", _op.const(waitcnt_lgkmcnt_imm(n), "int32"), ty="void")


@auto_emit_void_call
def s_barrier():
    return _op.call_llvm_intrin("llvm.amdgcn.s.barrier", ty="void")


@auto_emit_void_call
def workgroup_barrier():
    return _op.call_extern(BARRIER, ty="void")
