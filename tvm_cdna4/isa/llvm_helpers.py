"""LLVM IR helpers linked into every gfx950 module (TIRx's rocm build parses each file that
``tvm_callback_rocm_bitcode_path`` returns, links it, marks it alwaysinline and inlines it).

The helpers are part of the instruction set as this package sees it: the patterns call them by
name, ``rocm.build`` links them (``helpers_path``), the emulator gives them their semantics.

Why they exist:

- **bf16 vectors.** TIRx's ``BF16ComputeLegalize`` widens bf16 to f32 on non-CUDA targets, so TIR
  cannot carry the ``<8 x bfloat>`` operands of ``mfma.*.bf16`` or the ``<4 x bfloat>`` result of
  ``ds.read.tr16.b64.v4bf16``. TIR passes the bit patterns as ``i16`` vectors; the helper bitcasts
  and calls the exact intrinsic. Immediate operands (blgp) must be constants inside the helper, so
  there is one helper per legal value.
- **Buffer loads.** ``buffer_load_dwordx4`` through a raw buffer resource built from a global
  pointer (``T.rocm.buffer_load``): 32-bit offsets instead of 64-bit address arithmetic, and the
  hardware range check returns zeros for masked lanes.
- **Direct-to-LDS loads.** ``buffer_load_dword{,x3,x4} ... lds`` (``T.rocm.buffer_load_lds``):
  ``llvm.amdgcn.raw.ptr.buffer.load.async.lds`` through the same buffer resource. The *async*
  variant (LLVM 23, docs/AMDGPUAsyncOperations.rst) makes the kernel responsible for completion
  (``s_waitcnt vmcnt``): LLVM's ``SIInsertWaitcnts`` then adds no ``vmcnt`` wait before LDS reads,
  which for the plain variant it does before every LDS read that carries no ``!alias.scope`` (all
  of TIRx's), see docs/patterns.md.
- **Wave reductions.** ``T.rocm.wave_reduce``: one helper per combine and group width, the
  exchange steps of ``lanes.WAVE_REDUCE_STEPS`` (``llvm.amdgcn.update.dpp`` steps, which LLVM fuses
  with the combine into ``v_max_f32_dpp`` / ``v_add_f32_dpp``; the gfx950 ``permlane16/32.swap``,
  whose two results are combined), since TIR cannot take the swaps' ``{i32, i32}`` results.
- **Workgroup barrier.** ``T.gpu_storage_sync("shared")`` emits a bare ``s_barrier``; the helper is
  HIP's ``__syncthreads``: release fence, ``s_barrier``, acquire fence (``s_waitcnt lgkmcnt(0)``
  before the barrier).

Helpers are ``linkonce_odr`` so unused ones vanish from the code object.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import attrs

from . import CATALOG, MfmaOp
from .lanes import REDUCE_MASKS, reduce_steps
from .llvm_types import llvm_type

PREFIX = "tvm_cdna4_"
BARRIER = PREFIX + "workgroup_barrier"
# the hardware exponential v_exp_f32 (2^x, about 1 ulp; denormal results flush to zero): what the
# fused epilogue's activations call (``kernels.gfx950.emit.fused_ops``); llvm.exp2.f32 would add
# a range reduction for denormal results around it
EXP2 = "llvm.amdgcn.exp2"
# the hardware logarithm v_log_f32 (log2 x, about 1 ulp; a denormal input reads as 0): the attention
# kernel's log-sum-exp (``kernels.gfx950.attention_emit``), once per query row
LOG2 = "llvm.amdgcn.log"
# v_cvt_pk_fp8_f32 (gfx950: OCP e4m3, round to nearest even): two f32 -> two fp8 in the low (word_sel
# false) or high 16 bits of ``old``, the rest of ``old`` kept: the fp8 attention kernel's P
# (``kernels.gfx950.attention_emit``), four scores per 32-bit word
CVT_PK_FP8 = "llvm.amdgcn.cvt.pk.fp8.f32"
# v_cvt_scalef32_pk_bf16_fp8 (gfx950) with the scale 1.0: bytes 0-1 (``_lo``) or 2-3 (``_hi``) of a word,
# OCP e4m3, to two bf16 in one 32-bit word (exact: every e4m3 value is a bf16 value); the paged decode
# kernel's fp8 KV dequantization (``kernels.gfx950.paged_decode_emit``). The intrinsic returns
# <2 x bfloat>, which TIR cannot carry: the helper returns its bits as i32
CVT_PK_BF16_FP8 = {False: PREFIX + "cvt_pk_bf16_fp8_lo", True: PREFIX + "cvt_pk_bf16_fp8_hi"}
_CVT_PK_BF16_FP8_INTRINSIC = "llvm.amdgcn.cvt.scalef32.pk.bf16.fp8"


def bf16_mfma_helper(op: MfmaOp, blgp: int) -> str:
    return f"{PREFIX}{op.name}_blgp{blgp}"


def bf16_tr_helper(name: str) -> str:
    return PREFIX + name


_SCHED_PROGRAMS: dict[str, tuple[tuple[int, int], ...]] = {}

# llvm.amdgcn.sched.group.barrier instruction classes
SCHED_MFMA, SCHED_VALU, SCHED_SALU, SCHED_VMEM_READ, SCHED_DS_READ, SCHED_DS_WRITE = 0x8, 0x2, 0x4, 0x20, 0x100, 0x200


def sched_helper(program: tuple[tuple[int, int], ...]) -> str:
    """Name of a helper holding ``llvm.amdgcn.sched.group.barrier(mask, count, 0)`` for each
    ``(mask, count)`` of ``program``: called in a loop body, it asks LLVM's scheduler to order that
    block's instructions in those groups (e.g. one MFMA, then one LDS read, ...). No semantics."""
    name = f"{PREFIX}sched_{hashlib.sha256(repr(program).encode()).hexdigest()[:12]}"
    _SCHED_PROGRAMS[name] = tuple(program)
    return name


