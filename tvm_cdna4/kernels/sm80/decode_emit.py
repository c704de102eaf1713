"""Emission of the decode GEMM: a :class:`~tvm_cdna4.kernels.sm80.decode_plan.DecodePlan` to a TIRx
PrimFunc ``main(A, B, C[, W, S])`` (A = x [M, K], B = W [N, K], C [M, N]).

Every decision is in the plan (``kernels.sm80.decode_plan.plan_decode``); the macros spell it with plain
``T.ptx`` instructions on registers: 16-byte ``ld.global.nc`` loads of W and x into ``uint32``
words in the K-permuted fragment order, ``mma.sync.m16n8k16`` on them, the warps' partials added
through shared memory, then one output element per thread at a time (with a K split, the workspace
and ticket reduction of the tile GEMM's epilogue, ``kernels.sm80.gemm_emit.split_epilogue``, per element), each
through the plan's fused epilogue (``kernels.gemm.epilogue.apply``, its inputs prefetched before the K loop) before its conversion and store.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from .decode_plan import DecodePlan
from ..gemm import epilogue as fused
from .gemm_emit import signature_source
from .gemm_emit_common import wide_at, wide_index
from .gemm_emit_epilogue import TIR_OPS, fused_inputs


@attrs.frozen
class Lane:
    """A thread's kernel-wide values."""

    A: object
    """x [M, K]."""
    B: object
    """W [N, K]."""
    wr: object
    """W chunks of one iteration: ``unroll x row_tiles x 2 row halves x 4`` words."""
    xr: object
    """x chunks of one iteration: ``unroll x token_tiles x 4`` words."""
    acc: object
    """f32 accumulators: ``row_tiles x token_tiles x 4``."""
    n0: object
    """First W row of the CTA."""
    g: object
    """lane / 4: the MMA row (W row) and column (token) group."""
    t: object
    """lane % 4: the 8-element chunk of a 32-k group."""


def w_word(p: DecodePlan, u, r, h, q):
    """Index in ``Lane.wr`` of word q of chunk u, row tile r, row half h."""
    return ((u * p.config.row_tiles + r) * 2 + h) * 4 + q


def x_word(p: DecodePlan, u, nt, q):
    return (u * p.token_tiles + nt) * 4 + q


def acc_word(p: DecodePlan, r, nt, c):
    return (r * p.token_tiles + nt) * 4 + c


# ---- loads ---------------------------------------------------------------------------------------


@T.macro
def load_chunk(p, G, regs, i, row, k, masked, instr, name):
    # 8 elements G[row, k .. k+7] into regs[i .. i+3] (element pairs, low half first); name: G's parameter
    if I.constexpr(p.vector == 8):
        if I.constexpr(masked):
            T.ptx[instr](regs[i], regs[i + 1], regs[i + 2], regs[i + 3], G.ptr_to(wide_at(p, name, row, T.min(k, p.K - 8))))
            for q in T.unroll(4):
                regs[i + q] = T.if_then_else(k < p.K, regs[i + q], T.uint32(0))
        else:
            T.ptx[instr](regs[i], regs[i + 1], regs[i + 2], regs[i + 3], G.ptr_to(wide_at(p, name, row, k)))
    else:
        # rows not 16-byte aligned (K % 8 != 0): element loads, zero past K
        Gu = T.decl_tensor(G.ptr_to([0, 0]), ty_args=[T.Tensor(G.shape, "uint16", layout="default")])
        for q in T.unroll(4):
            lo = T.if_then_else(k + 2 * q < p.K, T.Cast("uint32", Gu[wide_index(p, name, row), T.min(k + 2 * q, p.K - 1)]),
                                T.uint32(0))
            hi = T.if_then_else(k + 2 * q + 1 < p.K,
                                T.Cast("uint32", Gu[wide_index(p, name, row), T.min(k + 2 * q + 1, p.K - 1)]), T.uint32(0))
            regs[i + q] = lo | (hi << T.uint32(16))


