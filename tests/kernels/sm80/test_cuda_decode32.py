"""The decode GEMM at 17..32 tokens (``decode_plan.DECODE_MAX_M``: three and four n8 token tiles): exact in the
emulator on odd shapes (M = 17, 24, 29, 32; N and K not multiples of 8 or of the K span; split-K of both
reductions; the element loads; dynamic M through the 17..32 bucket), the planners' switch
(``decode_plan.WEIGH_WIDE_DECODE``, off by default: the M it moves on sm80 and sm90) and the refusals past it."""

from __future__ import annotations

import os
import sys

import numpy as np
import paths
import pytest

sys.path.append(os.path.join(str(paths.ROOT), "benchmarks"))  # after tests/: a benchmark script never shadows a test helper

import cuda_crosscheck as xc  # noqa: E402

from tvm_cdna4.emulator import emulate  # noqa: E402
from tvm_cdna4.errors import ContractError  # noqa: E402
from tvm_cdna4.kernels import devices, gemm  # noqa: E402
from tvm_cdna4.kernels.gemm import GemmProblem  # noqa: E402
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402
from tvm_cdna4.kernels.sm80 import decode_plan as dp  # noqa: E402
from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm  # noqa: E402
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, DecodePlan, plan_decode  # noqa: E402
from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig  # noqa: E402
from tvm_cdna4.kernels.sm90.gemm_dynamic import plan_bucket  # noqa: E402
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Plan  # noqa: E402
from tvm_cdna4.runtime import cuda as runner  # noqa: E402


@pytest.fixture
def wide(monkeypatch):
    """The planners weigh the decode kernel up to ``DECODE_MAX_M`` (``WEIGH_WIDE_DECODE`` on)."""
    monkeypatch.setattr(dp, "WEIGH_WIDE_DECODE", True)


def _ints(M, N, K, dt, seed):
    rng = np.random.default_rng(seed)
    return xc._ints(rng, (M, K), runner.np_dtype(dt)), xc._ints(rng, (N, K), runner.np_dtype(dt))


def _run(func, p, a, b, ot):
    """C (from NaN) of ``func`` (the kernel of plan ``p``) on a, b, its workspace and tickets zero before; both left
    zero after by the row blocks' last CTAs."""
    c = np.full((a.shape[0], b.shape[0]), np.nan, runner.np_dtype(ot))
    extra = [np.zeros(q.shape, np.float32 if q.dtype == "float32" else np.uint32) for q in p.params[3:]]
    emulate(func, a, b, c, *extra, target="sm80")
    if p.k_splits > 1:
        assert not extra[1].any() and (p.config.reduction == "ordered" or not extra[0].any())
    return c


# (M, N, K, dtype, out dtype, config): 3 and 4 token tiles; rows past N; tokens past M in the last tile (17, 29);
# K a multiple of 8 with a masked last iteration, K % 8 != 0 (element loads); splits of both reductions
WIDE_CASES = [
    (17, 37, 200, "bf16", "bf16", DecodeConfig(warps=2, row_tiles=2, unroll=2)),
    (24, 40, 520, "f16", "f32", DecodeConfig(warps=2, row_tiles=1, unroll=2, split_k=2)),
    (29, 33, 101, "bf16", "bf16", DecodeConfig(warps=2, row_tiles=2, unroll=1)),
    (32, 24, 520, "bf16", "f16", DecodeConfig(warps=2, row_tiles=1, unroll=2, split_k=2, reduction="ordered",
                                              line_copy=False)),
    (32, 70, 600, "f16", "bf16", DecodeConfig(warps=2, row_tiles=1, unroll=4, stages=6)),
]


# the wide decode kernel is not the cost model's to M = 32 (decode_plan.WEIGH_WIDE_DECODE, timed and left off): its
# cases of 24 x 520 and more run with TVM_CDNA4_SLOW=1 (suite time)
@pytest.mark.parametrize("M,N,K,dt,ot,cfg", [pytest.param(*c, marks=pytest.mark.slow) if c[0] * c[2] >= 24 * 520 else c
                                              for c in WIDE_CASES], ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in WIDE_CASES])