def _sched_helpers() -> list[str]:
    out = ["declare void @llvm.amdgcn.sched.group.barrier(i32 immarg, i32 immarg, i32 immarg)"] if _SCHED_PROGRAMS else []
    for name, program in sorted(_SCHED_PROGRAMS.items()):
        calls = "".join(f"  call void @llvm.amdgcn.sched.group.barrier(i32 {m}, i32 {c}, i32 0)\n" for m, c in program)
        out.append(f"define linkonce_odr void @{name}() {{\n{calls}  ret void\n}}")
    return out


def _dequant_helpers() -> list[str]:
    out = [f"declare <2 x bfloat> @{_CVT_PK_BF16_FP8_INTRINSIC}(i32, float, i1 immarg)"]
    for high, name in CVT_PK_BF16_FP8.items():
        out.append(f"define linkonce_odr i32 @{name}(i32 %x) {{\n"
                   f"  %r = call <2 x bfloat> @{_CVT_PK_BF16_FP8_INTRINSIC}(i32 %x, float 1.0, i1 {str(high).lower()})\n"
                   f"  %i = bitcast <2 x bfloat> %r to i32\n  ret i32 %i\n}}")
    return out


def _i16(vector: str) -> str:
    return vector.replace("bfloat", "i16")


def _mfma_helpers() -> list[str]:
    out = []
    for op in CATALOG.values():
        if getattr(op, "a_vector", "") != "<8 x bfloat>":
            continue
        a, c, intr = op.a_vector, op.acc_vector, op.llvm_intrinsic
        out.append(f"declare {c} @{intr}({a}, {a}, {c}, i32 immarg, i32 immarg, i32 immarg)")
        blgp = op.modifier("blgp")
        for value in range(blgp.lo, blgp.hi + 1):
            out.append(
                f"define linkonce_odr {c} @{bf16_mfma_helper(op, value)}({_i16(a)} %a, {_i16(a)} %b, {c} %c) {{\n"
                f"  %ab = bitcast {_i16(a)} %a to {a}\n  %bb = bitcast {_i16(a)} %b to {a}\n"
                f"  %r = call {c} @{intr}({a} %ab, {a} %bb, {c} %c, i32 0, i32 0, i32 {value})\n"
                f"  ret {c} %r\n}}"
            )
    return out


