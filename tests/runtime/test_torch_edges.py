"""Stop 55 (edges): the torch ops at the edges a serving stack hits, without a GPU. ``attention`` and
``paged_attention`` of an empty batch (and the other empty sizes ``scaled_dot_product_attention`` takes) return
their outputs with no build and no launch, in the real implementation (CPU tensors, launches stubbed:
``benchmarks/dispatch.py``'s ``stubbed``), the fake one (meta tensors, ``FakeTensorMode``) and the prepared launch;
every other rule still refuses. ``gemm`` takes ``torch._scaled_mm``'s per-tensor and row-wise scale shapes."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from aten_ops import Ops  # noqa: E402
from tvm_cdna4.errors import ContractError  # noqa: E402

dispatch = benchmark_module("dispatch")
BF = dict(dtype=torch.bfloat16)
SDPA = torch.nn.functional.scaled_dot_product_attention

# (B, H, Hkv, Sq, Skv): each an empty size SDPA takes (no output element, or no key: O zeros)
EMPTY = [(0, 8, 2, 16, 16), (2, 0, 0, 16, 16), (2, 0, 2, 16, 16), (2, 8, 2, 0, 16), (2, 8, 2, 16, 0),
         (0, 8, 8, 0, 0)]


def _qkv(B, H, Hkv, Sq, Skv, D=64, device="cpu", dtype=torch.bfloat16):
    return (torch.randn(B, H, Sq, D, dtype=dtype).to(device), torch.randn(B, Hkv, Skv, D, dtype=dtype).to(device),
            torch.randn(B, Hkv, Skv, D, dtype=dtype).to(device))



def _no_build(*args, **kwargs):
    raise AssertionError("an empty call built a kernel")


@pytest.mark.parametrize("shape", EMPTY)
def test_an_empty_attention_returns_sdpas_outputs_without_a_build_or_launch(shape, monkeypatch):
    q, k, v = _qkv(*shape)
    want = SDPA(q.float(), k.float(), v.float(), enable_gqa=shape[1] != shape[2])
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        monkeypatch.setattr(tt, "attention_kernel", _no_build)
        assert tt.check_attention_arguments(q, k, v, False, None) is None
        for causal in (False, True, False):  # the third: the prepared launch of the first's key
            o, lse = tt.attention(q, k, v, causal=causal, return_lse=True)
            assert o.shape == q.shape == want.shape and o.dtype == q.dtype and o.is_contiguous()
            assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
            assert torch.equal(o.float(), want) and bool((lse == -math.inf).all())  # Skv 0: zeros, -inf
            assert tt.attention(q, k, v, causal=causal).shape == q.shape
        assert len(tt._CALLS) == 2  # both keys prepared: their next calls skip the op
        recorder = Ops()
        with recorder:  # a dispatch mode: the custom op's real implementation
            o = tt.attention(q, k, v)
        assert torch.equal(o.float(), want)
        assert not [op for op in recorder.ops if "_local_scalar_dense" in op or "_to_copy" in op or "copy_" in op]
        assert list(calls) == [] and tt.kernel_cache() == {}


@pytest.mark.parametrize("shape", EMPTY)
def test_the_fake_attention_gives_the_empty_shapes(shape):
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = _qkv(*shape, device="meta")
    o, lse = torch.ops.tvm_cdna4.attention(q, k, v, False, None)
    assert (o.shape, lse.shape, o.device.type) == (q.shape, q.shape[:3], "meta")
    o, lse = tt.attention(q, k, v, causal=True, return_lse=True)
    assert (o.shape, lse.shape, lse.dtype) == (q.shape, q.shape[:3], torch.float32)
    with FakeTensorMode():
        q, k, v = _qkv(*shape, device="meta")
        assert tt.attention(q, k, v).shape == q.shape


@pytest.mark.parametrize("shape, D, keywords, operand, match", [
    ((0, 8, 2, 16, 16), 32, {}, "q", "head dim"),
    ((0, 8, 3, 16, 16), 64, {}, "k", "kv heads"),
    ((2, 8, 0, 16, 16), 64, {}, "k", "kv heads"),
    ((0, 8, 2, 16, 16), 64, dict(scale=-1.0), "scale", "the softmax scale"),
    ((2, 8, 2, 0, 16), 64, dict(scale=math.inf), "scale", "the softmax scale"),
])
def test_an_empty_attention_still_refuses_every_other_rule(shape, D, keywords, operand, match):
    q, k, v = _qkv(*shape, D=D, device="meta")
    with pytest.raises(ValueError, match=f"argument '{operand}': {match}"):
        tt.attention(q, k, v, **keywords)


def test_an_empty_attention_still_refuses_mismatched_tensors():
    q, k, v = _qkv(0, 8, 2, 16, 16, device="meta")
    with pytest.raises(ValueError, match="argument 'v': dtype"):
        tt.attention(q, k, v.half())
    with pytest.raises(ValueError, match="argument 'k': shape"):
        tt.attention(q, k[:, :, :, :32], v)


# ------------------------------------------------------------------------------------ paged_attention


def _paged(B=2, nq=1, H=8, Hkv=2, D=128, pages=10, P=16, max_pages=3, device="cpu"):
    q = torch.zeros(B, nq, H, D, **BF, device=device)
    k, v = (torch.zeros(pages, P, Hkv, D, **BF, device=device) for _ in "kv")
    return (q, k, v, torch.zeros(B, max_pages, dtype=torch.int32, device=device),
            torch.zeros(B, dtype=torch.int32, device=device))


@pytest.mark.parametrize("sizes", [dict(B=0), dict(nq=0), dict(H=0), dict(B=0, nq=0)])
def test_an_empty_paged_batch_returns_empty_outputs_without_a_build_or_launch(sizes, monkeypatch):
    from tvm_cdna4 import torch_paged

    args = _paged(**sizes)
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        monkeypatch.setattr(torch_paged, "_kernels", _no_build)
        assert tt.check_paged_arguments(*args, None, None, None) is None
        for _ in range(2):  # the checked path, then the prepared launch
            o, lse = tt.paged_attention(*args, return_lse=True)
            assert (o.shape, o.dtype, lse.shape, lse.dtype) == (args[0].shape, torch.bfloat16, args[0].shape[:3],
                                                                torch.float32)
        assert len(tt._CALLS) == 1
        with Ops():
            assert tt.paged_attention(*args).shape == args[0].shape  # the op's real implementation
        assert list(calls) == [] and torch_paged._KERNELS == {}
    meta = _paged(**sizes, device="meta")
    assert torch.ops.tvm_cdna4.paged_attention(*meta, None, None, None)[1].shape == meta[0].shape[:3]


@pytest.mark.parametrize("change, operand", [
    (dict(D=96), "q"),  # a head dim no kernel has
    (dict(Hkv=3), "k_cache"),  # GQA
    (dict(P=12), "k_cache"),  # a page size
    (dict(max_pages=0), "block_table"),
    (dict(pages=0), "k_cache"),
])
def test_an_empty_paged_batch_still_refuses_every_other_rule(change, operand):
    with pytest.raises(ContractError) as info:
        tt.paged_attention(*_paged(B=0, device="meta", **change))
    assert info.value.operand == operand
    with pytest.raises(ContractError, match="the softmax scale"):
        tt.paged_attention(*_paged(B=0, device="meta"), scale=0.0)


@pytest.mark.parametrize("operand", ["k_cache", "v_cache"])
def test_an_empty_paged_batchs_prepared_launch_refuses_what_the_checked_path_refuses(operand, monkeypatch):
    # the key holds shapes, dtypes and devices, not strides: a strided cache of a prepared empty shape must still be
    # refused naming it (review56: the empty launch returned the outputs)
    from tvm_cdna4 import torch_paged

    args = _paged(B=0)
    at = ("k_cache", "v_cache").index(operand) + 1
    strided = torch.zeros(*args[at].shape[:-1], 2 * args[at].shape[-1], **BF)[..., ::2]
    with dispatch.stubbed("sm_90", "sm90"):
        monkeypatch.setattr(torch_paged, "_kernels", _no_build)
        for _ in range(2):  # the checked path, then the prepared launch
            tt.paged_attention(*args)
        with pytest.raises(ContractError, match="contiguous") as info:
            tt.paged_attention(*args[:at], strided, *args[at + 1:])
        assert info.value.operand == operand


def test_an_empty_attentions_prepared_launch_refuses_what_the_checked_path_refuses():
    # no query head (H = 0): k and v hold elements, and the key holds no strides
    q, k, v = _qkv(2, 0, 2, 16, 16)
    strided = torch.zeros(2, 2, 16, 128, **BF)[..., ::2]
    with dispatch.stubbed():
        for _ in range(2):
            tt.attention(q, k, v)
        with pytest.raises(ValueError, match="argument 'k': non-contiguous"):
            tt.attention(q, strided, v)


def test_the_table_of_an_empty_paged_batch_still_has_no_rows():
    q, k, v, table, lens = _paged(B=0, device="meta")
    with pytest.raises(ContractError) as info:
        tt.paged_attention(q, k, v, torch.empty(1, 3, dtype=torch.int32, device="meta"), lens)
    assert info.value.operand == "block_table"


# ------------------------------------------------------------------------------------ gemm: torch._scaled_mm's scales


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_a_per_tensor_scale_broadcasts_to_every_row_or_column(shape):
    a, b = torch.zeros(5, 64, **BF), torch.zeros(24, 64, **BF)
    s = torch.full(shape, 3.0)
    rows, cols = tt.broadcast_scales(a, b, "nt", s, s * 2)
    assert rows.shape == (5,) and cols.shape == (24,) and rows.is_contiguous() and cols.is_contiguous()
    assert bool((rows == 3).all()) and bool((cols == 6).all())
    assert tt.broadcast_scales(a, b.t().contiguous(), "nn", None, s)[1].shape == (24,)


def test_row_wise_scales_are_viewed_not_copied():
    a, b = torch.zeros(5, 64, **BF), torch.zeros(24, 64, **BF)
    rs, cs = torch.arange(5.0)[:, None], torch.arange(24.0)[None, :]
    rows, cols = tt.broadcast_scales(a, b, "nt", rs, cs)
    assert (rows.shape, cols.shape) == ((5,), (24,))
    assert rows.data_ptr() == rs.data_ptr() and cols.data_ptr() == cs.data_ptr()
    plain = torch.ones(5)
    assert tt.broadcast_scales(a, b, "nt", plain, None)[0] is plain  # [M]: the tensor itself


def test_gemm_launches_a_per_tensor_scale_as_a_row_scale(monkeypatch):
    a, b = torch.zeros(5, 64, **BF), torch.zeros(24, 64, **BF)
    with dispatch.stubbed() as calls:
        calls.record = True
        for _ in range(2):  # the checked path, then the prepared launch
            y = tt.gemm(a, b, row_scale=torch.tensor(0.5), col_scale=torch.tensor([[2.0]]))
            assert y.shape == (5, 24)
        assert len(tt._CALLS) == 1 and len(calls) == 2
        for call in calls:  # a, b, out, row_scale [M], col_scale [N] (PARAM_ORDER)
            assert [tuple(t.shape) for t in call[3:]] == [(5,), (24,)]
            assert bool((call[3] == 0.5).all()) and bool((call[4] == 2.0).all())


@pytest.mark.parametrize("keywords, operand", [
    (dict(row_scale=torch.ones(2)), "row_scale"),
    (dict(row_scale=torch.ones(5, 2)), "row_scale"),
    (dict(col_scale=torch.ones(24, 1)), "col_scale"),  # not torch's [1, N]
    (dict(col_scale=torch.ones(2, 12)), "col_scale"),
    (dict(row_scale=torch.tensor([1.0], dtype=torch.bfloat16)), "row_scale"),  # f32 only, as torch._scaled_mm
])
def test_other_scale_shapes_are_refused_naming_the_operand(keywords, operand):
    a, b = torch.zeros(5, 64, **BF, device="meta"), torch.zeros(24, 64, **BF, device="meta")
    keywords = {k: v.to("meta") for k, v in keywords.items()}
    with pytest.raises(ValueError, match=f"argument '{operand}'"):
        tt.gemm(a, b, **keywords)


def test_a_per_tensor_scale_traces_under_torch_compile():
    a, b = torch.empty(5, 64, **BF, device="meta"), torch.empty(24, 64, **BF, device="meta")
    compiled = torch.compile(lambda a, b, s: tt.gemm(a, b, row_scale=s, col_scale=s), fullgraph=True,
                             backend="aot_eager")
    assert compiled(a, b, torch.empty((), device="meta")).shape == (5, 24)


def test_a_tensor_softmax_scale_is_refused_not_read_to_the_host():
    # float() of a CUDA tensor is .item(): a host synchronization in every call (an error under CUDA-graph capture);
    # the kernels bake the scale in, and scaled_dot_product_attention takes a float
    q, k, v = _qkv(2, 8, 2, 16, 16, device="meta")
    with pytest.raises(ValueError, match="argument 'scale': the softmax scale"):
        tt.attention(q, k, v, scale=torch.tensor(0.125))
    with pytest.raises(ContractError, match="the softmax scale") as info:
        tt.paged_attention(*_paged(device="meta"), scale=torch.tensor(0.125))
    assert info.value.operand == "scale"


# ------------------------------------------------------------------------------------ on a GPU


@pytest.mark.cuda
def test_empty_calls_are_captured_in_a_cuda_graph_at_their_first_call():
    # no build and no host synchronization: even a key's first call can be captured; replayed, O zeros and LSE -inf
    q, k, v = _qkv(2, 8, 2, 16, 0, device="cuda")  # no keys: O zeros, LSE -inf
    q0, k0, v0 = _qkv(0, 8, 2, 16, 16, device="cuda")
    paged = _paged(B=0, device="cuda")
    built = dict(tt.kernel_cache())
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = tt.attention(q, k, v, return_lse=True)
        o0 = tt.attention(q0, k0, v0, causal=True)
        p0, plse = tt.paged_attention(*paged, return_lse=True)
    graph.replay()
    torch.cuda.synchronize()
    assert bool((o == 0).all()) and bool((lse == -math.inf).all()) and o0.shape == q0.shape
    assert (p0.shape, plse.shape) == (paged[0].shape, paged[0].shape[:3])
    assert tt.kernel_cache() == built


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_fp8_gemm_with_per_tensor_scales_matches_torch_scaled_mm(shape):
    M, N, K = 77, 400, 528
    gen = torch.Generator(device="cuda").manual_seed(M)
    a = torch.empty((M, K), device="cuda").uniform_(-400, 400, generator=gen).to(torch.float8_e4m3fn)
    b = torch.empty((N, K), device="cuda").uniform_(-400, 400, generator=gen).to(torch.float8_e4m3fn)
    sa, sb = torch.full(shape, 0.01, device="cuda"), torch.full(shape, 0.002, device="cuda")
    y = tt.gemm(a, b, row_scale=sa, col_scale=sb)
    want = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    exact = (a.float() @ b.float().T) * 0.01 * 0.002
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    for got in (y, want):
        assert float(torch.linalg.norm(got.float() - exact) / torch.linalg.norm(exact)) < 1e-2
    assert float((y.float() - want.float()).abs().max()) <= 2 * float(exact.abs().max()) * 2.0 ** -8


# ------------------------------------------------------------------------------------ torch.compile across shapes


def test_attention_compiles_across_batch_sizes():
    # the second size recompiles with dynamic sizes (torch's automatic dynamic shapes): the checks built the
    # AttentionProblem of symbolic sizes, which the record refused, reported as a bad 'scale'; the kernel bakes every
    # extent in, so the checks specialize them (a recompile per shape, as the kernel cache builds one per shape)
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: tt.attention(q, k, v, causal=True, return_lse=True), fullgraph=True,
                             backend="aot_eager")
    for B in (2, 3, 4, 0):
        q, k, v = _qkv(B, 8, 2, 16, 16, device="meta")
        o, lse = compiled(q, k, v)
        assert (o.shape, lse.shape) == (q.shape, q.shape[:3])


def test_paged_attention_compiles_before_any_eager_call_and_across_batch_sizes(monkeypatch):
    # the key's plan flags were read while dynamo traced: their first read imports the flags' modules
    # (importlib.import_module), which dynamo refuses to trace; now no key is made while compiling
    from tvm_cdna4.kernels.sm80 import paged_decode_rule

    monkeypatch.setattr(paged_decode_rule.plan_flags, "_read", None)  # no eager call yet in this process
    monkeypatch.setattr(paged_decode_rule.plan_flags, "values", None)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *args: tt.paged_attention(*args, return_lse=True), fullgraph=True,
                             backend="aot_eager")
    for B in (2, 5, 7, 0):
        args = _paged(B=B, device="meta")
        o, lse = compiled(*args)
        assert (o.shape, lse.shape) == (args[0].shape, args[0].shape[:3])
