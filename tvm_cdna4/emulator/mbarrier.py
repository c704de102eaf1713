"""``mbarrier`` objects in shared memory (PTX ISA 9.7.13.15) for the CUDA emulator: ``mbarrier.init``,
``mbarrier.arrive`` (a count, or one), ``mbarrier.test_wait.parity`` / ``try_wait.parity``, TIRx's
blocking ``T.cuda.mbarrier_wait(addr, parity)``, and ``cp.async.mbarrier.arrive.noinc``.

A barrier is a 64-bit word of a shared buffer, identified here by (buffer, byte offset) per
workgroup: its expected count (``init``), the arrivals still pending in the current phase, and the
phases completed. A phase completes when its pending count reaches zero; then the count is
re-armed. A wait on parity ``p`` succeeds when the last completed phase has parity ``p`` (so before
any completion a wait on parity 1 succeeds: the "previous phase" idiom of empty barriers); a
successful wait orders the waiting warp after the accesses each arriving warp made before its
arrival (``Machine.seen``, as named barriers). Waits are not arrivals: warps need not align.

``cp.async.mbarrier.arrive.noinc`` arrives once the thread's earlier ``cp.async`` copies have
landed; the emulator lands them (and makes the arrival) when a warp waits on that barrier and the
phase is not complete yet, or at a ``cp.async.wait_group`` that lands them. ``.noinc``: the init
count includes these arrivals.

The emulator runs warps in lockstep: a blocking wait on an incomplete phase can never be satisfied
by a later instruction (except inside a warp-specialized branch, which hands the run to the other
branch first: ``emulator.tasks``), so it is a deadlock error naming the barrier, its phase and pending count;
``test_wait`` / ``try_wait`` return false, and the same phase polled ``POLLS`` times is one too.
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError

POLLS = 1000  # unsuccessful polls of one phase that count as a deadlock


def progressed(machine) -> None:
    """An mbarrier arrival, transaction or a copy that completes on one: a task blocked on a wait may
    go on (``emulator.tasks``)."""
    if "tasks" in machine.state:
        machine.state["tasks"].progressed()


class MBarrier:
    """One mbarrier word of every workgroup of the batch (module docstring)."""

    def __init__(self, machine, name: str):
        g, W = len(machine.groups), machine.waves_per_group
        self.machine, self.name = machine, name
        self.expected = np.zeros(g, np.int64)  # 0: not initialized
        self.pending = np.zeros(g, np.int64)
        self.phase = np.zeros(g, np.int64)  # phases completed
        self.tx = np.zeros(g, np.int64)  # the current phase's transaction count (bytes expected, not yet completed)
        self.join = np.zeros((g, W), np.int64)  # the current phase's arrivals' clocks
        self.last = np.zeros((g, W), np.int64)  # the last completed phase's
        self.polls = np.zeros(g, np.int64)

    def init(self, g: int, count: int, where: str) -> None:
        if not 0 < count < 2**20:
            raise EmulationError(f"mbarrier.init {self.name}: count {count} is not in 1..2^20-1", where,
                                 int(self.machine.groups[g]), None, None)
        self.expected[g] = self.pending[g] = count
        self.phase[g] = self.polls[g] = self.tx[g] = 0
        self.join[g] = self.last[g] = 0

    def arrive(self, g: int, waves: np.ndarray, counts: np.ndarray, snaps: np.ndarray, where: str) -> None:
        """Arrivals of one instruction in workgroup ``g``, in thread order: ``counts[i]`` by a thread of
        wave ``waves[i]`` whose clock at arrival is ``snaps[i]`` (a ``seen`` row, own entry raised)."""
        m = self.machine
        if not self.expected[g]:
            raise EmulationError(f"mbarrier.arrive on {self.name} before its mbarrier.init", where,
                                 int(m.groups[g]), int(waves[0]), None)
        progressed(m)
        for k in range(len(waves)):
            if counts[k] > self.pending[g]:
                tma = m.state.get("tma")
                late = tma.in_flight(self, g) if tma is not None else None
                raise EmulationError(f"mbarrier.arrive on {self.name}: count {int(counts[k])} exceeds the "
                                     f"{int(self.pending[g])} arrivals pending in phase {int(self.phase[g])}"
                                     + (f" {late}" if late else ""), where, int(m.groups[g]), int(waves[k]), None)
            self.join[g] = np.maximum(self.join[g], snaps[k])
            self.pending[g] -= counts[k]
            self._complete(g)

    def transact(self, g: int, nbytes: int, snap, where: str) -> None:
        """``expect-tx`` (``nbytes`` > 0: the phase waits for that many more bytes) or ``complete-tx``
        (< 0: bytes landed, by an access whose clock is ``snap``, or None) in workgroup ``g`` (PTX ISA 9.4
        §9.7.15.16: a phase completes when its pending arrivals and its transaction count are zero)."""
        if not self.expected[g]:
            raise EmulationError(f"mbarrier expect-tx/complete-tx on {self.name} before its mbarrier.init", where,
                                 int(self.machine.groups[g]), None, None)
        if not -(2**20) < self.tx[g] + nbytes < 2**20:
            raise EmulationError(f"mbarrier {self.name}: transaction count {int(self.tx[g] + nbytes)} is outside "
                                 "the range -(2^20-1)..2^20-1", where, int(self.machine.groups[g]), None, None)
        self.tx[g] += nbytes
        progressed(self.machine)
        if snap is not None:
            self.join[g] = np.maximum(self.join[g], snap)
        self._complete(g)

    def _complete(self, g: int) -> None:
        if self.pending[g] == 0 and self.tx[g] == 0:
            self.last[g], self.join[g] = self.join[g], 0
            self.phase[g] += 1
            self.pending[g] = self.expected[g]
            self.polls[g] = 0

    def done(self, g: int, parity: int) -> bool:
        return int(self.phase[g]) % 2 != parity

    def describe(self, g: int, parity: int) -> str:
        tx = f", {int(self.tx[g])} transaction bytes pending" if self.tx[g] else ""
        return (f"mbarrier {self.name}: waiting for the phase of parity {parity}; {int(self.phase[g])} phases "
                f"completed, {int(self.pending[g])} of {int(self.expected[g])} arrivals pending{tx}")


class MBarriers:
    """The launch's mbarriers (``machine.state["mbarrier"]``) and the deferred arrivals of
    ``cp.async.mbarrier.arrive.noinc`` (thread, the copies issued before it, the barrier)."""

    def __init__(self, machine):
        self.machine = machine
        self.bars: dict[tuple, MBarrier] = {}
        self.deferred: list[dict] = []

    def barrier(self, buf, offset: int) -> MBarrier:
        key = (id(buf), int(offset))
        if key not in self.bars:
            self.bars[key] = MBarrier(self.machine, f"'{buf.name}' byte {int(offset)}")
        return self.bars[key]

    def snapshot(self, threads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Advance the clocks of the threads' workgroups; each thread's wave's ``seen`` row with its
        own entry past every access it made so far, and the stamp those accesses are below."""
        m = self.machine
        g, w = m.wg_of[threads], m.wave_of[threads]
        for gi in np.unique(g):
            m.epoch[gi] += 1
        snaps = m.seen[g, w].copy()
        snaps[np.arange(len(threads)), w] = m.epoch[g]
        return snaps, m.epoch[g] - 1

    def by_barrier(self, ptr, threads: np.ndarray, dest=None):
        """Yield (workgroup, barrier, positions in ``threads``) for each barrier word addressed (in the
        threads' own workgroups, or ``dest``: each thread's, a cluster's peer for a ``.shared::cluster`` one)."""
        m = self.machine
        offs = np.broadcast_to(np.asarray(ptr.offset, np.int64), (m.nthreads,))[threads]
        groups = m.wg_of[threads] if dest is None else dest
        for off in np.unique(offs):
            bar = self.barrier(ptr.buffer, off)
            for g in np.unique(groups[offs == off]):
                yield int(g), bar, np.flatnonzero((offs == off) & (groups == g))

    def arrive(self, ptr, threads, counts, where: str, dest=None) -> None:
        """Arrivals of ``threads`` (``dest``: on the barrier of each one's target workgroup, ``emulator.cluster``;
        an arrival on another CTA's barrier orders nothing there)."""
        snaps, _ = self.snapshot(threads)
        if dest is not None:
            snaps[dest != self.machine.wg_of[threads]] = 0
        for g, bar, pos in self.by_barrier(ptr, threads, dest):
            bar.arrive(g, self.machine.wave_of[threads[pos]], counts[pos], snaps[pos], where)

    def defer(self, ptr, threads, seq: int, where: str) -> None:
        snaps, stamps = self.snapshot(threads)
        progressed(self.machine)
        for g, bar, pos in self.by_barrier(ptr, threads):
            self.deferred.append(dict(bar=bar, g=g, threads=threads[pos], seq=seq, snaps=snaps[pos],
                                      stamps=stamps[pos], where=where))

    def resolve(self, copies, bar=None, where: str = "") -> None:
        """Make the deferred arrivals on ``bar`` (None: all) whose copies ``copies`` can land: land them
        (stamped as of the arrive instruction) and arrive. A copy lands stamped as of the first arrive its
        thread issued after it: the copies before an earlier arrival still deferred (on another barrier)
        land first, by that arrival's stamp (``self.deferred`` is in issue order)."""
        keep = []
        for d in self.deferred:
            if bar is not None and d["bar"] is not bar:
                keep.append(d)
                continue
            for e in keep:
                common = np.isin(e["threads"], d["threads"])
                if common.any():
                    copies.land_before(e["threads"][common], e["seq"], e["stamps"][common], where or e["where"])
            copies.land_before(d["threads"], d["seq"], d["stamps"], where or d["where"])
            d["bar"].arrive(d["g"], self.machine.wave_of[d["threads"]], np.ones(len(d["threads"]), np.int64),
                            d["snaps"], d["where"])
        self.deferred = keep

    def ready(self, copies, bar, g: int, parity: int, where: str) -> bool:
        """Whether the phase of ``parity`` has completed, once the copies that can complete it landed."""
        m = self.machine
        if not bar.done(g, parity):
            self.resolve(copies, bar, where)
        if not bar.done(g, parity) and "tma" in m.state:  # sm90: bulk tensor copies complete-tx
            m.state["tma"].land(bar, where)
        return bar.done(g, parity)

    def handover(self) -> bool:
        """A blocking wait on an incomplete phase inside a task: run the other task (True), or False
        when none can run (``emulator.tasks``)."""
        tasks = self.machine.state.get("tasks")
        return tasks is not None and tasks.block()

    def wait(self, copies, ptr, threads, parity, where: str, blocking: bool) -> np.ndarray:
        """Per thread of ``threads``: whether the phase of ``parity`` (per thread) has completed;
        a successful wait orders the thread's wave after that phase's arrivals."""
        m = self.machine
        ok = np.zeros(len(threads), bool)
        for g, bar, pos in self.by_barrier(ptr, threads):
            for par in np.unique(parity[pos]):
                sel = pos[parity[pos] == par]
                while not self.ready(copies, bar, g, int(par), where) and blocking and self.handover():
                    pass  # another task ran (a warp-specialized branch: emulator.tasks); try again
                if bar.done(g, int(par)):
                    waves = np.unique(m.wave_of[threads[sel]])
                    m.seen[g, waves] = np.maximum(m.seen[g, waves], bar.last[g][None, :])
                    ok[sel] = True
                    continue
                bar.polls[g] += 1
                if blocking or bar.polls[g] >= POLLS:
                    raise EmulationError(f"deadlock: {bar.describe(g, int(par))}; in the emulator's lockstep order "
                                         "no later arrival can complete it (a missing arrive, or a wrong count)",
                                         where, int(m.groups[g]), int(m.wave_of[threads[sel[0]]]), None)
        return ok
