"""The K-tile software pipeline of the gfx950 GEMMs: two stages of LDS plus registers.

Each of the two stages is an LDS buffer plus a register set; tile ``j`` lives in stage ``j % 2``.
Step ``ko`` (of ``k_steps``): store the registers holding tile ``ko + 1`` into their stage's LDS,
load tile ``ko + 2`` from global memory into the other register set (free since step ``ko - 1``),
run tile ``ko``'s MFMAs from its LDS, then one workgroup barrier. The global loads of a step do not
wait for its LDS stores and have more than a whole step to land; the single barrier both publishes
the stored tile and retires the reads of the computed one. The loop is unrolled by two so that
every stage is static (constant LDS addresses; LLVM sees the stages never alias and may move LDS
stores between the other stage's reads).
"""

from __future__ import annotations

import math

from tvm_tirx.script import tirx as T

from ..patterns.wave import BUFFER_OOB
from ..rocm.helpers import SCHED_DS_READ, SCHED_DS_WRITE, SCHED_MFMA, SCHED_VMEM_READ, sched_helper


def k_pipeline(k_steps: int, load, store, compute):
    """Macro ``run(stage0, stage1, state)`` running the pipeline over ``k_steps`` K tiles.

    The kernel supplies three macros: ``load(stage, state, ko)`` (tile ``ko``: global -> the
    stage's registers; tiles past the end are never requested), ``store(stage, state)`` (the
    stage's registers -> its LDS) and ``compute(stage, state)`` (the MFMAs of the tile in the
    stage's LDS). Stages and state are whatever those macros take (named records of tensors, e.g.
    ``gfx950_gemm.Stage`` and ``gfx950_gemm.WaveState``).
    """
    pairs = max(k_steps - 2, 0) // 2  # loop iterations of two steps, all with store and load
    tail = k_steps - 2 * pairs

    @T.macro
    def step(ko, cur, nxt, state):
        if ko + 1 < k_steps:
            store(nxt, state)
        if ko + 2 < k_steps:
            load(cur, state, ko + 2)
        compute(cur, state)
        T.rocm.workgroup_barrier()

    @T.macro
    def run(stage0, stage1, state):
        load(stage0, state, 0)
        store(stage0, state)
        if k_steps > 1:
            load(stage1, state, 1)
        T.rocm.workgroup_barrier()
        for kp in T.serial(pairs):
            step(2 * kp, stage0, stage1, state)
            step(2 * kp + 1, stage1, stage0, state)
        for t in T.unroll(tail):
            if t % 2 == 0:
                step(2 * pairs + t, stage0, stage1, state)
            else:
                step(2 * pairs + t, stage1, stage0, state)

    return run


def interleave_program(mfmas: int, first_reads: int, lds_reads: int, lds_writes: int, global_loads: int,
                       loads_first: bool = False) -> tuple[tuple[int, int], ...]:
    """``llvm.amdgcn.sched.group.barrier`` groups for one K tile: the first K step's LDS reads, then
    every MFMA followed by one of the remaining LDS reads and by the LDS stores, then the global
    loads (or loads first: for short steps, where the loads need the whole step to land), as many
    per MFMA as it takes to place them all, so that they issue while the MFMA pipe is busy."""
    reads = lds_reads - first_reads
    per_mfma = -(-(lds_writes + global_loads) // mfmas)
    memory = [SCHED_DS_WRITE] * lds_writes + [SCHED_VMEM_READ] * global_loads
    if loads_first:
        memory.reverse()
    program = [(SCHED_DS_READ, first_reads)]
    for _ in range(mfmas):
        program.append((SCHED_MFMA, 1))
        if reads:
            program.append((SCHED_DS_READ, 1))
            reads -= 1
        program += [(mask, 1) for mask in memory[:per_mfma]]
        del memory[:per_mfma]
    return tuple(program)


def schedule_hint(program: tuple[tuple[int, int], ...] | None):
    """Macro that places ``program`` (``interleave_program``) in the current loop body; a no-op
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


def lds_stage(shape: tuple[int, ...], dtype: str):
    """One LDS stage: a 16-byte aligned row-major ``(1, *shape)`` shared tensor type."""
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return T.Tensor((1, *shape), dtype, scope="shared", align=16,
                    layout=T.TileLayout(T.S[(1, *shape) : (math.prod(shape), *strides)]))


def guarded_load(X, base, r, c, lim, dtype: str):
    """``X[base + r * lim[1] + c]`` for (r, c) inside the ``lim`` matrix, zero outside (the address
    is clamped, so the load itself is always in bounds)."""
    inside = T.And(r < lim[0], c < lim[1])
    return T.if_then_else(inside, X[base + T.min(r, lim[0] - 1) * lim[1] + T.min(c, lim[1] - 1)], T.cast(0, dtype))


def chunk_loader(dtype: str, vec: int, lim: tuple[int, int], cpr: int, k_rows: bool, batch_elems: int, total_elems: int):
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
    """
    esize = 16 // vec
    nbytes = total_elems * esize

    def coords(t, q, tile0, k0):
        """(storage row, storage column) of the chunk's first element."""
        r, c = (q * 256 + t) // cpr, (q * 256 + t) % cpr * vec
        return (k0 + r, tile0 + c) if k_rows else (tile0 + r, k0 + c)

    def offsets(bz, t, q, tile0, k0):
        """(voffset, soffset) in bytes: the K step (whole rows when ``k_rows``) goes to soffset."""
        row, col = coords(t, q, tile0, 0)
        inside = T.And(row + (k0 if k_rows else 0) < lim[0], col + (0 if k_rows else k0) < lim[1])
        soff = bz * batch_elems + (k0 * lim[1] if k_rows else k0)
        return T.if_then_else(inside, (row * lim[1] + col) * esize, T.int32(BUFFER_OOB)), soff * esize

    if lim[1] % vec == 0 and nbytes < 2**31:
        @T.macro
        def chunk(regs, X, Xg, bz, tile0, t, q, k0):
            voff, soff = offsets(bz, t, q, tile0, k0)
            regs[T.ramp(q * vec, 1, vec)] = T.rocm.buffer_load(X.data, nbytes, voff, soff, f"{dtype}x{vec}")
    else:
        @T.macro
        def chunk(regs, X, Xg, bz, tile0, t, q, k0):
            row, col = coords(t, q, tile0, k0)
            for e in T.unroll(vec):
                regs[q * vec + e] = guarded_load(Xg, bz * batch_elems, row, col + e, lim, dtype)
    return chunk
