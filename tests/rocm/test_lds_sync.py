"""The compile-time LDS synchronization check (tvm_cdna4.rocm.lds_sync): missing barriers and waits
refused on tvm_cdna4.build and tvm_tirx.tirx.compile, with both statements, the buffer and the fix;
the package's GEMMs, double and triple buffering and direct-to-LDS pipelines accepted; what it cannot
evaluate left to the emulator."""

import logging

import numpy as np
import pytest
import tvm_tirx

import dma_kernels as DMA
import lds_sync_kernels as L
import rocm_kernels as R
import tvm_cdna4
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import emulate
from tvm_cdna4.rocm import lds_sync
from tvm_cdna4.kernels.gfx950.gemm import gfx950_gemm
from tvm_cdna4.kernels.gfx950.mx_gemm import gfx950_mx_gemm
from tvm_cdna4.kernels.gfx950.gemm_plan import Gfx950GemmConfig

GFX950 = {"kind": "rocm", "mcpu": "gfx950"}
FIX = r"Suggestion: order them with T\.rocm\.workgroup_barrier\(\) \(s_waitcnt lgkmcnt\(0\), then s_barrier\)"
ROUTES = {"build": tvm_cdna4.build, "tirx.compile": lambda k: tvm_tirx.tirx.compile(k, target=GFX950)}
UNDECIDED = "is left to the emulator"


@pytest.fixture
def undecided(caplog):
    caplog.set_level(logging.DEBUG, logger=lds_sync.logger.name)
    return lambda: [r.getMessage() for r in caplog.records if UNDECIDED in r.getMessage()]


@pytest.mark.parametrize("stages", [2, 3], ids=["double", "triple"])
def test_the_buffered_gemm_is_exact_and_accepted_on_both_routes(stages, undecided, rng):
    a = rng.integers(-2, 3, (64, 32 * 5)).astype(np.float16)
    b = rng.integers(-2, 3, (32 * 5, 16)).astype(np.float16)
    d = np.zeros((64, 16), np.float32)
    emulate(L.double_buffered_gemm(5, stages=stages), a, b, d)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32))
    for route in ROUTES.values():
        route(L.double_buffered_gemm(5, stages=stages))
    assert undecided() == []  # decided, not skipped


