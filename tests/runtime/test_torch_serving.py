"""Stop 55 (serving2): what a serving stack passes the torch ops that they refused. ``paged_attention``'s
``k_scale`` / ``v_scale`` as one element (vLLM's ``layer._k_scale``: 0-d, ``(1,)``, ``(1, 1)``) or a Python float
(FlashInfer's), broadcast to every kv head on the device; ``gemm`` / ``grouped_gemm`` of an activation ``[..., K]``
(``torch.nn.functional.linear``'s), viewed as ``[M, K]``; an M = 0 / T = 0 call's prepared launch. Without a GPU:
CPU tensors with the launches stubbed (``benchmarks/dispatch.py``'s ``stubbed``), meta tensors, ``torch.compile``;
the GPU tests at the end run in ``bash benchmarks/gpu_stop45.sh edges``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4 import torch_paged  # noqa: E402
from tvm_cdna4.errors import ContractError  # noqa: E402

dispatch = benchmark_module("dispatch")
BF = dict(dtype=torch.bfloat16)
FP8 = torch.float8_e4m3fn
HKV = 2


@pytest.fixture
def calls(monkeypatch):
    """The stubbed ops (launches recorded); ``checks`` counts ``check_arguments`` calls (the checked path)."""
    checks = []
    real = tt.check_arguments
    monkeypatch.setattr(tt, "check_arguments", lambda *a: (checks.append(1), real(*a))[1])
    monkeypatch.setattr(torch_paged, "_SCALES", {}, raising=False)
    with dispatch.stubbed() as recorded:
        recorded.checks = checks
        recorded.record = True
        yield recorded


def _paged(B=2, H=8, Hkv=HKV, D=128, pages=10, P=16, max_pages=3, device="cpu", kv=FP8):
    q = torch.zeros(B, 1, H, D, **BF, device=device)
    k, v = (torch.zeros(pages, P, Hkv, D, **BF, device=device).to(kv) for _ in "kv")
    return (q, k, v, torch.zeros(B, max_pages, dtype=torch.int32, device=device),
            torch.zeros(B, dtype=torch.int32, device=device))


def _scales(call) -> tuple:
    """The (k, v) scales a recorded paged launch passed the kernel (its main: q, k, v, table, lens, k_scale, v_scale),
    copied (a prepared launch's buffer is written again by the next call)."""
    return call[5].clone(), call[6].clone()


# ------------------------------------------------------------------------------------ paged_attention's scales


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_one_element_scales_are_broadcast_to_every_kv_head_each_call(calls, shape):
    args = _paged()
    k_scale, v_scale = torch.full(shape, 0.5), torch.full(shape, 0.25)
    launched = []
    for k_value in (0.5, 3.0, 7.0):  # the checked path, then the prepared launch twice: each call's value read
        k_scale.fill_(k_value)
        tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
        launched.append(_scales(calls[-1]))
    assert len(calls) == 3 and len(tt._CALLS) == 1
    for (k, v), k_value in zip(launched, (0.5, 3.0, 7.0)):
        assert k.shape == v.shape == (HKV,) and k.dtype == torch.float32
        assert torch.equal(k, torch.full((HKV,), k_value)) and torch.equal(v, torch.full((HKV,), 0.25))
    # the prepared launch's buffers are kept with it: the same tensors every call (nothing allocated: CUDA graphs)
    assert calls[-1][5] is calls[-2][5] and calls[-1][6] is calls[-2][6]
    assert calls[-1][5] is not k_scale


def test_float_scales_are_constants_of_their_key(calls):
    args = _paged()
    for k_value, v_value in ((0.5, 0.25), (2.0, 4), (0.5, 0.25), (2.0, 4)):  # an int is a number too
        tt.paged_attention(*args, k_scale=k_value, v_scale=v_value)
        k, v = _scales(calls[-1])
        assert torch.equal(k, torch.full((HKV,), float(k_value))) and torch.equal(v, torch.full((HKV,), float(v_value)))
    assert len(calls) == 4 and len(tt._CALLS) == 2  # one key a pair of values; the last two calls prepared
    cpu = torch.device("cpu")  # the prepared launches pass the constants, filled once
    assert calls[2][5] is torch_paged._SCALES[(0.5, HKV, cpu)] and calls[2][6] is torch_paged._SCALES[(0.25, HKV, cpu)]
    assert calls[3][5] is torch_paged._SCALES[(2.0, HKV, cpu)] and calls[3][6] is torch_paged._SCALES[(4.0, HKV, cpu)]


@pytest.mark.parametrize("k_scale, v_scale", [
    (0.5, torch.full((1,), 0.25)),
    (torch.full((HKV,), 0.5), torch.tensor(0.25)),
    (torch.full((HKV,), 0.5), 0.25),
])
def test_a_broadcast_scale_beside_a_per_head_one(calls, k_scale, v_scale):
    args = _paged()
    for _ in range(3):
        tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
        k, v = _scales(calls[-1])
        assert torch.equal(k, torch.full((HKV,), 0.5)) and torch.equal(v, torch.full((HKV,), 0.25))
    assert len(calls) == 3 and len(tt._CALLS) == 1
    per_head = [s for s in (k_scale, v_scale) if isinstance(s, torch.Tensor) and s.shape == (HKV,)]
    assert all(s in (calls[-1][5], calls[-1][6]) for s in per_head)  # passed as it is


def test_a_one_element_scale_of_one_kv_head_is_the_per_head_scale(calls):
    args = _paged(Hkv=1)
    k_scale, v_scale = torch.ones(1), torch.ones(1)
    for _ in range(2):
        tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
    assert calls[-1][5] is k_scale and calls[-1][6] is v_scale


def test_the_buffers_outlive_inference_mode(calls):
    # a serving stack's first call runs under torch.inference_mode: an inference tensor would refuse the next call's
    # in-place copy outside it
    args = _paged()
    k_scale, v_scale = torch.tensor(0.5), torch.tensor(0.25)
    with torch.inference_mode():
        for _ in range(2):
            tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
    v_scale.fill_(8.0)
    tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
    assert torch.equal(_scales(calls[-1])[1], torch.full((HKV,), 8.0)) and len(tt._CALLS) == 1
    with torch.inference_mode():
        tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale)
    assert len(calls) == 4


