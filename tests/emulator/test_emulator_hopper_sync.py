"""sm90 synchronization in the CUDA emulator (emulator/ptx_hopper.py, emulator/mbarrier.py): mbarrier
transaction counts (``expect_tx`` / ``complete_tx``: the phase completes when the arrivals and the bytes
are both done), ``elect.sync`` (the lowest member lane leads), ``setmaxnreg`` (warp-collective)."""

from __future__ import annotations

import numpy as np
import pytest
from hopper_kernels import tx_kernel

from tvm_cdna4.emulator import EmulationError, emulate


def test_phase_completes_after_arrival_and_all_transaction_bytes_and_elect_picks_the_lowest_member():
    out = np.zeros((2, 32), np.uint32)
    emulate(tx_kernel(), out, target="sm90")
    np.testing.assert_array_equal(out[0], 1)  # warp 0's try_wait succeeded
    # warp 1, members 4..31 of 0xFFFFFFF0: d = 4 in each member lane, p only in lane 4; lanes 0-3 untouched
    np.testing.assert_array_equal(out[1], [0] * 4 + [9] + [8] * 27)


def test_missing_complete_tx_bytes_is_a_deadlock_naming_them():
    with pytest.raises(EmulationError, match=r"deadlock: mbarrier 'BAR' byte 0: waiting for the phase of parity 0; "
                                             r"0 phases completed, 0 of 1 arrivals pending, 32 transaction bytes pending"):
        emulate(tx_kernel(complete=(32,)), np.zeros((2, 32), np.uint32), target="sm90")


def test_setmaxnreg_on_part_of_a_warp_is_reported():
    with pytest.raises(EmulationError, match="wave-collective setmaxnreg executed with 16 of 32 lanes active"):
        emulate(tx_kernel(partial_setmaxnreg=True), np.zeros((2, 32), np.uint32), target="sm90")
