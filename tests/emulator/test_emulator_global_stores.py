"""Global stores across workgroups (issue 35): the gfx950 emulator flags two workgroups storing one
global byte, as the sm80 one does, except where atomics or a release/acquire pair order them; the
per-byte records of the launch stay a fraction of the output's size."""

import tracemalloc

import numpy as np
import pytest

import atomic_kernels as A
import emulator_api_kernels as K
from tvm_cdna4.emulator import EmulationError, emulate


@pytest.mark.parametrize("batch", [8192, 64])  # both workgroups in one batch, or one per batch
def test_two_workgroups_storing_one_element_is_a_race(batch):
    with pytest.raises(EmulationError, match=r"race on global 'Out' byte 0: stored by workgroup 0 and by workgroup 1 "
                                             r"in one launch \(plain stores of different workgroups are unordered\)"):
        emulate(K.workgroup_stores(overlap=True), np.zeros(128, np.float32), max_threads_per_batch=batch)


def test_the_race_names_the_second_workgroup_and_its_lane():
    with pytest.raises(EmulationError) as err:
        emulate(K.workgroup_stores(groups=3, overlap=True, lanes=1), np.zeros(192, np.float32))
    assert (err.value.workgroup, err.value.wave, err.value.lane) == (1, 0, 0)


def test_disjoint_workgroup_stores_are_clean():
    out = np.zeros(128, np.float32)
    emulate(K.workgroup_stores(overlap=False), out, max_threads_per_batch=64)
    np.testing.assert_array_equal(out, np.repeat([0.0, 1.0], 64))


def test_a_store_ordered_by_release_and_acquire_is_clean():
    out, s = np.zeros(64, np.float32), np.zeros(1, np.uint32)
    emulate(K.ordered_overwrite(fences=True), out, s)
    np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(EmulationError, match=r"race on global 'Out' byte 0: stored by workgroup 0 and by workgroup 1 "
                                             r"in one launch"):
        emulate(K.ordered_overwrite(fences=False), np.zeros(64, np.float32), np.zeros(1, np.uint32))


def test_atomics_of_many_workgroups_stay_clean():
    x, c = np.arange(512, dtype=np.float32), np.zeros(8, np.float32)
    emulate(A.atomic_sum(groups=4), x, c, max_threads_per_batch=128)
    np.testing.assert_array_equal(c, x.reshape(-1, 8).sum(axis=0))
    y, w, s = np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(1, np.uint32)
    emulate(A.ticket_reduce(groups=3), np.ones(192, np.float32), w, s, y, max_threads_per_batch=64)
    np.testing.assert_array_equal(y, 3.0)


# -- the size of the launch's records -------------------------------------------------------------

GROUPS, REPS = 64, 64  # 64 workgroups x 64 x 4 KiB: a 16 MiB f32 output


def _peak(run) -> int:
    """The most memory numpy and Python held above the start while ``run()`` ran (tracemalloc)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("target, atomic", [("gfx950", False), ("gfx950", True), ("sm80", False)])
def test_records_of_a_large_output_stay_small(target, atomic):
    """Before, the records took 16 (sm80) or 30 (gfx950 with atomics) bytes per output byte: a 1 GiB
    C needed tens of GB. Per 4-byte element (or 16-byte store) in the narrowest integer type that
    holds the values, they take a quarter of a byte per output byte here, one (gfx950 atomics: the
    workgroup, the writes not yet released, the fence that released them); the peak adds the
    batch's working arrays and the widening of a field."""
    out = np.zeros(GROUPS * REPS * 1024, np.float32)
    kernel = K.sm80_wide_stores(GROUPS, REPS) if target == "sm80" else K.wide_stores(GROUPS, REPS, atomic)
    emulate(kernel, out.copy(), target=target)  # lowering and caches before measuring
    peak = _peak(lambda: emulate(kernel, out, target=target))
    assert peak < (1.5 if atomic else 0.5) * out.nbytes, f"{peak / out.nbytes:.2f} bytes per output byte"
    assert (out[::4] == 1).all()
