"""The sm90 GEMM in thread-block clusters (``Sm90Config.cluster_m`` = 2; docs/sm90_gemm.md "Clusters"): what the
emitter (``gemm_emit``) adds for a cluster, each a no-op (the very call of an unclustered kernel) when
``cluster_m`` is 1, so that the generated code of every other plan is unchanged.

A cluster of 2 CTAs (``clusterDim`` (2, 1, 1): CTAs ``2 c`` and ``2 c + 1``, rank ``blockIdx.x % 2``) takes two
adjacent tile rows of one tile column (``Sm90Plan.tile_of``). Per k-tile each CTA's producer waits on its stage's
"empty" mbarrier, arms its "full" one with the whole stage's bytes, loads its own A box and its SHARE of the B box
(``gemm_boxes.b_shares``: half, or the tile's 8-row swizzle atoms split as evenly as they come, 88 + 80 rows of 168,
rank 1's after rank 0's; uneven shares through a second B map, ``B1``) with
``cp.async.bulk.tensor...multicast::cluster`` and CTA mask ``0b11``: the share lands at the same shared offset in both CTAs and completes its bytes on the "full"
mbarrier at the same offset in each (PTX ISA 9.4 §9.7.10.28.5), so each B byte leaves L2 once per cluster. A
stage is refilled by both producers (each writes half of the peer's B), so a consumer releases it on its own
CTA's "empty" barrier and, through ``mapa``, on the peer's (``release``): the "empty" barriers count the
consumers of both CTAs (CUTLASS's ``PipelineTmaAsync`` with a cluster: ``consumer_release`` arrives on the
empty barrier of every CTA that multicasts into the stage, ``include/cutlass/pipeline/sm90_pipeline.hpp``).
Swapped (``swap_ab``; ``Sm90Config.multicast`` "A") the pair is two tile columns, the token tiles, of one tile row
(``Sm90Plan.swapped_pair``) and the shared operand is the kernel's A role, the weights: each rank loads its own
activations' box and half of the weights' ``block_m`` rows (whole atoms: one map, boxes of ``block_m / 2`` rows) with
the multicast (``a_load``, ``share_row``, ``share_offset``); the barriers and releases are the unswapped cluster's.
A cluster barrier after the mbarriers' initialization (a peer's barrier is initialized before it is signalled)
and one at the end (no CTA exits while its peer may still signal or fill its shared memory: CUTLASS's sm90
warp-specialized kernels end the same way) bracket the kernel (``cluster_sync``).
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from .gemm_plan import BLOCK_K, Sm90Plan

MULTICAST = ".multicast::cluster"
"""The TMA load's qualifier that lands the box in every CTA of its mask (PTX ISA 9.4 §9.7.10.28.5)."""


def launch(p: Sm90Plan, threads: int):
    """The kernel's launch: the persistent grid of ``p.ctas`` CTAs, ``threads`` each, the ring's dynamic shared
    memory, in clusters of ``cluster_m`` CTAs along x (none for 1: the unclustered launch)."""
    extra = {"cluster": p.config.cluster_m} if p.config.cluster_m > 1 else {}
    return T.cuda.LaunchConfig(grid=p.ctas, block=threads, dynamic_smem_bytes=p.smem_bytes, **extra)


def rank(p: Sm90Plan):
    """The CTA's rank in its cluster (``blockIdx.x % cluster_m``; a cluster along x)."""
    return T.truncmod(T.cuda.block_idx("x"), p.config.cluster_m)


def empty_arrivals(p: Sm90Plan) -> int:
    """The arrivals that release a stage: one per consumer warpgroup (ping-pong: the one consumer of the tile),
    of every CTA of the cluster."""
    c = p.config
    return (1 if c.pingpong else c.consumers) * c.cluster_m


def multicasts(p: Sm90Plan, role: str) -> bool:
    """Whether the kernel's operand ``role`` ("A" or "B") is multicast: a cluster's ``Sm90Config.multicast``."""
    return p.config.cluster_m > 1 and p.config.multicast == role


def a_box_rows(p: Sm90Plan) -> int:
    """The rows of the kernel's A box (its first map): ``block_m``; multicast (``swap_ab``'s cluster) rank 0's share
    of it (``block_m / 2``: whole atoms, even halves)."""
    return p.config.shares[0] if multicasts(p, "A") else p.config.block_m


def b_box_rows(p: Sm90Plan) -> int:
    """The rows of B's TMA box (map ``B``): the tile's ``block_n``; multicast rank 0's share of it
    (``gemm_boxes.b_shares``: ``block_n / 2``, or 88 of 168)."""
    return p.config.shares[0] if multicasts(p, "B") else p.config.block_n