@T.macro
def load_iteration(p, th, k0, masked):
    # the lane's chunks of one iteration: rows g, g+8 of every row tile, tokens g (and 8+g); rows
    # past N and tokens past M read clamped rows (their outputs are not stored)
    for u in T.unroll(p.config.unroll):
        for r in T.unroll(p.config.row_tiles):
            for h in T.unroll(2):
                load_chunk(p, th.B, th.wr, w_word(p, u, r, h, 0), T.min(th.n0 + 16 * r + 8 * h + th.g, p.N - 1),
                           k0 + 32 * u + 8 * th.t, masked, p.load_w, "B")
        for nt in T.unroll(p.token_tiles):
            load_chunk(p, th.A, th.xr, x_word(p, u, nt, 0), T.min(8 * nt + th.g, p.M - 1), k0 + 32 * u + 8 * th.t,
                       masked, p.load_x, "A")


@T.macro
def mma_iteration(p, th):
    # two k16 steps per chunk: words 0, 1 of each chunk are step 0's k-slots, words 2, 3 step 1's
    for u in T.unroll(p.config.unroll):
        for s in T.unroll(2):
            for r in T.unroll(p.config.row_tiles):
                for nt in T.unroll(p.token_tiles):
                    T.ptx[p.mma_instr](
                        th.acc[acc_word(p, r, nt, 0)], th.acc[acc_word(p, r, nt, 1)],
                        th.acc[acc_word(p, r, nt, 2)], th.acc[acc_word(p, r, nt, 3)],
                        th.wr[w_word(p, u, r, 0, 2 * s)], th.wr[w_word(p, u, r, 1, 2 * s)],
                        th.wr[w_word(p, u, r, 0, 2 * s + 1)], th.wr[w_word(p, u, r, 1, 2 * s + 1)],
                        th.xr[x_word(p, u, nt, 2 * s)], th.xr[x_word(p, u, nt, 2 * s + 1)],
                        th.acc[acc_word(p, r, nt, 0)], th.acc[acc_word(p, r, nt, 1)],
                        th.acc[acc_word(p, r, nt, 2)], th.acc[acc_word(p, r, nt, 3)])


# ---- the cp.async pipeline (K a multiple of 8) ------------------------------------------------------


def chunk_offset(p: DecodePlan, stage, u, slot):
    """Halves from the warp's pipeline base to the lane's chunk (stage, unroll u, slot): slots are the
    W row halves (``2 * row_tiles``) then the token tiles; 32 lanes' chunks side by side."""
    slots = 2 * p.config.row_tiles + p.token_tiles
    return ((stage * p.config.unroll + u) * slots + slot) * 32 * 8


def line_offset(p: DecodePlan, stage, slot, row, col):
    """Halves from the warp's pipeline base to chunk (row, col) of a slot in the line-copy layout: a
    slot is 8 rows x ``4 * unroll`` chunks, the column XORed with 4 on odd rows (when a row has 8 or
    more chunks), so a fragment read's 8-lane phase (rows 2p and 2p + 1, 4 columns) and a copy's (8
    chunks of one row) each touch 8 different bank groups (tests/kernels/sm80/test_cuda_decode.py)."""
    cols = 4 * p.config.unroll
    slots = 2 * p.config.row_tiles + p.token_tiles
    return ((stage * slots + slot) * 8 * cols + row * cols + (col ^ ((row % 2) * 4 % cols))) * 8