@pytest.mark.parametrize("scales, operand, match", [
    (dict(k_scale=torch.ones(3)), "k_scale", "per-kv-head scales"),  # neither [Hkv] nor one element
    (dict(k_scale=torch.ones(HKV, 1)), "k_scale", "per-kv-head scales"),
    (dict(v_scale=torch.ones(1, HKV)), "v_scale", "per-kv-head scales"),
    (dict(k_scale=torch.ones((), dtype=torch.float16)), "k_scale", "dtype"),
    (dict(k_scale=True), "k_scale", "a torch.Tensor, a float or None"),
    (dict(v_scale="0.5"), "v_scale", "a torch.Tensor, a float or None"),
    (dict(k_scale=float("nan")), "k_scale", "a torch.Tensor, a float or None"),
    (dict(v_scale=float("inf")), "v_scale", "a torch.Tensor, a float or None"),
    (dict(k_scale=[0.5]), "k_scale", "a torch.Tensor, a float or None"),
])
def test_other_scales_are_refused_naming_the_operand(scales, operand, match):
    scales = {"k_scale": torch.ones(()), "v_scale": torch.ones(()), **scales}
    scales = {n: s.to("meta") if isinstance(s, torch.Tensor) else s for n, s in scales.items()}
    with pytest.raises(ContractError, match=match) as info:
        tt.paged_attention(*_paged(device="meta"), **scales)
    assert info.value.operand == operand


def test_a_scale_on_another_device_or_of_a_16_bit_cache_is_refused():
    with pytest.raises(ContractError, match="q's device") as info:  # a CPU scalar: no host-to-device copy
        tt.paged_attention(*_paged(device="meta"), k_scale=torch.tensor(0.5), v_scale=0.5)
    assert info.value.operand == "k_scale"
    with pytest.raises(ContractError, match="only fp8") as info:
        tt.paged_attention(*_paged(device="meta", kv=torch.bfloat16), k_scale=0.5, v_scale=0.5)
    assert info.value.operand == "k_scale"


