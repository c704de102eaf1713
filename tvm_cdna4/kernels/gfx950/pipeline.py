"""The K-tile software pipeline of the gfx950 GEMMs (dense and MX).

``fragment_pipeline``: two LDS stages and two MFMA fragment register sets, one explicit wait per K
tile (its docstring); ``dma_pipeline``: the same with direct-to-LDS global loads (three LDS stages,
no staging registers); ``schedule_hint``: a period's ``prefetch_program`` (``gfx950_plan``, pure,
re-exported here with ``prefetch_reads``: where each period's memory instructions go between its
MFMAs) in the loop body; ``chunk_loader`` and friends: the global -> register copies;
``dma_loader``: the global -> LDS copies.
"""

from __future__ import annotations

import math

from tvm_tirx.script import tirx as T

from ...patterns.dma import LdsTile
from ...patterns.wave import BUFFER_OOB, waitcnt_lgkmcnt_imm, waitcnt_vmcnt_imm
from ...isa.llvm_helpers import sched_helper
from .gemm_interleave import prefetch_program, prefetch_reads  # noqa: F401 (pure: the plans call them)


@T.macro
def period_wait(vmcnt):
    """``s_waitcnt vmcnt(vmcnt) lgkmcnt(0)``: the one wait at the end of a pipeline period."""
    T.evaluate(T.call_llvm_intrin("llvm.amdgcn.s.waitcnt", T.int32(waitcnt_vmcnt_imm(vmcnt) & waitcnt_lgkmcnt_imm(0)),
                                  ty="void"))


def fragment_pipeline(k_steps: int, load, store, read, mma, ahead: int = 1, loads_per_tile: int = 0,
                      fence: bool = False):
    """Macro ``run(stages, staging, frags, state)``: the K-tile pipeline with the operand fragments
    double-buffered in registers, so that one ``s_waitcnt vmcnt(n) lgkmcnt(0)`` per K tile is the
    only wait LLVM's waitcnt insertion finds necessary. ``stages``, ``staging`` and ``frags`` are
    pairs (tile ``j`` uses entry ``j % 2``): LDS stages, global-load staging register sets, MFMA
    fragment register sets.

    Period ``p`` (between the barriers of consecutive tiles) stores the staging registers holding
    tile ``p + 1`` into its LDS stage, loads tile ``p + 1 + ahead`` from global memory into staging
    registers, reads the fragments of tile ``p`` from its stage into its set, and runs tile
    ``p - 1``'s MFMAs from the other set (read in period ``p - 1``): nothing in a period waits for
    a memory operation of the same period. Then one wait, for the period's LDS stores and reads and
    for every global load but those of the next ``ahead - 1`` tiles (``loads_per_tile`` each), and
    one workgroup barrier (it publishes tile ``p + 1``'s stage and retires the reads of tile
    ``p``'s). ``ahead`` 1: a global load has one period to land, and one staging register set
    suffices (pass the same set twice); 2: two periods, two sets. The last tile's MFMAs follow the
    loop.

    The kernel supplies four macros: ``load(staging, state, ko)`` (tile ``ko``: global -> staging
    registers), ``store(stage, staging, state)`` (staging registers -> the stage's LDS),
    ``read(stage, frags, state)`` (the stage's fragments -> the register set) and ``mma(frags,
    state)`` (the MFMAs of a register set). The loop is unrolled by two so that every entry is
    static. ``fence``: a ``sched.barrier`` after each period's barrier, so that LLVM's scheduler
    moves no instruction (MFMAs, ALU work on loaded registers) into another period, where it would
    need a wait of its own.
    """
    if ahead not in (1, 2):
        raise ValueError(f"fragment_pipeline: ahead must be 1 or 2 periods; got {ahead}")
    pairs = max(k_steps - 2 - ahead, 0) // 2  # loop iterations (periods 2i+1, 2i+2), all with store and load
    tail = k_steps - 1 - 2 * pairs  # periods after the loop

    @T.macro
    def period(p, j, stages, staging, frags, state):
        """Period ``p``; ``j = p % 2`` as a Python int."""
        if p + 1 < k_steps:
            store(stages[1 - j], staging[1 - j], state)
        if p + 1 + ahead < k_steps:
            load(staging[(j + 1 + ahead) % 2], state, p + 1 + ahead)
        read(stages[j], frags[j], state)
        if p >= 1:
            mma(frags[1 - j], state)
        if p + 1 + ahead < k_steps:
            period_wait((ahead - 1) * loads_per_tile)
        else:
            period_wait(0)
        T.rocm.workgroup_barrier()
        if fence:
            T.evaluate(T.call_llvm_intrin("llvm.amdgcn.sched.barrier", T.int32(0), ty="void"))

    @T.macro
    def run(stages, staging, frags, state):
        load(staging[0], state, 0)
        store(stages[0], staging[0], state)
        if k_steps > 1:
            load(staging[1], state, 1)
        if ahead == 2 and k_steps > 2:
            load(staging[0], state, 2)
        if ahead + 1 < k_steps:
            period_wait((ahead - 1) * loads_per_tile)
        else:
            period_wait(0)
        T.rocm.workgroup_barrier()
        period(0, 0, stages, staging, frags, state)
        for kp in T.serial(pairs):
            period(2 * kp + 1, 1, stages, staging, frags, state)
            period(2 * kp + 2, 0, stages, staging, frags, state)
        for t in T.unroll(tail):
            if t % 2 == 0:
                period(2 * pairs + 1 + t, 1, stages, staging, frags, state)
            else:
                period(2 * pairs + 1 + t, 0, stages, staging, frags, state)
        mma(frags[(k_steps - 1) % 2], state)

    return run


