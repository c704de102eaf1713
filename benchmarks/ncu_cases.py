"""One warm call of a named case inside ``torch.cuda.profiler`` start/stop: what ``ncu --profile-from-start off``
profiles (Nsight Compute's counters of that call's kernels only; the builds and warm-up calls stay outside).

    ncu --profile-from-start off --clock-control none --set full python3 benchmarks/ncu_cases.py CASE

Cases (``CASES``): the sm90 GEMM at 4096^3 bf16 nt plain and with each costly epilogue (issue 36's 3 % bar) and
at medium M on Qwen2.5-7B projections (and its QKV at M = 200 with the buckets' swapped plan; its o projection at
M = 3000 unclustered and in clusters of two),
and paged decode attention (issue 37) at the batch-8 and batch-64 rows of ``benchmarks/paged_decode.py``, bf16
and fp8 KV, and the sm90 attention forward at 8 x 2k tokens, hidden 2048 (issue 38). Diagnostic: the numbers of record are the benchmarks'.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def gemm_case(torch, fused: tuple, mnk=(4096, 4096, 4096)):
    import tvm_cdna4.torch as ops

    m, n, k = mnk
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    kw = {}
    if "residual" in fused:
        kw["residual"] = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=g)
    if "bias" in fused:
        kw["bias"] = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    if "scales" in fused:
        kw["row_scale"] = torch.rand(m, device="cuda", generator=g) + 0.5
        kw["col_scale"] = torch.rand(n, device="cuda", generator=g) + 0.5
    if "gelu" in fused:
        kw["activation"] = "gelu"
    return lambda: ops.gemm(a, b, layout="nt", **kw)


SWAPPED_CASE_M_TILES = 4
"""``gemm_cost.SWAP_M_TILES`` of the swapped cases (``swapped_rule``): the rule before stop 50 they were written for."""


def swapped_rule(adjacent: bool | None = None) -> None:
    """Every dynamic-M bucket to ``TMA_BOX_MAX`` weighs swap AB (``gemm_cost.WEIGH_SWAP_DYNAMIC``; by default only those
    to ``SWAP_DYNAMIC_MAX_M``, in one tile of M) in up to ``SWAPPED_CASE_M_TILES`` tiles of M, as before stop 50 (its
    several-tile bucket plans timed slower; docs/sm90_gemm.md "Swap AB"): what ncu should explain. ``adjacent``: the
    swapped plans' walk (``gemm_cost.SWAP_PANEL_ADJACENT``; None: the package's)."""
    from tvm_cdna4.kernels.sm90 import gemm_cost

    gemm_cost.WEIGH_SWAP_DYNAMIC = True
    gemm_cost.SWAP_DYNAMIC_MAX_M = gemm_cost.TMA_BOX_MAX
    gemm_cost.SWAP_M_TILES = SWAPPED_CASE_M_TILES
    if adjacent is not None:
        gemm_cost.SWAP_PANEL_ADJACENT = adjacent


def swapped_bucket_case(torch, mnk, adjacent: bool | None = None):
    """The torch op under ``swapped_rule(adjacent)`` (set for the process)."""
    swapped_rule(adjacent)
    return gemm_case(torch, (), mnk)


def residual_read_case(torch, read: str):
    """The torch op's 4096^3 residual with ``read`` as the cost model's residual read (``gemm_plan.RESIDUAL_CHOICE``;
    ``"preread"``: opt-in, untimed, stop 49): the stall sampling beside ``gemm-residual``'s ``"tma"``."""
    from tvm_cdna4.kernels.sm90 import gemm_plan

    gemm_plan.RESIDUAL_CHOICE = read
    return gemm_case(torch, ("residual",))


