"""Thread-block clusters in the sm90 emulator (PTX ISA 9.4 §5.1.2 "Cluster of cooperative thread arrays",
§9.7.10.26 ``mapa``, §9.7.15.16 ``mbarrier`` on ``.shared::cluster``, §9.7.15.2 ``barrier.cluster``, §9.7.10.28.5
``cp.async.bulk.tensor`` with ``.multicast::cluster``).

A kernel launched with a cluster shape (``T.cuda.LaunchConfig(cluster=...)``, the launch's ``clusterDim``) runs the
CTAs of one cluster in the same emulated batch: :func:`order` sorts the chosen workgroups cluster by cluster and
:class:`Cluster` tells each workgroup of the batch its cluster and its rank (``%cluster_ctarank``: ``x % cx + (y %
cy) * cx + (z % cz) * cx * cy`` of its ``blockIdx``, which is ``blockIdx.x % cx`` for a cluster along x: how TIRx's
tile schedulers compute it) and finds a peer of a given rank.

Addresses. A shared::cta address is the workgroup's shared-window address (``Machine.shared_address``); ``mapa`` of
it into the CTA of rank ``r`` is the emulator's shared::cluster address ``addr | (r + 1) << RANK_SHIFT`` (the
hardware's encoding is not modelled: only ``mapa``'s result names another CTA). An instruction on a
``.shared::cluster`` address (``mbarrier.arrive``) acts on the shared memory of that CTA (:func:`targets`); a
mapped address where a shared::cta one is expected is reported.

Ordering. A remote arrival orders nothing in the receiving CTA (its arriving warp accessed only its own shared
memory); a multicast box lands in each masked CTA as a write of that CTA's thread of the issuing thread's index
(the same warp in every CTA: the producer warps of a cluster run one lockstep) and completes the transaction of its
bytes on the mbarrier at the same offset there.

``barrier.cluster.arrive{.release,.relaxed}{.aligned}`` / ``barrier.cluster.wait{.acquire}{.aligned}``: a phase
completes when every thread of every CTA of the cluster has arrived; a wait before then hands the run to another
task (a warp-specialized branch) or is a deadlock; a completed wait orders the CTA's warps as ``__syncthreads``.

Exit. A CTA that made a remote access (an arrival on a peer's mbarrier, a multicast into a peer) must take part
in a cluster barrier after it, or its peer may exit (and its shared memory be reused) while the access is still
on its way, or it may exit while its own shared memory is still written: at the end of the kernel such an access
is an ``EmulationError`` (:func:`unfinished`).
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError

RANK_SHIFT = 24
"""Bit of the emulated shared::cluster address where ``rank + 1`` starts (shared windows are below 2^24 bytes)."""
DIMS = "xyz"


def dims(cluster: dict) -> tuple:
    return tuple(int(cluster.get(d, 1)) for d in DIMS)


def order(chosen: np.ndarray, grid: dict, cluster: dict) -> np.ndarray:
    """The chosen workgroups (linear indices) cluster by cluster, each cluster's by rank; ValueError for a grid
    the cluster does not divide or a cluster chosen in part (``emulate``'s ``workgroups``)."""
    c, g = dims(cluster), tuple(int(grid.get(d, 1)) for d in DIMS)
    if any(gi % ci for gi, ci in zip(g, c)):
        raise ValueError(f"emulate: the cluster {c} does not divide the grid {g} (CUDA requires whole clusters)")
    cid, rank = _ids(chosen, g, c)
    size = int(np.prod(c))
    keys = np.lexsort((rank, cid))
    ordered_c = cid[keys]
    counts = np.unique(ordered_c, return_counts=True)[1]
    if (counts != size).any():
        raise ValueError(f"emulate: workgroups: a cluster of {size} CTAs is emulated whole; the chosen workgroups hold "
                         f"part of one (cluster shape {c})")
    return chosen[keys]


def _ids(linear: np.ndarray, grid: tuple, c: tuple):
    x, y, z = linear % grid[0], (linear // grid[0]) % grid[1], linear // (grid[0] * grid[1])
    gx, gy = grid[0] // c[0], grid[1] // c[1]
    cid = x // c[0] + (y // c[1]) * gx + (z // c[2]) * gx * gy
    rank = x % c[0] + (y % c[1]) * c[0] + (z % c[2]) * c[0] * c[1]
    return cid, rank


class Cluster:
    """The cluster geometry of one batch (``machine.cluster``): each workgroup's cluster id and rank."""

    def __init__(self, machine, grid: dict, cluster: dict):
        c, g = dims(cluster), tuple(int(grid.get(d, 1)) for d in DIMS)
        self.machine, self.shape, self.size = machine, c, int(np.prod(c))
        self.cid, self.rank = _ids(np.asarray(machine.groups, np.int64), g, c)
        self.arrived = np.zeros(machine.nthreads, bool)  # barrier.cluster: arrived in the current phase
        self.awaits = np.zeros(machine.nthreads, np.int64)  # the phase count a thread's wait needs
        self.armed = np.zeros(machine.nthreads, bool)  # arrived since its last wait
        self.phases = {}  # cluster id -> phases completed
        self.remote: dict[int, str] = {}  # workgroup -> its last remote access not yet followed by a cluster barrier

    def peer(self, g: np.ndarray, rank: np.ndarray, what: str, where: str) -> np.ndarray:
        """The workgroups (batch indices) of rank ``rank`` in the clusters of workgroups ``g``."""
        g, rank = np.asarray(g, np.int64), np.asarray(rank, np.int64)
        bad = (rank < 0) | (rank >= self.size)
        if bad.any():
            k = int(np.argmax(bad))
            raise EmulationError(f"{what}: CTA rank {int(rank[k])} is outside the cluster of {self.size} CTAs "
                                 f"(shape {self.shape})", where, int(self.machine.groups[g[k]]), None, None)
        table = {(int(c), int(r)): i for i, (c, r) in enumerate(zip(self.cid, self.rank))}
        return np.array([table[(int(self.cid[a]), int(b))] for a, b in zip(g, rank)], np.int64)

    def members(self, g: int) -> np.ndarray:
        return np.flatnonzero(self.cid == self.cid[g])

    def note_remote(self, g, what: str, where: str) -> None:
        for gi in np.unique(np.asarray(g)):
            self.remote[int(gi)] = f"{what} at {where}"


def of(machine) -> Cluster | None:
    return getattr(machine, "cluster", None)


def require(machine, what: str, where: str) -> Cluster:
    c = of(machine)
    if c is None:
        raise EmulationError(f"{what}: the kernel is launched without a cluster (T.cuda.LaunchConfig(cluster=...))", where)
    return c


def local_address(machine, addr, what: str, where: str):
    """``addr`` (shared-window addresses) checked to name no other CTA: a shared::cluster address from ``mapa``
    where a shared::cta one is expected is reported."""
    a = np.asarray(addr).astype(np.int64)
    if (a >> RANK_SHIFT).any():
        r = int((a[a >> RANK_SHIFT != 0].reshape(-1)[0] >> RANK_SHIFT) - 1)
        raise EmulationError(f"{what}: the address is a shared::cluster address of the cluster's CTA {r} (mapa); "
                             "this operand takes a shared::cta address", where)
    return a


def targets(machine, addr, threads: np.ndarray, what: str, where: str):
    """(the shared::cta addresses, the workgroup each thread's ``.shared::cluster`` address names) of the
    threads ``threads``: a ``mapa`` result names its CTA, a plain address the thread's own."""
    a = np.broadcast_to(np.asarray(addr).astype(np.int64), (machine.nthreads,))
    own = machine.wg_of[threads]
    rank = (a[threads] >> RANK_SHIFT) - 1
    local = a & ((1 << RANK_SHIFT) - 1)
    if (rank < 0).all():
        return local, own
    c = require(machine, what, where)
    dest = own.copy()
    mapped = rank >= 0
    dest[mapped] = c.peer(own[mapped], rank[mapped], what, where)
    if (dest != own).any():
        c.note_remote(own[dest != own], what, where)
    return local, dest


def mapa(compiler, call):
    """``mapa.shared::cluster.u32 d, a, b`` (PTX ISA §9.7.10.26): ``d`` is shared::cta address ``a`` mapped into
    the cluster's CTA of rank ``b`` (module docstring: the emulator's encoding); a rank outside the cluster is
    reported."""
    from .ptx_operands import _per_thread, _writer

    machine, where = compiler.machine, call.where
    a, b = compiler.expr(call.operands["a"][0]), compiler.expr(call.operands["b"][0])
    write = _writer(compiler, call.operands["d"][0])

    def run(env, mask):
        c = require(machine, "mapa", where)
        active = machine.active(mask)
        threads = np.flatnonzero(active)
        if not threads.size:
            return
        T = machine.nthreads
        addr = _per_thread(np.asarray(a(env, mask)).astype(np.int64), T) & ((1 << RANK_SHIFT) - 1)
        rank = _per_thread(np.asarray(b(env, mask)).astype(np.int64), T)
        c.peer(machine.wg_of[threads], rank[threads], "mapa", where)  # the rank's check
        out = (addr | ((rank + 1) << RANK_SHIFT)).astype(np.uint32)
        write(env, active, out.view(np.uint8).reshape(T, 4))
    return run


def barrier_cluster(wait: bool):
    def factory(compiler, call):
        """``barrier.cluster.arrive{.release,.relaxed}{.aligned}`` / ``barrier.cluster.wait{.acquire}{.aligned}``
        (PTX ISA §9.7.15.2; module docstring)."""
        machine, where = compiler.machine, call.where
        what = f"barrier.cluster.{'wait' if wait else 'arrive'}"

        def run(env, mask):
            c = require(machine, what, where)
            threads = np.flatnonzero(machine.active(mask))
            if threads.size:
                (_wait if wait else _arrive)(c, threads, what, where)
        return run
    return factory


def _arrive(c: Cluster, threads, what: str, where: str) -> None:
    m = c.machine
    twice = threads[c.arrived[threads]]
    if twice.size:
        raise EmulationError(f"{what}: a second arrival before the phase completed (no barrier.cluster.wait between)",
                             where, *m.coords(int(twice[0])))
    c.arrived[threads] = c.armed[threads] = True
    for cid in np.unique(c.cid[m.wg_of[threads]]):
        c.awaits[threads[c.cid[m.wg_of[threads]] == cid]] = c.phases.get(int(cid), 0) + 1
        inside = np.isin(m.wg_of, np.flatnonzero(c.cid == cid))
        if c.arrived[inside].all():
            c.phases[int(cid)] = c.phases.get(int(cid), 0) + 1
            c.arrived[inside] = False
            groups = np.flatnonzero(c.cid == cid)
            for g in groups:
                c.remote.pop(int(g), None)
    tasks = m.state.get("tasks")
    if tasks is not None:
        tasks.progressed()


def _wait(c: Cluster, threads, what: str, where: str) -> None:
    m = c.machine
    tasks = m.state.get("tasks")

    def missing():
        cid = c.cid[m.wg_of[threads]]
        done = (np.array([c.phases.get(int(k), 0) for k in cid]) >= c.awaits[threads]) & c.armed[threads]
        return threads[~done]

    while missing().size and tasks is not None and tasks.block():
        pass
    late = missing()
    if late.size:
        t = int(late[0])
        cid = c.cid[m.wg_of[t]]
        inside = np.isin(m.wg_of, np.flatnonzero(c.cid == cid))
        raise EmulationError(f"deadlock: {what}: {int(c.arrived[inside].sum())} of {int(inside.sum())} threads of the "
                             f"cluster arrived (a barrier.cluster.arrive missing in some thread, or a wait without an "
                             "arrive)", where, *m.coords(t))
    c.armed[threads] = False
    groups = np.zeros(len(m.groups), bool)
    groups[m.wg_of[threads]] = True
    m.epoch[groups] += 1
    m.seen[groups] = m.epoch[groups, None, None]


def unfinished(machine) -> None:
    """At the end of a launch: EmulationError for a remote access no cluster barrier followed (module docstring)."""
    c = of(machine)
    if c is None or not c.remote:
        return
    g, why = next(iter(sorted(c.remote.items())))
    raise EmulationError(f"CTA {int(c.rank[g])} of cluster {int(c.cid[g])} made a remote access ({why}) that no "
                         "barrier.cluster.arrive / wait of the whole cluster follows: a CTA of the cluster may exit "
                         "while its shared memory is still accessed", "end of kernel", int(machine.groups[g]), None, None)