def dma_pipeline(k_steps: int, load, read, mma, loads_per_tile: int):
    """Macro ``run(stages, frags, state)``: ``fragment_pipeline`` with direct-to-LDS global loads
    (``T.rocm.buffer_load_lds``): no staging registers and no LDS stores, three LDS stages
    (``stages``, tile ``j`` in entry ``j % 3``) and two fragment register sets (``frags``, ``j % 2``).

    Period ``p`` loads tile ``p + 2`` from global memory straight into its stage (the stage of tile
    ``p - 1``, whose reads the previous period's barrier retired), reads the fragments of tile ``p``
    into its set and runs tile ``p - 1``'s MFMAs from the other. Then one ``s_waitcnt vmcnt(n)
    lgkmcnt(0)``: ``n = loads_per_tile`` (this wave's loads per tile) leaves tile ``p + 2``'s loads
    in flight and completes tile ``p + 1``'s, whose bytes land in LDS at that wait; the barrier
    publishes them to the other waves. So a load has two periods to land, as the register-staged
    pipeline's with ``ahead`` 2. The kernel supplies ``load(stage, state, ko)`` (tile ``ko``: global
    -> the stage's LDS), ``read`` and ``mma`` (as ``fragment_pipeline``). The loop is unrolled by
    six (three stages x two fragment sets) so that every entry is static."""
    groups = max(k_steps - 3, 0) // 6  # loop iterations (periods 6i+1 .. 6i+6), all with a load

    @T.macro
    def period(p, s, f, stages, frags, state):
        """Period ``p``; ``s = p % 3`` and ``f = p % 2`` as Python ints."""
        if p + 2 < k_steps:
            load(stages[(s + 2) % 3], state, p + 2)
        read(stages[s], frags[f], state)
        if p >= 1:
            mma(frags[1 - f], state)
        if p + 2 < k_steps:
            period_wait(loads_per_tile)
        else:
            period_wait(0)
        T.rocm.workgroup_barrier()

    def static_periods(first: int, last: int):
        """Macro ``(stages, frags, state)`` running periods ``first`` to ``last - 1``, each with its
        own Python-int ``p`` (no run-time branches outside the loop)."""
        if first >= last:
            @T.macro
            def none(stages, frags, state):
                T.evaluate(0)
            return none
        rest = static_periods(first + 1, last)

        @T.macro
        def chain(stages, frags, state):
            period(first, first % 3, first % 2, stages, frags, state)
            rest(stages, frags, state)
        return chain

    head, tail = static_periods(0, 1), static_periods(6 * groups + 1, k_steps)

    @T.macro
    def run(stages, frags, state):
        load(stages[0], state, 0)
        if k_steps > 1:
            load(stages[1], state, 1)
            period_wait(loads_per_tile)
        else:
            period_wait(0)
        T.rocm.workgroup_barrier()
        head(stages, frags, state)
        if groups > 0:  # no zero-trip loop to lower
            for it in T.serial(groups):
                period(6 * it + 1, 1, 1, stages, frags, state)
                period(6 * it + 2, 2, 0, stages, frags, state)
                period(6 * it + 3, 0, 1, stages, frags, state)
                period(6 * it + 4, 1, 0, stages, frags, state)
                period(6 * it + 5, 2, 1, stages, frags, state)
                period(6 * it + 6, 0, 0, stages, frags, state)
        tail(stages, frags, state)
        mma(frags[(k_steps - 1) % 2], state)

    return run


