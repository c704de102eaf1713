"""The direct-to-LDS variant of the gfx950 GEMM (``Gfx950GemmConfig.lds_dma``, ``dma_config``): its
plan (three LDS stages in two workgroups' share of a CU, the tile the fragment reads expect), its
compiled main loop, and f16 nt / fp8 nn / i8 nt through the emulator on shapes that are no tile
multiples (the loader is the same for every dtype: 16-byte chunks into padded rows)."""

import math

import attrs
import pytest
from gfx950_gemm_kernels import run_gemm

from tvm_cdna4.isa.llvm_helpers import SCHED_DS_WRITE, SCHED_VMEM_READ
from tvm_cdna4.kernels.gfx950.gemm import LAYOUTS, dma_config, plan_gfx950_gemm

ESIZE = {"f16": 2, "bf16": 2, "fp8": 1, "i8": 1}


@pytest.mark.parametrize("dtype", list(ESIZE))
def test_dma_plan_fits_three_stages_in_80_kib_and_lands_the_register_staged_layout(dtype):
    for layout in LAYOUTS:
        plan = plan_gfx950_gemm(4096, 4096, 4096, dtype, layout, config=dma_config(dtype))
        staged = plan_gfx950_gemm(4096, 4096, 4096, dtype, layout,
                                  config=attrs.evolve(dma_config(dtype), lds_dma=False))
        stage_bytes = (math.prod(plan.a.lds_shape) + math.prod(plan.b.lds_shape)) * ESIZE[dtype]
        assert plan.lds_stages == 3 and plan.block[2] * ESIZE[dtype] == 64 and 3 * stage_bytes <= 80 * 1024
        for dma, reg in ((plan.a, staged.a), (plan.b, staged.b)):
            pitch = reg.lds_shape[1] * ESIZE[dtype]  # bytes per padded row of the register-staged stage
            assert dma.lds_shape[1] == reg.lds_shape[1] and dma.lds_shape[0] * pitch >= 4 * dma.dma_loads * 1024
            assert all(dma.dma.offset(r, c) == r * pitch + 16 * c
                       for r in range(reg.lds_shape[0]) for c in range(reg.chunks_per_row))
        # no LDS stores; the period's direct-to-LDS loads spread over its MFMAs
        program = [mask for mask, _ in plan.interleave]
        assert SCHED_DS_WRITE not in program and program.count(SCHED_VMEM_READ) == plan.a.dma_loads + plan.b.dma_loads


def test_dma_plan_of_the_f16_nt_tile():
    plan = plan_gfx950_gemm(4096, 4096, 4096, "f16", "nt", config=dma_config("f16"))
    assert plan.block == (128, 128, 32) and plan.mfma == "mfma_f32_32x32x16_f16" and plan.repeats == (2, 2, 2)
    # 128 rows of 64 + 16 bytes = 10 blocks of 1024 bytes, 3 per wave: 12 blocks = 154 rows of 80 bytes
    assert (plan.a.dma.loads, plan.a.dma_loads, plan.a.lds_shape) == (10, 3, (154, 40))
    fp8 = plan_gfx950_gemm(4096, 4096, 4096, "fp8", "nn", config=dma_config("fp8"))
    assert fp8.mfma == "mfma_scale_f32_32x32x64_f8f6f4" and fp8.b.dma.rows == 64 and fp8.b.dma.cols == 8


def test_dma_refuses_rows_that_are_not_whole_chunks_and_one_tile_ahead():
    with pytest.raises(ValueError, match=r"lds_dma: A rows of 33 elements are not whole 16-byte chunks"):
        plan_gfx950_gemm(64, 64, 33, "f16", "nt", config=dma_config("f16"))
    with pytest.raises(ValueError, match=r"lds_dma loads two K tiles ahead into three LDS stages; got load_ahead=1"):
        plan_gfx950_gemm(64, 64, 64, "f16", "nt", config=attrs.evolve(dma_config("f16"), load_ahead=1))


@pytest.mark.parametrize("dtype, layout, shape, batch", [
    ("f16", "nt", (40, 70, 264), 0),   # 9 K tiles: one loop iteration of six periods and a tail of two
    ("fp8", "nn", (65, 48, 112), 0),   # the scaled 32x32x64 MFMA; B's K rows (N contiguous), ds_read_tr8
    ("i8", "nt", (33, 20, 80), 2),     # the batch offset in soffset
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_dma_gemm_matches_numpy(dtype, layout, shape, batch, rng):
    run_gemm(rng, dtype, layout, shape, config=dma_config(dtype), batch=batch)


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
@pytest.mark.xdist_group("gfx950-dma")  # the golden test's f16_nt_dma kernel: one build, through the session cache
def test_dma_main_loop_has_no_staging_and_one_wait_per_k_tile():
    """The compiled loop (16 K tiles: two iterations of six, one per stage and fragment set, and a
    tail of four): every global load goes straight to LDS, no LDS store, one ``s_waitcnt`` and one
    barrier per K tile, and the staging registers are gone (the register-staged kernel of the same
    tile needs over 200 VGPRs)."""
    from tvm_cdna4.report import loop_report
    from tvm_cdna4.kernels.gfx950 import gemm

    result = gemm.build(256, 192, 512, "f16", "nt", config=dma_config("f16"))
    loop = loop_report(result.asm)
    assert loop.mix["mfma"] == 6 * 8 and loop.mix["global_lds"] == 6 * 6
    assert "global" not in loop.mix and "lds_write" not in loop.mix
    assert loop.mix["waitcnt"] == loop.mix["barrier"] == 6
    info = result.kernel()
    assert info.scratch_bytes == 0 and info.vgprs <= 160 and info.lds_bytes <= 80 * 1024
