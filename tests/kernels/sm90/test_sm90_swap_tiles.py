"""Swapped dynamic-M plans with several tiles of M (issue 36, M = 96-256): a bucket weighs swapped tiles whose width
takes its largest M in up to ``gemm_cost.SWAP_M_TILES`` column tiles of C^T (``swap_widths``; cuBLAS runs M = 200 in
3 x 72 or 2 x 104 columns of tokens), where ``WEIGH_SWAP_DYNAMIC`` is on (off by default); the kernel counts M's
tiles at launch, zero-fills the activations' boxes past M and masks C^T's stores at M (validated in the CUDA emulator
by tests/kernels/sm90/test_sm90_swap_dynamic.py: M smaller than one tile, odd M, M over two and three tiles, one and two
consumers, a K split); the benchmark's A/B of the flag."""

from __future__ import annotations

import attrs
import pytest

from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.sm90 import gemm_cost

H100 = devices.DEVICES["H100"]


def test_a_bucket_weighs_swapped_widths_that_take_its_m_in_several_tiles(monkeypatch):
    # the default since stop 50: every M of the bucket in one tile (several tiles timed 0.87x unswapped at M = 200)
    assert gemm_cost.SWAP_M_TILES == 1 and gemm_cost.swap_widths(193, 256) == (256,)
    monkeypatch.setattr(gemm_cost, "SWAP_M_TILES", 4)
    # 193..256 at its samples 193, 207, 222, 239, 256: one tile of 256; two of 104..128; three of 72..88; four of 64
    assert gemm_cost.swap_widths(193, 256) == (256, 128, 120, 112, 104, 88, 80, 72, 64)
    assert gemm_cost.swap_widths(129, 192) == (192, 96, 88, 80, 72, 64)
    # 65..96: two tiles would be under WAVE_WIDTH_MIN columns (64x72 at M = 96 ran 0.57x cuBLAS): one tile only
    assert gemm_cost.swap_widths(65, 96) == (96,) and gemm_cost.swap_widths(17, 32) == (32,)


