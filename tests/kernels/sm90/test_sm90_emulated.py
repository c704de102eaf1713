"""The sm90 GEMM in the CUDA emulator (``emulate(..., target="sm90")``): plans validated without a GPU
(``gemm_target.execute`` without a runner, the CLI's ``--validate``), and kernels with a wait dropped
from the emitted TIR reported by the emulator's ordering checks (the chunked TMA epilogue's bulk waits too)."""

from __future__ import annotations

import pytest
from hopper_kernels import dropping

from tvm_cdna4.cli import main
from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.parametrize("problem, config", [
    # two consumers, more k-tiles than stages (the producer waits on released stages), ragged M, N, K
    (GemmProblem(67, 69, 264, "bf16", "nt", "f32"), Sm90Config(128, 64, 2, 2)),
    # one consumer, one persistent CTA walking two tiles, the fused epilogue, bf16 C
    (GemmProblem(33, 100, 136, "bf16", "nt", "bf16", Fusion(bias=True, activation="gelu", residual=True)),
     Sm90Config(64, 64, 2, 1, ctas=1)),
    # C staged in shared memory and stored with TMA (clipped at C's edges), f16
    (GemmProblem(77, 64, 72, "f16", "nt", "f16", Fusion(row_scale=True, col_scale=True)),
     Sm90Config(128, 64, 2, 2, epilogue="tma")),
    # C staged in 64-column chunks through two buffers per warpgroup (epilogue_tile): one CTA walking four
    # ragged tiles, so a buffer is reused across chunks and tiles; the fused epilogue, bf16
    (GemmProblem(130, 200, 64, "bf16", "nt", "bf16", Fusion(residual=True, col_scale=True)),
     Sm90Config(128, 128, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64)),
    # three chunks a tile (an odd count: a tile's first chunk waits for the previous tile's last store and syncs)
    (GemmProblem(130, 400, 64, "bf16", "nt", "bf16", Fusion(bias=True)),
     Sm90Config(128, 192, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64)),
    # odd N: C stored one element at a time
    (GemmProblem(20, 41, 64, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 1)),
    # ping-pong: one CTA, three tiles alternating between the consumers (named barriers 3 and 4 order them)
    (GemmProblem(40, 150, 128, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 2, ctas=1, schedule="pingpong")),
])
def test_the_emulator_validates_sm90_plans(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


def test_validate_beyond_the_emulated_macs_asks_for_a_gpu():
    problem = GemmProblem(512, 512, 512, "bf16", "nt", "f32")
    assert 512 ** 3 > gemm_target.EMULATED_MACS
    with pytest.raises(ValueError, match="needs an NVIDIA Hopper GPU .* EMULATED_MACS = 4194304"):
        gemm.validate(problem, "sm90")


def test_the_cli_validates_sm90_without_a_gpu(capsys):
    from tvm_cdna4.runtime import cuda

    if cuda.have_cuda_gpu()[0]:
        pytest.skip("a GPU is present: --validate runs on it")
    assert main(["gemm", "--target", "sm90", "-M", "77", "-N", "72", "-K", "128", "--dtype", "bf16", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "validated sm90 nt bf16->f32 77x72x128 on the CUDA emulator" in out and out.strip().endswith("PASS")


@pytest.mark.parametrize("op, nth, words", [
    # the consumers' wait on the stage's "full" mbarrier: wgmma reads the TMA's bytes still in flight
    ("tirx.cuda.mbarrier_wait", 2, "while an asynchronous copy into it is still in flight"),
    # the producer's wait on "empty": it re-arms a stage's "full" barrier whose phase is still pending
    ("tirx.cuda.mbarrier_wait", 1, "count 1 exceeds the 0 arrivals pending"),
    # the consumers' wgmma.wait_group 1: the stage is released (and reloaded) while its wgmma reads it
    ("tirx.ptx.wgmma_wait_group", 1, "while a wgmma.mma_async.m64n64k16 reading it is still in flight"),
])
def test_a_dropped_wait_is_reported(op, nth, words):
    problem = GemmProblem(33, 41, 264, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", Sm90Config(64, 64, 2, 1))
    data = random_inputs(problem, 0)
    c = data.output()
    emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")  # as emitted: no error
    assert data.ratio(c) <= 1.0
    with pytest.raises(EmulationError, match=words):
        emulate(dropping(gemm_target.emit(p), op, nth), *data.arguments(p.params, data.output()), target="sm90")


@pytest.mark.parametrize("problem, config, nth", [
    # two chunks a tile: the chunk's wait_group.read 0 before its barrier (the other buffer's store has read it)
    (GemmProblem(130, 200, 64, "bf16", "nt", "bf16"), Sm90Config(128, 128, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64), 1),
    # three chunks: the wait before a tile's first chunk (the previous tile's last store read buffer 0), and the chunk's
    (GemmProblem(130, 400, 64, "bf16", "nt", "bf16"), Sm90Config(128, 192, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64), 1),
    (GemmProblem(130, 400, 64, "bf16", "nt", "bf16"), Sm90Config(128, 192, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64), 2),
])
def test_a_dropped_chunk_wait_is_reported(problem, config, nth):
    # the chunked TMA epilogue (gemm_epilogue.store_tma_chunks) with one of its cp.async.bulk.wait_group.read
    # dropped: a chunk rewrites a staging buffer a TMA store still reads (emulator.ptx_tma.BulkStores)
    p = gemm.plan(problem, "sm90", config)
    data = random_inputs(problem, 0)
    with pytest.raises(EmulationError, match=r"write of shared 'SMH' byte \d+ while a TMA store \(cp.async.bulk.tensor\) "
                                             r"reading it is still in flight"):
        emulate(dropping(gemm_target.emit(p), "tirx.ptx.cp_async_bulk_wait_group", nth),
                *data.arguments(p.params, data.output()), target="sm90")


@pytest.mark.parametrize("problem, config", [
    # the whole tile staged (gemm_epilogue.store_tma)
    (GemmProblem(77, 64, 72, "f16", "nt", "f16"), Sm90Config(128, 64, 2, 2, epilogue="tma")),
    # 64-column chunks (gemm_epilogue.store_tma_chunks)
    (GemmProblem(130, 200, 64, "bf16", "nt", "bf16"), Sm90Config(128, 128, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64)),
])
def test_a_dropped_proxy_fence_before_the_tma_store_is_reported(problem, config):
    # the consumers' st.shared of C, then the elected thread's TMA store of it: without each writer's
    # fence.proxy.async.shared::cta before the named barrier the store may read stale shared memory (emulator.proxy)
    p = gemm.plan(problem, "sm90", config)
    data = random_inputs(problem, 0)
    with pytest.raises(EmulationError, match=r"shared 'SMH' byte \d+: written by the generic proxy \(wave \d+ lane \d+ "
                                             r"of workgroup \d+\) and read by the async proxy \(the TMA store "
                                             r"cp.async.bulk.tensor reading its box\) with no fence.proxy.async"):
        emulate(dropping(gemm_target.emit(p), "tirx.ptx.fence_proxy", 1), *data.arguments(p.params, data.output()),
                target="sm90")