def test_wide_decode_exact_on_small_integers(M, N, K, dt, ot, cfg):
    # small-integer data: every product and partial sum is exact, so the tokens' four n8 tiles, the warps' sum and
    # the K split must give the numpy product bit for bit
    p = plan_decode(M, N, K, dt, "nt", ot, cfg)
    assert p.token_tiles == -(-M // 8) and p.out_per_thread == -(-M * cfg.block_rows // cfg.threads)
    assert p.smem_floats == cfg.warps * cfg.row_tiles * p.token_tiles * 4 * 32
    assert p.smem_bytes == (cfg.smem_bytes(p.token_tiles) if K % 8 == 0 else 0) and p.vector == (8 if K % 8 == 0 else 1)
    a, b = _ints(M, N, K, dt, M + N + K)
    c = _run(cuda_gemm.cuda_gemm(M, N, K, dt, "nt", ot, cfg), p, a, b, ot)
    want = runner.reference(a, b, "nt").astype(runner.np_dtype(ot))
    assert xc.first_difference(c, want) is None, xc.first_difference(c, want)


@pytest.mark.parametrize("M", [17, pytest.param(29, marks=pytest.mark.slow)])  # WEIGH_WIDE_DECODE off
def test_dynamic_m_through_the_wide_bucket(wide, M):
    # with the switch on, the sm80 dynamic GEMM's bucket 17..32 is the decode kernel (four token tiles, planned at
    # M = 32), exact at a run-time M inside it, through the model's K split (the workspace sized for M = 32)
    N, K = 40, 4096
    dyn = cuda_gemm.build_dynamic(N, K, "f16", "nt", "f32")
    p = dyn.plan(M)
    assert isinstance(p, DecodePlan) and p.dynamic_m == MBucket(17, 32) and p.token_tiles == 4
    assert p.config == dp.choose_decode(32, N, K, "f32")[0] and p.k_splits == 16  # 64 iterations, 16 slices of 4
    a, b = _ints(M, N, K, "f16", M)
    c = _run(dyn.primfunc(M), p, a, b, "f32")
    assert xc.first_difference(c, runner.reference(a, b, "nt").astype(np.float32)) is None


def test_the_switch_moves_the_sm90_bucket_17_to_32_only(monkeypatch):
    device = devices.DEVICES["H100"]

    def plan(lo, hi):
        return plan_bucket(MBucket(lo, hi), 3584, 3584, "bf16", "nt", "bf16", Fusion(), device)

    assert dp.WEIGH_WIDE_DECODE is False and dp.decode_limit() == dp.DECODE_WEIGHED_M == 16  # off by default
    off = [plan(1, 16), plan(17, 32), plan(33, 64)]
    assert [type(p) for p in off] == [DecodePlan, Sm90Plan, Sm90Plan]
    monkeypatch.setattr(dp, "WEIGH_WIDE_DECODE", True)
    assert dp.decode_limit() == dp.DECODE_MAX_M == 32
    on = [plan(1, 16), plan(17, 32), plan(33, 64)]
    assert isinstance(on[0], DecodePlan) and (on[0].config, on[2].config) == (off[0].config, off[2].config)  # the others keep theirs
    assert isinstance(on[1], DecodePlan) and on[1].token_tiles == 4 and on[1].dynamic_m == MBucket(17, 32)
    assert on[1].config == dp.choose_decode(32, 3584, 3584, "bf16", device.units)[0]
    # the static sm90 choice and the torch op's bucket (gemm.build of a dynamic problem) follow the switch
    assert isinstance(gemm.choose(GemmProblem(24, 3584, 3584, "bf16", "nt", "bf16"), "sm90"), DecodeConfig)
    assert isinstance(gemm.build(GemmProblem(None, 3584, 3584, "bf16", "nt", "bf16"), "sm90").plan(20), DecodePlan)
    assert not isinstance(gemm.choose(GemmProblem(33, 3584, 3584, "bf16", "nt", "bf16"), "sm90"), DecodeConfig)
    # without decode_keeps (the target's DECODE_KEEPS, f16 / bf16) no bucket keeps the decode kernel
    assert isinstance(plan_bucket(MBucket(17, 32), 3584, 3584, "bf16", "nt", "bf16", Fusion(), device, False), Sm90Plan)


def test_the_switch_moves_sm80_choices_by_the_model(monkeypatch):
    # sm80's choose_kernel weighs the decode kernel at M = 17..32 only with the switch (Qwen2.5-7B o at M = 32: by
    # the models the decode kernel; a K not 16-byte aligned keeps the tile GEMM)
    assert isinstance(dp.choose_kernel(32, 3584, 3584, "bf16", "nt", "bf16"), GemmConfig)
    assert not any(isinstance(c, DecodeConfig) for c in dp.ranked_configs(24, 3584, 3584, "bf16", "nt", "bf16"))
    monkeypatch.setattr(dp, "WEIGH_WIDE_DECODE", True)
    assert isinstance(dp.choose_kernel(32, 3584, 3584, "bf16", "nt", "bf16"), DecodeConfig)
    assert any(isinstance(c, DecodeConfig) for c in dp.ranked_configs(24, 3584, 3584, "bf16", "nt", "bf16"))
    assert isinstance(dp.choose_kernel(29, 1000, 4099, "bf16", "nt", "bf16"), GemmConfig)
    assert isinstance(dp.choose_kernel(33, 3584, 3584, "bf16", "nt", "bf16"), GemmConfig)


def test_wide_estimates_and_candidates():
    # four token tiles: the x rows every CTA reads grow the stream, the candidates fit shared memory at four tiles,
    # the registers model grows with the accumulators; M <= 16 weighs the same candidates as before
    N, K, cfg = 3584, 3584, DecodeConfig(warps=4, row_tiles=4, unroll=2)
    est = [dp.decode_estimate(M, N, K, cfg, 2).time_s for M in (16, 24, 32)]
    assert est[0] < est[1] < est[2] < 1.2 * est[0]
    assert dp.decode_registers(cfg, 4) == 24 + 2 * 2 * (2 * 4 + 4) + 4 * 4 * 4
    wide = dp.decode_candidates(32, N, K)
    assert all(c.smem_bytes(4) <= devices.DEVICES["H100"].smem_per_unit for c in wide)
    assert len(wide) < len(dp.decode_candidates(16, N, K)) == len(dp.decode_candidates(1, N, K))


@pytest.mark.parametrize("call, operand", [
    (lambda: plan_decode(33, 64, 64), "A"),
    (lambda: plan_decode(MBucket(17, 33), 64, 64), "A"),  # a bucket: its largest M
    (lambda: plan_decode(16, 64, 64, layout="tn"), "layout"),
    # 196,608 B of stages at two token tiles, 262,144 B at four
    (lambda: plan_decode(32, 64, 64, config=DecodeConfig(warps=8, row_tiles=2, unroll=2, stages=4)), "config"),
])
def test_refusals_past_the_decode_kernel(call, operand):
    with pytest.raises(ContractError) as err:
        call()
    assert err.value.operand == operand
    if operand == "A":
        assert f"M <= {dp.DECODE_MAX_M}" in str(err.value) and "found M=33" in str(err.value)
    plan_decode(16, 64, 64, config=DecodeConfig(warps=8, row_tiles=2, unroll=2, stages=4))  # fits at two tiles


@pytest.mark.slow  # WEIGH_WIDE_DECODE timed and left off (stop 50)
def test_the_torch_benchmark_prints_the_wide_decode_plans(capsys, monkeypatch):
    # --plans --wide-decode off,on: the 17..32 bucket's plan under each setting and each one's estimate (the decode
    # model's for the decode plan); --wide-decode on alone: the on-setting's bucket plans; the flag restored
    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    argv = ["--plans", "--wide-decode", "off,on", "--ms", "16,24,33", "--projs", "o", "--models", "qwen2.5-7b",
            "--device", "H100"]
    assert torch_gemm.main(argv) == 0
    out = capsys.readouterr().out
    assert "| qwen2.5-7b | o | 3584 | 3584 | 16 (1-16) | decode | decode |" in out
    # off: the swapped sm90 bucket plan (gemm_cost.WEIGH_SWAP_DYNAMIC, on to SWAP_DYNAMIC_MAX_M), by the model faster
    assert "| qwen2.5-7b | o | 3584 | 3584 | 24 (17-32) | 64x32 swap raster-n shift | **decode** | 11.6 | 15.5 | 0.75x |" in out
    assert "| qwen2.5-7b | o | 3584 | 3584 | 33 (33-64) | 64x64 swap raster-n shift | 64x64 swap raster-n shift |" in out
    assert "| 24 | 1 of 1 | 0.751x |" in out
    assert dp.WEIGH_WIDE_DECODE is False
    monkeypatch.setattr(dp, "WEIGH_WIDE_DECODE", False)  # restored after the test: a single setting stays set
    assert torch_gemm.main(["--plans", "--wide-decode", "on", "--ms", "24", "--models", "qwen2.5-7b"]) == 0
    assert "| qwen2.5-7b | o | 3584 | 3584 | decode (17-32) |" in capsys.readouterr().out
