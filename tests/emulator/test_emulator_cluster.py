"""Thread-block clusters in the sm90 emulator (emulator/cluster.py): the CTAs of a cluster run in one batch; a
TMA multicast lands in every masked CTA and completes the transaction there; ``mapa`` + ``mbarrier.arrive
.shared::cluster`` arrive on a peer's barrier; ``barrier.cluster``; the errors: a rank outside the cluster, a
missing remote arrival (a deadlock), an incomplete cluster barrier, no trailing cluster barrier after a remote
access, a mapped address where a local one is expected, a cluster emulated in part."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from cluster_kernels import multicast_kernel

from tvm_cdna4.emulator import EmulationError, emulate


def _a():
    return (np.arange(64 * 64) % 251).reshape(64, 64).astype(ml_dtypes.bfloat16)


def _run(**flags):
    a = _a()
    out = np.zeros_like(a)
    emulate(multicast_kernel(**flags), a, out, target="sm90")
    return a, out


def test_each_cta_of_a_cluster_holds_the_whole_box_its_two_halves_multicast():
    a, out = _run()
    np.testing.assert_array_equal(out, np.concatenate([a[0:16], a[0:16], a[16:32], a[16:32]]))


def test_a_multicast_to_one_cta_leaves_the_other_short_of_bytes():
    """Both halves land in rank 0 only: rank 1's barrier still expects the whole box's 2048 bytes."""
    with pytest.raises(EmulationError, match=r"(?s)deadlock: mbarrier 'BAR' byte 0: .* 2048 transaction bytes pending"
                                             r".*in: workgroup 1"):
        _run(mask=1)


def test_a_multicast_mask_bit_outside_the_cluster_is_reported():
    with pytest.raises(EmulationError, match=r"multicast::cluster: CTA rank 2 is outside the cluster of 2 CTAs"):
        _run(mask=5)


def test_mapa_of_a_rank_outside_the_cluster_is_reported():
    with pytest.raises(EmulationError, match=r"mapa: CTA rank 3 is outside the cluster of 2 CTAs"):
        _run(peer=3)


@pytest.mark.parametrize("flags, pattern", [
    ({"remote": False}, r"deadlock: mbarrier 'BAR' byte 8: .* 1 of 2 arrivals pending"),
    ({"trailing": False}, r"CTA 0 of cluster 0 made a remote access \(mbarrier arrive at .*\) that no "
                          r"barrier.cluster.arrive / wait of the whole cluster follows"),
    ({"partial_arrive": True}, r"deadlock: barrier.cluster.wait: 128 of 256 threads of the cluster arrived"),
    ({"local_mapped": True}, r"shared::cluster address of the cluster's CTA 0 \(mapa\); this operand takes a "
                             r"shared::cta address"),
], ids=["a missing remote arrival is a deadlock", "a remote access without a trailing cluster barrier",
        "a cluster barrier not every thread arrives at is a deadlock", "a mapped address for a local operand"])
def test_a_broken_cluster_protocol_is_reported(flags, pattern):
    with pytest.raises(EmulationError, match=pattern):
        _run(**flags)


def test_a_cluster_emulated_in_part_is_refused():
    with pytest.raises(ValueError, match=r"a cluster of 2 CTAs is emulated whole"):
        emulate(multicast_kernel(), _a(), np.zeros((64, 64), ml_dtypes.bfloat16), target="sm90", workgroups=[0, 1, 2])