def _tr_helpers() -> list[str]:
    out = []
    for op in CATALOG.values():
        if op.kind != "ds_read_tr" or "bfloat" not in op.result_vector:
            continue
        t, intr = op.result_vector, op.llvm_intrinsic
        out.append(f"declare {t} @{intr}(ptr addrspace(3))")
        out.append(
            f"define linkonce_odr {_i16(t)} @{bf16_tr_helper(op.name)}(ptr addrspace(3) %p) {{\n"
            f"  %r = call {t} @{intr}(ptr addrspace(3) %p)\n"
            f"  %i = bitcast {t} %r to {_i16(t)}\n  ret {_i16(t)} %i\n}}"
        )
    return out


# TIR dtypes of the buffer loads: 16-byte vectors (buffer_load_dwordx4), three words (buffer_load_dwordx3)
# and 32-bit words (buffer_load_dword)
BUFFER_LOAD_DTYPES = ("float16x8", "int16x8", "int8x16", "uint8x16", "float32x4", "int32x4", "uint32x4", "float64x2",
                      "uint32x3", "int32", "uint32")
_BUFFER_LOAD_WORDS = {4: ("<4 x i32>", "v4i32"), 3: ("<3 x i32>", "v3i32"), 1: ("i32", "i32")}
# Third word of a gfx9 buffer resource: DATA_FORMAT = 32 bit (composable_kernel include/ck/ck.hpp,
# CK_BUFFER_RESOURCE_3RD_DWORD for __gfx9__)
BUFFER_RSRC_WORD3 = 0x00020000


def buffer_load_helper(dtype: str) -> str:
    if dtype not in BUFFER_LOAD_DTYPES:
        raise ValueError(f"T.rocm.buffer_load: dtype {dtype!r} is not a 16-byte vector or a 32-bit word (or uint32x3); "
                         f"expected one of {BUFFER_LOAD_DTYPES}")
    return f"{PREFIX}buffer_load_{dtype}"


# Direct-to-LDS buffer loads: bytes per lane -> gfx950 mnemonic (1 dword on gfx9; 3 and 4 dwords are
# gfx950 additions: LLVM llvm/test/CodeGen/AMDGPU/llvm.amdgcn.raw.ptr.buffer.load.lds.gfx950.ll)
BUFFER_LOAD_LDS_MNEMONICS = {4: "buffer_load_dword", 12: "buffer_load_dwordx3", 16: "buffer_load_dwordx4"}
BUFFER_LOAD_LDS_INTRINSIC = "llvm.amdgcn.raw.ptr.buffer.load.async.lds"


def buffer_load_lds_helper(size: int) -> str:
    """The helper issuing ``BUFFER_LOAD_LDS_MNEMONICS[size] ... lds`` (size checked by the caller)."""
    return f"{PREFIX}buffer_load_lds_b{8 * size}"


def _rsrc(base: str, nbytes: str) -> str:
    """A raw buffer resource over ``nbytes`` (i64) bytes at global pointer ``base``."""
    return (f"call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) {base}, i16 0, "
            f"i64 {nbytes}, i32 {BUFFER_RSRC_WORD3})")


def _buffer_lds_helpers() -> list[str]:
    out = [f"declare void @{BUFFER_LOAD_LDS_INTRINSIC}(ptr addrspace(8), ptr addrspace(3), i32 immarg, i32, i32, "
           "i32 immarg, i32 immarg)"]
    for size in BUFFER_LOAD_LDS_MNEMONICS:
        out.append(
            f"define linkonce_odr void @{buffer_load_lds_helper(size)}(ptr addrspace(1) %base, i32 %bytes, "
            f"i32 %voffset, i32 %soffset, ptr addrspace(3) %lds) {{\n  %n = zext i32 %bytes to i64\n"
            f"  %rsrc = {_rsrc('%base', '%n')}\n"
            f"  call void @{BUFFER_LOAD_LDS_INTRINSIC}(ptr addrspace(8) %rsrc, ptr addrspace(3) %lds, i32 {size}, "
            f"i32 %voffset, i32 %soffset, i32 0, i32 0)\n  ret void\n}}")
    return out