def schedule_hint(program: tuple[tuple[int, int], ...] | None):
    """Macro that places ``program`` (``prefetch_program``) in the current loop body; a no-op
    for None."""
    if program is None:
        @T.macro
        def hint():
            T.evaluate(0)
    else:
        name = sched_helper(program)

        @T.macro
        def hint():
            T.evaluate(T.call_extern(name, ty="void"))
    return hint


def lds_stage(shape: tuple[int, ...], dtype: str, stages: int = 1):
    """LDS stages: a 16-byte aligned row-major ``(stages, *shape)`` shared tensor type (one stage:
    ``(1, *shape)``)."""
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return T.Tensor((stages, *shape), dtype, scope="shared", align=16,
                    layout=T.TileLayout(T.S[(stages, *shape) : (math.prod(shape), *strides)]))


def guarded_load(X, base, r, c, lim, dtype: str):
    """``X[base + r * lim[1] + c]`` for (r, c) inside the ``lim`` matrix, zero outside (the address
    is clamped, so the load itself is always in bounds)."""
    inside = T.And(r < lim[0], c < lim[1])
    return T.if_then_else(inside, X[base + T.min(r, lim[0] - 1) * lim[1] + T.min(c, lim[1] - 1)], T.cast(0, dtype))


def chunk_loader(dtype: str, vec: int, lim: tuple[int, int], cpr: int, k_rows: bool, batch_elems: int, total_elems: int,
                 max_elems: int | None = None):
    """Macro ``chunk(regs, X, Xg, bz, tile0, t, q, k0)``: thread ``t``'s 16-byte chunk ``q`` of an
    operand tile into ``regs[q * vec : (q + 1) * vec]``.

    The operand is stored row-major as ``lim`` (``lim[0]`` rows of ``lim[1]`` elements; a batch of
    ``batch_elems`` elements per ``bz``); its rows are K when ``k_rows``. The tile starts at K
    ``k0`` and at ``tile0`` along M or N; chunk ``q`` of thread ``t`` is the tile's row
    ``(q * 256 + t) // cpr``, elements ``(q * 256 + t) % cpr * vec`` onward. ``X`` is the operand
    parameter, ``Xg`` a flat view of it. Where every chunk is wholly inside or outside a matrix row
    (``lim[1] % vec == 0``) and offsets fit 31 bits, one ``buffer_load_dwordx4`` per chunk: the
    per-thread offset is loop-invariant, the K step goes into the wave-uniform ``soffset``, and a
    chunk outside the matrix gets the out-of-range offset (zeros). Otherwise clamped element loads.
    ``total_elems`` may be an expression of a dynamic M; ``max_elems`` is then its largest value.
    """
    esize = 16 // vec
    nbytes = total_elems * esize
    if not isinstance(total_elems, int) and max_elems is None:
        raise ValueError(f"chunk_loader: the operand's {total_elems} elements need their largest value (max_elems)")
    fits = (total_elems if isinstance(total_elems, int) else max_elems) * esize < 2**31

    def coords(t, q, tile0, k0):
        """(storage row, storage column) of the chunk's first element."""
        r, c = (q * 256 + t) // cpr, (q * 256 + t) % cpr * vec
        return (k0 + r, tile0 + c) if k_rows else (tile0 + r, k0 + c)

    if lim[1] % vec == 0 and fits:
        @T.macro
        def chunk(regs, X, Xg, bz, tile0, t, q, k0):
            voff, soff = buffer_offsets(*coords(t, q, tile0, 0), k0, lim, k_rows, bz * batch_elems, esize)
            regs[T.ramp(q * vec, 1, vec)] = T.rocm.buffer_load(X.data, nbytes, voff, soff, f"{dtype}x{vec}")
    else:
        @T.macro
        def chunk(regs, X, Xg, bz, tile0, t, q, k0):
            row, col = coords(t, q, tile0, k0)
            for e in T.unroll(vec):
                regs[q * vec + e] = guarded_load(Xg, bz * batch_elems, row, col + e, lim, dtype)
    return chunk