WRITE = r"`SA\[\(tx & 63\) \* 32 \+ \(tx >> 6\) \* 8\] = A\[\(tx & 63\) \* 128 \+ \(tx >> 6\) \* 8\]`"
READ = r"`ra\[0\] = SA\[(\(kt & 1\)|T\.truncmod\(kt, 3\)) \* 2048 \+ \(tx >> 6\) \* 512 \+ \(tx & 15\) \* 32 \+ \(\(tx & 63\) >> 4\) \* 8\]`"
MISSING = {
    "after the prologue stores": (dict(prologue_barrier=False), rf"wave 1 wrote it in {WRITE} and wave 0 reads it in {READ} \(kt = 0\)"),
    "at the end of a K step": (dict(step_barrier=False), rf"wave 1 read it in {READ} \(kt = 0\) and wave 0 writes it in `SA\[.*\(kt = 1\)"),
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("stages", [2, 3], ids=["double", "triple"])
@pytest.mark.parametrize("missing", list(MISSING))
def test_a_missing_barrier_is_refused_at_compile_time(missing, stages, route):
    change, message = MISSING[missing]
    with pytest.raises(ContractError, match=rf"^operand SA: LDS race on byte \d+: {message}, with no barrier ordering the two\. {FIX}") as info:
        ROUTES[route](L.double_buffered_gemm(4, stages=stages, **change))
    assert (info.value.check, info.value.operand) == ("LDS synchronization", "SA")


REFUSED = {
    "no barrier": (lambda: R.lds_exchange(barrier=False), r"wave 1 wrote it in `S\[tx\] = A\[tx\]` and wave 0 reads it in `B\[tx\] = S\["),
    "s_barrier without a wait": (R.lds_exchange_s_barrier, r"wave 1 wrote it in `S\[tx\] = A\[tx\]`"),
    "direct-to-LDS wait after the barrier": (lambda: DMA.dma_copy(waves=2, read_other_wave=True, wait_after_barrier=True),
                                             r"wave 1 wrote it in `T\.call_extern\(\"tvm_cdna4_buffer_load_lds_b128\""),
    "direct-to-LDS vmcnt too high": (lambda: DMA.dma_pipeline(vmcnt=2),
                                     r"wave 1 wrote it in `T\.call_extern\(.*\)` and wave 0 reads it in `acc\[0\] = .*` \(k = 0\)"),
    "no barrier after the reads": (lambda: DMA.dma_pipeline(barrier_after_reads=False),
                                   r"wave 1 read it in .*\(k = 0\) and wave 0 writes it in `T\.call_extern\(.*\(k = 1\)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_seeded_races_are_refused(case):
    make, message = REFUSED[case]
    with pytest.raises(ContractError, match=rf"^operand S: LDS race on byte \d+: {message}") as info:
        tvm_cdna4.build(make())
    assert info.value.check == "LDS synchronization"


def test_a_wave_reading_its_own_load_in_flight_is_refused():
    with pytest.raises(ContractError, match=r"^operand S: wave 0 reads byte 0 in `D\[tx \* 4\] = S\[tx \* 4\]` while its own "
                       r"direct-to-LDS load `T\.call_extern\(\"tvm_cdna4_buffer_load_lds_b128\".* is still in flight\. "
                       r"Suggestion: wait for the load first"):
        tvm_cdna4.build(DMA.dma_copy(wait=False))


@pytest.mark.parametrize("make", [R.lds_exchange, lambda: R.lds_exchange_s_barrier(wait=0), DMA.dma_pipeline,
                                  lambda: DMA.dma_copy(waves=2, read_other_wave=True), R.tr_operand_then_mfma],
                         ids=["workgroup_barrier", "lgkmcnt(0) + s_barrier", "direct-to-LDS pipeline", "dma copy",
                              "ds_read_tr operand"])
def test_synchronized_kernels_are_accepted(make, undecided):
    tvm_cdna4.build(make())
    assert undecided() == []


GEMMS = {
    "f16 nn": lambda: gfx950_gemm(256, 256, 512, "f16", "nn"),
    "bf16 nt, one tile ahead": lambda: gfx950_gemm(256, 256, 512, "bf16", "nt", config=Gfx950GemmConfig(load_ahead=1)),
    "fp8 tn": lambda: gfx950_gemm(256, 256, 512, "fp8", "tn"),
    "f16 tn direct-to-LDS": lambda: gfx950_gemm(256, 256, 256, "f16", "tn", config=Gfx950GemmConfig(lds_dma=True)),
    "mxfp8 nt": lambda: gfx950_mx_gemm(256, 256, 512, "mxfp8", "nt"),
    "mxfp4 nn": lambda: gfx950_mx_gemm(256, 256, 512, "mxfp4", "nn"),
}


@pytest.mark.parametrize("gemm", list(GEMMS))
def test_the_package_gemms_are_decided_and_accepted(gemm, undecided):
    tvm_cdna4.build(GEMMS[gemm]())
    assert undecided() == []


def test_what_it_cannot_evaluate_is_left_to_the_emulator(undecided):
    tvm_cdna4.build(L.undecidable_index())
    assert len(undecided()) == 1 and "`S[P[tx]] = A[tx]`" not in undecided()[0]


def test_loops_run_their_first_iterations_and_a_tail_in_phase():
    assert lds_sync.iterations(5) == [0, 1, 2, 3, 4]
    assert lds_sync.iterations(12) == list(range(12))
    assert lds_sync.iterations(64) == [0, 1, 2, 3, 4, 5, 60, 61, 62, 63]
    assert lds_sync.iterations(13) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
