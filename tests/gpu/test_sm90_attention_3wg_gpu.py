"""Three consumer warpgroups (``Sm90AttentionConfig.consumers=3``: 192 query rows, D 64) of the sm90 attention forward
on a Hopper GPU (``cuda(arch="sm_90a")``) against the float64 reference within ``error_bound`` (O and the LSE): odd
lengths 1, 130, 3000, causal and not, GQA, Sq != Skv, f16, 64- and 128-key tiles, the schedules, persistent CTAs and
the options; beside them the same shapes with two consumers, and the torch op against SDPA. Skipped without such a
GPU (``benchmarks/gpu_stop45.sh attn3wg``)."""


import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C  # noqa: E402
from attention_gpu import assert_exact_on_the_card, assert_kernel_matches_sdpa, assert_matches_sdpa, random_qkv  # noqa: E402

PINGPONG = {"overlap": True, "pingpong": True}
CASES = [
    (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True), C(128, 3, **PINGPONG, consumers=3)),
    (AttentionProblem(2, 4, 2, 130, 130, 64, causal=True), C(128, 3, **PINGPONG, consumers=3)),
    (AttentionProblem(1, 8, 2, 3000, 3000, 64, causal=True), C(128, 3, **PINGPONG, consumers=3)),
    (AttentionProblem(1, 4, 4, 3000, 3000, 64), C(128, 3, **PINGPONG, consumers=3)),
    (AttentionProblem(2, 8, 1, 1000, 1003, 64), C(64, 3, consumers=3)),
    (AttentionProblem(1, 8, 2, 777, 1500, 64, causal=True, dtype="f16"), C(128, 2, overlap=True, consumers=3)),
    (AttentionProblem(1, 4, 2, 1500, 777, 64, causal=True), C(64, 4, **PINGPONG, consumers=3)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **PINGPONG, persistent=True, consumers=3)),
    (AttentionProblem(1, 32, 8, 1500, 1500, 64), C(128, 3, **PINGPONG, persistent=True, ctas=7, consumers=3)),
    (AttentionProblem(1, 8, 2, 777, 1500, 64, causal=True), C(128, 3, **PINGPONG, epilogue="tma", consumers=3)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **PINGPONG, persistent=True,
                                                               split_kv_barrier=True, epilogue="tma_buffer",
                                                               consumers=3)),
    # two consumers at the same shapes and tile: the A/B's other side exact too
    (AttentionProblem(1, 8, 2, 3000, 3000, 64, causal=True), C(128, 3, **PINGPONG)),
    (AttentionProblem(2, 8, 2, 3000, 3001, 64, causal=True), C(128, 3, **PINGPONG, persistent=True)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_three_consumers_exact_within_the_documented_bound(case):
    assert_exact_on_the_card(*CASES[case], seed=case)


@pytest.mark.parametrize("causal", [False, True])
def test_three_consumers_match_sdpa_at_2k_tokens(causal):
    """The torch op's kernel with three consumers at a benchmark shape (8 x 2k tokens, 32 heads, GQA 4:1) against
    SDPA's math in f32: what the timing in benchmarks/attention_sm90.py --configs consumers computes."""
    problem = AttentionProblem(8, 32, 8, 2048, 2048, 64, causal=causal)
    config = C(128, 3, **PINGPONG, persistent=True, consumers=3)
    assert_kernel_matches_sdpa(problem, config, 1, torch)


@pytest.mark.parametrize("causal", [False, True])
def test_the_torch_ops_default_at_d64_is_three_consumers_and_matches_sdpa(causal):
    """``tvm_cdna4.torch.attention`` with no config at a D 64 benchmark shape (2 x 2k tokens, 32 heads, GQA 4:1): the
    cost model's plan is three consumers (``attention_cost.WEIGH_CONSUMERS``, stop 50), O and the LSE against SDPA's
    math in f32 (``benchmarks/gpu_stop45.sh attnfit``)."""
    import tvm_cdna4.torch as tt

    problem = AttentionProblem(2, 32, 8, 2048, 2048, 64, causal=causal)
    q, k, v = random_qkv(problem, 2, torch)
    o, lse = tt.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    assert tt.attention_kernel(q, problem).plan.config.consumers == 3
    assert_matches_sdpa(problem, q, k, v, o, lse, torch)
