"""Checks the GPU GEMM tests share (a CUDA device and torch: called only from tests that have them)."""


def assert_fused_silu_matches(gemm, M: int, N: int, K: int, seed: int, tol: float = 2e-2):
    """``gemm(a, b, bias=, activation="silu", residual=)`` (bf16 a [M, K], b [N, K], residual [M, N]; an f32 bias) of random
    inputs drawn from ``seed`` within ``tol`` of ``silu(a b^T + bias) + residual`` in f32, relative to its largest
    magnitude; returns the output."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    bias = torch.randn(N, device="cuda", generator=g)  # f32
    residual = torch.randn(M, N, device="cuda", generator=g).bfloat16()
    y = gemm(a, b, bias=bias, activation="silu", residual=residual)
    ref = torch.nn.functional.silu(a.float() @ b.float().t() + bias.float()) + residual.float()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= tol
    return y


def sm90_plan_config(ours, N: int, K: int, M: int, fused: bool = False):
    """The config the torch op's one sm90 kernel of (N, K) (fused steps or none) runs at ``M`` (``ours``:
    ``tvm_cdna4.torch``; its ``kernel_cache()``)."""
    kernels = [k for key, k in ours.kernel_cache().items()
               if key[:2] == (N, K) and key[-1] == "sm90" and (not key[5].empty) == fused]
    assert len(kernels) == 1, "the torch op ran no (or more than one) sm90 kernel of this epilogue"
    return kernels[0].dynamic.plan(M).config


def random_ab(torch, M: int, N: int, K: int):
    """bf16 ``a`` [M, K] and ``b`` [N, K] on the GPU, normal, seeded by ``M + N``."""
    g = torch.Generator(device="cuda").manual_seed(M + N)
    return (torch.randn(M, K, device="cuda", generator=g).bfloat16(),
            torch.randn(N, K, device="cuda", generator=g).bfloat16())


def assert_near_the_product(y, a, b, tol: float = 1e-2) -> None:
    """``y`` [M, N], no NaN, within ``tol`` of ``a @ b.T`` in f32, relative to the product's largest magnitude."""
    ref = a.float() @ b.float().t()
    assert y.shape == ref.shape and not y.float().isnan().any()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= tol
