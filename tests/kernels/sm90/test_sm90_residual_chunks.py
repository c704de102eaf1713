"""The fused residual staged in the chunked TMA epilogue's buffers (``Sm90Config.residual_read="chunks"``,
``kernels.sm90.gemm_chunkres``): the plan's rules, the cost model's flag, the emitted kernel's barriers, the kernel in
the CUDA emulator (ragged M and N, two, three and four chunks a tile, the other epilogue steps) and the emulator's
report of each dropped wait; on a Hopper GPU, validated beside the other reads."""

from __future__ import annotations

import attrs
import pytest
from hopper_kernels import dropping

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_chunkres, gemm_emit, gemm_plan, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]
CHUNKS = dict(epilogue="tma", epilogue_tile=64, residual_read="chunks")
BIG = GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16", Fusion(residual=True))


def test_the_staged_chunks_keep_128x256_at_four_stages_in_the_chunk_buffers():
    # C and D share the chunk buffers: the shared memory of the chunked epilogue reading the residual from global memory
    staged = gemm.plan(BIG, "sm90", Sm90Config(128, 256, 4, 2, **CHUNKS))
    plain = gemm.plan(BIG, "sm90", attrs.evolve(staged.config, residual_read="global"))
    assert staged.smem_bytes == plain.smem_bytes == 4 * (128 + 256) * 64 * 2 + 2 * 2 * 64 * 64 * 2
    # a "full" and a "free" mbarrier for each warpgroup's two buffers after the ring's 2 x 4
    assert gemm_emit.barriers(staged) == 2 * 4 + 8 and gemm_chunkres.full_bar(staged, 1, 1) == 11
    assert gemm_chunkres.free_bar(staged, 0, 0) == 12 and gemm_chunkres.free_bar(staged, 1, 1) == 15
    assert "mapresidual" in gemm_emit.signature_source(staged) and "mapresidual" not in gemm_emit.signature_source(plain)
    # buffer b's uses a tile: chunks b, b + 2, ...; chunk q of the CTA's i-th tile is use i * uses(b) + q // 2
    three = gemm.plan(GemmProblem(130, 400, 64, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                      Sm90Config(128, 192, 2, 2, ctas=1, **CHUNKS))
    assert [gemm_chunkres.uses(three, b) for b in (0, 1)] == [2, 1]
    assert [gemm_chunkres.use_of(three, 3, q) for q in range(3)] == [6, 3, 7]


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="chunks"), "epilogue_tile=0"),
    (Sm90Config(128, 256, 4, 2, residual_read="chunks"), "epilogue='registers'"),
    (Sm90Config(128, 128, 4, 2, schedule="pingpong", **CHUNKS), "schedule='pingpong'"),
    (Sm90Config(128, 256, 4, 2, split_k=2, **CHUNKS), "split_k=2"),
    (Sm90Config(128, 256, 4, 2, cluster_m=2, **CHUNKS), "cluster_m=2"),
    (Sm90Config(128, 256, 4, 2, shift_last=True, **CHUNKS), "shift_last=True"),
])
def test_a_plan_the_staged_chunks_cannot_serve_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError, match="config residual_read: 'chunks' loads the residual into the chunked TMA "
                                            "epilogue's two buffers") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "residual_read" and e.value.check == "parameters" and found in e.value.found
    assert e.value.found.startswith("residual_read='chunks', epilogue=")


def test_the_staged_chunks_need_a_fused_residual_and_a_dense_gemm():
    with pytest.raises(ContractError, match="residual_read: 'chunks' loads the fused residual") as e:
        gemm.plan(GemmProblem(256, 256, 64, "bf16", "nt", "bf16", Fusion(bias=True)), "sm90",
                  Sm90Config(128, 128, 2, 2, **CHUNKS))
    assert e.value.operand == "residual_read"
    grouped = GemmProblem(None, 128, 64, "bf16", "nt", "bf16", Fusion(residual=True), groups=4)
    with pytest.raises(ContractError, match="grouped GEMM config residual_read") as e:
        gemm.plan(grouped, "sm90", Sm90Config(128, 128, 2, 2, **CHUNKS), m=64)
    assert e.value.found == "'chunks'"


def test_the_cost_model_takes_the_staged_chunks_only_where_its_flag_is_on(monkeypatch):
    chunked = Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64)
    fused = Fusion(residual=True)
    assert gemm_plan.WEIGH_CHUNK_RESIDUAL is False
    assert gemm_plan.epilogue_choices(chunked, fused, "bf16").residual_read == "global"
    monkeypatch.setattr(gemm_plan, "WEIGH_CHUNK_RESIDUAL", True)
    assert gemm_plan.epilogue_choices(chunked, fused, "bf16").residual_read == "chunks"
    assert gemm_plan.epilogue_choices(chunked, Fusion(bias=True), "bf16").residual_read == "global"  # nothing to load
    whole = Sm90Config(128, 256, 3, 2, epilogue="tma")  # the whole tile staged: RESIDUAL_CHOICE as before
    assert gemm_plan.epilogue_choices(whole, fused, "bf16").residual_read == gemm_plan.RESIDUAL_CHOICE
    assert gemm_plan.epilogue_choices(attrs.evolve(chunked, cluster_m=2), fused, "bf16").residual_read == "global"


F = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("problem, config", [
    # two chunks a tile, one CTA walking four ragged tiles: each buffer's barriers run phases 0..3 across tiles
    (GemmProblem(130, 200, 64, "bf16", "nt", "bf16", Fusion(residual=True, col_scale=True)),
     Sm90Config(128, 128, 2, 2, ctas=1, **CHUNKS)),
    # three chunks (buffer 0 used twice a tile, buffer 1 once), the bias
    pytest.param(GemmProblem(130, 400, 64, "bf16", "nt", "bf16", Fusion(residual=True, bias=True)),
                 Sm90Config(128, 192, 2, 2, ctas=1, **CHUNKS), marks=pytest.mark.slow),  # the lever is off
    # four chunks (128x256 / 64, the 4096^3 plan's), f16 C, every fused step
    pytest.param(GemmProblem(130, 504, 64, "bf16", "nt", "f16", F), Sm90Config(128, 256, 2, 2, ctas=1, **CHUNKS),
                 marks=pytest.mark.slow),  # the lever is off: suite time
    # one consumer warpgroup, as many k-tiles as stages
    pytest.param(GemmProblem(77, 304, 136, "f16", "nt", "f16", Fusion(residual=True)),
                 Sm90Config(64, 128, 3, 1, ctas=1, **CHUNKS), marks=pytest.mark.slow),
    # chunks of 128 columns (two 64-column boxes each: two chunks, no later ones), fewer k-tiles than stages
    pytest.param(GemmProblem(200, 264, 72, "bf16", "nt", "bf16", Fusion(residual=True, activation="silu")),
                 Sm90Config(128, 256, 3, 2, ctas=1, epilogue="tma", epilogue_tile=128, residual_read="chunks"),
                 marks=pytest.mark.slow),
    # four 64-column chunks, 2 k-tiles < 3 stages: the previous tile's later chunks and the tile's early ones after
    # the same ring load, the last k-tile (late_at = min(stages, k_tiles) - 1; at stages - 1 no ring load reaches it:
    # a deadlock, as in the 1-k-tile cases above)
    pytest.param(GemmProblem(200, 264, 72, "bf16", "nt", "bf16", Fusion(residual=True)),
                 Sm90Config(128, 256, 3, 2, ctas=1, **CHUNKS), marks=pytest.mark.slow),
])
def test_the_emulator_validates_the_staged_chunks(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0


THREE = (GemmProblem(130, 400, 64, "bf16", "nt", "bf16", Fusion(residual=True)),
         Sm90Config(128, 192, 2, 2, ctas=1, **CHUNKS))


@pytest.mark.parametrize("op, nth, words", [
    # the consumers' wait on a buffer's "full" (the mbarrier waits in program order: the producer's "empty", its
    # "free" for the previous tile's later chunks, for the tile's first two, for the last tile's later ones, the
    # consumers' "full" of the ring, then of the chunk): the residual read while its TMA load is in flight
    ("tirx.cuda.mbarrier_wait", 6, r"read of LDS 'SMH' byte \d+ while an asynchronous copy into it is still in flight"),
    # the producer's wait on "free" before a later chunk: "full" re-armed while its previous phase is pending
    ("tirx.cuda.mbarrier_wait", 2, r"mbarrier.arrive on 'MB' byte \d+: count 1 exceeds the 0 arrivals pending"),
    # the storing thread's wait_group.read before a buffer's "free" (after chunk 0's store; in the next tile's first
    # k-tile): the next residual chunk lands in the buffer while the store still reads it
    ("tirx.ptx.cp_async_bulk_wait_group", 1, r"write of shared 'SMH' byte \d+ while a TMA store \(cp.async.bulk.tensor\) "
                                             "reading it is still in flight"),
    ("tirx.ptx.cp_async_bulk_wait_group", 2, r"write of shared 'SMH' byte \d+ while a TMA store \(cp.async.bulk.tensor\) "
                                             "reading it is still in flight"),
    # the writers' fence.proxy.async before the chunk's barrier (each consumer thread, after its st.shared of D): the
    # TMA store would read generic-proxy writes unordered (the producer's next load into the buffer is ordered after
    # that store's read by the storing thread's "free", so it needs no fence of its own)
    ("tirx.ptx.fence_proxy", 1, r"written by the generic proxy .* read by the async proxy \(the TMA store"),
])
def test_a_dropped_wait_of_the_staged_chunks_is_reported(op, nth, words):
    problem, config = THREE
    p = gemm.plan(problem, "sm90", config)
    data = random_inputs(problem, 0)
    with pytest.raises(EmulationError, match=words):
        emulate(dropping(gemm_target.emit(p), op, nth), *data.arguments(p.params, data.output()), target="sm90")


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M, N, K, fusion, block_n", [
    (333, 1000, 520, Fusion(residual=True), 256),
    (77, 200, 264, F, 256),
    (333, 1000, 520, Fusion(residual=True, bias=True), 192),  # three chunks a tile
    # many tiles a CTA (past the SMs: the buffers' phases carried across tiles; 1000x2048 was 128 tiles, one a CTA)
    (2000, 4096, 1024, Fusion(residual=True), 128),           # two chunks, 512 tiles
    (3000, 4096, 136, Fusion(residual=True), 256),            # four chunks, 384 tiles, 3 k-tiles < 4 stages (late_at)
])
def test_the_staged_chunks_validate_on_a_hopper_gpu(M, N, K, fusion, block_n):
    from tvm_cdna4.runtime.cuda import run_gemm

    cfg = Sm90Config(128, block_n, 4, 2, **CHUNKS)
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
