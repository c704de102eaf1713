"""The sm90 GEMM in clusters of two CTAs (``Sm90Config.cluster_m``, ``kernels/sm90/gemm_cluster.py``): the plan's
rules and tile order, the emitted launch and instructions, emulator-exact runs (a pair whose second tile row lies
past M, odd M / N / K, one and two consumers, ping-pong, the TMA epilogue with a TMA-read residual, dynamic M) and
a missing remote release or trailing cluster barrier reported by the emulator."""

from __future__ import annotations

import pytest
from hopper_kernels import dropping

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, b_shares, plan

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.parametrize("field, config", [
    ("cluster_m", Sm90Config(cluster_m=3)),
    ("cluster_m", Sm90Config(cluster_m=2, split_k=2)),
    ("cluster_m", Sm90Config(block_n=8, cluster_m=2)),  # one 8-row atom of B: no share for rank 1
    ("cluster_m", Sm90Config(cluster_m=2, ctas=5)),
])
def test_a_config_breaking_a_cluster_rule_names_cluster_m(field, config):
    with pytest.raises(ContractError, match=r"sm90 GEMM config cluster_m") as e:
        config.check(232448)
    assert e.value.operand == field


def test_a_cluster_takes_two_adjacent_tile_rows_of_one_column_and_the_grid_is_whole_clusters():
    p = gemm.plan(GemmProblem(300, 500, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 128, cluster_m=2, group_m=4),
                  sms=7)
    assert (p.tiles_m, p.tiles_n, p.units, p.ctas) == (3, 4, 16, 6)  # 3 tile rows in 2 pairs; 7 SMs: 3 clusters
    tiles = [p.tile_of(u, lambda a, b: a // b, lambda a, b: a % b, min) for u in range(p.units)]
    assert tiles[:6] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]  # pairs (0, 1), (2, 3): column-major
    assert sorted(tiles) == sorted((m, n) for m in range(4) for n in range(4))  # row 3 lies past M: zeros, clipped


def test_an_unclustered_plan_keeps_its_tile_order():
    p = gemm.plan(GemmProblem(300, 500, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 128, group_m=2), sms=7)
    tiles = [p.tile_of(u, lambda a, b: a // b, lambda a, b: a % b, min) for u in range(p.units)]
    assert (p.units, p.ctas) == (12, 7) and tiles[:5] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]


def test_the_clustered_kernel_launches_clusters_of_two_and_multicasts_half_of_b():
    p = gemm.plan(GemmProblem(300, 500, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 128, cluster_m=2), sms=8)
    text = gemm_target.emit(p).script()
    assert "T.device_entry(8, 1, 1, 384, 1, 1, 2, 1, 1," in text  # grid 8, block 384, cluster (2, 1, 1)
    assert text.count("multicast::cluster") == 1 and text.count('T.ptx.barrier("cluster", "arrive"') == 2
    assert text.count('"arrive", "", "", "shared::cluster"') == 2  # both releases, in the peer too (CUTLASS's .release.cta)
    assert '"release", "cluster", "shared::cluster"' not in text  # no cluster-scope fence every k-tile
    assert "T.address_of(MB[4 + s])), T.uint32(4)" in text  # each "empty" barrier: 2 consumers x 2 CTAs


@pytest.mark.parametrize("block_n, shares", [(128, (64, 64)), (168, (88, 80)), (72, (40, 32)), (136, (72, 64)),
                                             (16, (8, 8)), (8, (8, 0))])
def test_each_rank_multicasts_whole_swizzle_atoms_of_b_as_near_half_as_they_come(block_n, shares):
    assert b_shares(block_n, 2) == shares and b_shares(block_n, 1) == (block_n,)


def test_a_cluster_of_uneven_shares_loads_b_through_two_maps_each_rank_on_its_atom():
    p = gemm.plan(GemmProblem(300, 504, 128, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                  Sm90Config(128, 168, 2, 2, epilogue="tma", residual_read="tma", cluster_m=2), sms=8)
    text = gemm_target.emit(p).script()
    encodes = [line.split("(")[1].split(",")[0] for line in text.splitlines() if "tensormap_encode_tiled(" in line]
    # B1 (rank 1's 80 rows) after C's and the residual's maps, before the tail maps (168 = 2 x 64 + a 40-column tail)
    assert encodes == ["mapA", "mapB", "mapC", "mapresidual", "mapB1", "mapCTail", "mapresidualTail"]
    assert "mapB, T.address_of(B[0, 0]), 128, 504, 256, 64, 88, 1, 1," in text
    assert "mapB1, T.address_of(B[0, 0]), 128, 504, 256, 64, 80, 1, 1," in text
    assert text.count("multicast::cluster") == 2  # rank 0 through mapB, rank 1 through mapB1
    assert 'if T.truncmod(T.cuda.block_idx("x"), 2) == 0:' in text
    # rank 1's box: rows 88.. of the tile, at 88 rows x 128 bytes (11 atoms of 1024 bytes) into the stage's B
    assert 'n0 + T.truncmod(T.cuda.block_idx("x"), 2) * 88' in text
    assert 'T.truncmod(T.cuda.block_idx("x"), 2) * 88 * 64' in text
    # each CTA's "full" barrier expects the whole stage: A's 128 rows and both shares of B
    assert f"T.uint32({(128 + 168) * 128})" in text


def test_the_second_b_map_comes_after_the_residual_prefetch_map_and_before_the_tails():
    from tvm_cdna4.kernels.sm90.gemm_emit import signature_source

    p = gemm.plan(GemmProblem(77, 176, 136, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                  Sm90Config(128, 168, 2, 2, epilogue="tma", residual_read="prefetch", cluster_m=2))
    call = signature_source(p).splitlines()[-1]
    assert call.endswith("(mapA, mapB, mapC, mapresidualL2, mapB1, mapCTail,))")  # the prefetch's map at 2 + 1


def test_the_emulator_validates_a_clustered_plan():
    """M = 33 in one 64-row tile: the pair's second row lies wholly past M (zeros, no stores); odd N over two tile
    columns; K = 200: more k-tiles than stages (each producer waits on both CTAs' releases)."""
    v = gemm.validate(GemmProblem(33, 69, 200, "bf16", "nt", "f32"), "sm90", Sm90Config(64, 64, 2, 1, cluster_m=2))
    assert v.ok and v.where == EMULATOR and v.ratio == 0.0


@pytest.mark.parametrize("problem, config", [
    # 168 = 88 + 80 rows of B: odd N over two tile columns (the second's rank-1 share past N), the pair's second
    # row partly past M
    (GemmProblem(67, 171, 200, "bf16", "nt", "f32"), Sm90Config(64, 168, 2, 1, cluster_m=2)),
    # 72 = 40 + 32: the pair's second row wholly past M, three tile columns, the last 5 rows of N
    pytest.param(GemmProblem(33, 149, 136, "bf16", "nt", "f32"), Sm90Config(64, 72, 2, 1, cluster_m=2),
                 marks=pytest.mark.slow),  # suite time: the 168 case holds uneven shares, the clustered plan a pair past M
])
def test_the_emulator_validates_clusters_of_uneven_b_shares(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("problem, config", [
    # two consumers, odd M / N / K, the pair's second row past M
    (GemmProblem(67, 69, 264, "bf16", "nt", "f32"), Sm90Config(128, 64, 2, 2, cluster_m=2)),
    # one consumer, one cluster walking three tile rows (a ragged pair) x two columns, fused epilogue, bf16 C
    (GemmProblem(150, 100, 136, "bf16", "nt", "bf16", Fusion(bias=True, activation="gelu")),
     Sm90Config(64, 64, 2, 1, ctas=2, cluster_m=2)),
    # ping-pong: each CTA's consumers alternate tiles, each releases its stages in both CTAs
    (GemmProblem(130, 150, 128, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 2, ctas=2, schedule="pingpong", cluster_m=2)),
    # the TMA epilogue and the residual read with TMA into the staging buffer, f16
    (GemmProblem(77, 64, 200, "f16", "nt", "f16", Fusion(residual=True)),
     Sm90Config(128, 64, 2, 2, epilogue="tma", residual_read="tma", cluster_m=2)),
    # fp8 inputs: 128-element K tiles, the same 128-byte rows
    (GemmProblem(70, 48, 256, "fp8", "nt", "bf16"), Sm90Config(64, 48, 2, 1, cluster_m=2)),
    # uneven shares of B in fp8 (40 + 32 rows of 72, 128-element K tiles: B1's boxes 128 x 32) and in ping-pong
    (GemmProblem(70, 80, 256, "fp8", "nt", "bf16"), Sm90Config(64, 72, 2, 1, cluster_m=2)),
    (GemmProblem(130, 150, 128, "bf16", "nt", "f32"),
     Sm90Config(64, 72, 2, 2, ctas=2, schedule="pingpong", cluster_m=2)),
    # uneven shares of B with the residual prefetched into L2 through its own map (B1 after it)
    (GemmProblem(77, 176, 136, "bf16", "nt", "bf16", Fusion(residual=True)),
     Sm90Config(128, 168, 2, 2, epilogue="tma", residual_read="prefetch", cluster_m=2)),
    # uneven shares of B (88 + 80) with the TMA epilogue's tail maps after B1, a TMA-read residual
    (GemmProblem(77, 176, 136, "bf16", "nt", "bf16", Fusion(residual=True)),
     Sm90Config(128, 168, 2, 2, epilogue="tma", residual_read="tma", cluster_m=2)),
])
def test_the_emulator_validates_more_clustered_plans(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow
def test_the_emulator_validates_a_clustered_dynamic_m_kernel():
    p = plan(MBucket(1, 256), 72, 128, "bf16", "nt", "bf16", Sm90Config(64, 64, 2, 1, cluster_m=2), 132, 232448)
    assert p.dynamic_m is not None
    for m in (33, 130):
        data = random_inputs(GemmProblem(m, 72, 128, "bf16", "nt", "bf16"), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0


@pytest.mark.parametrize("op, nth, words", [
    # a consumer's release of a stage in the peer CTA: the peer's producer waits for it forever
    ("tirx.ptx.mbarrier_arrive_nocount", 1, r"deadlock: mbarrier 'MB' byte 16: .* 1 of 2 arrivals pending"),
    # the trailing cluster barrier's arrive: the wait cannot complete
    ("tirx.ptx.barrier_cluster_arrive", 2, r"deadlock: barrier.cluster.wait: 0 of 512 threads of the cluster arrived"),
])
def test_a_dropped_cluster_step_is_reported(op, nth, words):
    problem = GemmProblem(33, 41, 200, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", Sm90Config(64, 64, 2, 1, cluster_m=2))
    data = random_inputs(problem, 0)
    with pytest.raises(EmulationError, match=words):
        emulate(dropping(gemm_target.emit(p), op, nth), *data.arguments(p.params, data.output()), target="sm90")


def test_the_estimate_of_a_cluster_halves_each_ctas_b_bytes_and_pairs_the_tile_rows():
    import attrs

    from tvm_cdna4.kernels.devices import DEVICES
    from tvm_cdna4.kernels.sm90 import gemm_cost

    dev, one = DEVICES["H100"], Sm90Config(128, 256, 4, 2, ctas=8)
    two = attrs.evolve(one, cluster_m=2)
    # 5 tile rows of one column: 5 CTAs alone, 6 (3 pairs) in clusters: a sixth CTA's first stage to fill
    a, b = (gemm_cost.estimate(c, 640, 256, 4096, 2, dev) for c in (one, two))
    assert b.fill / a.fill == pytest.approx(6 / 5)
    # 8 CTAs streaming from L2 (a small grid): each CTA's bytes (A's 128 rows, B's 256, or 128 in a pair) bound it
    k, c_bytes = 4096, 128 * 256 * 2
    a, b = (gemm_cost.estimate(c, 1024, 256, k, 2, dev) for c in (one, two))
    assert b.memory / a.memory == pytest.approx(((128 + 128) * k * 2 + c_bytes) / ((128 + 256) * k * 2 + c_bytes))


def test_the_choice_weighs_clusters_only_when_asked():
    from tvm_cdna4.kernels.devices import DEVICES
    from tvm_cdna4.kernels.sm90 import gemm_cost

    dev = DEVICES["H100"]
    assert not gemm_cost.WEIGH_CLUSTER
    assert all(c.cluster_m == 1 for _, c in gemm_cost.ranked(3000, 4608, 3584, 2, dev))
    weighed = gemm_cost.ranked(3000, 4608, 3584, 2, dev, cluster=True)
    assert any(c.cluster_m == 2 for _, c in weighed)
    # the wave-fitting widths (multiples of 8, not of 16: gemm_cost.wave_widths) run in clusters too (b_shares)
    weighed = gemm_cost.ranked(768, 3584, 3584, 2, dev, cluster=True)
    assert (weighed[0][1].block_n, weighed[0][1].cluster_m) == (168, 2)


def test_the_grouped_kernel_refuses_a_cluster():
    from tvm_cdna4.kernels.sm90.grouped_plan import check_grouped_config

    with pytest.raises(ContractError, match="sm90 grouped GEMM config cluster_m") as e:
        check_grouped_config(Sm90Config(cluster_m=2))
    assert e.value.operand == "cluster_m"


@pytest.mark.slow  # suite time: run with TVM_CDNA4_SLOW=1
def test_nvcc_assembles_a_cluster_of_uneven_b_shares_for_sm_90a(tmp_path):
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    p = gemm.plan(GemmProblem(768, 3584, 3584, "bf16", "nt", "bf16"), "sm90",
                  Sm90Config(128, 168, 4, 2, epilogue="tma", cluster_m=2))
    (tmp_path / "k.cu").write_text(gemm_target.build_plan(p, cache=False).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 bytes spill stores" in done.stderr