def _buffer_helpers() -> list[str]:
    out = ["declare ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1), i16, i64, i32)"]
    for word, suffix in _BUFFER_LOAD_WORDS.values():
        out.append(f"declare {word} @llvm.amdgcn.raw.ptr.buffer.load.{suffix}(ptr addrspace(8), i32, i32, i32 immarg)")
    for dtype in BUFFER_LOAD_DTYPES:
        t = llvm_type(dtype)
        w, suffix = _BUFFER_LOAD_WORDS[3 if dtype.endswith("x3") else 4 if "x" in dtype else 1]
        load = f"@llvm.amdgcn.raw.ptr.buffer.load.{suffix}(ptr addrspace(8) %rsrc, i32 %voffset, i32 %soffset, i32 0)"
        ret = f"  %r = bitcast {w} %w to {t}\n  ret {t} %r\n" if t != w else f"  ret {t} %w\n"
        out.append(f"define linkonce_odr {t} @{buffer_load_helper(dtype)}(ptr addrspace(1) %base, i32 %bytes, "
                   f"i32 %voffset, i32 %soffset) {{\n  %n = zext i32 %bytes to i64\n"
                   f"  %rsrc = {_rsrc('%base', '%n')}\n  %w = call {w} {load}\n{ret}}}")
    return out


# Global f32 atomic add (``T.rocm.global_atomic_add_f32``): ``atomicrmw fadd`` at agent scope, relaxed
# (monotonic) ordering; ``!amdgpu.no.fine.grained.memory`` and ``!amdgpu.ignore.denormal.mode`` let
# gfx950 select ``global_atomic_add_f32`` instead of a compare-and-swap loop (LLVM AMDGPUUsage,
# "Memory Model GFX942": fine-grained memory and denormals are what the native instruction does not handle)
GLOBAL_ATOMIC_ADD_F32 = PREFIX + "global_atomic_add_f32"
GLOBAL_ATOMIC_ADD_F32_MNEMONIC = "global_atomic_add_f32"


# Global u32 atomic add returning the old value (``T.rocm.global_atomic_add_u32``: a split-K tile's
# ticket): ``atomicrmw add`` at agent scope, relaxed; gfx950 selects ``global_atomic_add ... sc0`` (sc0:
# return the pre-op value)
GLOBAL_ATOMIC_ADD_U32 = PREFIX + "global_atomic_add_u32"
GLOBAL_ATOMIC_ADD_U32_MNEMONIC = "global_atomic_add"
# Agent-scope fences (``T.rocm.fence_release`` / ``T.rocm.fence_acquire``): what LLVM's memory model
# emits for them on gfx950 (AMDGPUUsage "Memory Model GFX942", which gfx950 follows; llc-22 output):
# release = ``buffer_wbl2 sc1`` (write the L2 back for other XCDs' L2s) then ``s_waitcnt vmcnt(0)
# lgkmcnt(0)`` (every earlier load, store and atomic of the thread complete); acquire = ``s_waitcnt
# vmcnt(0)`` then ``buffer_inv sc1`` (drop stale vector L1 / L2 lines before later loads)
FENCE_RELEASE_AGENT = PREFIX + "fence_release_agent"
FENCE_ACQUIRE_AGENT = PREFIX + "fence_acquire_agent"
FENCE_MNEMONICS = {FENCE_RELEASE_AGENT: ("buffer_wbl2 sc1", "s_waitcnt vmcnt(0) lgkmcnt(0)"),
                   FENCE_ACQUIRE_AGENT: ("s_waitcnt vmcnt(0)", "buffer_inv sc1")}


