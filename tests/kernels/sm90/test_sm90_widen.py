"""benchmarks/sm90_widen.py's CPU parts (stop 52, "widen"): the wide-N shapes' plans and their model figures (rounds of
132 tiles, the last round's fill, the modelled DRAM bytes of the order), and every candidate config planned at its
shape and validated in the CUDA emulator at a small shape with the same config."""

from __future__ import annotations

import pytest

from tests.benchmark_modules import benchmark_module
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]


def rows_of(shape):
    widen = benchmark_module("sm90_widen")
    return {rank: widen.model_row(cfg, shape, H100) for rank, cfg in widen.configs(shape, H100).items()}


def test_the_bucket_of_3000x14336_runs_a_short_last_round_that_240_columns_fill():
    r = rows_of((3000, 14336, 3584))
    # the torch op's 2561..3072 bucket: 24 x 56 tiles, 10.18 rounds run as 11; the static choice 128x224 12 rounds
    assert (r["bucket"]["tile"], r["bucket"]["tiles"], r["bucket"]["rounds"]) == ("128x256 s3 m8", 1344, 11)
    assert r["bucket"]["useful"] == pytest.approx(1344 / (11 * 132) * 3000 / 3072)
    assert (r["static"]["tile"], r["static"]["tiles"], r["static"]["rounds"]) == ("128x224 s3 m8", 1536, 12)
    assert (r["w240"]["tiles"], r["w240"]["rounds"]) == (1440, 11) and r["w240"]["useful"] > 0.96 > 0.91 > r["bucket"]["useful"]
    assert r["w240"]["est_us"] < r["static"]["est_us"] < r["bucket"]["est_us"]
    # the order of least modelled bytes: 2.80x A + B once against group_m 8's 3.30x
    assert round(r["w240"]["ab_mb"]) == 410 and round(r["w240-m32"]["ab_mb"]) == 348
    assert r["w240-m32"]["ab_floor"] == pytest.approx(2.80, abs=0.01)
    assert r["w240-c2"]["tile"] == "128x240 s3 m8 c2" and r["w240-c2"]["rounds"] == 11


def test_768x37888_in_248_columns_fills_its_seventh_round():
    r = rows_of((768, 37888, 3584))
    assert "static" not in r  # the static choice is the bucket's
    assert (r["bucket"]["tiles"], r["bucket"]["rounds"]) == (888, 7) and r["bucket"]["useful"] == pytest.approx(888 / 924)
    assert (r["w248"]["tiles"], r["w248"]["rounds"]) == (918, 7) and r["w248"]["useful"] > 0.99
    assert r["s4"]["tile"] == "128x256 s4 et64 m8" and r["c2"]["rounds"] == 7
    # A is 5.5 MB: the order reads B once and A about 6 times, 1.12x the floor whatever the group
    assert r["bucket"]["ab_floor"] == pytest.approx(1.12, abs=0.01)


@pytest.mark.parametrize("shape", [s for s in benchmark_module("sm90_widen").SHAPES])
def test_every_candidate_plans_at_its_shape_on_an_h100(shape):
    widen = benchmark_module("sm90_widen")
    for rank, cfg in widen.configs(shape, H100).items():
        p = gemm.plan(GemmProblem(*shape, "bf16", "nt", "bf16"), "sm90", cfg, sms=H100.units)
        assert p.smem_bytes <= H100.smem_per_unit, rank


EMULATED = [  # (rank, a small problem): two column tiles (the second clipped), the ring past its stages where K allows
    ("w240", GemmProblem(40, 304, 320, "bf16", "nt", "bf16")),
    ("w240-m32", GemmProblem(260, 248, 64, "bf16", "nt", "bf16")),  # three tile rows, two columns, one group
    ("w240-c2", GemmProblem(200, 248, 64, "bf16", "nt", "bf16")),  # a cluster of the two tile rows
    ("w248", GemmProblem(40, 304, 320, "bf16", "nt", "bf16")),
    ("s4", GemmProblem(40, 304, 320, "bf16", "nt", "bf16")),
    ("c2", GemmProblem(200, 264, 64, "bf16", "nt", "bf16")),
    ("m32", GemmProblem(240, 264, 64, "bf16", "nt", "bf16")),  # two tile rows, two columns, one group
]


@pytest.mark.parametrize("rank, problem", [pytest.param(r, p, marks=pytest.mark.slow) for r, p in EMULATED],
                         ids=[r for r, _ in EMULATED])  # the wide-N candidates were timed and closed (stop 53)
def test_the_emulator_validates_each_candidate_config(rank, problem):
    widen = benchmark_module("sm90_widen")
    fields = {r: f for cands in widen.CANDIDATES.values() for r, f, _ in cands}
    v = gemm.validate(problem, "sm90", Sm90Config(**fields[rank]))
    assert v.ok and v.ratio <= 1.0


def test_every_candidate_is_emulated_and_has_a_reason():
    widen = benchmark_module("sm90_widen")
    ranks = [r for cands in widen.CANDIDATES.values() for r, _, _ in cands]
    assert sorted(ranks) == sorted(r for r, _ in EMULATED) and len(ranks) == len(set(ranks))
    assert all(len(c) <= 3 and all(len(why) > 40 for _, _, why in c) for c in widen.CANDIDATES.values())


