"""The decode kernel at 17..32 tokens (three and four n8 token tiles, ``decode_plan.DECODE_MAX_M``) on a Hopper GPU
(``cuda(arch="sm_90a")``): static plans of odd N and K (the cp.async pipeline, K splits of both reductions, the element
loads where K % 8 != 0) through ``runtime.cuda.compile_and_load``, and the torch op's bucket 17..32 with
``decode_plan.WEIGH_WIDE_DECODE`` on (each test's kernels built afresh); exact against the product of small integers
(every sum exact in f32, one rounding to bf16). Skipped without such a GPU."""

import os
import sys

import numpy as np
import paths
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

sys.path.append(os.path.join(str(paths.ROOT), "benchmarks"))  # after tests/: a benchmark script never shadows a test helper

import cuda_crosscheck as xc  # noqa: E402

import tvm_cdna4.torch as ours  # noqa: E402
from tvm_cdna4.kernels.sm80 import decode_plan as dp  # noqa: E402
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, DecodePlan  # noqa: E402
from tvm_cdna4.runtime import cuda as runner  # noqa: E402

SHAPES = ((3584, 3584), (3584, 18944))
"""The torch op's shapes: Qwen2.5-7B's o (4 token tiles, no split) and down (its K split)."""

STATIC = [  # (M, N, K, config): odd N; K with a masked last iteration; K % 8 != 0; splits of both reductions
    (17, 1000, 4104, DecodeConfig(warps=4, row_tiles=4, unroll=2, split_k=2)),
    (24, 4095, 2056, DecodeConfig(warps=8, row_tiles=2, unroll=2, split_k=3, reduction="ordered")),
    (29, 1001, 4099, DecodeConfig(warps=4, row_tiles=2, unroll=2)),
    (32, 999, 3000, DecodeConfig(warps=2, row_tiles=4, unroll=4, stages=3)),
    (32, 3584, 3584, None),  # the decode model's choice at M = 32 (choose_decode)
]


@pytest.fixture
def wide_buckets(planner_flags):
    """The planners weigh the decode kernel up to ``DECODE_MAX_M``; the torch op's kernels of ``SHAPES`` built afresh
    before and after the test."""
    planner_flags(dp, WEIGH_WIDE_DECODE=True)


@pytest.mark.parametrize("M,N,K,cfg", STATIC, ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in STATIC])
def test_static_wide_decode_is_exact(M, N, K, cfg, tmp_path):
    cfg = cfg or dp.choose_decode(M, N, K, "bf16")[0]
    rng = np.random.default_rng(M + N + K)
    a, b = xc._ints(rng, (M, K), runner.np_dtype("bf16")), xc._ints(rng, (N, K), runner.np_dtype("bf16"))
    want = runner.reference(a, b, "nt").astype(runner.np_dtype("bf16")).astype(np.float32)
    fn = runner.compile_and_load(M, N, K, "bf16", "nt", "bf16", cfg, workdir=str(tmp_path))
    outs = [runner.run_numpy(fn, a, b, M, N, "bf16") for _ in range(2)]  # the second: workspace and tickets left zero
    for out in outs:
        np.testing.assert_array_equal(out, want)


@pytest.mark.usefixtures("wide_buckets")
@pytest.mark.parametrize("N,K", SHAPES)
def test_the_torch_op_runs_the_wide_bucket_exactly(N, K):
    for M in (17, 24, 32):
        g = torch.Generator(device="cuda").manual_seed(M + N)
        a = torch.randint(-3, 4, (M, K), device="cuda", generator=g).bfloat16()
        b = torch.randint(-3, 4, (N, K), device="cuda", generator=g).bfloat16()
        y = ours.gemm(a, b)
        kernels = [k for key, k in ours.kernel_cache().items() if key[:2] == (N, K)]
        p = kernels[0].dynamic.plan(M)
        assert isinstance(p, DecodePlan) and p.token_tiles == 4 and (p.dynamic_m.lo, p.dynamic_m.hi) == (17, 32)
        want = (a.double() @ b.double().t()).bfloat16()
        assert torch.equal(y, want), float((y.float() - want.float()).abs().max())
        assert torch.equal(ours.gemm(a, b), y)  # a second launch: a split's workspace and tickets were left for it
