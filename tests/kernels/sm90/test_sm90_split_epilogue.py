"""A K split's epilogue as the kernel runs it (``gemm_cost.WEIGH_SPLIT_EPILOGUE``, off by default until the torch op's
A/B on a GPU): C stored once a tile by the unit that gathers it, and the split configs from registers only; the
benchmarks that time it (``torch_gemm.py --split-epilogue``, ``sm90_sweep.py --peers``) and the check of it against
the H100's static timings (``sm90_fit.py --split-epilogue``). CPU only."""

import pytest

from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_dynamic, gemm_shift
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100, H200 = devices.DEVICES["H100"], devices.DEVICES["H200"]


@pytest.fixture
def split_epilogue(monkeypatch):
    monkeypatch.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", True)


def test_the_flag_is_on_by_default():
    # on since the torch op's A/B on an H100 (runs/torch_gemm_splitepi_h100_2026-12-07b.md: 1.14-1.33x where it moved)
    assert gemm_cost.WEIGH_SPLIT_EPILOGUE is True


def test_a_split_stores_c_once_a_tile_where_the_flag_is_on(monkeypatch):
    # Qwen2.5-7B's down at M = 200 in 128x256 tiles split 4 ways: 2 x 14 = 28 tiles, 112 units on 112 CTAs; the tile's
    # last slice alone stores C (gemm_emit.split_store), so the C epilogue is a quarter of every CTA storing a tile
    split = Sm90Config(128, 256, 4, 2, split_k=4)
    whole, hybrid = Sm90Config(128, 256, 4, 2), Sm90Config(128, 256, 3, 2, split_k=2, decomposition="hybrid")
    monkeypatch.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", False)
    off = [gemm_cost.estimate(c, M, 3584, 18944, 2, H100) for c, M in ((split, 200), (whole, 200), (hybrid, 3000))]
    monkeypatch.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", True)
    on = [gemm_cost.estimate(c, M, 3584, 18944, 2, H100) for c, M in ((split, 200), (whole, 200), (hybrid, 3000))]
    assert on[0].epilogue == pytest.approx(off[0].epilogue * 28 / 112)
    assert off[0].epilogue * 1e6 == pytest.approx(7.07, abs=0.01)
    assert (on[0].compute, on[0].memory, on[0].reduction) == (off[0].compute, off[0].memory, off[0].reduction)
    assert on[1:] == off[1:]  # unsplit and hybrid: every CTA stores its tiles, as before


def test_the_choice_gives_a_split_the_register_epilogue_where_the_flag_is_on(split_epilogue):
    on = gemm_cost.ranked(200, 3584, 18944, 2, H200)
    assert not any(c.split_k > 1 and c.epilogue == "tma" and c.decomposition == "split-k" for _, c in on)
    assert any(c.split_k > 1 for _, c in on) and any(c.epilogue == "tma" and c.split_k == 1 for _, c in on)
    # the torch op's 193..256 bucket of Qwen2.5-7B's down on the H200's DeviceSpec (what the H100 runs of 2026-12-07
    # planned with): 128x224 /k4 with TMA stores and a 3-stage ring, now the same split from registers with 5 stages
    cfg = gemm_cost.choose_for_range(193, 256, 3584, 18944, 2, H200)
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.epilogue, cfg.stages) == (128, 224, 4, "registers", 5)


def test_the_bucket_plans_the_flag_moves_are_the_down_projections_splits(monkeypatch):
    from benchmark_modules import benchmark_module

    monkeypatch.setattr(gemm_dynamic, "REFINE_BUCKETS", False)  # the coarse buckets the A/B of 2026-12-07 ran,
    monkeypatch.setattr(gemm_cost, "SPLIT_IN_ONE_WAVE", False)  # and its splits past one wave
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)  # and its TMA-store plans unshifted
    models = ["qwen2.5-7b", "gemma-2-9b", "phi-3-medium"]
    rows = benchmark_module("torch_gemm").swap_plan_rows(models, [96, 200, 400, 1200], ["off", "on"], "H100",
                                                         "split_epilogue")
    moved = {(r["model"], r["proj"], r["M"]): (r["plan_off"], r["plan_on"])
             for r in rows if r["plan_off"] != r["plan_on"]}
    assert moved == {("qwen2.5-7b", "down", 400): ("128x224 /k2 tma", "128x112 tma"),
                     ("qwen2.5-7b", "down", 1200): ("128x256 /k2 tma", "128x256 /k2 shift"),
                     ("gemma-2-9b", "down", 1200): ("128x256 /k2 tma", "128x128 tma")}
    assert gemm_cost.WEIGH_SPLIT_EPILOGUE is True  # restored


