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
