"""Wave-friendly tile widths of the sm90 GEMM (docs/sm90_gemm.md "Tile widths"): ``block_n`` a multiple of 32
(160, 224: fewer tile-times on 132 SMs for N = 3584, 4608, 5120) with the TMA epilogue, whose last staging block
is 32 columns wide (64-byte swizzle, C's tail tensor map); the plan's rules, the host part's maps, the
emulator's validation of the tail at clipped edges, and the cost model's weighing of the widths."""

from __future__ import annotations

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_emit
from tvm_cdna4.kernels.sm90.gemm_plan import TAIL_SWIZZLE, Sm90Config

H100 = DEVICES["H100"]


def test_the_tma_epilogue_stages_a_32_column_tail_block():
    cfg = Sm90Config(128, 224, 3, 2, epilogue="tma")
    cfg.check(H100.smem_per_unit)  # 3 x 44 KB ring + 56 KB staging
    assert TAIL_SWIZZLE[32] == 64 and cfg.tail_columns == 32 and Sm90Config(128, 160, 5, 2, epilogue="tma").tail_columns == 32
    assert Sm90Config(128, 256, 3, 2, epilogue="tma").tail_columns == 0 == Sm90Config(128, 224, 3, 2).tail_columns
    assert cfg.staging_bytes() == 2 * 64 * 224 * 2  # three 64-column blocks and the tail: the whole tile, as before
    # any other multiple of 8: a tail of 16 columns 32-byte swizzled, of 8, 40, 48 columns unswizzled
    for block_n, tail, swizzle in ((176, 48, 0), (200, 8, 0), (72, 8, 0), (168, 40, 0), (80, 16, 32), (224, 32, 64)):
        wide = Sm90Config(128, block_n, 2, 2, epilogue="tma")
        wide.check(H100.smem_per_unit)
        assert (wide.tail_columns, wide.tail_swizzle) == (tail, swizzle)
    with pytest.raises(ContractError, match="config epilogue_tile"):  # chunks are whole blocks dividing the tile
        Sm90Config(128, 224, 3, 2, epilogue="tma", epilogue_tile=64).check(H100.smem_per_unit)


def test_n_3584_in_224_column_tiles_and_the_tail_maps_the_host_part_encodes():
    problem = GemmProblem(3000, 3584, 3584, "bf16", "nt", "bf16", Fusion(residual=True))
    p = gemm.plan(problem, "sm90", Sm90Config(128, 224, 3, 2, epilogue="tma", residual_read="tma"))
    assert (p.tiles_m, p.tiles_n, p.tiles) == (24, 16, 384)  # 2.91 waves on 132 SMs (128x256: 336 tiles, 2.55)
    assert p.smem_bytes == 3 * (128 + 224) * 64 * 2 + 2 * 64 * 224 * 2
    assert gemm_emit.tail_maps(p) == ("C", "residual")
    src = gemm_emit.signature_source(p)
    # C's and the residual's tail maps: boxes of 64 rows x 32 columns over the same tensors, 64-byte swizzle (2)
    for name in ("C", "residual"):
        assert (f"tensormap_encode_tiled(map{name}Tail, {name}.ptr_to([0, 0]), 3584, 3000, 7168, 32, 64, 1, 1, "
                f"descriptor_dtype='bfloat16', rank=2, swizzle=2") in src
    assert src.rstrip().endswith("(mapA, mapB, mapC, mapresidual, mapCTail, mapresidualTail,))")
    whole = gemm.plan(problem, "sm90", Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="tma"))
    assert gemm_emit.tail_maps(whole) == () and "Tail" not in gemm_emit.signature_source(whole)