def _atomic_helpers() -> list[str]:
    return [f"define linkonce_odr void @{GLOBAL_ATOMIC_ADD_F32}(ptr addrspace(1) %base, i32 %index, float %v) {{\n"
            f"  %p = getelementptr inbounds float, ptr addrspace(1) %base, i32 %index\n"
            f'  %r = atomicrmw fadd ptr addrspace(1) %p, float %v syncscope("agent") monotonic, align 4, '
            f"!amdgpu.no.fine.grained.memory !0, !amdgpu.ignore.denormal.mode !0\n  ret void\n}}", "!0 = !{}",
            f"define linkonce_odr i32 @{GLOBAL_ATOMIC_ADD_U32}(ptr addrspace(1) %base, i32 %index, i32 %v) {{\n"
            f"  %p = getelementptr inbounds i32, ptr addrspace(1) %base, i32 %index\n"
            f'  %r = atomicrmw add ptr addrspace(1) %p, i32 %v syncscope("agent") monotonic, align 4, '
            f"!amdgpu.no.fine.grained.memory !0\n  ret i32 %r\n}}",
            f'define linkonce_odr void @{FENCE_RELEASE_AGENT}() {{\n  fence syncscope("agent") release\n  ret void\n}}',
            f'define linkonce_odr void @{FENCE_ACQUIRE_AGENT}() {{\n  fence syncscope("agent") acquire\n  ret void\n}}']


# What each call of this package does to LDS, for the LDS synchronization check (``rocm.lds_sync``),
# derived from the catalog and the helpers above so that a new opcode or helper cannot be missed
# (tests/test_lds_sync.py compares it with every helper that takes an addrspace(3) pointer):
# - ``read``: each lane reads ``bytes`` LDS bytes at its address operand (every catalog ds_read_tr,
#   under its intrinsic's full name, the name TIR gives its intrinsic id (LLVM's name of the
#   overloaded intrinsic, without the suffix) and its bf16 helper);
# - ``dma``: the direct-to-LDS load, ``bytes`` per lane from the wave's base (M0) on, completed by vmcnt;
# - ``barrier``: the workgroup barrier (``lgkmcnt(0)``, then ``s_barrier``);
# - ``wait``: the agent-scope fences, which wait for the counters their mnemonics name (``FENCE_MNEMONICS``).
# No helper issues an LDS atomic (the atomics are global).
@attrs.frozen
class LdsEffect:
    kind: str  # "read", "dma", "barrier", "wait"
    bytes: int = 0  # per lane (read, dma)
    opcodes: tuple[str, ...] = ()  # the catalog opcodes that lower to it (read)
    lgkmcnt: int | None = None  # the counters a wait leaves (None: not waited for)
    vmcnt: int | None = None


def _waits(mnemonics) -> dict:
    """``{"lgkmcnt": n, "vmcnt": n}`` of the ``s_waitcnt`` among ``mnemonics``."""
    found = {}
    for text in mnemonics:
        if text.startswith("s_waitcnt"):
            found.update((k, int(n)) for k, n in re.findall(r"(vmcnt|lgkmcnt)\((\d+)\)", text))
    return found