def test_the_flag_fits_the_split_timings_better_and_the_pairs_say_why():
    from benchmark_modules import benchmark_module

    fit = benchmark_module("sm90_fit")
    data = fit.split_timings()
    split = [t for t in data if t[0].decomposition == "split-k"]
    pairs = fit.split_pairs(data)
    assert len(split) == 32 and len(pairs) == 8
    # TMA's staging left 3 stages against the register epilogue's 4 on four of them: TMA 8-18 % slower there, while the
    # estimate (flag off) had it 3-6 % faster
    def est(cfg, M, N, K):
        return gemm_cost.estimate(cfg, M, N, K, 2, H100).total

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", False)
        shallow = [(t_us / r_us, est(t, M, N, K) / est(r, M, N, K)) for M, N, K, t, t_us, r, r_us in pairs if t.stages == 3]
        off = fit.errors(gemm_cost, split, H100)[0]
    assert len(shallow) == 4 and all(1.07 < measured < 1.19 and est < 0.97 for measured, est in shallow)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", True)
        on = fit.errors(gemm_cost, split, H100)[0]
    assert on < off and off == pytest.approx(0.075, abs=0.001) and on == pytest.approx(0.067, abs=0.001)


@pytest.mark.slow  # WEIGH_SPLIT_EPILOGUE timed and left off
def test_the_torch_benchmark_prints_the_split_epilogue_plans_and_refuses_two_ab(capsys):
    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    argv = ["--plans", "--split-epilogue", "off,on", "--ms", "96,200", "--projs", "down", "--device", "H200",
            "--swap-dynamic", "off"]  # the unswapped buckets (65..96 weighs the swapped kernel: WEIGH_SWAP_DYNAMIC)
    assert torch_gemm.main(argv) == 0
    out = capsys.readouterr().out
    assert "| qwen2.5-7b | down | 3584 | 18944 | 200 (193-256) | 128x224 /k4 tma | **128x224 /k4 shift** |" in out
    assert "| phi-3-medium | down | 5120 | 17920 | 96 (65-96) | 128x128 /k3 tma | **128x128 /k3 shift** |" in out
    assert "| gemma-2-9b | down | 3584 | 14336 | 200 (193-256) | 64x112 shift | 64x112 shift |" in out and "| qkv |" not in out
    assert "| 200 | 2 of 3 |" in out and gemm_cost.WEIGH_SPLIT_EPILOGUE is True
    with pytest.raises(SystemExit, match="one of them may take two settings"):
        torch_gemm.main(["--plans", "--split-epilogue", "off,on", "--swap-dynamic", "off,on"])


def test_the_plain_plans_table_plans_for_the_device_named(capsys):
    """``--plans --device H100`` without a switch's settings: the bucket plans made with the H100's figures (the option
    was read only beside a switch's A/B, and the table silently showed the planned GPU's: the H200 here)."""
    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    rows = {}
    for device in ("H100", "H200"):
        assert torch_gemm.main(["--plans", "--ms", "200", "--models", "qwen2.5-7b", "--device", device]) == 0
        rows[device] = next(r for r in capsys.readouterr().out.splitlines() if "| down |" in r)
    assert rows == {"H100": "| qwen2.5-7b | down | 3584 | 18944 | 64x112 shift (193-256) |",
                    "H200": "| qwen2.5-7b | down | 3584 | 18944 | 128x224 /k4 shift (193-256) |"}