@T.macro
def copy_lines(p, instr, G, SMH, wbase, stage, slot, row0, rmax, k0, ok, name):
    # the slot's 8 rows x 4*unroll chunks, chunk lane + 32 i by lane: whole lines per instruction
    lane = T.cuda.lane_id()
    cols = 4 * p.config.unroll
    for i in T.unroll(p.config.unroll):
        c = lane + 32 * i
        copy_chunk(p, instr, G, SMH.ptr_to([wbase + line_offset(p, stage, slot, c // cols, c % cols)]),
                   T.min(row0 + c // cols, rmax), k0 + 8 * (c % cols), ok, name)


@T.macro
def copy_iteration_lines(p, th, SMH, wbase, stage, li, k_slice):
    gi = k_slice * p.loop.slice_iters + li
    ok = li < p.loop.slice_iters
    slots = 2 * p.config.row_tiles
    for r in T.unroll(p.config.row_tiles):
        for h in T.unroll(2):
            copy_lines(p, p.copy_w, th.B, SMH, wbase, stage, 2 * r + h, th.n0 + 16 * r + 8 * h, p.N - 1, gi * p.loop.span, ok,
                       "B")
    for nt in T.unroll(p.token_tiles):
        copy_lines(p, p.copy_x, th.A, SMH, wbase, stage, slots + nt, 8 * nt, p.M - 1, gi * p.loop.span, ok, "A")


@T.macro
def copy_stage(p, th, SMH, wbase, base, stage, li, k_slice):
    if I.constexpr(p.line_copy):
        copy_iteration_lines(p, th, SMH, wbase, stage, li, k_slice)
    else:
        copy_iteration(p, th, SMH, base, stage, li, k_slice)


@T.macro
def read_any(p, th, SMH, wbase, base, stage):
    if I.constexpr(p.line_copy):
        T.cuda.warp_sync()  # every lane's copies of the stage have landed (each waited for its own)
    read_stage(p, th, SMH, wbase, base, stage)


@T.macro
def copy_chunk(p, instr, G, dst, row, k, ok, name):
    T.ptx[instr](dst, G.ptr_to(wide_at(p, name, row, T.min(k, p.K - 8))), 16,
                 T.if_then_else(T.and_(ok, k < p.K), T.uint32(16), T.uint32(0)))


@T.macro
def copy_iteration(p, th, SMH, base, stage, li, k_slice):
    # the lane's chunks of the warp's iteration li into its stage; an iteration past the slice copies
    # zeros and reads nothing (src-size 0)
    gi = k_slice * p.loop.slice_iters + li
    ok = li < p.loop.slice_iters
    slots = 2 * p.config.row_tiles
    for u in T.unroll(p.config.unroll):
        for r in T.unroll(p.config.row_tiles):
            for h in T.unroll(2):
                copy_chunk(p, p.copy_w, th.B, SMH.ptr_to([base + chunk_offset(p, stage, u, 2 * r + h)]),
                           T.min(th.n0 + 16 * r + 8 * h + th.g, p.N - 1), gi * p.loop.span + 32 * u + 8 * th.t, ok, "B")
        for nt in T.unroll(p.token_tiles):
            copy_chunk(p, p.copy_x, th.A, SMH.ptr_to([base + chunk_offset(p, stage, u, slots + nt)]),
                       T.min(8 * nt + th.g, p.M - 1), gi * p.loop.span + 32 * u + 8 * th.t, ok, "A")


def read_offset(p: DecodePlan, th, wbase, base, stage, u, slot):
    """Halves from shared memory's start to the chunk lane (g, t) reads for unroll ``u`` of ``slot``:
    its own chunk (``chunk_offset`` from the lane's ``base``), or with ``line_copy`` chunk (g, t + 4u)
    of the slot's lines (``line_offset`` from the warp's ``wbase``)."""
    if p.line_copy:
        return wbase + line_offset(p, stage, slot, th.g, th.t + 4 * u)
    return base + chunk_offset(p, stage, u, slot)


@T.macro
def read_stage(p, th, SMH, wbase, base, stage):
    # a landed stage's fragment words into the iteration's registers (``read_offset``)
    slots = 2 * p.config.row_tiles
    for u in T.unroll(p.config.unroll):
        for r in T.unroll(p.config.row_tiles):
            for h in T.unroll(2):
                i = w_word(p, u, r, h, 0)
                T.ptx["ld.shared.v4.b32"](th.wr[i], th.wr[i + 1], th.wr[i + 2], th.wr[i + 3],
                                          SMH.ptr_to([read_offset(p, th, wbase, base, stage, u, 2 * r + h)]))
        for nt in T.unroll(p.token_tiles):
            i = x_word(p, u, nt, 0)
            T.ptx["ld.shared.v4.b32"](th.xr[i], th.xr[i + 1], th.xr[i + 2], th.xr[i + 3],
                                      SMH.ptr_to([read_offset(p, th, wbase, base, stage, u, slots + nt)]))


@T.macro
def pipelined_loop(p, th, k_slice):
    # each warp its own cp.async pipeline over its iterations w, w + warps, ... (lane-private chunks:
    # the lane that copies a chunk is the one that reads it, so no barrier)
    warp = T.cuda.warp_id()
    lane = T.cuda.lane_id()
    S = p.config.stages
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 2,), p.dtype, scope="shared.dyn", layout="default", align=16)])
    wbase = warp * (p.smem_bytes // 2 // p.config.warps)
    base = wbase + lane * 8
    for s in T.unroll(S - 1):
        if s < p.loop.per_warp:
            copy_stage(p, th, SMH, wbase, base, s, warp + s * p.config.warps, k_slice)
        T.ptx["cp.async.commit_group"]()
    for j in range(p.loop.per_warp):
        if I.constexpr(p.line_copy):
            T.cuda.warp_sync()  # every lane has read the stage this trip's copies overwrite
        if j + S - 1 < p.loop.per_warp:
            copy_stage(p, th, SMH, wbase, base, (j + S - 1) % S, warp + (j + S - 1) * p.config.warps, k_slice)
        T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](S - 1)
        read_any(p, th, SMH, wbase, base, j % S)
        mma_iteration(p, th)
    T.ptx["cp.async.wait_group"](0)


@T.macro
def k_loop(p, th, k_slice):
    if I.constexpr(p.pipelined):
        pipelined_loop(p, th, k_slice)
    else:
        register_loop(p, th, k_slice)


@T.macro
def register_loop(p, th, k_slice):
    # warp w takes the slice's iterations w, w + warps, ...; the one partial iteration (K not a
    # multiple of the span) is masked
    warp = T.cuda.warp_id()
    for j in range(p.loop.per_warp):
        li = warp + j * p.config.warps
        gi = k_slice * p.loop.slice_iters + li
        if T.and_(li < p.loop.slice_iters, gi < p.loop.full):
            load_iteration(p, th, gi * p.loop.span, False)
            mma_iteration(p, th)
        if I.constexpr(p.loop.full < p.loop.iters):
            if T.and_(li < p.loop.slice_iters, gi == p.loop.full):
                load_iteration(p, th, gi * p.loop.span, True)
                mma_iteration(p, th)


# ---- the warps' partials, the epilogue -----------------------------------------------------------


def red_index(p: DecodePlan, w, rt, nt, c, lane):
    """Shared f32 word of warp w's accumulator (row tile, token tile, element c) of lane ``lane``."""
    return (((w * p.config.row_tiles + rt) * p.token_tiles + nt) * 4 + c) * 32 + lane


def out_partial(p: DecodePlan, red, tok, row):
    """The CTA's sum over its warps of output (token ``tok``, CTA row ``row``), from the shared words:
    D row ``row`` is lane (row % 8) * 4 + (tok % 8) // 2's element 2 * ((row % 16) // 8) + tok % 2."""
    c = 2 * ((row % 16) // 8) + tok % 2
    lane = 4 * (row % 8) + (tok % 8) // 2
    total = red[red_index(p, 0, row // 16, tok // 8, c, lane)]
    for w in range(1, p.config.warps):
        total = total + red[red_index(p, w, row // 16, tok // 8, c, lane)]
    return total


@T.macro
def share_partials(p, th, red):
    lane = T.cuda.lane_id()
    warp = T.cuda.warp_id()
    for r in T.unroll(p.config.row_tiles):
        for nt in T.unroll(p.token_tiles):
            for c in T.unroll(4):
                red[red_index(p, warp, r, nt, c, lane)] = th.acc[acc_word(p, r, nt, c)]
    T.cuda.cta_sync()


def fused_at(p: DecodePlan, pre, i) -> dict:
    """The fused inputs of the thread's output ``i``, from the registers ``prefetch_fused`` filled."""
    return {name: pre[j * p.out_per_thread + i] for j, name in enumerate(p.fusion.inputs())}


@T.macro
def prefetch_one(p, args, pre, j, i, tok, n):
    # input j of the fusion (``Fusion.inputs()[j]``) of output (tok, n), as f32, into register j * out_per_thread + i
    pre[j * p.out_per_thread + i] = TIR_OPS.f32(fused_inputs(p.fusion, args, tok, n, wide=p.offsets64)[p.fusion.inputs()[j]])


@T.macro
def prefetch_fused(p, args, pre, n0):
    # the fused epilogue's inputs of the thread's outputs into registers before the K loop, so that their
    # load latency hides under it (read at the end, a dependent load per wave of CTAs measured +1.7 µs at
    # 1x6144x4096 on the H200); the index clamped inside C (an output outside is never stored)
    tid = T.cuda.thread_idx("x")
    rows = p.config.block_rows
    for i in T.unroll(p.out_per_thread):
        tok = T.min(T.truncdiv(tid + i * p.threads, rows), p.M - 1)
        n = T.min(n0 + T.truncmod(tid + i * p.threads, rows), p.N - 1)
        [prefetch_one(p, args, pre, j, i, tok, n) for j in range(len(p.fusion.inputs()))]


@T.macro
def store_c(p, args, tok, n, v, pre, i):
    # output (tok, n), inside C: the fused epilogue (DecodePlan.fusion, its inputs prefetched into ``pre``),
    # the conversion, the store
    if I.constexpr(p.out_dtype == "float32"):
        args["C"][wide_index(p, "C", tok), n] = fused.apply(p.fusion, v, fused_at(p, pre, i), TIR_OPS)
    else:
        args["C"][wide_index(p, "C", tok), n] = T.Cast(p.out_dtype, fused.apply(p.fusion, v, fused_at(p, pre, i), TIR_OPS))


@T.macro
def epilogue(p, args, red, pre, n0, k_slice):
    tid = T.cuda.thread_idx("x")
    rows = p.config.block_rows
    vals = T.alloc_tensor(ty_args=[T.Tensor((p.out_per_thread,), "float32", scope="local", layout="default")])
    for i in T.unroll(p.out_per_thread):
        e = tid + i * p.threads
        if T.and_(e < p.M * rows, n0 + e % rows < p.N):
            vals[i] = out_partial(p, red, e // rows, e % rows)
            if I.constexpr(p.reduce_instr is None):
                store_c(p, args, e // rows, n0 + e % rows, vals[i], pre, i)
            elif I.constexpr(p.config.reduction == "ordered"):
                T.ptx[p.reduce_instr](args["W"].ptr_to(wide_at(p, "W", k_slice, e // rows, n0 + e % rows)), vals[i])
            else:
                T.ptx[p.reduce_instr](args["W"].ptr_to(wide_at(p, "W", 0, e // rows, n0 + e % rows)), vals[i])
    if I.constexpr(p.reduce_instr is not None):
        split_tail(p, args, vals, pre, n0)


@T.macro
def split_tail(p, args, vals, pre, n0):
    # a fence, the row block's ticket; its last CTA gathers the sum, clears W and S, stores C
    tid = T.cuda.thread_idx("x")
    rb = T.truncmod(T.cuda.block_idx("x"), p.row_blocks)
    rows = p.config.block_rows
    T.ptx["fence.acq_rel.gpu"]()
    T.cuda.cta_sync()
    ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared", layout="default")])
    drawn = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    part = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local", layout="default")])
    if tid == 0:
        T.ptx["atom.global.add.u32"](drawn[0], args["S"].ptr_to([rb]), T.uint32(1))
        ticket[0] = drawn[0]
    T.cuda.cta_sync()
    if ticket[0] == T.uint32(p.k_splits - 1):
        T.ptx["fence.acq_rel.gpu"]()
        for i in T.unroll(p.out_per_thread):
            e = tid + i * p.threads
            if T.and_(e < p.M * rows, n0 + e % rows < p.N):
                T.ptx["ld.global.cg.f32"](vals[i], args["W"].ptr_to(wide_at(p, "W", 0, e // rows, n0 + e % rows)))
                if I.constexpr(p.config.reduction == "atomic"):
                    T.ptx["st.global.f32"](args["W"].ptr_to(wide_at(p, "W", 0, e // rows, n0 + e % rows)), T.float32(0))
                else:
                    for s in T.unroll(1, p.k_splits):
                        T.ptx["ld.global.cg.f32"](part[0], args["W"].ptr_to(wide_at(p, "W", s, e // rows, n0 + e % rows)))
                        vals[i] = vals[i] + part[0]
                store_c(p, args, e // rows, n0 + e % rows, vals[i], pre, i)
        if tid == 0:
            args["S"][rb] = T.uint32(0)


# ---- the kernel ------------------------------------------------------------------------------------


@T.macro
def decode_kernel(p, args):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=p.threads, dynamic_smem_bytes=p.smem_bytes))
    pid = T.cuda.block_idx("x")
    lane = T.cuda.lane_id()
    n0 = T.truncmod(pid, p.row_blocks) * p.config.block_rows
    k_slice = T.truncdiv(pid, p.row_blocks)
    wr = T.alloc_tensor(ty_args=[T.Tensor((p.config.unroll * p.config.row_tiles * 8,), "uint32", scope="local", layout="default")])
    xr = T.alloc_tensor(ty_args=[T.Tensor((p.config.unroll * p.token_tiles * 4,), "uint32", scope="local", layout="default")])
    acc = T.alloc_tensor(ty_args=[T.Tensor((p.config.row_tiles * p.token_tiles * 4,), "float32", scope="local", layout="default")])
    red = T.alloc_tensor(ty_args=[T.Tensor((p.smem_floats,), "float32", scope="shared", layout="default", align=16)])
    for i in T.unroll(p.config.row_tiles * p.token_tiles * 4):
        acc[i] = T.float32(0)
    if I.constexpr(len(p.fusion.inputs()) > 0):
        pre = T.alloc_tensor(ty_args=[T.Tensor((len(p.fusion.inputs()) * p.out_per_thread,), "float32", scope="local", layout="default")])
        prefetch_fused(p, args, pre, n0)
        decode_body(p, args, Lane(args["A"], args["B"], wr, xr, acc, n0, lane // 4, lane % 4), red, pre, n0, k_slice)
    else:  # no fused inputs: nothing reads ``pre``
        decode_body(p, args, Lane(args["A"], args["B"], wr, xr, acc, n0, lane // 4, lane % 4), red, acc, n0, k_slice)


@T.macro
def decode_body(p, args, th, red, pre, n0, k_slice):
    k_loop(p, th, k_slice)
    share_partials(p, th, red)
    epilogue(p, args, red, pre, n0, k_slice)


@transpile_once
def emit_decode(p: DecodePlan):
    """The TIRx PrimFunc ``main(A, B, C[, W, S])`` of a decode plan."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p, "decode_kernel"), {"T": T, "decode_kernel": decode_kernel, "p": p, "types": types})
