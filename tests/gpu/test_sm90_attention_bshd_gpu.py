"""Stop 55 (bshd): the sm90 attention on [B, S, H, D] storage (``AttentionProblem.layout = "bshd"``, 4-D tensor maps)
on a Hopper GPU: within ``error_bound`` of the float64 reference (MHA / GQA, causal, odd lengths, the TMA epilogues,
fp8), and ``tvm_cdna4.torch.attention`` of ``proj(x).view(B, S, H, D).transpose(1, 2)`` views against
``scaled_dot_product_attention`` of the same views, O with q's strides, equal to the op on ``.contiguous()`` copies,
captured in a CUDA graph. Skipped without such a GPU."""

from functools import partial

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

from tvm_cdna4.kernels import attention  # noqa: E402
from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C  # noqa: E402


def bshd(*args, **fields):
    return AttentionProblem(*args, layout="bshd", **fields)


CASES = [
    (bshd(2, 8, 8, 1000, 1003, 128), None),
    (bshd(2, 8, 2, 777, 1500, 64, causal=True), None),
    (bshd(1, 4, 2, 1, 1, 128, causal=True), None),
    (bshd(2, 8, 2, 777, 1500, 128, causal=True, dtype="f16"), C(128, 3, True, True, True, epilogue="tma")),
    (bshd(2, 8, 2, 3000, 3001, 128, causal=True), C(128, 2, True, True, True, persistent=True, epilogue="tma_buffer")),
    (bshd(2, 8, 2, 1500, 777, 128, causal=True, dtype="fp8"), None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_bshd_within_the_documented_bound(case):
    from tvm_cdna4.torch import run_attention

    problem, config = CASES[case]
    v = attention.validate(problem, "sm90", config, seed=case, run=partial(run_attention, target="sm90", config=config))
    assert v.ok and v.where == "the NVIDIA GPU", v


@pytest.mark.parametrize("B, H, Hkv, S, D, causal", [(2, 16, 4, 1000, 128, True), (1, 8, 8, 4096, 64, False)])
def test_the_op_on_transposed_views_against_sdpa(B, H, Hkv, S, D, causal):
    import tvm_cdna4.torch as tt

    def view(heads):  # a model's proj(x).view(B, S, heads, D).transpose(1, 2)
        return torch.randn(B, S, heads, D, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    q, k, v = view(H), view(Hkv), view(Hkv)
    o, lse = tt.attention(q, k, v, causal=causal, return_lse=True)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=H != Hkv)
    assert o.shape == want.shape and o.stride() == q.stride()
    assert float((o.float() - want.float()).abs().max()) < 2e-2
    keys = [key for key in tt.kernel_cache() if key[0] == "attention" and "bshd" in key and S in key]
    assert keys, "the op ran the bshd kernel"
    o2, lse2 = tt.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal, return_lse=True)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)  # the same tiles in the same order, stored otherwise
    graph = torch.cuda.CUDAGraph()  # the prepared bshd launch is capturable
    with torch.cuda.graph(graph):
        out = tt.attention(q, k, v, causal=causal)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, o) and out.stride() == q.stride()