def buffer_offsets(row, col, k0, lim: tuple[int, int], k_rows: bool, batch0, esize: int):
    """(voffset, soffset) in bytes of the operand element at storage (``row``, ``col``) of K tile 0
    moved to K ``k0`` (``chunk_loader``'s storage), in the batch starting at element ``batch0``: the
    K step (whole rows when ``k_rows``) and the batch go to the wave-uniform soffset; an element
    outside the ``lim`` matrix gets ``BUFFER_OOB`` (the load reads zeros)."""
    inside = T.And(row + (k0 if k_rows else 0) < lim[0], col + (0 if k_rows else k0) < lim[1])
    soff = batch0 + (k0 * lim[1] if k_rows else k0)
    return T.if_then_else(inside, (row * lim[1] + col) * esize, T.int32(BUFFER_OOB)), soff * esize


def dma_loader(tile: LdsTile, vec: int, lim: tuple[int, int], k_rows: bool, batch_elems: int, total_elems: int):
    """Macro ``dma(lds, X, bz, tile0, i, lane, k0)``: direct-to-LDS load ``i`` of an operand tile
    (``patterns.dma.lane_sources``: the wave's ``64 x 16``-byte block at ``tile.load_base(i)`` of
    the ``lds`` stage, ``(1, rows, pitch)``; lane ``lane`` loads the chunk that ``tile`` puts at its
    slot). The operand, tile origin and K tile are those of ``chunk_loader``; ``tile`` rows are its
    tile rows (K when ``k_rows``), its chunks ``vec`` elements. A lane whose slot is padding, past
    the tile or outside the matrix is masked (writes zeros). Needs ``lim[1] % vec == 0`` (every chunk
    wholly inside or outside a matrix row) and one padding per row (``tile.pad_every`` 1: the
    stage's row-major padded layout)."""
    if tile.pad_every != 1 or tile.swizzle != 1:
        raise ValueError(f"dma_loader: the stage layout pads every row and does not swizzle; got {tile}")
    esize = 16 // vec
    nbytes = total_elems * esize
    pitch = tile.group_bytes // esize  # elements per padded LDS row

    @T.macro
    def dma(lds, X, bz, tile0, i, lane, k0):
        start = tile.load_base(i)
        slot = start + lane * tile.size
        r, c = tile.row_at(slot), tile.col_at(slot) * vec
        voff, soff = buffer_offsets(*((r, tile0 + c) if k_rows else (tile0 + r, c)), k0, lim, k_rows, bz * batch_elems,
                                    esize)
        T.rocm.buffer_load_lds(X.data, nbytes, T.if_then_else(tile.in_tile(slot), voff, T.int32(BUFFER_OOB)), soff,
                               lds[0, start // esize // pitch, start // esize % pitch], tile.size)
    return dma