def cluster_case(torch, cluster_m: int, mnk=(3000, 3584, 3584)):
    """The static sm90 kernel at the cost model's config with ``cluster_m`` 1 or 2 (``benchmarks/sm90_clusters.py``'s
    c1 and c2; docs/sm90_gemm.md "Clusters"): the torch op does not choose clusters."""
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan, replace_config
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    m, n, k = mnk
    problem = gemm.GemmProblem(m, n, k, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", replace_config(gemm.plan(problem, "sm90").config, cluster_m=cluster_m))
    kernel = Kernel(load_build(build_plan(p)), p)
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return lambda: kernel.launch(a, b, c)


def paged_case(torch, batch: int, mean: int, kv_dtype: str):
    import paged_decode as pd
    import tvm_cdna4.torch as ops

    spec = dict(set="ncu", batch=batch, mean=mean, heads=32, kv_heads=8, page_size=16, queries=1, kv_dtype=kv_dtype)
    contexts = pd.draw_contexts(batch, mean)
    problem = pd.problem_of(spec, contexts)
    x = pd._inputs(torch, problem, contexts, 1, 0)
    (k, v), (ks, vs) = x["caches"][0], x["scales"][0]
    return lambda: ops.paged_attention(x["q"], k, v, x["table"], x["lens"], k_scale=ks, v_scale=vs)


def attention_case(torch, head_dim: int, causal: bool, kv_heads_div: int = 1):
    import tvm_cdna4.torch as ops

    heads = 2048 // head_dim
    batch, seq = 8, 2048
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(batch, heads // kv_heads_div, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                        generator=g) for _ in range(2))
    return lambda: ops.attention(q, k, v, causal=causal)


CASES = {
    "gemm-plain": lambda t: gemm_case(t, ()),
    "gemm-residual": lambda t: gemm_case(t, ("residual",)),
    "gemm-residual-preread": lambda t: residual_read_case(t, "preread"),
    "gemm-bias-scales": lambda t: gemm_case(t, ("bias", "scales")),
    "gemm-all": lambda t: gemm_case(t, ("residual", "bias", "scales", "gelu")),
    # Qwen2.5-7B's fused gate/up projection (N 37888, K 3584) at the medium M rows of RESULTS.md "sm90 GEMM"
    "gemm-m768": lambda t: gemm_case(t, (), (768, 37888, 3584)),
    "gemm-m200": lambda t: gemm_case(t, (), (200, 37888, 3584)),
    "gemm-m3000-o": lambda t: gemm_case(t, (), (3000, 3584, 3584)),
    # Qwen2.5-7B's QKV (N 4608, K 3584) at M = 200: the unswapped bucket plan, and the swapped one (128x88 over three
    # token tiles since stop 49; 64x256 in stop 44's run, 1.6x the static 64x200's time); each in its own process
    "gemm-m200-qkv": lambda t: gemm_case(t, (), (200, 4608, 3584)),
    "gemm-m200-qkv-swapped": lambda t: swapped_bucket_case(t, (200, 4608, 3584)),
    # Qwen2.5-7B's o projection at M = 200, swapped 64x128 over two token tiles: a weight panel's two readers group_m
    # (8) CTAs apart (raster "m") or adjacent (raster "n", gemm_cost.SWAP_PANEL_ADJACENT; stop 49, swapmulti)
    "gemm-m200-o-swapped-m": lambda t: swapped_bucket_case(t, (200, 3584, 3584), False),
    "gemm-m200-o-swapped-n": lambda t: swapped_bucket_case(t, (200, 3584, 3584), True),
    # Qwen2.5-7B's o projection at M = 3000 (128x224) unclustered and in clusters of two (1.6-2.1x slower, stop 46)
    "gemm-cluster-c1": lambda t: cluster_case(t, 1),
    "gemm-cluster-c2": lambda t: cluster_case(t, 2),
    "paged-bf16-b8": lambda t: paged_case(t, 8, 8192, "bf16"),
    "paged-fp8-b8": lambda t: paged_case(t, 8, 8192, "fp8"),
    "paged-bf16-b64": lambda t: paged_case(t, 64, 8192, "bf16"),
    "paged-fp8-b64": lambda t: paged_case(t, 64, 8192, "fp8"),
    "attn-d128": lambda t: attention_case(t, 128, False),
    "attn-d128-causal": lambda t: attention_case(t, 128, True),
    "attn-d64": lambda t: attention_case(t, 64, False),
    "attn-d64-causal": lambda t: attention_case(t, 64, True),
    "attn-d128-gqa": lambda t: attention_case(t, 128, False, 4),
}


def main(argv=None) -> int:
    import torch

    names = (argv if argv is not None else sys.argv[1:]) or list(CASES)
    for name in names:
        fn = CASES[name](torch)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"ncu case {name}: profiled one call", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
