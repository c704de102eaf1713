"""Lane, wave, barrier, wait and buffer-load helpers for gfx950 kernels, exposed as ``T.rocm.*``.

Each helper's docstring is its contract: what it does, each argument and its unit, the instruction
it lowers to, the waits it needs and an example (docs/patterns.md has the same in prose):

- ``T.rocm.lane_id()``, ``T.rocm.wave_id()``: where a thread is (``wave_id`` is wave-uniform for LLVM);
- ``T.rocm.workgroup_barrier()``, ``T.rocm.s_barrier()``, ``T.rocm.s_waitcnt_lgkmcnt(n)``,
  ``T.rocm.s_waitcnt_vmcnt(n)``: barriers and waits;
- ``T.rocm.buffer_load(ptr, num_bytes, voffset, soffset, dtype)``: a range-checked global load into
  registers; ``T.rocm.buffer_load_lds(ptr, num_bytes, voffset, soffset, lds_dst, size)``: gfx950's
  direct-to-LDS load; ``BUFFER_OOB`` is the ``voffset`` that masks a lane;
- ``T.rocm.wave_reduce(combine, value, lanes, axis)``: max or sum over groups of lanes (DPP and
  lane swaps).

The global atomics and fences are in ``patterns.atomic``, ``T.rocm.tile.apply`` in ``patterns``.
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
    """``T.rocm.lane_id()`` -> int32: this thread's lane in its 64-lane wave, 0..63. No arguments.

    Lowers to ``v_mbcnt_lo_u32_b32`` / ``v_mbcnt_hi_u32_b32`` (``llvm.amdgcn.mbcnt.lo`` / ``.hi`` of an
    all-ones mask: the number of lanes below this one), a VGPR value; for a 1-D workgroup it equals
    ``threadIdx.x % 64``. Needs no wait.

    Example: ``C[T.rocm.wave_id() * 64 + T.rocm.lane_id()] = v``
    """
    lo = _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.lo", _op.const(-1, "int32"), _op.const(0, "int32"), ty="int32")
    return _op.call_llvm_pure_intrin("llvm.amdgcn.mbcnt.hi", _op.const(-1, "int32"), lo, ty="int32")


def wave_id():
    """``T.rocm.wave_id()`` -> int32: this wave's index in its workgroup, ``threadIdx.x // 64``, for 1-D
    workgroups. No arguments.

    Lowers to ``v_readfirstlane_b32`` of ``threadIdx.x >> 6`` (``llvm.amdgcn.readfirstlane``): the
    value is in an SGPR and LLVM knows it is the same in every lane. ``tx // 64`` is the same number
    (and ``rocm.analysis`` accepts it as wave-uniform), but LLVM cannot prove that it is: where a
    scalar operand needs a wave-uniform value (the ``soffset`` of ``T.rocm.buffer_load`` /
    ``buffer_load_lds``), an expression of ``tx // 64`` becomes a ``readfirstlane`` waterfall loop
    around every such load, and one of ``wave_id()`` does not (docs/patterns.md, "Wave-uniform
    scalar operands"). Needs no wait.

    Example: ``T.rocm.buffer_load_lds(A.data, nbytes, lane * 16, T.rocm.wave_id() * 1024, S[tx // 64 * 512], 16)``
    """
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
    """``T.rocm.buffer_load(ptr, num_bytes, voffset, soffset, dtype)`` -> ``dtype``: each lane loads 16
    bytes (or 12, or a 32-bit word) from global memory through a raw buffer resource, whose range
    check masks out-of-range lanes to zero.

    - ``ptr``: the buffer's global pointer, ``A.data`` of a kernel parameter ``A``.
    - ``num_bytes``: the buffer's size in **bytes**, in [1, 2**31): a constant, or an int32
      expression for a run-time size. Bytes at or past it read as zero.
    - ``voffset``: the lane's byte offset (int32, may differ per lane). ``BUFFER_OOB`` (any value at
      or past ``num_bytes``) masks the lane: it reads zeros.
    - ``soffset``: a byte offset added for every lane (int32); it goes to an SGPR, so it must be
      wave-uniform **as LLVM sees it**: kernel arguments, ``blockIdx``, loop variables, constants,
      ``T.rocm.wave_id()``. A value LLVM cannot prove uniform (``tx // 64 * stride``) still
      computes the right thing, through a ``readfirstlane`` waterfall loop around the load
      (docs/patterns.md, "Wave-uniform scalar operands"); put per-wave offsets in ``voffset`` or
      use ``wave_id()``.
    - ``dtype``: the loaded value: a 16-byte vector (``"float16x8"``, ``"int16x8"``, ``"int8x16"``,
      ``"uint8x16"``, ``"float32x4"``, ``"int32x4"``, ``"uint32x4"``, ``"float64x2"``),
      ``"uint32x3"`` (12 bytes) or a 32-bit word (``"int32"``, ``"uint32"``).

    Lowers to ``buffer_load_dwordx4`` / ``buffer_load_dwordx3`` / ``buffer_load_dword ... offen``
    (``llvm.amdgcn.raw.ptr.buffer.load``): the lane reads bytes ``[voffset + soffset, + size)``.
    Contract, checked by the emulator: every lane wholly inside the buffer or masked, 4-byte
    aligned. Waits: none to write, LLVM waits (``s_waitcnt vmcnt``) before the value is used; the
    load counts in ``vmcnt`` (``T.rocm.s_waitcnt_vmcnt``).

    Example (8 float16 of row ``row`` of an ``(M, K)`` tensor ``A``; rows past ``M`` read zeros)::

        r[T.ramp(0, 1, 8)] = T.rocm.buffer_load(A.data, M * K * 2, T.if_then_else(row < M, (row * K + k) * 2,
                                                BUFFER_OOB), 0, "float16x8")
    """
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
    """``T.rocm.buffer_load_lds(ptr, num_bytes, voffset, soffset, lds_dst, size)``: gfx950's
    direct-to-LDS load: each lane reads ``size`` bytes of global memory and the hardware writes them
    to LDS, with no VGPR staging and no ``ds_write``.

    - ``ptr``, ``num_bytes``, ``voffset``, ``soffset``: the global side, as ``T.rocm.buffer_load``
      (bytes; ``voffset`` per lane, ``BUFFER_OOB`` masks the lane; ``soffset`` wave-uniform as LLVM
      sees it, else a ``readfirstlane`` waterfall loop around every such load). Lane ``l`` reads
      ``[voffset + soffset, + size)``, 4-byte aligned, wholly inside ``num_bytes`` or masked; a
      masked lane writes ``size`` **zero** bytes to LDS.
    - ``lds_dst``: an element of an LDS (``scope="shared"``) tensor, ``S[i, j]``, or its
      ``T.address_of``: the wave's base, wave-uniform (it goes to ``M0``; LLVM takes lane 0's value
      with ``v_readfirstlane_b32``) and 4-byte aligned. The layout is the hardware's: lane ``l``
      writes bytes ``[base + l*size, base + (l+1)*size)``, one contiguous ``64*size``-byte block
      per wave and instruction; ``patterns.dma`` (``LdsTile``, ``lane_sources``) gives the global
      chunk each lane loads to make a padded or swizzled tile.
    - ``size``: bytes per lane, 4, 12 or 16 (default 16).

    Lowers to ``buffer_load_dword`` / ``buffer_load_dwordx3`` / ``buffer_load_dwordx4 ... offen lds``
    (``llvm.amdgcn.raw.ptr.buffer.load.async.lds``) after an ``s_mov_b32 m0``. Waits: asynchronous,
    and LLVM inserts none: the bytes land at the issuing wave's ``T.rocm.s_waitcnt_vmcnt(n)`` that
    leaves at most ``n`` newer vector-memory loads in flight. No barrier waits for them (not
    ``T.rocm.workgroup_barrier()``): wait, then barrier, then read; any LDS access before that is a
    race the emulator reports.

    ``ContractError`` before the kernel runs: a size other than 4, 12, 16; a destination not in LDS
    (here); a target other than gfx950, a lane-varying or provably misaligned destination
    (``rocm.analysis``, rules ``target``, ``wave-uniform operand``, ``LDS alignment``).

    Example (wave ``w`` fills the 1024-byte block ``w`` of ``S``, a float16 tile)::

        T.rocm.buffer_load_lds(A.data, nbytes, lane * 16, T.rocm.wave_id() * 1024, S[tx // 64 * 512], 16)
        T.rocm.s_waitcnt_vmcnt(0)
        T.rocm.workgroup_barrier()
    """
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
    """``T.rocm.wave_reduce(combine, value, lanes, axis="row")`` -> float32: ``value`` combined over each
    group of lanes; every lane of a group gets the same bits.

    - ``combine``: ``"max"`` or ``"sum"``.
    - ``value``: a float32 expression, this lane's operand.
    - ``lanes``: the groups: a width (2, 4, 8, 16, 32, 64 aligned consecutive lanes) or an MFMA
      opcode (``T.amdgcn[...]`` or its name), meaning the lanes that hold one row or one column of
      its accumulator (``isa.lanes.acc_lane_mask``; 32x32 rows: the 32 lanes of a wave half,
      columns: lanes ``c`` and ``c + 32``; 16x16 rows: 16 lanes, columns: 4 lanes 16 apart).
    - ``axis``: with an opcode, ``"row"`` or ``"col"`` of its accumulator.

    Lowers to DPP steps fused into the combine (``v_max_f32_dpp`` / ``v_add_f32_dpp`` with
    ``quad_perm:[1,0,3,2]``, ``quad_perm:[2,3,0,1]``, ``row_half_mirror``, ``row_mirror``) and the
    gfx950 lane swaps ``v_permlane16_swap_b32`` / ``v_permlane32_swap_b32``, each followed by the
    combine (``isa.lanes.WAVE_REDUCE_STEPS``): 4 VALU instructions for 16 lanes, 7 for 32, 3 for a
    32x32 column; no LDS. Waits: none (LLVM places the DPP ``s_nop``s). Wave-collective: every lane
    of the wave must run it (``rocm.analysis`` refuses it under lane-varying control, rule
    ``wave-uniform control``); a NaN input gives an unspecified ``max``. ``ContractError`` (opcode
    ``T.rocm.wave_reduce``) for another combine, width or axis, an opcode without an accumulator
    or whose row/column is one lane, a value that is not float32.

    Example: ``m = T.rocm.wave_reduce("max", s[r], lanes=T.amdgcn["mfma_f32_32x32x16_bf16"])``
    """
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
    """``T.rocm.s_waitcnt_vmcnt(n)``: wait until at most ``n`` of this wave's vector-memory instructions
    are outstanding. ``n``: a count of instructions, 0..63 (default 0: all done).

    Lowers to ``s_waitcnt vmcnt(n)`` (``llvm.amdgcn.s.waitcnt``, the other counters not waited on).
    Every ``T.rocm.buffer_load`` and ``T.rocm.buffer_load_lds`` counts, in issue order (and the
    other global loads, stores and atomics of the wave), so ``n`` leaves the ``n`` newest in flight.
    LLVM waits for the registers a load writes by itself; this wait is for what it does not track:
    a direct-to-LDS load lands in LDS only at such a wait (then ``T.rocm.workgroup_barrier()``,
    then the reads). ``ContractError`` (rule ``modifier range``) for ``n`` outside 0..63.

    Example: ``T.rocm.s_waitcnt_vmcnt(1)  # every load but the newest has landed``
    """
    return _op.call_llvm_intrin("llvm.amdgcn.s.waitcnt", _op.const(waitcnt_vmcnt_imm(n), "int32"), ty="void")


@auto_emit_void_call
def s_waitcnt_lgkmcnt(n: int = 0):
    """``T.rocm.s_waitcnt_lgkmcnt(n)``: wait until at most ``n`` of this wave's LDS and scalar-memory
    operations are outstanding. ``n``: a count of instructions, 0..15 (default 0: all done).

    Lowers to ``s_waitcnt lgkmcnt(n)`` (``llvm.amdgcn.s.waitcnt``, the other counters not waited
    on); LDS operations complete in issue order, scalar loads in any order. LLVM waits for the
    registers an LDS read writes by itself; this wait is for LDS *writes* that another wave reads
    after a bare ``T.rocm.s_barrier()`` (``T.rocm.workgroup_barrier()`` includes it).
    ``ContractError`` (rule ``modifier range``) for ``n`` outside 0..15.

    Example: ``T.rocm.s_waitcnt_lgkmcnt(0); T.rocm.s_barrier()``
    """
    return _op.call_llvm_intrin("llvm.amdgcn.s.waitcnt", _op.const(waitcnt_lgkmcnt_imm(n), "int32"), ty="void")


@auto_emit_void_call
def s_barrier():
    """``T.rocm.s_barrier()``: the bare barrier: the waves of the workgroup meet, nothing is waited for.
    No arguments.

    Lowers to ``s_barrier`` (``llvm.amdgcn.s.barrier``) alone. An LDS write issued before it may
    still be in flight after it, so give your own ``T.rocm.s_waitcnt_lgkmcnt(0)`` first (or use
    ``T.rocm.workgroup_barrier()``); a direct-to-LDS load needs ``T.rocm.s_waitcnt_vmcnt(n)``. The
    emulator and ``rocm.lds_sync`` report a wait that is missing.

    Example: ``T.rocm.s_waitcnt_lgkmcnt(0); T.rocm.s_barrier()``
    """
    return _op.call_llvm_intrin("llvm.amdgcn.s.barrier", ty="void")


@auto_emit_void_call
def workgroup_barrier():
    """``T.rocm.workgroup_barrier()``: every wave's LDS operations complete, then the waves of the
    workgroup meet (HIP's ``__syncthreads``). No arguments.

    Lowers to a workgroup-scope release fence, ``s_barrier`` and an acquire fence; on gfx950 that is
    ``s_waitcnt lgkmcnt(0)`` (when LDS operations are outstanding) then ``s_barrier``. Use it
    between LDS writes and other waves' reads, and before overwriting LDS other waves still read.
    It does not wait for vector memory: a direct-to-LDS load needs its wave's
    ``T.rocm.s_waitcnt_vmcnt(n)`` first. Prefer it to ``T.gpu_storage_sync("shared")``, which on
    ROCm is a bare ``s_barrier``.

    Example: ``S[tx] = A[tx]; T.rocm.workgroup_barrier(); C[tx] = S[255 - tx]``
    """
    return _op.call_extern(BARRIER, ty="void")