def b_peer_rows(p: Sm90Plan) -> int:
    """The rows of the second B map's box (``B1``): rank 1's share where it differs from rank 0's (80 of 168: the
    halves are uneven, ``block_n % 16 == 8``), else 0 (no second map; the A role's halves are always even)."""
    shares = p.config.shares
    return shares[-1] if multicasts(p, "B") and shares[-1] != shares[0] else 0


def share_row(p: Sm90Plan, role: str, row):
    """The first row of the CTA's load of operand ``role``'s tile whose panel starts at ``row``: multicast, rank 1's
    share after rank 0's."""
    return row + rank(p) * p.config.shares[0] if multicasts(p, role) else row


def share_offset(p: Sm90Plan, role: str, offset):
    """The ring element of the CTA's box of operand ``role`` of the stage whose tile starts at element ``offset``
    (multicast: rank 0's share is whole swizzle atoms, rank 1's box starts on one)."""
    return offset + rank(p) * p.config.shares[0] * BLOCK_K if multicasts(p, role) else offset


def b_row(p: Sm90Plan, row):
    """B's first row of the CTA's load of the tile whose panel starts at ``row`` (``share_row``)."""
    return share_row(p, "B", row)


def b_offset(p: Sm90Plan, offset):
    """The ring element of the CTA's B box of the stage whose B tile starts at element ``offset`` (``share_offset``)."""
    return share_offset(p, "B", offset)


def cta_mask(p: Sm90Plan):
    """The multicast's CTA mask: every CTA of the cluster (``ctaMask`` bit ``r``: rank ``r``)."""
    return T.uint16((1 << p.config.cluster_m) - 1)


@T.macro
def b_load(p, instruction, dst, maps, k0, row0, mbar):
    # the B box's TMA load (instruction: the kernel's, gemm_emit.TMA_LOAD; maps: B's map, then B1's or None):
    # multicast to every CTA of the cluster where B is (multicasts; CTA mask all ones), else the CTA's own; uneven
    # shares (b_peer_rows) load through rank 0's map B or rank 1's B1
    if I.constexpr(not multicasts(p, "B")):
        T.ptx[instruction](dst, T.address_of(maps[0]), k0, row0, mbar)
    elif I.constexpr(b_peer_rows(p) == 0):
        T.ptx[instruction + MULTICAST](dst, T.address_of(maps[0]), k0, row0, mbar, cta_mask(p))
    else:
        if rank(p) == 0:
            T.ptx[instruction + MULTICAST](dst, T.address_of(maps[0]), k0, row0, mbar, cta_mask(p))
        else:
            T.ptx[instruction + MULTICAST](dst, T.address_of(maps[1]), k0, row0, mbar, cta_mask(p))


@T.macro
def a_load(p, instruction, dst, tensor_map, k0, row0, mbar):
    # the kernel's A box's share multicast to every CTA of the cluster (multicasts(p, "A"): swap_ab's weights; the
    # halves of block_m are whole atoms, one map)
    T.ptx[instruction + MULTICAST](dst, T.address_of(tensor_map), k0, row0, mbar, cta_mask(p))


@T.macro
def release(p, MB, index):
    # a consumer warpgroup's release of the stage whose "empty" mbarrier is MB[index]: its own CTA's and, in a
    # cluster, the peer's (mapa of the same barrier into the other CTA; a .shared::cluster arrive with the default
    # .release.cta semantics, as CUTLASS's ClusterBarrier::arrive(cta_id, pred); with .release.cluster the clustered
    # kernel ran 1.6-2.1x slower than the unclustered one on an H100: docs/sm90_gemm.md "Clusters")
    T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([index]), T.uint32(1))
    if I.constexpr(p.config.cluster_m > 1):
        remote = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        T.ptx.mapa.shared__cluster.u32(remote[0], T.cuda.cvta_generic_to_shared(MB.ptr_to([index])),
                                       T.Cast("uint32", 1 - rank(p)))
        T.ptx.mbarrier.arrive.shared__cluster.b64(remote[0])


@T.macro
def cluster_sync(p):
    # every thread of the cluster's CTAs (a cluster only): barrier.cluster.arrive (release) + wait (acquire)
    if I.constexpr(p.config.cluster_m > 1):
        T.ptx["barrier.cluster.arrive.aligned"]()
        T.ptx["barrier.cluster.wait.aligned"]()


__all__ = ["MULTICAST", "a_box_rows", "a_load", "b_box_rows", "b_load", "b_offset", "b_peer_rows", "b_row", "cluster_sync",
           "cta_mask", "empty_arrivals", "launch", "multicasts", "rank", "release", "share_offset", "share_row"]