def test_the_ab_passes_the_other_switch_to_both_runs(tmp_path, monkeypatch):
    import json
    import subprocess

    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    commands = []

    def fake_run(cmd):
        commands.append(cmd)
        s = cmd[cmd.index("--split-epilogue") + 1]
        rows = [dict(model="qwen2.5-7b", proj="down", M=200, N=3584, K=18944, tile=s, torch_graph_us=61.0,
                     ours_graph_us=90.0 if s == "off" else 80.0, speedup_graph=61.0 / (90.0 if s == "off" else 80.0),
                     ours_ok=True)]
        (tmp_path / f"torch_gemm_splitepi_{s}.json").write_text(json.dumps(dict(meta={}, rows=rows)))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    argv = ["--split-epilogue", "off,on", "--swap-dynamic", "off", "--projs", "down", "--ms", "200",
            "--out", str(tmp_path)]
    assert torch_gemm.main(argv) == 0
    assert [c[c.index("--tag") + 1] for c in commands] == ["splitepi_off", "splitepi_on"]
    assert all(c[c.index("--swap-dynamic") + 1] == "off" and c[c.index("--projs") + 1] == "down" for c in commands)
    md = (tmp_path / "torch_gemm_splitepi.md").read_text()
    row = "| qwen2.5-7b | down | 200 | 3584 | 18944 | off | on | 90.0 | 80.0 | 1.12x | 61.0 | 0.68x | 0.76x | yes |"
    assert row in md
    meta = json.loads((tmp_path / "torch_gemm_splitepi.json").read_text())["meta"]
    assert meta["switch"] == "WEIGH_SPLIT_EPILOGUE" and meta["fixed"] == {"swap_dynamic": "off"}


def test_the_peer_sweep_puts_cublas_tiles_in_our_swapped_kernel(capsys):
    from benchmark_modules import benchmark_module

    sweep = benchmark_module("sm90_sweep")
    # cuBLAS's Qwen2.5-7B down at M = 200: 128 rows of N x 104 tokens, 7 stages, a 4x2 cluster, its K split in two
    name = sweep.peer_kernel("qwen2.5-7b", "down", 200)
    assert name.startswith("nvjet_sm90_tst_128x104_64x7_4x2")
    (rank, cfg), = sweep.peer_configs(name, 200, 3584, 18944, H100)
    assert rank == "peer" and (cfg.block_m, cfg.block_n, cfg.split_k, cfg.swap_ab, cfg.stages) == (128, 104, 2, True, 7)
    # the o projection's 64x104 at cuBLAS's 10 stages beside our deepest 8; gate_up's 192-row tile: none (96 rows a
    # consumer)
    o = sweep.peer_configs(sweep.peer_kernel("qwen2.5-7b", "o", 200), 200, 3584, 3584, H100)
    assert [(r, c.block_m, c.block_n, c.consumers, c.stages) for r, c in o] == [("peer", 64, 104, 1, 8),
                                                                             ("peer-deep", 64, 104, 1, 10)]
    assert sweep.peer_configs(sweep.peer_kernel("qwen2.5-7b", "gate_up", 200), 200, 37888, 3584, H100) == []
    assert sweep.main(["--peers", "--model-only", "--device", "H100", "--models", "qwen2.5-7b", "--projs", "o",
                       "--ms", "200"]) == 0
    out = capsys.readouterr().out
    assert "| qwen2.5-7b | o | 200 | bucket=bucket-split=model | 64x112/1 registers | 8 | 16.7 |" in out
    assert "| qwen2.5-7b | o | 200 | peer | 64x104/1 registers swap | 8 | 14.1 |" in out


@pytest.mark.slow  # 12 s in the emulator; split-K register epilogues run exactly in test_sm90_shift_last / test_sm90_split_k
def test_the_moved_plan_runs_exactly_in_the_emulator():
    # the flag's plan of Qwen2.5-7B's 193..256 bucket (128x224 in four K slices, the register epilogue, 5 stages) on a
    # problem the emulator runs in seconds: M = 200 of the bucket, a ragged second column tile, slices of one k-tile
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.sm90.gemm_emit import emit
    from tvm_cdna4.kernels.sm90.gemm_plan import plan

    cfg = Sm90Config(128, 224, 5, 2, split_k=4)
    p = plan(MBucket(193, 256), 232, 200, "bf16", "nt", "bf16", cfg, H100.units, H100.smem_per_unit)
    data = random_inputs(GemmProblem(200, 232, 200, "bf16", "nt", "bf16"), seed=5)
    c = data.output()
    args = data.arguments(p.params, c)
    emulate(emit(p), *args, target="sm90")
    assert data.ratio(c) <= 1.0 and not args[-1].any()  # exact to bf16's bound; the tickets left zero
