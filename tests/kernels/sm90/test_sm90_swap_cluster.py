"""The swapped sm90 GEMM (``Sm90Config.swap_ab``) in clusters of two CTAs (``cluster_m`` = 2): the pair is two tile
columns (token tiles) of one tile row and the weights, the kernel's A role, are multicast (``Sm90Config.multicast``):
the plan's rules and tile order, the emitted loads, emulator-exact runs (a token tile partly and a pair's second
wholly past M, one and two consumers, ping-pong, fp8, a fused epilogue, dynamic M), a dropped remote release
reported, and the cost model's halved weight bytes a CTA."""

from __future__ import annotations

import attrs
import pytest
from hopper_kernels import dropping

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_order, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

EMULATOR = "the CUDA emulator (no GPU runner)"


def py_tiles(p):
    return [p.tile_of(u, lambda a, b: a // b, lambda a, b: a % b, min) for u in range(p.units)]


def test_a_swapped_cluster_multicasts_the_weights_half_of_block_m_a_rank():
    two = Sm90Config(128, 104, 4, 2, swap_ab=True, cluster_m=2)
    two.check(232448)
    assert (two.multicast, two.multicast_rows, two.shares) == ("A", 128, (64, 64))
    one = Sm90Config(128, 104, 4, 2, cluster_m=2)
    assert (one.multicast, one.multicast_rows, one.shares) == ("B", 104, (56, 48))


def test_a_swapped_cluster_refuses_a_k_split_naming_the_multicast_operand():
    with pytest.raises(ContractError, match=r"sm90 GEMM config cluster_m: .*\(multicast: the kernel's A role\)") as e:
        Sm90Config(64, 104, 4, 1, swap_ab=True, split_k=2, cluster_m=2).check(232448)
    assert e.value.operand == "cluster_m" and e.value.found == "split_k=2, swap_ab=True, multicast='A'"


def test_a_swapped_cluster_takes_two_token_tiles_of_one_weight_panel():
    # C^T: 130 rows of N in 3 tile rows of 64, M = 100 in 3 token tiles of 48 (the third partly past M), in 2 pairs
    # (the second pair's second column wholly past M): 3 x 4 units, 8 SMs: 4 clusters
    p = gemm.plan(GemmProblem(100, 130, 136, "bf16", "nt", "f32"), "sm90",
                  Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2), sms=8)
    assert (p.tiles_m, p.tiles_n, p.units, p.ctas) == (3, 3, 12, 8)
    tiles = py_tiles(p)
    assert tiles[:6] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]  # a cluster: one tile row, columns 2q, 2q + 1
    assert sorted(tiles) == sorted((m, n) for m in range(3) for n in range(4))
    p = gemm.plan(GemmProblem(200, 300, 64, "bf16", "nt", "f32"), "sm90",
                  Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2, raster="n", group_m=4), sms=8)
    tiles = py_tiles(p)  # raster n: group_m / 2 = 2 pairs of token tiles a group, row-major inside the group
    assert tiles[:8] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert sorted(tiles) == sorted((m, n) for m in range(p.tiles_m) for n in range(6))


@pytest.mark.parametrize("cfg", [Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2, group_m=2),
                                 Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2, group_m=4, raster="n")])
def test_the_order_model_counts_the_panels_a_swapped_cluster_walks(cfg):
    p = gemm.plan(GemmProblem(200, 700, 64, "bf16", "nt", "f32"), "sm90", cfg)
    tiles = py_tiles(p)
    for ctas in (8, 12, 40):
        for lo in range(0, p.units, ctas):
            wave = [t for t in tiles[lo:lo + ctas] if t[1] < p.tiles_n]
            got = gemm_order.tile_panels(cfg, p.tiles_m, p.tiles_n, lo, min(p.units, lo + ctas))
            assert got == ({r for r, _ in wave}, {c for _, c in wave}), (ctas, lo)


