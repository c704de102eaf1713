"""The sm90 GEMM's trimmed loads (``Sm90Config.trim_loads``): a tile that runs past its operand's rows (A's past M,
B's past N; swapped, the roles') loads them in one box, the least of ``gemm_emit.trim_boxes`` (8, 16, ... rows, a map
of each) that holds the rows that exist, and arms its stage's "full" barrier with that box's bytes; the ring is zeroed
once so that the rows left hold data. Emulator-exact at odd M, N and K (one and two consumers, swapped, fp8, a K split, a TMA epilogue with a
staged residual, ping-pong, dynamic M), the contract, the emitted loads, and the planners' flag."""

from __future__ import annotations

import attrs
import pytest
from tvm_tirx.script import tirx as T

from tvm_cdna4.emulator import emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_dynamic, gemm_emit, gemm_plan, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import ATOM_ROWS, Sm90Config, plan

ALL = Fusion(row_scale=True, col_scale=True, bias=True, activation="silu", residual=True)

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.parametrize("problem, config", [
    # the second tile row 5 rows deep (A trimmed to one 8-row box), the second tile column 24 of 48 (B trimmed)
    (GemmProblem(133, 72, 200, "bf16", "nt", "f32"), Sm90Config(128, 48, 3, 2, trim_loads=True)),
    # M below one tile; N's last tile 24 rows; K not a multiple of 64 (the K tail still zero-filled)
    pytest.param(GemmProblem(5, 72, 136, "bf16", "nt", "bf16"), Sm90Config(64, 48, 2, 1, trim_loads=True),
                 marks=pytest.mark.slow),  # TRIM_LOADS timed and left off (stop 52)
    # swapped: the weights (the A role) past N, the tokens (the B role) past M
    pytest.param(GemmProblem(37, 150, 264, "bf16", "nt", "f32"), Sm90Config(64, 40, 2, 1, swap_ab=True, trim_loads=True),
                 marks=pytest.mark.slow),
])
def test_the_emulator_validates_trimmed_loads(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.parametrize("residual_read", [pytest.param("tma", marks=pytest.mark.slow),
                                           pytest.param("sliced", marks=pytest.mark.slow), "preread"])
def test_a_staged_residual_with_a_tail_block_reads_through_its_tail_map_under_trimmed_loads(residual_read):
    # block_n 48: a tail block of 48 columns, whose residual boxes come through the residual's tail map; the trimmed
    # loads' atom maps are the last two maps, so "the last map" is no longer the residual's tail map (review51: the
    # residual barrier waited for 5120 bytes that never came, a hang on the GPU; sliced: B's rows in the staging)
    problem = GemmProblem(70, 112, 128, "bf16", "nt", "bf16", Fusion(residual=True))
    config = Sm90Config(64, 48, 2, 1, epilogue="tma", residual_read=residual_read, trim_loads=True)
    assert config.tail_columns
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("problem, config", [
    (GemmProblem(70, 80, 256, "fp8", "nt", "bf16"), Sm90Config(64, 40, 2, 1, trim_loads=True)),
    (GemmProblem(130, 72, 384, "bf16", "nt", "f32"), Sm90Config(64, 48, 2, 1, split_k=2, trim_loads=True)),
    (GemmProblem(150, 136, 192, "bf16", "nt", "bf16", Fusion(residual=True)),
     Sm90Config(128, 64, 2, 2, epilogue="tma", residual_read="tma", trim_loads=True)),
    (GemmProblem(130, 150, 128, "bf16", "nt", "f32"),
     Sm90Config(128, 48, 2, 2, ctas=2, schedule="pingpong", trim_loads=True)),
])
def test_the_emulator_validates_more_trimmed_loads(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@T.macro
def nan_ring(p, SMH, tid):
    # gemm_emit.clear_ring with NaN (all-ones bits: bf16, f16 and both fp8 bytes) where it writes zeros
    for i in range(-(-p.staging // p.config.threads)):
        if tid + i * p.config.threads < p.staging:
            SMH[tid + i * p.config.threads] = T.reinterpret(T.uint16(0xFFFF), ty=p.smem_dtype)
    T.ptx["fence.proxy.async.shared::cta"]()


@pytest.mark.parametrize("problem, config", [
    (GemmProblem(70, 75, 136, "bf16", "nt", "bf16", ALL), Sm90Config(64, 48, 2, 1)),  # odd N: element stores
    (GemmProblem(37, 150, 136, "bf16", "nt", "bf16", ALL), Sm90Config(64, 40, 2, 1, swap_ab=True)),  # lane pairs
    (GemmProblem(70, 112, 128, "bf16", "nt", "bf16", Fusion(residual=True)),
     Sm90Config(64, 48, 2, 1, epilogue="tma", residual_read="sliced")),
    (GemmProblem(70, 80, 208, "fp8", "nt", "bf16", Fusion(row_scale=True, col_scale=True)), Sm90Config(64, 40, 2, 1)),
    pytest.param(GemmProblem(37, 150, 384, "bf16", "nt", "f32"), Sm90Config(64, 40, 2, 1, swap_ab=True, split_k=2),
                 marks=pytest.mark.slow),  # a pair's second element past M into W
    pytest.param(GemmProblem(70, 75, 384, "bf16", "nt", "f32"), Sm90Config(64, 48, 2, 1, split_k=2, reduction="atomic"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(133, 100, 256, "bf16", "nt", "bf16"),
                 Sm90Config(64, 48, 2, 1, split_k=2, decomposition="hybrid", ctas=4), marks=pytest.mark.slow),
    pytest.param(GemmProblem(130, 150, 128, "bf16", "nt", "bf16", ALL),
                 Sm90Config(64, 48, 2, 2, ctas=4, schedule="pingpong"), marks=pytest.mark.slow),
])
def test_stale_rows_of_nan_reach_no_stored_element(monkeypatch, problem, config):
    # the rows a trimmed load leaves feed only C's elements past M / N: with a ring of NaN (the CTAs' first tiles read
    # it where their loads stop) every epilogue, reduction and store still leaves C exact (review51)
    monkeypatch.setattr(gemm_emit, "clear_ring", nan_ring)
    v = gemm.validate(problem, "sm90", attrs.evolve(config, trim_loads=True))
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow  # TRIM_LOADS timed and left off (stop 52): its heavier cases run with slow
def test_a_trimmed_dynamic_m_kernel_is_exact_at_every_depth_of_its_last_tile():
    p = plan(MBucket(129, 256), 72, 128, "bf16", "nt", "bf16", Sm90Config(128, 48, 2, 2, trim_loads=True), 132, 232448)
    for m in (130, 200, 256):  # the last tile row 2, 72 and 128 rows deep
        data = random_inputs(GemmProblem(m, 72, 128, "bf16", "nt", "bf16"), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0


def test_trim_boxes_double_from_one_swizzle_atom_below_the_tile():
    assert gemm_emit.trim_boxes(128) == (ATOM_ROWS, 2 * ATOM_ROWS, 4 * ATOM_ROWS, 8 * ATOM_ROWS)
    assert gemm_emit.trim_boxes(120) == gemm_emit.trim_boxes(128) and gemm_emit.trim_boxes(64)[-1] == 32
    assert gemm_emit.trim_boxes(200)[-1] == 128 and gemm_emit.trim_boxes(ATOM_ROWS) == ()


def test_trimmed_loads_encode_a_map_of_each_box_of_each_operand():
    p = gemm.plan(GemmProblem(260, 5120, 5120, "bf16", "nt", "bf16"), "sm90",
                  Sm90Config(128, 120, 6, 2, epilogue="tma", trim_loads=True))
    whole = attrs.evolve(p, config=attrs.evolve(p.config, trim_loads=False))
    boxes = gemm_emit.trim_boxes(128) + gemm_emit.trim_boxes(120)
    assert (gemm_target.emit(p).script().count("tensormap_encode_tiled")
            == gemm_target.emit(whole).script().count("tensormap_encode_tiled") + len(boxes))
    host = gemm_emit.signature_source(p)  # boxes innermost first: 64 K elements x the box's rows, of A and of B
    encodes = {line.split("(")[1].split(",")[0]: line for line in host.splitlines() if "tensormap_encode_tiled" in line}
    for role, block in (("A", 128), ("B", 120)):
        for box in gemm_emit.trim_boxes(block):
            assert f", {p.block_k}, {box}, 1, 1," in encodes[f"map{role}Box{box}"]
    assert "Box" not in gemm_emit.signature_source(whole)


def test_the_ring_is_cleared_sixteen_bytes_a_store_where_a_tile_can_run_past_its_operand():
    # review51: the clear is every trimmed CTA's prologue, before its first load: 2-byte stores took 248 a thread at
    # 128x120, 6 stages (95232 words over 384 threads), one st.shared.v4.b32 takes 8 words. Only the regions of a role
    # whose operand ends inside a tile are cleared: at M = 260, N = 5120 with 128x120 tiles both (N's last column 80
    # of 120 rows); at M = 256, N = 5040 neither (no store at all); at a dynamic M the A region behind M % 128
    def clears(M, N, config):  # the script's 16-byte shared stores: one a cleared region
        script = gemm_target.emit(gemm.plan(GemmProblem(M, N, 5120, "bf16", "nt", "bf16"), "sm90", config)).script()
        return [line for line in script.splitlines() if "T.ptx.st(" in line and "SMH[" in line]
    cfg = Sm90Config(128, 120, 6, 2, epilogue="tma", trim_loads=True)
    a, b = 6 * 128 * 64 // gemm_emit.CLEAR_WORDS, 6 * 120 * 64 // gemm_emit.CLEAR_WORDS
    assert gemm_emit.CLEAR_WORDS * 2 == 16 and a + b == 95232 // 8
    assert len(clears(260, 5120, cfg)) == 2 and clears(256, 5040, cfg) == []
    p = plan(MBucket(257, 384), 5040, 5120, "bf16", "nt", "bf16", cfg, 132, 232448)
    script = gemm_target.emit(p).script()
    assert sum("T.ptx.st(" in line and "SMH[" in line for line in script.splitlines()) == 1  # A's, behind M % 128
    assert gemm_emit.ring_regions(p)[1][2] is False
    assert "st.shared.v4.b32" in gemm_target.build_plan(p, cache=False).source


def test_trimmed_loads_are_the_unclustered_dense_kernels():
    with pytest.raises(ContractError) as e:
        Sm90Config(128, 104, 4, 2, swap_ab=True, cluster_m=2, trim_loads=True).check(232448)
    assert e.value.operand == "trim_loads"
    from tvm_cdna4.kernels.sm90.grouped_plan import check_grouped_config
    with pytest.raises(ContractError) as e:
        check_grouped_config(Sm90Config(128, 128, 4, 2, trim_loads=True))
    assert e.value.operand == "trim_loads"


def test_the_planners_take_trimmed_loads_where_trim_loads_is_on(monkeypatch):
    device, N, K = devices.DEVICES["H100"], 5120, 5120
    bucket = next(b for b in gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", device) if 300 in b)
    off = gemm_dynamic.plan_bucket(bucket, N, K, "bf16", "nt", "bf16", Fusion(), device).config
    assert not off.trim_loads
    monkeypatch.setattr(gemm_plan, "TRIM_LOADS", True)
    on = gemm_dynamic.plan_bucket(bucket, N, K, "bf16", "nt", "bf16", Fusion(), device).config
    assert on == attrs.evolve(off, trim_loads=True)
    problem = GemmProblem(300, N, K, "bf16", "nt", "bf16")
    assert gemm_target.choose(problem, sms=device.units).trim_loads
    # a cluster asked for on top of the choice loads whole boxes
    assert not gemm_target.with_fields(problem, gemm_target.choose(problem, sms=device.units), {"cluster_m": 2},
                                       sms=device.units).trim_loads
