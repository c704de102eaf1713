"""Shared by the sm90 attention GPU tests (tests/gpu): a problem's random bf16 Q, K, V on the GPU, and the check of an
``(O, LSE)`` against SDPA's math in f32 (GQA's K / V heads repeated) and the scores' logsumexp."""


def random_qkv(problem, seed: int, torch):
    """Q, K, V of ``problem``'s shapes, standard normal in bfloat16 on the GPU (``seed``)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    s = problem.shapes()
    return tuple(torch.randn(s[n], generator=gen, device="cuda").to(torch.bfloat16) for n in ("Q", "K", "V"))


def assert_matches_sdpa(problem, q, k, v, o, lse, torch) -> None:
    """O within 1 % (relative Frobenius) of SDPA's f32 math, the LSE within 1e-2 of the scores' logsumexp."""
    import torch.nn.functional as F

    group = problem.heads // problem.kv_heads
    kf, vf = (x.float().repeat_interleave(group, 1) for x in (k, v))
    ref = F.scaled_dot_product_attention(q.float(), kf, vf, is_causal=problem.causal)
    scores = torch.matmul(q.float(), kf.transpose(-1, -2)) * problem.head_dim ** -0.5
    if problem.causal:
        mask = torch.ones(problem.seq_q, problem.seq_kv, dtype=torch.bool, device="cuda").triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    assert ((o.float() - ref).norm() / ref.norm()).item() < 1e-2
    assert (lse - torch.logsumexp(scores, -1)).abs().max().item() < 1e-2


def assert_exact_on_the_card(problem, config, seed: int) -> None:
    """The sm90 kernel of ``config`` run through the torch op's launcher on the GPU, validated against the problem's
    float64 reference within its documented bound (``kernels.attention.validate``)."""
    from functools import partial

    from tvm_cdna4.kernels import attention
    from tvm_cdna4.torch import run_attention

    v = attention.validate(problem, "sm90", config, seed=seed, run=partial(run_attention, target="sm90", config=config))
    assert v.ok and v.where == "the NVIDIA GPU", v


def assert_kernel_matches_sdpa(problem, config, seed: int, torch) -> None:
    """The sm90 kernel of ``config`` launched on ``random_qkv(problem, seed)``, then ``assert_matches_sdpa``."""
    from tvm_cdna4.torch import attention_kernel

    q, k, v = random_qkv(problem, seed, torch)
    o, lse = torch.empty_like(q), torch.empty(problem.shapes()["LSE"], dtype=torch.float32, device="cuda")
    attention_kernel(q, problem, "sm90", config).launch(q, k, v, o, lse)
    torch.cuda.synchronize()
    assert_matches_sdpa(problem, q, k, v, o, lse, torch)