def test_the_swapped_cluster_multicasts_each_ranks_half_of_the_weight_box():
    p = gemm.plan(GemmProblem(200, 3584, 3584, "bf16", "nt", "bf16"), "sm90",
                  Sm90Config(64, 104, 4, 1, swap_ab=True, cluster_m=2), sms=132)
    assert (p.tiles_m, p.tiles_n, p.units, p.ctas) == (56, 2, 112, 112)
    text = gemm_target.emit(p).script()
    assert "T.device_entry(112, 1, 1, 256, 1, 1, 2, 1, 1," in text  # clusters of (2, 1, 1)
    # the weights' map (the kernel's A role) has boxes of a rank's 32 rows, the activations' the whole 104
    assert "mapB, T.address_of(B[0, 0]), 3584, 3584, 7168, 64, 32, 1, 1," in text
    assert "mapA, T.address_of(A[0, 0]), 3584, 200, 7168, 64, 104, 1, 1," in text
    assert text.count("multicast::cluster") == 1 and "mapB1" not in text
    # rank 1's 32 rows at 32 x 64 elements (4 atoms) into the stage's A, from row m0 + 32
    assert 'SMH[s_1 * 64 * 64 + T.truncmod(T.cuda.block_idx("x"), 2) * 32 * 64]' in text
    assert 'm0 + T.truncmod(T.cuda.block_idx("x"), 2) * 32' in text
    assert f"T.uint32({(64 + 104) * 128})" in text  # each "full" barrier expects the whole stage
    assert "T.address_of(MB[4 + s])), T.uint32(2)" in text  # each "empty" barrier: 1 consumer x 2 CTAs
    assert text.count('"arrive", "", "", "shared::cluster"') == 2  # both releases reach the peer


def test_the_emulator_validates_a_swapped_cluster_at_m_200():
    """M = 200 in cuBLAS's 104-wide token tiles: one pair, its second tile 96 columns; N = 72 over two 64-row weight
    tiles (the last 8 rows); K = 200: more k-tiles than stages (each producer waits on both CTAs' releases)."""
    v = gemm.validate(GemmProblem(200, 72, 200, "bf16", "nt", "f32"), "sm90",
                      Sm90Config(64, 104, 2, 1, swap_ab=True, cluster_m=2))
    assert v.ok and v.where == EMULATOR and v.ratio == 0.0


