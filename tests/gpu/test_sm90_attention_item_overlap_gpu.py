"""``Sm90AttentionConfig.item_overlap`` (an item's first S and last P V outside ping-pong's turns) of the sm90
attention forward on a Hopper GPU (``cuda(arch="sm_90a")``) against the float64 reference within ``error_bound`` (O
and the LSE): odd lengths, causal and not, GQA, f16, D 64 and 128, two and three consumers, persistent CTAs walking
many items of unequal lengths (the warpgroups a turn apart across items), the TMA epilogues; and the benchmark shape
(8 x 2k tokens, D 128, causal) against SDPA's math. Skipped without such a GPU (``benchmarks/gpu_stop45.sh
attnitem``)."""


import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C  # noqa: E402
from attention_gpu import assert_exact_on_the_card, assert_kernel_matches_sdpa  # noqa: E402

EDGES = {"overlap": True, "pingpong": True, "item_overlap": True}
CASES = [
    (AttentionProblem(1, 4, 2, 1, 1, 128, causal=True), C(128, 3, **EDGES, persistent=True, ctas=1)),
    (AttentionProblem(2, 4, 2, 130, 130, 128, causal=True), C(128, 3, **EDGES)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 3, **EDGES, persistent=True)),
    (AttentionProblem(1, 8, 2, 2048, 2048, 128, causal=True), C(128, 3, **EDGES, persistent=True, ctas=7)),
    (AttentionProblem(2, 8, 8, 1000, 1003, 128), C(128, 3, **EDGES, persistent=True, ctas=5)),
    (AttentionProblem(1, 8, 2, 777, 1500, 128, causal=True, dtype="f16"), C(128, 3, **EDGES, persistent=True)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 2, **EDGES, persistent=True,
                                                                epilogue="tma_buffer")),
    (AttentionProblem(1, 8, 2, 777, 1500, 128, causal=True), C(128, 3, **EDGES, persistent=True, epilogue="tma")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **EDGES, persistent=True)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **EDGES, persistent=True, consumers=3)),
    (AttentionProblem(1, 32, 8, 1500, 1500, 64), C(128, 3, **EDGES, persistent=True, ctas=7, consumers=3)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_item_overlap_exact_within_the_documented_bound(case):
    assert_exact_on_the_card(*CASES[case], seed=case)


@pytest.mark.parametrize("causal", [False, True])
def test_item_overlap_matches_sdpa_at_the_benchmark_shape(causal):
    """8 x 2k tokens, 16 heads, D 128 (the worst shape of ``runs/attention_sm90_attnfit_h100_2026-12-07b.json``), the
    default's tile and ring with ``item_overlap``: O and the LSE against SDPA's math in f32."""
    problem = AttentionProblem(8, 16, 16, 2048, 2048, 128, causal=causal)
    config = C(128, 3, **EDGES, persistent=True)
    assert_kernel_matches_sdpa(problem, config, 3, torch)
