"""The interleave program of the gfx950 GEMMs' k-loop, without TIRx: the
``llvm.amdgcn.sched.group.barrier`` groups of one period (``prefetch_program``) and the order of the
next tile's fragment reads they place (``prefetch_reads``). The plans compute the program
(``kernels.gfx950.gemm_plan``, ``kernels.gfx950.mx_gemm_plan``); ``kernels.gfx950.pipeline`` emits it."""

from __future__ import annotations

from ...isa.llvm_helpers import SCHED_DS_READ, SCHED_DS_WRITE, SCHED_MFMA, SCHED_VMEM_READ


def prefetch_program(repeats: tuple[int, int, int], a_reads: int, b_reads: int, lds_writes: int,
                     global_loads: int) -> tuple[tuple[int, int], ...]:
    """``llvm.amdgcn.sched.group.barrier`` groups for one period of ``fragment_pipeline``.

    The period's MFMAs (``repeats`` = (RM, RN, RK); K step, then M, then N fragment) carry its
    memory instructions: over the first half of them, the LDS stores, each followed by a global
    load (which may reuse its registers); and each fragment of the next tile is read (``a_reads``
    / ``b_reads`` LDS reads per A / B fragment) right after the last MFMA that uses the same
    fragment of the current tile, so that the register allocator can give it the same registers:
    the two fragment sets cost little more than one."""
    rm, rn, rk = repeats
    memory = []
    for i in range(max(lds_writes, global_loads)):
        memory += [SCHED_DS_WRITE] * (i < lds_writes) + [SCHED_VMEM_READ] * (i < global_loads)
    per_mfma = -(-len(memory) // max(1, rm * rn * rk // 2))
    program = []
    for _ in range(rk):
        for mi in range(rm):
            for ni in range(rn):
                program.append((SCHED_MFMA, 1))
                program += [(mask, 1) for mask in memory[:per_mfma]]
                del memory[:per_mfma]
                if ni == rn - 1:  # A fragment mi of this K step is dead
                    program.append((SCHED_DS_READ, a_reads))
                if mi == rm - 1:  # B fragment ni of this K step is dead
                    program.append((SCHED_DS_READ, b_reads))
    return tuple(program)


def prefetch_reads(repeats: tuple[int, int, int]) -> tuple[tuple[str, int, int], ...]:
    """The fragments of one tile, ("A", K step, M fragment) or ("B", K step, N fragment), in the
    order in which ``prefetch_program`` places their LDS reads: emitting the reads in this order
    lets each group take the reads of its own fragment."""
    rm, rn, rk = repeats
    order = []
    for kk in range(rk):
        for mi in range(rm):
            for ni in range(rn):
                if ni == rn - 1:
                    order.append(("A", kk, mi))
                if mi == rm - 1:
                    order.append(("B", kk, ni))
    return tuple(order)