@pytest.mark.parametrize("problem, config", [
    # odd M: the third token tile partly past M, the second pair's second tile wholly past it; odd N
    pytest.param(GemmProblem(101, 130, 136, "bf16", "nt", "f32"), Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2),
                 marks=pytest.mark.slow),
    # two consumers (128 weight rows: 64 a rank), odd M / N / K, a bf16 C
    pytest.param(GemmProblem(67, 150, 264, "bf16", "nt", "bf16"), Sm90Config(128, 32, 2, 2, swap_ab=True, cluster_m=2),
                 marks=pytest.mark.slow),  # swapped clusters timed and left off (stop 50)
])
def test_the_emulator_validates_swapped_clusters(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("problem, config", [
    # ping-pong: each CTA's consumers alternate tiles, one cluster walking several pairs
    (GemmProblem(130, 150, 128, "bf16", "nt", "f32"),
     Sm90Config(128, 48, 2, 2, ctas=2, schedule="pingpong", swap_ab=True, cluster_m=2)),
    # fp8: 128-element K tiles of the same 128-byte rows; a fused bias + gelu into a bf16 C
    (GemmProblem(70, 80, 256, "fp8", "nt", "bf16"), Sm90Config(64, 40, 2, 1, swap_ab=True, cluster_m=2)),
    (GemmProblem(90, 100, 136, "bf16", "nt", "bf16", Fusion(bias=True, activation="gelu")),
     Sm90Config(64, 32, 2, 1, ctas=2, swap_ab=True, cluster_m=2)),
])
def test_the_emulator_validates_more_swapped_clusters(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow
def test_the_emulator_validates_a_swapped_clustered_dynamic_m_kernel():
    p = plan(MBucket(1, 256), 72, 128, "bf16", "nt", "bf16", Sm90Config(64, 48, 2, 1, swap_ab=True, cluster_m=2), 132,
             232448)
    assert p.dynamic_m is not None
    for m in (33, 130):  # one token tile (its pair's second past M); three (the second pair's second past M)
        data = random_inputs(GemmProblem(m, 72, 128, "bf16", "nt", "bf16"), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0


def test_a_dropped_remote_release_of_a_swapped_cluster_is_reported():
    problem = GemmProblem(60, 64, 200, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", Sm90Config(64, 32, 2, 1, swap_ab=True, cluster_m=2))
    data = random_inputs(problem, 0)
    with pytest.raises(EmulationError, match=r"deadlock: mbarrier 'MB' byte 16: .* 1 of 2 arrivals pending"):
        emulate(dropping(gemm_target.emit(p), "tirx.ptx.mbarrier_arrive_nocount", 1),
                *data.arguments(p.params, data.output()), target="sm90")


def test_the_estimate_of_a_swapped_cluster_halves_each_ctas_weight_bytes():
    from tvm_cdna4.kernels.devices import DEVICES
    from tvm_cdna4.kernels.sm90 import gemm_cost

    dev, one = DEVICES["H100"], Sm90Config(64, 104, 4, 1, ctas=8, swap_ab=True)
    two = attrs.evolve(one, cluster_m=2)
    # 8 CTAs streaming from L2: each CTA's bytes (the weights' 64 rows, 32 in a pair, and 104 token rows) bound it
    k, c_bytes = 3584, 64 * 104 * 2
    a, b = (gemm_cost.estimate(c, 200, 1024, k, 2, dev) for c in (one, two))
    assert b.memory / a.memory == pytest.approx(((32 + 104) * k * 2 + c_bytes) / ((64 + 104) * k * 2 + c_bytes))
    # M = 100: one token tile; in clusters its pair's second runs too (16 tile rows: 16 CTAs alone, 32 in pairs)
    a, b = (gemm_cost.estimate(attrs.evolve(c, ctas=0), 100, 1024, k, 2, dev) for c in (one, two))
    assert b.fill / a.fill == pytest.approx(2)


def test_the_choice_weighs_swapped_clusters_only_when_asked():
    from tvm_cdna4.kernels.devices import DEVICES
    from tvm_cdna4.kernels.sm90 import gemm_cost

    dev = DEVICES["H100"]
    assert not any(c.swap_ab and c.cluster_m == 2 for _, c in gemm_cost.ranked(200, 3584, 3584, 2, dev))
    weighed = gemm_cost.ranked(200, 3584, 3584, 2, dev, cluster=True)
    assert any(c.swap_ab and c.cluster_m == 2 for _, c in weighed)


def test_the_swap_cluster_sweep_times_each_tile_alone_and_in_pairs_of_token_tiles(capsys):
    from benchmark_modules import benchmark_module

    from tvm_cdna4.kernels.devices import DEVICES

    sweep = benchmark_module("sm90_sweep")
    args = sweep.argparse.Namespace(models="qwen2.5-7b", projs="o", ms="96,200", swap_tiles=sweep.SWAP_TILES)
    ranks = {(key[2], key[5]): cfg for key, _, cfg in sweep.swap_cluster_jobs(args, DEVICES["H100"])}
    # M = 200: two token tiles of 104 (c1 and c2), five of 48; the model's 200-wide tile is one (c1 only)
    assert {r for m, r in ranks if m == 200} == {"64x104/1 c1", "64x104/1 c2", "128x104/2 c1", "128x104/2 c2",
                                                  "64x48/1 c1", "64x48/1 c2", "model 64x200/1 c1"}
    assert (ranks[200, "64x104/1 c2"]["cluster_m"], ranks[200, "64x104/1 c2"]["swap_ab"]) == (2, True)
    assert {r for m, r in ranks if m == 96 and r.endswith("c2")} == {"64x48/1 c2"}  # 96 in one 104-wide tile
    rows = [dict(model="qwen2.5-7b", proj="o", M=200, N=3584, K=3584, rank=r, ok=True, us=us, cublas_us=13.9,
                 config={}) for r, us in (("64x104/1 c1", 15.3), ("64x104/1 c2", 13.9))]
    table = sweep.swap_cluster_summary(rows)
    assert "| qwen2.5-7b | o | 200 | 64x104/1 | 15.3 | 13.9 | 1.10x | 13.9 | 0.91x | 1.00x |" in table
    assert "| 200 | 1 | 1.101 | 1.10 | 1.10 |" in table


@pytest.mark.slow  # suite time: run with TVM_CDNA4_SLOW=1
@pytest.mark.parametrize("cfg", [Sm90Config(64, 104, 8, 1, swap_ab=True, cluster_m=2),
                                 Sm90Config(128, 104, 6, 2, swap_ab=True, cluster_m=2)])
def test_nvcc_assembles_a_swapped_cluster_for_sm_90a_without_spills(cfg, tmp_path):
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    p = gemm.plan(GemmProblem(200, 3584, 3584, "bf16", "nt", "bf16"), "sm90", cfg)
    (tmp_path / "k.cu").write_text(gemm_target.build_plan(p, cache=False).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 bytes spill stores" in done.stderr