def test_the_table_gives_each_contender_its_per_clock_over_cublas():
    widen = benchmark_module("sm90_widen")
    row = dict(M=768, N=37888, K=3584, ok=True, random_tflops=650.0, random_mhz=1500.0, random_watts=690.0,
               zeros_per_clock=0.8, kernel="nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN")
    cub = dict(row, contender="cuBLAS", random_per_clock=0.85, model=None)
    ours = dict(row, contender="w248", random_per_clock=0.833,
                model=rows_of((768, 37888, 3584))["w248"])
    lines = widen.table([ours, cub], "H100")
    assert lines[-2].startswith("| 768 | 37888 | 3584 | w248 | 128x248 s3 m8 | 7 | 0.992 | 310 | ")
    assert lines[-2].endswith("| 83.3 % | 80.0 % | 0.980 |")
    assert "| cuBLAS | nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN |" in lines[-1] and lines[-1].endswith("| 1.000 |")


def test_model_only_prints_every_shape_without_a_gpu(capsys):
    widen = benchmark_module("sm90_widen")
    assert widen.main(["--model-only", "--shapes", "3000x14336x3584,768x14336x4096"]) == 0
    out = capsys.readouterr().out
    assert "| 3000 | 14336 | 3584 | w240-c2 | 128x240 s3 m8 c2 | 1440 | 11 |" in out
    assert "| 768 | 14336 | 4096 | bucket | 128x224 s3 m8 | 384 | 3 |" in out


def test_main_times_every_built_config_beside_the_two_and_writes_each_shape(monkeypatch, tmp_path):
    # the GPU path's wiring without a GPU: the static kernels go to sm90_power.row_for as extra contenders, each row
    # gets its config's model figures (the torch op's: the bucket's) and cuBLAS's kernel names
    import sys
    import types

    widen, power = benchmark_module("sm90_widen"), benchmark_module("sm90_power")
    monkeypatch.setattr("tvm_cdna4.kernels.devices.planned", lambda target: H100)
    monkeypatch.setattr(widen, "built_kernels", lambda shapes, device, seconds: {
        (s, rank): (lambda x, w, y: None, cfg) if rank != "s4" else "CompileError: no"
        for s in shapes for rank, cfg in widen.configs(s, device).items()})
    monkeypatch.setattr(widen, "cublas_kernels", lambda torch, shape: ["nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN"])
    calls = []

    def row_for(torch, ours, shape, args, sms, extra=None):
        calls.append((shape, sorted(extra)))
        names = ["ours", "cuBLAS", *extra]
        return [dict(M=shape[0], N=shape[1], K=shape[2], contender=n, ok=True, err=0.0, random_tflops=600.0,
                     random_mhz=1500.0, random_watts=690.0, random_per_clock=0.8 if n != "cuBLAS" else 0.85,
                     zeros_per_clock=0.8) for n in names]

    monkeypatch.setattr(power, "row_for", row_for)
    monkeypatch.setitem(sys.modules, "sm90_power", power)
    widen.configs((768, 37888, 3584), H100)  # TIRx (and tvm_ffi, which reads torch's dtypes) imported before the fake
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: types.SimpleNamespace(
        name="H100", multi_processor_count=132)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "tvm_cdna4.torch", types.ModuleType("tvm_cdna4.torch"))
    assert widen.main(["--shapes", "768x37888x3584", "--out", str(tmp_path)]) == 0
    assert calls == [((768, 37888, 3584), ["bucket", "c2", "w248"])]  # s4 did not build: left out, said so
    md = (tmp_path / "sm90_widen.md").read_text()
    assert "| 768 | 37888 | 3584 | ours | 128x256 s3 m8 | 7 | 0.961 |" in md
    assert "| w248 | 128x248 s3 m8 | 7 | 0.992 |" in md and md.count("| 0.941 |") == 4
    assert "cuBLAS: 768x37888x3584 nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN" in md


@pytest.mark.slow
def test_moves_lists_the_bucket_plans_deeper_wave_widths_change():
    from tvm_cdna4.kernels.sm90 import gemm_cost

    widen = benchmark_module("sm90_widen")
    lines = widen.moved_lines(40, [768], H100)
    assert gemm_cost.MAX_WAVES == 4  # restored
    rows = [ln for ln in lines if ln.startswith("| ") and "---" not in ln][1:]
    assert [ln.split(" | ")[:3] for ln in rows] == [["| qwen2.5-7b", "gate_up", "768"],
                                                    ["| phi-3-medium", "gate_up", "768"]]
    assert "| 513..768 | 128x256 s3 m8 | 0.961 |" in rows[0] and "| 513..768 | 128x248 s3 m8 | 0.992 |" in rows[0]
    assert "| 128x240 s3 m8 | 0.970 |" in rows[1]


def test_deep_waves_offer_the_widths_that_fill_the_last_of_many_waves(monkeypatch):
    # gemm_cost.WEIGH_DEEP_WAVES (off): wave_widths fits widths up to DEEP_MAX_WAVES waves, not MAX_WAVES. 3000 x 14336
    # on 132 SMs (24 tile rows of 128): 128x240 is 60 columns, 1440 tiles filling 11 waves to 0.99 (128x256: 1344
    # tiles, 10.2 waves); 768 x 37888 (6 tile rows): 128x248 is 153 columns, 918 tiles, 6.95 waves (128x256: 6.73)
    from tvm_cdna4.kernels.sm90 import gemm_cost

    assert not gemm_cost.WEIGH_DEEP_WAVES and gemm_cost.DEEP_MAX_WAVES > gemm_cost.MAX_WAVES
    shallow = gemm_cost.wave_widths(3000, 14336, 132)
    assert (128, 240, 2) not in shallow
    assert gemm_cost.choose_config(768, 37888, 3584, 2, H100).block_n == 256
    monkeypatch.setattr(gemm_cost, "WEIGH_DEEP_WAVES", True)
    deep = gemm_cost.wave_widths(3000, 14336, 132)
    assert set(shallow) <= set(deep) and (128, 240, 2) in deep
    assert gemm_cost.choose_config(768, 37888, 3584, 2, H100).block_n == 248