@pytest.mark.parametrize("problem, config", [
    # N = 208 in one 224-column tile: the tail block (columns 192..223) clipped at C's edge, ragged M
    (GemmProblem(77, 208, 64, "bf16", "nt", "bf16"), Sm90Config(128, 224, 2, 2, epilogue="tma")),
    # 96-column tiles (a whole block and the tail) over N = 120 (the second tile's whole block clipped, its tail
    # past C), three row tiles, the fused epilogue with the residual loaded by TMA into the staging buffer (its
    # tail block through the residual's tail map)
    # (suite time: test_sm90_wave_widths validates a 104-wide tail with the same fused steps and TMA residual)
    pytest.param(GemmProblem(333, 120, 64, "bf16", "nt", "bf16",
                             Fusion(bias=True, activation="silu", residual=True, col_scale=True)),
                 Sm90Config(128, 96, 2, 2, epilogue="tma", residual_read="tma", activation_form="tanh"),
                 marks=pytest.mark.slow),
])
def test_the_emulator_validates_the_tail_block(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.ratio <= 1.0


def test_the_grouped_kernel_keeps_whole_blocks():
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.grouped_plan import check_grouped_config

    with pytest.raises(ContractError, match="grouped GEMM config epilogue: .*whole 64-column blocks") as e:
        check_grouped_config(Sm90Config(128, 224, 3, 2, epilogue="tma"))
    assert e.value.found == "block_n = 224, epilogue='tma'"
    check_grouped_config(Sm90Config(128, 224, 3, 2))  # stores from registers: any multiple of 8
    assert {c.block_n for c in gemm_cost.grouped_configs(4096, 3584, 2, H100)} == {256, 128, 192, 64}


MODEL_CHOICES = [  # (M, N, K): the model's tile before the 224 / 160 widths, and with them (H100)
    ((3000, 3584, 3584), 256, 224),   # Qwen2.5-7B o: 336 tiles of 256 (2.55 waves, run as 3) -> 384 of 224 (2.91)
    ((3000, 4608, 3584), 256, 224),   # qkv: 432 -> 504 tiles, 4 waves either way, each of 224 columns
    ((3000, 3584, 14336), 256, 224),  # Gemma-2-9B down
    ((768, 4608, 3584), 256, 224),    # Qwen2.5-7B qkv at M = 768: 108 tiles of 224, one wave
    ((768, 3584, 3584), 192, 192),    # o at M = 768: 114 tiles of 192, one wave; 96 of 224 keep it, wider each
    ((3000, 5120, 5120), 256, 256),   # Phi-3 o: 480 tiles of 256 (3.6 waves) beat 552 of 224 (4.2)
]


@pytest.mark.parametrize("shape, before, after", MODEL_CHOICES)
def test_the_cost_model_takes_the_224_column_tile_where_it_saves_a_wave(shape, before, after, monkeypatch):
    from tvm_cdna4.kernels.sm90 import gemm_cost

    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # CANDIDATES alone (the wave-fitting widths: test_sm90_wave_widths.py)

    assert (128, 224, 2) in gemm_cost.CANDIDATES and (128, 160, 2) in gemm_cost.CANDIDATES
    new = gemm_cost.choose_config(*shape, 2, H100)
    assert (new.block_m, new.block_n, new.consumers, new.epilogue) == (128, after, 2, "tma")
    monkeypatch.setattr(gemm_cost, "CANDIDATES", tuple(c for c in gemm_cost.CANDIDATES if c[1] % 64 == 0))
    old = gemm_cost.choose_config(*shape, 2, H100)
    assert old.block_n == before
    t_new, t_old = (gemm_cost.estimate(c, *shape, 2, H100).total for c in (new, old))
    assert t_new < t_old * 0.92 if after != before else t_new == t_old  # three of 224 vs three of 256: 9-10%


def test_the_tile_efficiency_falls_with_the_width_and_the_waves_decide():
    from tvm_cdna4.kernels.sm90 import gemm_cost

    eff = {bn: gemm_cost.efficiency(Sm90Config(128, bn, 3, 2)) / gemm_cost.TENSOR_EFFICIENCY for bn in (256, 224, 192, 160)}
    # per k-tile: 4 bn tensor clocks against (256 + 3 bn) shared-memory clocks (both tiles' TMA writes, the wgmma reads)
    assert eff == pytest.approx({bn: 4 * bn / (256 + 3 * bn) for bn in eff}) and eff[256] == 1.0
    assert eff[224] == pytest.approx(0.9655, abs=1e-4) and eff[160] == pytest.approx(0.8696, abs=1e-4)


@pytest.mark.slow  # a benchmark script's sweep (suite time)
def test_the_sweep_times_each_width_beside_the_choice_before_them(monkeypatch):
    import argparse

    from tvm_cdna4.kernels.sm90 import gemm_cost

    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # CANDIDATES alone (the wave-fitting widths: test_sm90_wave_widths.py)

    from benchmark_modules import benchmark_module

    sweep = benchmark_module("sm90_sweep")
    args = argparse.Namespace(models="qwen2.5-7b", ms="3000", widths="224,160")
    jobs = {(key[1], key[5]): cfg for key, _, cfg in sweep.width_jobs(args)}
    assert len(jobs) == 4 * 3  # four projections: the old choice, the best 224 and the best 160
    assert jobs[("o", "old")]["block_n"] == 256 and jobs[("o", "w224")]["block_n"] == 224
    assert jobs[("o", "w160")]["block_n"] == 160 and jobs[("o", "w224")]["epilogue"] == "tma"
    table = sweep.model_table(argparse.Namespace(models="qwen2.5-7b", ms="768,3000", widths="224,160", device="H100"))
    assert "| qwen2.5-7b | o | 3000 | 3584 | 3584 | 128x256/2 tma | 128x224/2 tma | 117.7 | 106.5 | 1.105 | 2561-3072 |" in (
        "\n".join(table))


@pytest.mark.slow  # nvcc's ptxas, ~3 s: the emulator tests above check the tail's layout
def test_ptxas_assembles_the_224_column_kernel_without_spills(tmp_path):
    import shutil
    import subprocess

    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    problem = GemmProblem(3000, 3584, 3584, "bf16", "nt", "bf16", Fusion(residual=True))
    p = gemm.plan(problem, "sm90", Sm90Config(128, 224, 3, 2, epilogue="tma", residual_read="tma"))
    (tmp_path / "k.cu").write_text(build_plan(p, cache=False).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 bytes spill stores" in done.stderr and "C7508" not in done.stderr


def test_the_bucket_edge_at_2560_gives_m_3000_the_224_column_tile(monkeypatch):
    # 2049..3072 as one bucket keeps 128x192 for N = 3584 (at M = 2049, 224 runs 2.06 waves, three tile-times);
    # 2561..3072 takes 224: by the model 1.19x at M = 3000 (the torch op's bucket, gemm_dynamic.EDGES)
    from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_dynamic

    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # CANDIDATES alone (the wave-fitting widths: test_sm90_wave_widths.py)

    bucket = next(b for b in gemm_dynamic.dynamic_buckets(3584) if 3000 in b)
    assert (bucket.lo, bucket.hi) == (2561, 3072) and 2560 in gemm_dynamic.EDGES
    for K in (3584, 18944):
        cfg = gemm_cost.choose_for_range(*gemm_dynamic.planned_range(bucket), 3584, K, 2, H100, m_max=bucket.hi)
        assert (cfg.block_n, cfg.epilogue) == (224, "tma")
        wide = gemm_cost.choose_for_range(2049, 3072, 3584, K, 2, H100)
        assert wide.block_n == 192 and gemm_cost.estimate(wide, 3000, 3584, K, 2, H100).total > 1.18 * (
            gemm_cost.estimate(cfg, 3000, 3584, K, 2, H100).total)


def test_a_dynamic_m_bucket_encodes_the_tail_map_at_the_run_time_m(monkeypatch):
    # the bucket's kernel (M the TIR variable): C's tail map over the run-time rows, validated at M = 77 of 65..96
    from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_target

    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # CANDIDATES alone (the wave-fitting widths: test_sm90_wave_widths.py)

    monkeypatch.setattr(gemm_target, "DECODE_KEEPS", False)
    monkeypatch.setattr(gemm_cost, "CANDIDATES", ((128, 224, 2),))  # the only tile weighed: N = 208 in one
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP", False)  # (the swapped kernel would take this small M)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", False)
    problem = GemmProblem(None, 208, 64, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", m=77)
    assert (p.config.block_n, p.config.epilogue, p.config.tail_columns) == (224, "tma", 32)
    assert "mapCTail, C.ptr_to([0, 0]), 208, p.M, 416, 32, 64" in gemm_emit.signature_source(p)
    v = gemm.validate(problem, "sm90", m=77)
    assert v.ok and v.ratio <= 1.0
