"""Dynamic M on sm90 (``kernels.sm90.gemm_dynamic``): the bucket plans, the refusals, the emitted kernel (M a
parameter bound at launch, A's tensor map encoded with it; nvcc assembles it for sm_90a where present) and
``--emit config``."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket, m_limit
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm80.decode_plan import DecodePlan
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_dynamic, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, Sm90Plan

LLAMA = GemmProblem(None, 4096, 4096, "bf16", "nt", "bf16")


def test_each_bucket_is_the_cost_models_plan_over_its_range_of_m():
    d = gemm.build(LLAMA, "sm90")
    assert [(b.lo, b.hi) for b in gemm_dynamic.dynamic_buckets(4096)] == [
        (1, 16), (17, 32), (33, 64), (65, 96), (97, 128), (129, 192), (193, 256), (257, 384), (385, 512), (513, 768),
        (769, 1024), (1025, 1536), (1537, 2048), (2049, 2560), (2561, 3072), (3073, 4096), (4097, 6144), (6145, 8192),
        (8193, m_limit(4096))]  # the coarse buckets; the problem's are those cut where one plan loses (refined)
    device = devices.planned("sm80")
    assert d.buckets == gemm_dynamic.dynamic_buckets(4096, 4096, "bf16", "bf16", device)
    for b in d.buckets[1:]:
        p = d.plan(b.hi)
        assert isinstance(p, Sm90Plan) and p.dynamic_m == b and str(p.M) == "M"
        assert p.config == gemm_cost.choose_for_range(*gemm_dynamic.planned_range(b), 4096, 4096, 2, device)
        assert [str(x) for x in p.params[0].shape] == ["M", "4096"] and str(p.params[2].shape[0]) == "M"
    assert gemm_dynamic.planned_range(d.buckets[-1]) == (8193, 16386)
    assert (d.plan(100).config.block_m, d.plan(5000).config.block_n) == (64, 256)  # small tiles for small M
    # the bucket 1..16 keeps the weight-streaming decode kernel (DECODE_KEEPS), built for sm_90a
    assert isinstance(d.plan(5), DecodePlan) and d.plan(5).dynamic_m == MBucket(1, 16)
    assert d.built() == ()  # nothing is built before a bucket's first use


def test_a_bucket_is_cut_at_multiples_of_cut_rows_until_its_plan_loses_at_most_regret_max(monkeypatch):
    # Qwen2.5-7B's down projection on the H100: the coarse 1025..1536's one plan (128x256 /k2) loses 1.3x at M = 1255
    # by the model; refined, every bucket's plan is within REGRET_MAX of each sampled M's best or the bucket is
    # CUT_ROWS wide, the buckets tile 1..m_limit without gaps, and M = 1200 gets the model's own pick at 1200
    device, N, K = devices.DEVICES["H100"], 3584, 18944
    coarse = next(b for b in gemm_dynamic.dynamic_buckets(N) if 1200 in b)
    assert (coarse.lo, coarse.hi) == (1025, 1536)
    assert gemm_cost.range_choice(*gemm_dynamic.planned_range(coarse), N, K, 2, device, m_max=coarse.hi)[1] > 1.25
    fine = gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", device)
    assert fine[0].lo == 1 and fine[-1].hi == m_limit(N)
    assert all(a.hi + 1 == b.lo for a, b in zip(fine, fine[1:]))
    assert len(fine) > len(gemm_dynamic.dynamic_buckets(N))
    for b in fine:
        if 16 < b.hi and b.lo <= gemm_dynamic.EDGES[-1] and b.hi - b.lo >= gemm_dynamic.CUT_ROWS:
            r = gemm_cost.range_choice(*gemm_dynamic.planned_range(b), N, K, 2, device, m_max=b.hi)[1]
            assert r <= gemm_dynamic.REGRET_MAX, (b, r)
    for x, y in zip(fine, fine[1:]):
        if x.lo > 256 and x.hi not in gemm_dynamic.EDGES and x.hi not in gemm_dynamic.BUCKET_EDGES:
            # every new edge a multiple of CUT_ROWS, or (FINE_CUTS) of FINE_CUT_ROWS inside a part CUT_ROWS wide
            narrow = gemm_dynamic.FINE_CUTS and (x.hi - x.lo < gemm_dynamic.CUT_ROWS or y.hi - y.lo < gemm_dynamic.CUT_ROWS)
            assert x.hi % (gemm_dynamic.FINE_CUT_ROWS if narrow else gemm_dynamic.CUT_ROWS) == 0, (x, y)
    # coalesced: two neighbouring parts of one coarse bucket with the same plan are one bucket where the joined range
    # keeps that plan within REGRET_MAX (3 joins here: one kernel built where two were)
    coarse_of = {b: next(c for c in gemm_dynamic.dynamic_buckets(N) if c.lo <= b.lo <= c.hi) for b in fine}
    for x, y in zip(fine, fine[1:]):
        if coarse_of[x] == coarse_of[y] and 16 < x.hi <= gemm_dynamic.EDGES[-1]:
            cx, cy = (gemm_cost.range_choice(*gemm_dynamic.planned_range(b), N, K, 2, device, m_max=b.hi)[0] for b in (x, y))
            joined = gemm_cost.range_choice(x.lo, y.hi, N, K, 2, device, m_max=y.hi)
            assert not (cx == cy == joined[0] and joined[1] <= gemm_dynamic.REGRET_MAX), (x, y)
    assert len(fine) < sum(len(gemm_dynamic.refined(c, N, K, "bf16", 2, device)) for c in gemm_dynamic.dynamic_buckets(N))
    b1200 = next(b for b in fine if 1200 in b)
    assert gemm_dynamic.plan_bucket(b1200, N, K, "bf16", "nt", "bf16", Fusion(), device).config == (
        gemm_cost.choose_config(1200, N, K, 2, device))
    monkeypatch.setattr(gemm_dynamic, "REFINE_BUCKETS", False)
    assert gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", device) == gemm_dynamic.dynamic_buckets(N)


@pytest.mark.parametrize("N, K, out_dtype", [(3584, 18944, "bf16"), (4608, 3584, "f32"), (5120, 5120, "bf16")])
def test_a_coalesced_bucket_runs_the_plan_each_of_its_parts_had(N, K, out_dtype, monkeypatch):
    """``coalesced`` joins only ``refined``'s neighbouring parts of one coarse bucket: every bucket is a run of whole
    parts, and a joined one's plan (``plan_bucket``: its config, its epilogue) is the one each part had (Qwen2.5-7B
    down, its QKV with f32 out, Phi-3 o on the H100: 5, 4 and 1 joins). Without the narrow swapped parts
    (``WEIGH_SWAP_NARROW``: ``narrowed`` cuts its range before ``refined``; its own tests: test_sm90_swap_narrow.py)."""
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", False)
    device = devices.DEVICES["H100"]
    fine, joins = gemm_dynamic.dynamic_buckets(N, K, "bf16", out_dtype, device), 0

    def config(b):
        return gemm_dynamic.plan_bucket(b, N, K, "bf16", "nt", out_dtype, Fusion(), device).config

    for coarse in gemm_dynamic.dynamic_buckets(N):
        parts = gemm_dynamic.refined(coarse, N, K, "bf16", gemm_dynamic.out_bytes(out_dtype), device)
        edges = {p.hi for p in parts}
        for b in (b for b in fine if coarse.lo <= b.lo <= coarse.hi):
            assert b.hi in edges and (b.lo == coarse.lo or b.lo - 1 in edges), (coarse, b)
            inside = [p for p in parts if b.lo <= p.lo and p.hi <= b.hi]
            joins += len(inside) - 1
            assert all(config(p) == config(b) for p in inside), (b, inside)
    assert joins == {3584: 5, 4608: 4, 5120: 1}[N]


def test_without_decode_keeps_the_first_bucket_runs_the_sm90_kernel(monkeypatch):
    monkeypatch.setattr(gemm_target, "DECODE_KEEPS", False)
    p = gemm.plan(LLAMA, "sm90", m=3)
    assert isinstance(p, Sm90Plan) and p.dynamic_m == MBucket(1, 16) and p.config.block_m == 64


def test_a_range_plan_bounds_every_m_s_loss_where_the_largest_m_s_plan_does_not():
    # Qwen2.5-7B's down projection over 257..1024 (the shared bucket): planned at M = 1024 alone, M = 257 runs
    # 1.9x its own best by the model (2.5x before the 224-column tile); planned over the range, no sample loses
    # more than the range plan's worst
    device = devices.DEVICES["H100"]
    N, K, samples = 3584, 18944, gemm_cost.range_samples(257, 1024)
    assert samples == (257, 363, 513, 725, 1024)
    best = {m: gemm_cost.ranked(m, N, K, 2, device)[0][0] for m in samples}

    def worst(cfg):
        return max(gemm_cost.estimate(cfg, m, N, K, 2, device).total / best[m] for m in samples)

    at_top, over = gemm_cost.choose_config(1024, N, K, 2, device), gemm_cost.choose_for_range(257, 1024, N, K, 2, device)
    assert worst(at_top) > 1.8 and worst(over) < 1.7
    for _, cfg in gemm_cost.ranked(1024, N, K, 2, device):  # the least worst loss of every candidate
        assert worst(over) <= worst(cfg) + 1e-9
    assert gemm_cost.choose_for_range(300, 300, N, K, 2, device) == gemm_cost.choose_config(300, N, K, 2, device)


def test_plan_and_choose_at_a_run_time_m():
    p = gemm.plan(LLAMA, "sm90", m=300)
    assert p.dynamic_m == MBucket(257, 320) and gemm.choose(LLAMA, "sm90", m=300) == p.config  # FINE_CUTS: 257..384 cut
    assert gemm.plan(GemmProblem(None, 200, 264, "bf16", "nt", "f32", Fusion(bias=True)), "sm90", m=77).params[3].name == "bias"


@pytest.mark.parametrize("call, operand, check", [
    (lambda: gemm.build(LLAMA, "sm90", Sm90Config()), "config", "parameters"),   # every bucket is the cost model's
    (lambda: gemm.plan(LLAMA, "sm90", m=m_limit(4096) + 1), "A", "shape"),       # C's 32-bit offsets
    (lambda: gemm.build(GemmProblem(None, 64, 64, "bf16", "nn"), "sm90"), "layout", "layout"),
    (lambda: gemm.build(GemmProblem(None, 64, 68, "f16", "nt"), "sm90"), "K", "alignment"),
    (lambda: gemm.build(GemmProblem(None, 2**31, 64, "f16", "nt"), "sm90"), "C", "shape"),
])
def test_what_dynamic_m_cannot_do_is_refused_naming_the_operand(call, operand, check):
    with pytest.raises(ContractError) as e:
        call()
    assert e.value.operand == operand and e.value.check == check


@pytest.fixture(scope="module")
def dynamic_plan():
    problem = GemmProblem(None, 200, 264, "bf16", "nt", "bf16", Fusion(bias=True, activation="silu", residual=True))
    with pytest.MonkeyPatch.context() as mp:  # the unswapped kernel (the swapped one: test_sm90_swap_dynamic)
        mp.setattr(gemm_cost, "WEIGH_SWAP", False)
        return gemm.plan(problem, "sm90", m=77)


def test_the_kernel_takes_m_and_the_host_encodes_as_map_with_it(dynamic_plan):
    script = gemm.emit(dynamic_plan).script()
    assert "def main[M](A: T.Tensor((M, 264)" in script
    assert "tensormap_encode_tiled(mapA, T.address_of(A[0, 0]), 264, M, 528," in script
    assert "tensormap_encode_tiled(mapB, T.address_of(B[0, 0]), 264, 200, 528," in script
    assert "T.device_entry(T.min(T.Div(M + 63, 64) * " in script  # the persistent grid: min(tiles, SMs)
    source = gemm_target.build_plan(dynamic_plan, cache=False).source
    assert "CUtensorMap mapB, nv_bfloat16* __restrict__ residual_ptr, int M)" in source


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_nvcc_assembles_the_dynamic_m_kernel_for_sm_90a(dynamic_plan, tmp_path):
    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    (tmp_path / "k.cu").write_text(gemm_target.build_plan(dynamic_plan).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "C7508" not in done.stderr and "0 bytes spill stores" in done.stderr


def test_emit_config_of_a_dynamic_m_problem(capsys):
    assert main(["gemm", "--target", "sm90", "--dynamic-m", "-M", "100", "-N", "4096", "-K", "4096", "--dtype", "bf16",
                 "--out-dtype", "bf16", "--emit", "config"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["target"], out["M"], out["m_bucket"], out["planned_at_m"]) == ("sm90", "M", [97, 128], 128)
    assert out["planned_over_m"] == [97, 128]
    # unswapped (gemm_cost.WEIGH_SWAP_DYNAMIC: the buckets' swapped plans timed slower through the torch op)
    assert out["grid"] == "T.min(T.Div(M + 63, 64) * 64, 132)" and out["config"]["block_m"] == 64
    assert out["config"]["swap_ab"] is False
    assert out["buckets"][0] == "1-16" and out["buckets"][-1] == f"8193-{m_limit(4096)}"


def test_fine_cuts_cut_a_bucket_too_narrow_for_cut_rows_at_fine_cut_rows(monkeypatch):
    # Phi-3-medium down on the H100: 257..384 is one CUT_ROWS wide and its plan (128x120, two consumers) loses 1.08x
    # by the model at M = 300 against the 64-row tile of 257..320; FINE_CUTS cuts it at 320, every other bucket and
    # Qwen2.5-7B QKV's (whose plan loses no more than REGRET_MAX there) stay as they were
    device = devices.DEVICES["H100"]
    phi, qkv = (5120, 17920), (4608, 3584)
    monkeypatch.setattr(gemm_dynamic, "FINE_CUTS", False)
    before = {p: gemm_dynamic.dynamic_buckets(*p, "bf16", "bf16", device) for p in (phi, qkv)}
    monkeypatch.setattr(gemm_dynamic, "FINE_CUTS", True)
    after = {p: gemm_dynamic.dynamic_buckets(*p, "bf16", "bf16", device) for p in (phi, qkv)}
    assert after[qkv] == before[qkv]
    assert [b for b in after[phi] if b not in before[phi]] == [MBucket(257, 320), MBucket(321, 384)]
    assert [b for b in before[phi] if b not in after[phi]] == [MBucket(257, 384)]
    assert all(a.hi + 1 == b.lo for a, b in zip(after[phi], after[phi][1:]))

    def plan(b):
        return gemm_dynamic.plan_bucket(b, *phi, "bf16", "nt", "bf16", Fusion(), device).config

    old, new = plan(MBucket(257, 384)), plan(MBucket(257, 320))
    assert (old.block_m, old.consumers, new.block_m, new.consumers) == (128, 2, 64, 1)
    gain = (gemm_cost.estimate(old, 300, *phi, 2, device).total / gemm_cost.estimate(new, 300, *phi, 2, device).total)
    assert 1.07 < gain < 1.10


def test_fine_cuts_cut_any_narrow_part_whose_plan_loses_not_only_257_384(monkeypatch):
    # the rule is general (FINE_CUTS' docstring): on the H100 a small N cuts a part of 769..1024 at a 64-row multiple
    # too, untimed there; the twelve projections of benchmarks/torch_gemm.py change at 257..384 only
    device = devices.DEVICES["H100"]
    got = {}
    for on in (False, True):
        monkeypatch.setattr(gemm_dynamic, "FINE_CUTS", on)
        got[on] = gemm_dynamic.dynamic_buckets(1024, 4096, "bf16", "bf16", device)
    assert [b for b in got[False] if b not in got[True]] == [MBucket(769, 896)]
    assert [b for b in got[True] if b not in got[False]] == [MBucket(769, 832), MBucket(833, 896)]