@pytest.mark.parametrize("k_scale, v_scale, operand, found", [(0.5, None, "k_scale", "0.5"), (None, 2, "v_scale", "2.0")])
def test_a_float_scale_of_a_16_bit_cache_is_named_as_the_float_it_is(k_scale, v_scale, operand, found):
    # the error says what the caller passed (review56: "found a tensor", the [Hkv] tensor the float was filled into)
    with pytest.raises(ContractError, match="only fp8") as info:
        tt.paged_attention(*_paged(device="meta", kv=torch.bfloat16), k_scale=k_scale, v_scale=v_scale)
    assert info.value.operand == operand and info.value.found == found


def test_the_op_itself_still_takes_per_head_scales():
    args = _paged(device="meta")
    with pytest.raises(ContractError, match="per-kv-head scales") as info:
        torch.ops.tvm_cdna4.paged_attention(*args, None, torch.ones((), device="meta"), torch.ones((), device="meta"))
    assert info.value.operand == "k_scale"


@pytest.mark.parametrize("scale", [torch.ones(()), torch.ones(1, 1), 0.5])
def test_broadcast_scales_trace_under_torch_compile(scale):
    torch._dynamo.reset()
    args = _paged(device="meta")
    scale = scale.to("meta") if isinstance(scale, torch.Tensor) else scale
    compiled = torch.compile(lambda *a: tt.paged_attention(*a, k_scale=scale, v_scale=scale, return_lse=True),
                             fullgraph=True, backend="aot_eager")
    o, lse = compiled(*args)
    assert (o.shape, lse.shape, lse.dtype) == (args[0].shape, args[0].shape[:3], torch.float32)


def test_broadcast_scales_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        args = _paged(device="meta")
        o = tt.paged_attention(*args, k_scale=torch.ones(1, device="meta"), v_scale=0.5)
    assert o.shape == args[0].shape


# ------------------------------------------------------------------------------------ gemm of [..., K]


def test_gemm_views_leading_dims_as_m(calls):
    a, b = torch.randn(2, 3, 64, **BF), torch.randn(24, 64, **BF)
    for _ in range(2):  # the checked path, then the prepared launch
        y = tt.gemm(a, b)
        assert y.shape == (2, 3, 24) and y.dtype == torch.bfloat16 and y.is_contiguous()
        call = calls[-1]
        assert call[0].shape == (6, 64) and call[0].data_ptr() == a.data_ptr()  # a view, no copy
        assert call[2].shape == (6, 24) and call[2].data_ptr() == y.data_ptr()
    assert len(calls) == 2 and len(tt._CALLS) == 1 and len(calls.checks) == 2  # the wrapper's and the op's


def test_gemm_views_a_residual_row_scale_and_out_of_the_leading_dims(calls):
    a, b = torch.randn(2, 3, 64, **BF), torch.randn(24, 64, **BF)
    residual, out = torch.randn(2, 3, 24, **BF), torch.empty(2, 3, 24, **BF)
    for row_scale in (torch.rand(2, 3), torch.rand(2, 3, 1), torch.rand(2, 3)):
        y = tt.gemm(a, b, residual=residual, row_scale=row_scale, out=out)
        assert y is out
    assert len(calls) == 3 and len(tt._CALLS) == 1  # [2, 3] and [2, 3, 1] both viewed as [6]: one key
    for call in calls:  # a, b, out, row_scale, residual (PARAM_ORDER)
        assert [tuple(t.shape) for t in call] == [(6, 64), (24, 64), (6, 24), (6,), (6, 24)]
        assert call[2].data_ptr() == out.data_ptr() and call[4].data_ptr() == residual.data_ptr()
    y = tt.gemm(a, b, row_scale=torch.tensor(2.0))  # a per-tensor scale: M = 6 rows
    assert y.shape == (2, 3, 24) and calls[-1][3].shape == (6,) and bool((calls[-1][3] == 2).all())