def test_the_swapped_bucket_candidates_take_several_tiles_of_m_only_where_the_flag_is_on(monkeypatch):
    monkeypatch.setattr(gemm_cost, "SWAP_DYNAMIC_MAX_M", gemm_cost.TMA_BOX_MAX)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", False)
        _, _, off = gemm_cost.range_candidates(193, 256, 4608, 3584, 2, H100)
    assert not any(cfg.swap_ab for cfg in off)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", True)
        mp.setattr(gemm_cost, "SWAP_M_TILES", 4)
        _, _, on = gemm_cost.range_candidates(193, 256, 4608, 3584, 2, H100)
        cfg = gemm_cost.choose_for_range(193, 256, 4608, 3584, 2, H100)
    swapped = [c for c in on if c.swap_ab]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "SWAP_M_TILES", 4)
        assert {c.block_n for c in swapped} == set(gemm_cost.swap_widths(193, 256))
    assert {c.block_m for c in swapped} == {64, 128, 256} and set(off) < set(on)
    assert cfg.swap_ab and -(-256 // cfg.block_n) > 1, cfg  # Qwen2.5-7B's QKV: a swapped tile of several M tiles


@pytest.fixture
def several_tiles(monkeypatch):
    """The swapped buckets' widths of several tiles of M (``SWAP_M_TILES`` 4, the default before stop 50)."""
    monkeypatch.setattr(gemm_cost, "SWAP_M_TILES", 4)
    monkeypatch.setattr(gemm_cost, "SWAP_DYNAMIC_MAX_M", gemm_cost.TMA_BOX_MAX)  # 193..256 weighs swapped tiles


def _walk(cfg, M, N, K):
    """The (tile row, tile column) of C^T each unit of ``cfg``'s persistent order takes at a static M."""
    import operator

    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90.gemm_plan import plan

    p = plan(M, N, K, "bf16", "nt", "bf16", cfg, H100.units, H100.smem_per_unit, Fusion())
    return [p.tile_of(u, operator.floordiv, operator.mod, min) for u in range(p.tiles_m * p.tiles_n)]


def test_a_swapped_bucket_plan_walks_a_weight_panels_token_tiles_on_adjacent_ctas(several_tiles):
    # Qwen2.5-7B's o projection, 193..256: the swapped plan of two token tiles (64x128); SWAP_PANEL_ADJACENT (stop 49,
    # swapmulti) walks C^T's tile columns fastest, so CTAs 2r and 2r + 1 read weight panel r at the same time, as the
    # unswapped small-M plans' row tiles do; before, raster "m" put them group_m (8) CTAs apart
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", True)
        cfg = gemm_cost.choose_for_range(193, 256, 3584, 3584, 2, H100)
        _, _, on = gemm_cost.range_candidates(193, 256, 3584, 3584, 2, H100)
        mp.setattr(gemm_cost, "SWAP_PANEL_ADJACENT", False)
        before = gemm_cost.choose_for_range(193, 256, 3584, 3584, 2, H100)
    assert (cfg.block_m, cfg.block_n, cfg.swap_ab, cfg.raster) == (64, 128, True, "n") and before.raster == "m"
    assert attrs.evolve(cfg, raster="m") == before  # only the walk differs
    assert _walk(cfg, 200, 3584, 3584)[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert _walk(before, 200, 3584, 3584)[:9] == [(r, 0) for r in range(8)] + [(0, 1)]
    # one token tile (M <= block_n): the same tiles in the same order either way
    assert _walk(cfg, 100, 3584, 3584) == _walk(before, 100, 3584, 3584)
    # every swapped candidate walks so, the unswapped ones are not moved
    assert {c.raster for c in on if c.swap_ab} == {"n"} and {c.raster for c in on if not c.swap_ab} == {"m"}


@pytest.mark.slow  # several token tiles a swapped bucket: timed and left off
def test_the_torch_benchmark_prints_both_settings_bucket_plans_and_estimates(capsys, several_tiles, monkeypatch):
    from benchmark_modules import benchmark_module
    from tvm_cdna4.kernels.sm90 import gemm_shift

    # the 193..256 bucket whole and unshifted, as when these were written (WEIGH_SWAP_NARROW, SHIFT_LAST: stop 53)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", False)
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", False)

    torch_gemm = benchmark_module("torch_gemm")
    argv = ["--plans", "--swap-dynamic", "off,on", "--models", "qwen2.5-7b", "--ms", "96,200", "--device", "H100"]
    assert torch_gemm.main(argv) == 0
    out = capsys.readouterr().out
    # QKV at 200: the unswapped 64x144 against 128x88 swapped (three tiles of M), the model's estimates in µs
    assert "| qwen2.5-7b | qkv | 4608 | 3584 | 200 (193-256) | 64x144 | **128x88 swap raster-n** | 20.4 | 19.4 | 1.05x |" in out
    assert "| qwen2.5-7b | gate_up | 37888 | 3584 | 200 (193-256) | 128x192 tma | 128x192 tma |" in out  # unchanged
    assert "| 200 | 3 of 4 |" in out and gemm_cost.WEIGH_SWAP_DYNAMIC is True  # the package's default restored


def test_the_torch_benchmark_prints_the_swapped_walks_bucket_plans(capsys, several_tiles, monkeypatch):
    from benchmark_modules import benchmark_module
    from tvm_cdna4.kernels.sm90 import gemm_shift

    # the 193..256 bucket whole and unshifted, as when these were written (WEIGH_SWAP_NARROW, SHIFT_LAST: stop 53)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", False)
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", False)

    torch_gemm = benchmark_module("torch_gemm")
    argv = ["--plans", "--swap-dynamic", "on", "--swap-order", "off,on", "--models", "qwen2.5-7b", "--ms", "200",
            "--projs", "o", "--device", "H100"]
    assert torch_gemm.main(argv) == 0
    out = capsys.readouterr().out  # the same tile and estimate, the walk of a weight panel's two token tiles moved
    assert "| qwen2.5-7b | o | 3584 | 3584 | 200 (193-256) | 64x128 swap | **64x128 swap raster-n** | 15.1 | 15.1 | 1.00x |" in out
    assert gemm_cost.SWAP_PANEL_ADJACENT is True and gemm_cost.WEIGH_SWAP_DYNAMIC is True  # the defaults restored


def test_the_torch_benchmark_ab_runs_one_process_per_setting_and_sets_them_side_by_side(tmp_path, monkeypatch, capsys):
    import json
    import subprocess

    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    commands = []

    def fake_run(cmd):  # each setting's run writes its rows (here: two rows, ours 20 / 16 µs, cuBLAS 18 µs)
        commands.append(cmd)
        s = cmd[cmd.index("--swap-dynamic") + 1]
        rows = [dict(model="qwen2.5-7b", proj=p, M=200, N=4608, K=3584, tile=f"{p} {s}", torch_graph_us=18.0,
                     ours_graph_us=20.0 if s == "off" else 16.0, speedup_graph=18.0 / (20.0 if s == "off" else 16.0),
                     ours_ok=True) for p in ("qkv", "o")]
        if s == "off":
            (tmp_path / f"torch_gemm_swapdyn_{s}.json").write_text(json.dumps(dict(meta={}, rows=rows)))
        else:  # a run cut short: only the rows it wrote as it went
            (tmp_path / f"torch_gemm_swapdyn_{s}.partial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return subprocess.CompletedProcess(cmd, 0 if s == "off" else 124)

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert torch_gemm.main(["--swap-dynamic", "off,on", "--ms", "200", "--out", str(tmp_path)]) == 0
    assert [c[c.index("--tag") + 1] for c in commands] == ["swapdyn_off", "swapdyn_on"]
    md = (tmp_path / "torch_gemm_swapdyn.md").read_text()
    assert "| qwen2.5-7b | qkv | 200 | 4608 | 3584 | qkv off | qkv on | 20.0 | 16.0 | 1.25x | 18.0 | 0.90x | 1.12x | yes |" in md
    assert "| 200 | 1.25x | 1.25x | 1.25x |" in md  # on over off, per M
    capsys.readouterr()


@pytest.mark.parametrize("adjacent, raster", [(False, "m"), (True, "n")])
def test_the_ncu_swapped_cases_profile_swapped_plans_of_several_token_tiles(monkeypatch, adjacent, raster):
    # ncu_cases.py gemm-m200-o-swapped-m / -n (gpu_stop45.sh swaporder-ncu) and gemm-m200-qkv-swapped: the rule they
    # were written for (every bucket to TMA_BOX_MAX, up to four tiles of M), not the default's unswapped 193..256
    from benchmark_modules import benchmark_module
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90 import gemm_dynamic

    for name in ("WEIGH_SWAP_DYNAMIC", "SWAP_DYNAMIC_MAX_M", "SWAP_M_TILES", "SWAP_PANEL_ADJACENT"):
        monkeypatch.setattr(gemm_cost, name, getattr(gemm_cost, name))  # restored after the case's rule sets them
    benchmark_module("ncu_cases").swapped_rule(adjacent)

    def bucket_plan(N, K):
        b = next(b for b in gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", H100) if 200 in b)
        return gemm_dynamic.plan_bucket(b, N, K, "bf16", "nt", "bf16", Fusion(), H100).config

    o, qkv = bucket_plan(3584, 3584), bucket_plan(4608, 3584)
    assert (o.swap_ab, o.block_m, o.block_n, o.raster) == (True, 64, 128, raster)  # two token tiles at M = 200
    assert (qkv.swap_ab, qkv.block_m, qkv.block_n) == (True, 128, 88)  # three
