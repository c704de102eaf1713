"""The shared gfx950 K-tile pipeline: the scheduling-group programs of a period."""

from tvm_cdna4.isa.llvm_helpers import SCHED_DS_READ, SCHED_DS_WRITE, SCHED_MFMA, SCHED_VMEM_READ
from tvm_cdna4.kernels.gfx950.pipeline import prefetch_program, prefetch_reads


def _counts(program):
    out = {}
    for mask, n in program:
        out[mask] = out.get(mask, 0) + n
    return out


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


def test_prefetch_reads_follow_the_read_groups_of_prefetch_program():
    """The order the MX GEMM emits its fragment reads in: the read group after each MFMA takes its
    own fragment's reads (A fragment mi after (mi, RN - 1), B fragment ni after (RM - 1, ni))."""
    program = prefetch_program((2, 3, 2), 1, 10, 0, 0)
    groups = [("A" if n == 1 else "B") for mask, n in program if mask == SCHED_DS_READ]
    order = prefetch_reads((2, 3, 2))
    assert [operand for operand, _, _ in order] == groups
    assert order[:5] == (("A", 0, 0), ("B", 0, 0), ("B", 0, 1), ("A", 0, 1), ("B", 0, 2))
    assert sorted(order) == sorted([("A", kk, i) for kk in range(2) for i in range(2)] + [("B", kk, i) for kk in range(2) for i in range(3)])