def test_gemm_of_leading_dims_matches_linear_in_the_values_it_launches(calls, monkeypatch):
    # the stub computes nothing: check the launch's operands are F.linear's rows (a [6, 64] view of a, b [24, 64])
    a, b = torch.randn(2, 3, 64), torch.randn(24, 64)
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    tt.gemm(a16, b16)
    launched_a, launched_b = calls[-1][:2]
    want = torch.nn.functional.linear(a16.float(), b16.float())
    assert torch.equal((launched_a.float() @ launched_b.float().T).view(2, 3, 24), want)


@pytest.mark.parametrize("operand", ["a", "residual", "out"])
def test_leading_dims_no_view_merges_are_refused_naming_the_operand(operand):
    a, b = torch.empty(2, 3, 64, **BF, device="meta"), torch.empty(24, 64, **BF, device="meta")
    tensors = dict(a=a, residual=torch.empty(2, 3, 24, **BF, device="meta"), out=torch.empty(2, 3, 24, **BF,
                                                                                                device="meta"))
    t = tensors[operand]
    tensors[operand] = torch.empty(3, 2, t.shape[-1], **BF, device="meta").transpose(0, 1)  # [2, 3, X], not viewable
    with pytest.raises(ValueError, match=f"argument '{operand}': leading dimensions that one view merges"):
        tt.gemm(tensors.pop("a"), b, **tensors)


def test_leading_dims_that_do_not_match_a_are_named():
    a, b = torch.empty(2, 3, 64, **BF, device="meta"), torch.empty(24, 64, **BF, device="meta")
    with pytest.raises(ValueError, match="argument 'residual': shape"):
        tt.gemm(a, b, residual=torch.empty(3, 2, 24, **BF, device="meta"))
    with pytest.raises(ValueError, match="argument 'row_scale': shape"):
        tt.gemm(a, b, row_scale=torch.empty(3, 2, device="meta"))
    with pytest.raises(ValueError, match="argument 'a': non-contiguous"):  # rows viewed, each row strided
        tt.gemm(torch.empty(2, 3, 128, **BF, device="meta")[..., ::2], b)


def test_the_fake_gemm_of_leading_dims_gives_their_shape():
    a, b = torch.empty(4, 5, 64, **BF, device="meta"), torch.empty(64, 24, **BF, device="meta")
    assert tt.gemm(a, b, layout="nn").shape == (4, 5, 24)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b, r: tt.gemm(a, b, layout="nn", residual=r), fullgraph=True,
                             backend="aot_eager")
    assert compiled(a, b, torch.empty(4, 5, 24, **BF, device="meta")).shape == (4, 5, 24)


def test_grouped_gemm_views_leading_dims_as_t(calls):
    x, w = torch.randn(2, 8, 64, **BF), torch.randn(2, 24, 64, **BF)
    offsets = torch.tensor([0, 5, 16], dtype=torch.int32)
    for _ in range(2):
        y = tt.grouped_gemm(x, w, offsets, row_scale=torch.rand(2, 8))
        assert y.shape == (2, 8, 24)
    assert len(calls) == 2 and len(tt._CALLS) == 1
    assert [tuple(t.shape) for t in calls[-1][:3]] == [(16, 64), (2, 24, 64), (16, 24)]
    meta = torch.empty(2, 8, 64, **BF, device="meta"), w.to("meta"), offsets.to("meta")
    assert tt.grouped_gemm(*meta).shape == (2, 8, 24)


# ------------------------------------------------------------------------------------ M = 0 / T = 0: prepared


@pytest.mark.parametrize("lead", [(0,), (0, 5), (3, 0)])
def test_an_empty_gemm_is_prepared(calls, lead):
    a, b = torch.zeros(*lead, 64, **BF), torch.zeros(24, 64, **BF)
    for _ in range(3):
        y = tt.gemm(a, b, bias=torch.zeros(24), out_dtype=torch.float32)
        assert y.shape == (*lead, 24) and y.dtype == torch.float32
    assert len(calls.checks) == 2 and len(tt._CALLS) == 1 and list(calls) == []  # one checked call: its 2 checks
    out = torch.empty(*lead, 24, dtype=torch.float32)
    for _ in range(2):
        assert tt.gemm(a, b, bias=torch.zeros(24), out=out) is out
    assert len(calls.checks) == 4 and list(calls) == []


