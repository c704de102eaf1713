"""``Sm90AttentionConfig.walk`` (the persistent CTAs' order of the work items: ``"zigzag"``, ``"fold"``) of the sm90
attention forward on a Hopper GPU (``cuda(arch="sm_90a")``) against the float64 reference within ``error_bound`` (O
and the LSE): odd lengths, causal and not, GQA, f16, D 64 and 128, two and three consumers, few CTAs walking many
items (partial last rounds both ways), ``item_overlap`` on and off, the TMA epilogues; and the benchmark shape (8 x 2k
tokens, D 128, causal MHA) against SDPA's math. Skipped without such a GPU (``benchmarks/gpu_stop45.sh
attnzigzag``)."""


import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C  # noqa: E402
from attention_gpu import assert_exact_on_the_card, assert_kernel_matches_sdpa  # noqa: E402

PP = {"overlap": True, "pingpong": True, "persistent": True}
EDGES = {**PP, "item_overlap": True}
CASES = [
    (AttentionProblem(1, 4, 2, 1, 1, 128, causal=True), C(128, 3, **PP, ctas=1, walk="zigzag")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 3, **PP, walk="zigzag")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 3, **EDGES, walk="fold")),
    (AttentionProblem(1, 8, 2, 2048, 2048, 128, causal=True), C(128, 3, **PP, ctas=7, walk="fold")),
    (AttentionProblem(1, 8, 8, 2048, 2048, 128, causal=True), C(128, 3, **EDGES, ctas=5, walk="zigzag")),
    (AttentionProblem(2, 8, 8, 1000, 1003, 128), C(128, 3, **PP, ctas=5, walk="fold")),
    (AttentionProblem(1, 8, 2, 777, 1500, 128, causal=True, dtype="f16"), C(128, 3, **EDGES, ctas=3, walk="zigzag")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 2, **PP, walk="fold", epilogue="tma_buffer")),
    (AttentionProblem(1, 8, 2, 777, 1500, 128, causal=True), C(128, 3, **PP, ctas=5, walk="fold", epilogue="tma")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **PP, walk="zigzag")),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **EDGES, consumers=3, walk="fold")),
    (AttentionProblem(1, 32, 8, 1500, 1500, 64, causal=True), C(128, 3, **PP, ctas=7, consumers=3, walk="zigzag")),
    (AttentionProblem(1, 2, 1, 250, 250, 128, causal=True, dtype="fp8"), C(128, 2, **PP, ctas=3, walk="fold")),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_walk_exact_within_the_documented_bound(case):
    assert_exact_on_the_card(*CASES[case], seed=case)


@pytest.mark.parametrize("walk", ["zigzag", "fold"])
def test_walk_matches_sdpa_at_the_benchmark_shape(walk):
    """8 x 2k tokens, 16 heads, D 128, causal MHA (the round robin's busiest CTA 15 % over the mean there,
    ``attention_plan.cta_loads``), the default's tile and ring on persistent CTAs by ``walk``: O and the LSE against
    SDPA's math in f32."""
    problem = AttentionProblem(8, 16, 16, 2048, 2048, 128, causal=True)
    config = C(128, 3, **PP, walk=walk)
    assert_kernel_matches_sdpa(problem, config, 5, torch)
