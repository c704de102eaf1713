"""``tvm_cdna4.torch.gemm`` with fp8 (``torch.float8_e4m3fn``) inputs: the argument rules on meta tensors (no
GPU), the kernel choice with a faked compute capability (the sm90 kernel on sm_90, a clear refusal elsewhere),
and on a Hopper GPU (``cuda(arch="sm_90a")``) the result against ``torch._scaled_mm`` with rowwise scales."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402

FP8 = torch.float8_e4m3fn


def meta(*shape, dtype=FP8):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_fp8_gemm_defaults_to_a_bf16_output_with_the_scales_fused():
    y = tt.gemm(meta(5, 64), meta(24, 64), row_scale=meta(5, dtype=torch.float32), col_scale=meta(24, dtype=torch.float32))
    assert y.shape == (5, 24) and y.dtype == torch.bfloat16 and y.device.type == "meta"
    assert tt.gemm(meta(5, 64), meta(24, 64), out_dtype=torch.float32).dtype == torch.float32
    out = meta(5, 24, dtype=torch.float16)
    assert tt.gemm(meta(5, 64), meta(24, 64), out=out) is out


@pytest.mark.parametrize("call, message", [
    (lambda: tt.gemm(meta(4, 72), meta(8, 72)),
     r"argument 'a': fp8 rows .* K % 16 == 0; expected K a multiple of 16, found K = 72"),
    (lambda: tt.gemm(meta(4, 64), meta(64, 8), layout="nn"), r"argument 'layout': fp8 inputs are both K-major"),
    (lambda: tt.gemm(meta(4, 64), meta(8, 64, dtype=torch.bfloat16)),
     r"argument 'b': dtype; expected torch.float8_e4m3fn, found torch.bfloat16"),
    (lambda: tt.gemm(meta(4, 64, dtype=torch.float8_e5m2), meta(8, 64, dtype=torch.float8_e5m2)),
     r"argument 'a': dtype; expected torch.float16 or torch.bfloat16 or torch.float8_e4m3fn \(gemm only\)"),
    (lambda: tt.grouped_gemm(meta(4, 64), meta(2, 8, 64), meta(3, dtype=torch.int32)),
     r"grouped_gemm: argument 'x': dtype; expected torch.float16 or torch.bfloat16 \(fp8 inputs: gemm only, the sm90 "
     r"kernel\), found torch.float8_e4m3fn"),  # not fp8 among the expected dtypes (stop 54: it was)
])
def test_fp8_argument_rules(call, message):
    with pytest.raises(ValueError, match=message):
        call()


class FakeA:
    """What ``_kernel`` reads of ``a``: its device and dtype."""

    def __init__(self):
        self.device, self.dtype = torch.device("cuda", 0), FP8


@pytest.fixture
def capability(monkeypatch):
    """Device 0's faked compute capability (set ``value[0]``), the caches empty."""
    value = [(9, 0)]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: value[0])
    for name, empty in (("_DEVICES", {}), ("_SM90_REFUSED", set()), ("_KERNELS", {})):
        monkeypatch.setattr(tt, name, empty)
    return value


def test_fp8_runs_the_sm90_kernel_on_sm90(capability):
    k = tt._kernel(FakeA(), 24, 64, torch.bfloat16, "nt", Fusion(row_scale=True, col_scale=True), M=5)
    assert " sm90 nt fp8->bf16 N=24 K=64" in k.dynamic.describe and k.dynamic.built() == ()


@pytest.mark.parametrize("cap, setting", [((8, 0), "auto"), ((8, 9), "auto"), ((9, 0), "sm80")])
def test_fp8_is_refused_where_the_sm90_kernel_does_not_run(capability, monkeypatch, cap, setting):
    capability[0] = cap
    monkeypatch.setattr(tt, "CUDA_TARGET", setting)
    with pytest.raises(ValueError, match=r"argument 'a': fp8 \(torch.float8_e4m3fn\) runs on sm_90 GPUs .* found "
                                         rf"sm_{cap[0]}{cap[1]} \(cuda:0\), target sm80"):
        tt._kernel(FakeA(), 24, 64, torch.bfloat16, "nt", Fusion(), M=5)
    assert tt.kernel_cache() == {}


# ---------------------------------------------------------------------------------------- on a Hopper GPU


def _quantized(M, N, K, seed):
    """fp8 a [M, K], b [N, K] (per-token and per-channel absmax quantization of uniform data) and their f32
    scales [M], [N]."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.empty((M, K), device="cuda").uniform_(-3, 3, generator=gen)
    w = torch.empty((N, K), device="cuda").uniform_(-0.1, 0.1, generator=gen)
    fmax = torch.finfo(FP8).max
    sx, sw = x.abs().amax(1) / fmax, w.abs().amax(1) / fmax
    return (x / sx[:, None]).to(FP8), (w / sw[:, None]).to(FP8), sx.float(), sw.float()


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M", [5, 77, 768])
def test_fp8_gemm_on_sm90_matches_torch_scaled_mm(M):
    N, K = 400, 528  # torch._scaled_mm: N and K multiples of 16
    a, b, row_scale, col_scale = _quantized(M, N, K, M)
    y = tt.gemm(a, b, row_scale=row_scale, col_scale=col_scale)
    want = torch._scaled_mm(a, b.t(), scale_a=row_scale[:, None], scale_b=col_scale[None, :], out_dtype=torch.bfloat16)
    exact = (a.float() * row_scale[:, None]) @ (b.float() * col_scale[:, None]).T
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    for got in (y, want):
        assert float(torch.linalg.norm(got.float() - exact) / torch.linalg.norm(exact)) < 1e-2
    assert float((y.float() - want.float()).abs().max()) <= 2 * float(exact.abs().max()) * 2.0 ** -8
    assert any(k[2] == "fp8" and k[-1] == "sm90" for k in tt.kernel_cache())
