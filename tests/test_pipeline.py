"""The shared gfx950 K-tile pipeline: scheduling-group programs and the register/LDS stage rotation."""

import numpy as np
import pytest

from tvm_cdna4.rocm.helpers import SCHED_DS_READ, SCHED_DS_WRITE, SCHED_MFMA, SCHED_VMEM_READ
from tvm_cdna4.schedules.pipeline import interleave_program, prefetch_program


def _counts(program):
    out = {}
    for mask, n in program:
        out[mask] = out.get(mask, 0) + n
    return out


@pytest.mark.parametrize("loads_first", [False, True])
def test_interleave_program_places_every_instruction_once(loads_first):
    program = interleave_program(16, 7, 10, 9, 10, loads_first=loads_first)
    assert _counts(program) == {SCHED_DS_READ: 10, SCHED_MFMA: 16, SCHED_DS_WRITE: 9, SCHED_VMEM_READ: 10}
    assert program[0] == (SCHED_DS_READ, 7)  # the first K step's operands before any MFMA
    # 19 stores and loads over 16 MFMAs: at most two after each MFMA
    runs, run = [], 0
    for mask, _ in program[1:]:
        run = 0 if mask == SCHED_MFMA else run + (mask != SCHED_DS_READ)
        runs.append(run)
    assert max(runs) == 2
    memory = [mask for mask, _ in program if mask in (SCHED_DS_WRITE, SCHED_VMEM_READ)]
    assert memory[0] == (SCHED_VMEM_READ if loads_first else SCHED_DS_WRITE)


def test_interleave_program_one_memory_instruction_per_mfma():
    program = interleave_program(32, 8, 16, 8, 8)
    mfma_at = [i for i, (mask, _) in enumerate(program) if mask == SCHED_MFMA]
    between = np.diff(mfma_at + [len(program)]) - 1
    assert len(mfma_at) == 32 and between.max() == 2  # one LDS read and one store or load
    assert between[16:].sum() == 0  # everything placed within the first half of the tile


def test_prefetch_program_reads_each_fragment_after_its_last_use():
    """The f16 default's period: 4 x 4 x 2 MFMAs, one read per A and two per B fragment, 8 LDS
    stores and 8 global loads."""
    program = prefetch_program((4, 4, 2), 1, 2, 8, 8)
    assert _counts(program) == {SCHED_MFMA: 32, SCHED_DS_READ: 4 * 2 * 1 + 4 * 2 * 2, SCHED_DS_WRITE: 8, SCHED_VMEM_READ: 8}
    after = []  # the groups after each MFMA
    for mask, n in program:
        if mask == SCHED_MFMA:
            after.append([])
        else:
            after[-1].append((mask, n))
    stores_loads = [[mask for mask, _ in group if mask != SCHED_DS_READ] for group in after]
    assert stores_loads[:16] == [[SCHED_DS_WRITE], [SCHED_VMEM_READ]] * 8  # each store, then the load into its registers
    assert not any(stores_loads[16:])  # all in the first half of the period
    for i, group in enumerate(after):  # MFMA i = (kk, mi, ni) in K step, M, N order
        mi, ni = i // 4 % 4, i % 4
        reads = [n for mask, n in group if mask == SCHED_DS_READ]
        assert reads == [1] * (ni == 3) + [2] * (mi == 3)  # A fragment mi dead after ni = 3, B fragment ni after mi = 3