def lds_effects() -> dict[str, LdsEffect]:
    """``{call name: LdsEffect}`` of every call of this package that touches LDS (see above)."""
    table = {}
    for op in CATALOG.values():
        if op.kind == "ds_read_tr":
            names = [op.llvm_intrinsic, op.llvm_intrinsic.rsplit(".", 1)[0]]
            for name in names + ([bf16_tr_helper(op.name)] if "bfloat" in op.result_vector else []):
                known = table.get(name, LdsEffect("read", op.load_bits // 8))  # tr16's three share one name
                table[name] = attrs.evolve(known, opcodes=(*known.opcodes, op.name))
    table.update({buffer_load_lds_helper(size): LdsEffect("dma", size) for size in BUFFER_LOAD_LDS_MNEMONICS})
    table[BARRIER] = LdsEffect("barrier", lgkmcnt=0)
    table.update({name: LdsEffect("wait", **_waits(mnemonics)) for name, mnemonics in FENCE_MNEMONICS.items()})
    return table


# Wave reductions (``T.rocm.wave_reduce``): the combine of each reduction as LLVM IR on two floats.
# ``max`` is ``nnan`` so that LLVM selects a bare ``v_max_f32`` (fused into the DPP step) instead of
# quieting both inputs first: a NaN input gives an unspecified result
WAVE_REDUCE_COMBINES = {"max": "call nnan float @llvm.maxnum.f32(float {a}, float {b})", "sum": "fadd float {a}, {b}"}


def wave_reduce_helper(combine: str, mask: int) -> str:
    """The helper reducing f32 values with ``combine`` (``WAVE_REDUCE_COMBINES``) over each group of
    lanes that differ only in the bits of ``mask`` (``lanes.reduce_steps``)."""
    return f"{PREFIX}wave_reduce_{combine}_f32_lanes{mask:02x}"


def _wave_reduce_body(combine: str, mask: int) -> str:
    lines, x = [], "%x"
    for i, step in enumerate(reduce_steps(mask)):
        lines.append(f"  %i{i} = bitcast float {x} to i32")
        if step.dpp_ctrl is not None:  # bound_ctrl: every source lane is inside the group (LLVM then fuses the combine)
            lines += [f"  %d{i} = call i32 @llvm.amdgcn.update.dpp.i32(i32 poison, i32 %i{i}, i32 {step.dpp_ctrl}, "
                      f"i32 15, i32 15, i1 true)", f"  %b{i} = bitcast i32 %d{i} to float"]
            a, b = x, f"%b{i}"
        else:
            lines += [f"  %s{i} = call {{i32, i32}} @{step.swap}(i32 %i{i}, i32 %i{i}, i1 false, i1 true)"]
            for h in "ab":
                lines += [f"  %{h}{i}w = extractvalue {{i32, i32}} %s{i}, {'ab'.index(h)}",
                          f"  %{h}{i} = bitcast i32 %{h}{i}w to float"]
            a, b = f"%a{i}", f"%b{i}"
        lines.append(f"  %x{i} = " + WAVE_REDUCE_COMBINES[combine].format(a=a, b=b))
        x = f"%x{i}"
    return "\n".join(lines) + f"\n  ret float {x}\n"


def wave_reduce_helpers() -> list[str]:
    out = ["declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32 immarg, i32 immarg, i32 immarg, i1 immarg)",
           "declare float @llvm.maxnum.f32(float, float)",
           *(f"declare {{i32, i32}} @llvm.amdgcn.permlane{n}.swap(i32, i32, i1 immarg, i1 immarg)" for n in (16, 32))]
    for combine in WAVE_REDUCE_COMBINES:
        for mask in REDUCE_MASKS:
            out.append(f"define linkonce_odr float @{wave_reduce_helper(combine, mask)}(float %x) convergent {{\n"
                       f"{_wave_reduce_body(combine, mask)}}}")
    return out


def helpers_ll() -> str:
    barrier = (
        f"define linkonce_odr void @{BARRIER}() {{\n"
        '  fence syncscope("workgroup") release\n  call void @llvm.amdgcn.s.barrier()\n'
        '  fence syncscope("workgroup") acquire\n  ret void\n}\n'
        "declare void @llvm.amdgcn.s.barrier()"
    )
    body = "\n".join([*_mfma_helpers(), *_tr_helpers(), *_buffer_helpers(), *_buffer_lds_helpers(), *_sched_helpers(),
                      barrier, *_atomic_helpers(), *wave_reduce_helpers(), *_dequant_helpers()])
    return f'target triple = "amdgcn-amd-amdhsa"\n\n{body}\n'


def helpers_path() -> str:
    """The helpers as a .ll file (content-addressed: rewritten only when the helpers change)."""
    text = helpers_ll()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"tvm_cdna4_helpers_{digest}.ll"
    if not path.exists():
        tmp = path.with_suffix(f".{id(text)}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return str(path)
