"""Stop 56 (bshd80): the sm80-class attention on [B, S, H, D] storage (``AttentionProblem.layout = "bshd"``: the
cp.async copies and O's stores index the stored tensors) on an NVIDIA GPU, the sm80 target forced on whatever card
runs it (on an H100: the A100 kernel built for sm_90): within ``error_bound`` of the float64 reference (MHA / GQA,
causal, odd lengths, f16, one token; the cost model's configs, the overlapped softmax, and on sm_90 the mbarrier
pipeline), and ``tvm_cdna4.torch.attention`` with ``TVM_CDNA4_CUDA_TARGET=sm80`` on ``proj(x).view(B, S, H, D)
.transpose(1, 2)`` views against ``scaled_dot_product_attention`` of the same views, O with q's strides, equal to
the op on ``.contiguous()`` copies (the bhsd kernel: the same tiles in the same order), captured in a CUDA graph.
Skipped without an NVIDIA GPU."""

from functools import partial

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_80")  # the project plugin (tvm_cdna4.testing)

from tvm_cdna4.kernels import attention  # noqa: E402
from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionConfig as C  # noqa: E402


def bshd(*args, **fields):
    return AttentionProblem(*args, layout="bshd", **fields)


CASES = [
    (bshd(2, 8, 8, 1000, 1003, 128), None),
    (bshd(2, 8, 2, 777, 1500, 64, causal=True), None),
    (bshd(1, 4, 2, 1, 1, 128, causal=True), None),
    (bshd(2, 8, 2, 1500, 777, 128, causal=True, dtype="f16"), None),
    (bshd(2, 8, 2, 1000, 1000, 128, causal=True), C(64, 4, 3, overlap=True)),
    (bshd(2, 8, 2, 777, 1500, 64, causal=True), C(64, 4, 3, sync="mbarrier")),  # sm_90 (mbarrier.try_wait)
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_sm80_bshd_within_the_documented_bound(case):
    from tvm_cdna4.torch import run_attention

    problem, config = CASES[case]
    if config is not None and config.mbarrier and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("sync='mbarrier' needs sm_90")
    v = attention.validate(problem, "sm80", config, seed=case, run=partial(run_attention, target="sm80", config=config))
    assert v.ok and v.where == "the NVIDIA GPU", v


@pytest.fixture
def sm80_forced(monkeypatch):
    """``TVM_CDNA4_CUDA_TARGET=sm80`` as if read at import: the device's target asked again, no prepared launch of
    another target's kept (the call cache's key holds no target)."""
    import tvm_cdna4.torch as tt

    monkeypatch.setattr(tt, "CUDA_TARGET", "sm80")
    monkeypatch.setattr(tt, "_DEVICES", {})
    tt._CALLS.clear()
    yield tt
    tt._CALLS.clear()


@pytest.mark.parametrize("B, H, Hkv, S, D, causal", [(2, 16, 4, 1000, 128, True), (1, 8, 8, 2048, 64, False)])
def test_the_op_on_transposed_views_against_sdpa(sm80_forced, B, H, Hkv, S, D, causal):
    tt = sm80_forced
    assert tt.cuda_target(torch.device("cuda"))[1] == "sm80"

    def view(heads):  # a model's proj(x).view(B, S, heads, D).transpose(1, 2)
        return torch.randn(B, S, heads, D, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    q, k, v = view(H), view(Hkv), view(Hkv)
    o, lse = tt.attention(q, k, v, causal=causal, return_lse=True)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=H != Hkv)
    assert o.shape == want.shape and o.stride() == q.stride()
    assert float((o.float() - want.float()).abs().max()) < 2e-2
    keys = [key for key in tt.kernel_cache() if key[0] == "attention" and "bshd" in key and S in key]
    assert keys and all(key[-1] == "sm80" for key in keys), keys  # the sm80 kernel of layout bshd ran
    o2, lse2 = tt.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal, return_lse=True)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)  # the same tiles in the same order, stored otherwise
    graph = torch.cuda.CUDAGraph()  # the prepared bshd launch is capturable
    with torch.cuda.graph(graph):
        out = tt.attention(q, k, v, causal=causal)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, o) and out.stride() == q.stride()