def test_an_empty_gemm_still_refuses_a_strided_tensor_after_its_key_is_prepared(calls):
    a, b = torch.zeros(0, 64, **BF), torch.zeros(24, 64, **BF)
    tt.gemm(a, b, bias=torch.zeros(24))
    tt.gemm(a, b, bias=torch.zeros(24))
    with pytest.raises(ValueError, match="argument 'bias': non-contiguous"):
        tt.gemm(a, b, bias=torch.zeros(48)[::2])
    with pytest.raises(ValueError, match="argument 'b': non-contiguous"):
        tt.gemm(a, torch.zeros(64, 24, **BF).T, bias=torch.zeros(24))


def test_an_empty_grouped_gemm_is_prepared(calls, monkeypatch):
    checks = []
    real = tt.check_grouped_arguments
    monkeypatch.setattr(tt, "check_grouped_arguments", lambda *a: (checks.append(1), real(*a))[1])
    x, w, offsets = torch.zeros(0, 64, **BF), torch.zeros(2, 24, 64, **BF), torch.zeros(3, dtype=torch.int32)
    for _ in range(3):
        assert tt.grouped_gemm(x, w, offsets).shape == (0, 24)
    assert len(checks) == 2 and len(tt._CALLS) == 1 and list(calls) == []


# ------------------------------------------------------------------------------------ on a GPU


def _fp8_paged(seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    B, H, D, P, pages = 3, 8, 128, 16, 12
    q = torch.randn(B, 1, H, D, device="cuda", generator=gen).bfloat16()
    k, v = (torch.randn(pages, P, HKV, D, device="cuda", generator=gen).mul(4).to(FP8) for _ in "kv")
    table = torch.arange(B * 4, dtype=torch.int32, device="cuda").view(B, 4) % pages
    lens = torch.tensor([1, 37, 64], dtype=torch.int32, device="cuda")
    return q, k, v, table, lens


@pytest.mark.cuda
def test_broadcast_scales_match_per_head_ones_and_replay_in_a_cuda_graph():
    args = _fp8_paged()
    per_head = dict(k_scale=torch.full((HKV,), 0.5, device="cuda"), v_scale=torch.full((HKV,), 0.25, device="cuda"))
    want = tt.paged_attention(*args, **per_head, return_lse=True)
    k_scale, v_scale = torch.full((1,), 0.5, device="cuda"), torch.tensor(0.25, device="cuda")
    for keywords in (dict(k_scale=k_scale, v_scale=v_scale), dict(k_scale=0.5, v_scale=0.25)):
        for _ in range(2):  # the checked path, then the prepared launch
            o, lse = tt.paged_attention(*args, **keywords, return_lse=True)
            assert torch.equal(o, want[0]) and torch.equal(lse, want[1])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = tt.paged_attention(*args, k_scale=k_scale, v_scale=v_scale, return_lse=True)
    k_scale.fill_(2.0)  # the replay reads the scale's value now: the copy into the launch's buffer is captured
    graph.replay()
    torch.cuda.synchronize()
    per_head["k_scale"].fill_(2.0)
    want = tt.paged_attention(*args, **per_head, return_lse=True)
    assert torch.equal(o, want[0]) and torch.equal(lse, want[1])


@pytest.mark.cuda
def test_gemm_of_leading_dims_matches_linear():
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(3, 5, 256, device="cuda", generator=gen).bfloat16()
    w = torch.randn(384, 256, device="cuda", generator=gen).bfloat16()
    r = torch.randn(3, 5, 384, device="cuda", generator=gen).bfloat16()
    want = torch.nn.functional.linear(x.float(), w.float()) + r.float()
    for _ in range(2):
        y = tt.gemm(x, w, residual=r)
        assert y.shape == (3, 5, 384)
        assert float((y.float() - want).abs().max()) <= 2 ** -6 * float(want.abs().max())
    assert tt.gemm(x[:0], w).shape == (0, 5, 384)
