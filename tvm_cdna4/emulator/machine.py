"""Thread geometry, buffers and wave-level rules of one emulated launch (a batch of workgroups)."""

from __future__ import annotations

import numpy as np

from .cluster import local_address
from .errors import EmulationError
from .memory import Buffer

_DIMS = "xyz"
SHARED_ALIGN = 1024  # sm90 shared-window layout: each buffer's base (a 128B-swizzle period)


class Machine:
    def __init__(self, grid: dict[str, int], block: dict[str, int], wave_size: int, groups: np.ndarray,
                 global_buffers: dict[str, Buffer], lds_waits: bool = False):
        self.grid, self.block, self.wave_size = grid, block, wave_size
        self.fp8_accumulation = None  # sm90: the bits fp8 wgmma keeps of each addend (emulate's fp8_accumulation)
        self.groups = np.asarray(groups)  # global workgroup indices in this batch
        self.block_threads = int(np.prod([block.get(d, 1) for d in _DIMS]))
        g = len(self.groups)
        self.nthreads = g * self.block_threads
        self.wg_of = np.repeat(np.arange(g), self.block_threads)
        self.tid = np.tile(np.arange(self.block_threads), g)
        self.wave_of = (self.tid // wave_size).astype(np.int32)
        self.lane_of = self.tid % wave_size
        self.waves_per_group = -(-self.block_threads // wave_size)
        self.epoch = np.zeros(g, np.int64)  # the workgroup's clock: +1 at each barrier event; accesses stamped with it
        # seen[g, a, b]: wave b's accesses stamped below it are ordered before wave a's next accesses
        self.seen = np.zeros((g, self.waves_per_group, self.waves_per_group), np.int64)
        self.named: dict[int, NamedBarrier] = {}  # sm80 named barriers (bar.sync / bar.arrive with a count)
        self.globals = global_buffers
        self.state: dict = {}  # per-launch state of a target's call table (e.g. in-flight async copies)
        self.allow_uninitialized = False  # LDS reads of never-written bytes: error (False) or zeros
        self.stats: dict | None = None  # access statistics (shared bank conflicts), when asked for
        # LDS operations in flight (gfx950: a write completes only at an lgkmcnt wait; see issue_lds)
        self.lds_waits = lds_waits
        self.lgkm_issued = np.zeros((g, self.waves_per_group), np.int64)  # LDS operations issued per wave
        self.lgkm_done = np.zeros_like(self.lgkm_issued)  # operations 1..done of each wave have completed
        self.lgkm_at_barrier = np.zeros((g, 8, self.waves_per_group), np.int64)  # [g, e]: lgkm_done leaving epoch e
        self._zero = np.zeros(self.nthreads, np.int64)
        self._threads = np.arange(self.nthreads)
        # sm90: shared addresses as integers of the workgroup's shared window (shared_address)
        self.integer_shared = False
        self.async_registers = False  # sm90: a wgmma accessing its own in-flight registers (memory._check_registers)
        self.shared_window: list[tuple[int, Buffer]] = []  # (base address, buffer), in allocation order
        self.cluster = None  # sm90: the batch's cluster geometry (emulator.cluster.Cluster), launched with one

    # -- memory --------------------------------------------------------------------------------
    def state_of(self, key: str, make):
        """The launch's state ``key`` of a target's call table (in-flight copies, barriers), made by
        ``make(self)`` on first use."""
        if key not in self.state:
            self.state[key] = make(self)
        return self.state[key]

    def instance(self, buf: Buffer) -> np.ndarray:
        if buf.scope == "global":
            return self._zero
        if buf.scope.startswith("shared"):
            return self.wg_of
        return self._threads

    def allocate(self, name: str, scope: str, nbytes: int) -> Buffer:
        if scope.startswith("shared"):
            buf = Buffer(name, "shared", np.zeros((len(self.groups), nbytes), np.uint8), track=True)
            top = self.shared_window[-1][0] + self.shared_window[-1][1].nbytes if self.shared_window else 0
            self.shared_window.append((-(-top // SHARED_ALIGN) * SHARED_ALIGN, buf))
            return buf
        if scope == "local":
            return Buffer(name, "local", np.zeros((self.nthreads, nbytes), np.uint8))
        raise EmulationError(f"allocation of {name} in scope {scope!r} is not supported", name)

    def shared_address(self, ptr) -> np.ndarray:
        """The 32-bit shared-window address of a shared pointer: its buffer's base plus its offset
        (buffers laid out in allocation order, each aligned to ``SHARED_ALIGN`` bytes, so a swizzle
        pattern of the address is that of the offset)."""
        base = next(b for b, buf in self.shared_window if buf is ptr.buffer)
        return (np.asarray(ptr.offset, np.int64) + base).astype(np.uint32)

    def shared_pointer(self, addr, what: str, where: str):
        """The (buffer, offset) of shared-window addresses ``addr`` (one buffer for all of them)."""
        from .memory import Pointer

        a = local_address(self, addr, what, where)  # not a peer CTA's (emulator.cluster)
        flat = np.unique(a)
        for base, buf in self.shared_window:
            if base <= flat[0] < base + max(buf.nbytes, 1):
                if flat[-1] >= base + buf.nbytes:
                    raise EmulationError(f"{what}: shared addresses {int(flat[0])}..{int(flat[-1])} span more than "
                                         f"'{buf.name}' (bytes {base}..{base + buf.nbytes - 1})", where)
                return Pointer(buf, a - base)
        raise EmulationError(f"{what}: shared address {int(flat[0])} is in no shared buffer", where)

    # -- geometry ------------------------------------------------------------------------------
    def thread_index(self, tag: str):
        kind, dim = tag.split(".")
        if kind == "threadIdx":
            stride = int(np.prod([self.block.get(d, 1) for d in _DIMS[: _DIMS.index(dim)]]))
            return ((self.tid // stride) % self.block.get(dim, 1)).astype(np.int32)
        if kind == "blockIdx":
            stride = int(np.prod([self.grid.get(d, 1) for d in _DIMS[: _DIMS.index(dim)]]))
            return ((self.groups[self.wg_of] // stride) % self.grid.get(dim, 1)).astype(np.int32)
        raise EmulationError(f"unknown launch tag {tag}", tag)

    def coords(self, thread: int):
        return int(self.groups[self.wg_of[thread]]), int(self.wave_of[thread]), int(self.lane_of[thread])

    def active(self, mask) -> np.ndarray:
        return np.ones(self.nthreads, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), (self.nthreads,))

    def wave_counts(self, mask) -> np.ndarray:
        """Active lanes per (workgroup, wave): shape (groups, waves_per_group)."""
        counts = np.zeros((len(self.groups), self.waves_per_group), np.int64)
        np.add.at(counts, (self.wg_of, self.wave_of), self.active(mask))
        return counts

    # -- wave rules ----------------------------------------------------------------------------
    def require_full_waves(self, mask, what: str, where: str) -> None:
        counts = self.wave_counts(mask)
        partial = (counts > 0) & (counts < self.wave_size)
        if partial.any():
            g, w = (int(x) for x in np.argwhere(partial)[0])
            lanes = np.nonzero(~self.active(mask) & (self.wg_of == g) & (self.wave_of == w))[0]
            raise EmulationError(
                f"wave-collective {what} executed with {int(counts[g, w])} of {self.wave_size} lanes active",
                where, int(self.groups[g]), w, int(self.lane_of[lanes[0]]))

    def barrier(self, mask, where: str) -> None:
        counts = self.wave_counts(mask)
        reached = counts > 0
        bad = reached.any(axis=1) & ~reached.all(axis=1)
        if bad.any():
            g = int(np.argmax(bad))
            w = int(np.argmax(~reached[g]))
            raise EmulationError(f"barrier not reached by all waves of the workgroup (wave {w} skips it)",
                                 where, int(self.groups[g]), w, None)
        self._record_lds_completion(reached.any(axis=1))
        self.epoch[reached.any(axis=1)] += 1
        self.seen[reached.any(axis=1)] = self.epoch[reached.any(axis=1), None, None]

    # -- happens-before between waves (the LDS race checks) -------------------------------------
    def unordered(self, g, wave, other, stamp) -> np.ndarray:
        """Whether an access of wave ``other`` (-1: none, -2: several waves) stamped ``stamp`` is NOT
        ordered before wave ``wave``'s access now (workgroup ``g``; arrays of one shape). With only
        CTA-wide barriers this is "same epoch, other wave"; named barriers order only the waves they
        join (``NamedBarrier``). For "several waves" the least-synchronized other wave counts."""
        W = self.waves_per_group
        limit = self.seen[g, wave, np.maximum(other, 0)]
        several = other == -2
        if several.any() and W > 1:
            own = np.eye(W, dtype=bool)[wave[several]]
            limit = limit.copy()
            limit[several] = np.where(own, np.iinfo(np.int64).max, self.seen[g[several], wave[several]]).min(axis=-1)
        return (other != -1) & (other != wave) & (stamp >= limit)

    # -- LDS completion (lgkmcnt) --------------------------------------------------------------
    # On gfx950 an LDS access is one LGKM operation of its wave, counted in issue order; it has
    # completed once the wave executes ``s_waitcnt lgkmcnt(n)`` with at most ``n`` newer operations
    # (the emulator counts one operation per TIR access; the compiler may split or merge them). A
    # write that has not completed when its wave reaches ``s_barrier`` is not ordered before the
    # other waves' accesses after the barrier.
    def issue_lds(self, threads: np.ndarray) -> np.ndarray:
        """Count one LDS operation for each wave among ``threads``; each thread's sequence number."""
        g, w = self.wg_of[threads], self.wave_of[threads]
        issued = np.zeros(self.lgkm_issued.shape, bool)
        issued[g, w] = True
        self.lgkm_issued += issued
        return self.lgkm_issued[g, w]

    def wait_lds(self, mask, outstanding: int) -> None:
        """``s_waitcnt lgkmcnt(outstanding)`` in the waves with active lanes."""
        waiting = self.wave_counts(mask) > 0
        self.lgkm_done = np.where(waiting, np.maximum(self.lgkm_done, self.lgkm_issued - outstanding), self.lgkm_done)

    def _record_lds_completion(self, groups: np.ndarray) -> None:
        cap = self.lgkm_at_barrier.shape[1]
        if int(self.epoch.max()) >= cap:
            grown = np.zeros((len(self.groups), max(2 * cap, int(self.epoch.max()) + 1), self.waves_per_group), np.int64)
            grown[:, :cap] = self.lgkm_at_barrier
            self.lgkm_at_barrier = grown
        g = np.flatnonzero(groups)
        self.lgkm_at_barrier[g, self.epoch[g]] = self.lgkm_done[g]

    def unpublished(self, g, wave, seq, epoch) -> np.ndarray:
        """Whether LDS write number ``seq`` of ``wave`` (workgroup ``g``), made before epoch
        ``epoch``, was still in flight when that wave left epoch ``epoch - 1``."""
        return self.lgkm_at_barrier[g, np.maximum(epoch - 1, 0), np.maximum(wave, 0)] < seq

    def waves(self, mask):
        """Yield (thread indices of one fully active wave) for each wave with active lanes."""
        counts = self.wave_counts(mask)
        base = np.arange(self.wave_size)
        for g, w in np.argwhere(counts > 0):
            yield int(g), int(w), g * self.block_threads + w * self.wave_size + base


class NamedBarrier:
    """One named barrier of every workgroup of the batch (PTX ISA 9.7.13.1 ``bar{.cta}.sync a, b`` /
    ``bar{.cta}.arrive a, b``): a phase completes when ``b`` threads have arrived (whole warps; a
    ``bar.sync`` arrives and waits, ``bar.arrive`` only arrives); then every waiting wave is ordered
    after every arrived wave's accesses made before its arrival, and the barrier starts a new phase.

    The emulator runs all warps in lockstep, in program order, so a ``bar.sync`` must be completed by
    arrivals made before it or by the same instruction, or, inside a warp-specialized branch
    (``emulator.tasks``), by another task's later arrival: its warps wait (the task hands the run
    over) until the phase completes, and are ordered then. A wait no arrival can complete is reported
    as a deadlock."""

    def __init__(self, machine, bid: int):
        g, W = len(machine.groups), machine.waves_per_group
        self.machine, self.bid = machine, bid
        self.count = np.zeros(g, np.int64)  # the phase's expected threads (0: no arrival yet)
        self.arrived = np.zeros(g, np.int64)
        self.arrivers = np.zeros((g, W), bool)
        self.join = np.zeros((g, W), np.int64)  # max of the arrived waves' clocks at arrival
        self.phase = np.zeros(g, np.int64)  # phases completed
        self.waiting = np.zeros((g, W), bool)  # waves of a bar.sync blocked on the phase (emulator.tasks)

    def arrive(self, warps: np.ndarray, count: np.ndarray, wait: bool, where: str) -> None:
        """``warps`` (g, W) bool: the waves arriving now, ``count`` (g,) their ``b`` operand; ``wait``
        for ``bar.sync``. EmulationError for a count that is not whole warps, differs from the
        phase's, overshoots, or (``wait``) leaves the phase incomplete: a deadlock."""
        m = self.machine
        groups = np.flatnonzero(warps.any(axis=1))
        pending = []  # (workgroup, phase, waves) of a bar.sync whose phase is incomplete
        for g in groups:
            self._check_count(g, int(count[g]), where)
            ws = np.flatnonzero(warps[g])
            m.epoch[g] += 1  # accesses before the arrival get a smaller stamp than those after it
            snap = m.seen[g, ws].copy()
            snap[np.arange(len(ws)), ws] = m.epoch[g]
            self.join[g] = np.maximum(self.join[g], snap.max(axis=0))
            self.arrivers[g, ws] = True
            self.arrived[g] += m.wave_size * len(ws)
            if self.arrived[g] > self.count[g]:
                raise EmulationError(f"barrier {self.bid}: {int(self.arrived[g])} threads arrived, more than its count "
                                     f"{int(self.count[g])}", where, int(m.groups[g]), int(ws[0]), None)
            if self.arrived[g] == self.count[g]:
                self._complete(g, ws if wait else ws[:0])
            elif wait:
                self.waiting[g, ws] = True
                pending.append((g, int(self.phase[g]), ws))
        tasks = m.state.get("tasks")
        if tasks is not None:
            tasks.progressed()
        for g, phase, ws in pending:  # another task's later arrival may complete it (emulator.tasks)
            while self.phase[g] == phase and tasks is not None and tasks.block():
                pass
            if self.phase[g] == phase:
                raise EmulationError(self._deadlock(g, ws), where, int(m.groups[g]), int(ws[0]), None)

    def _check_count(self, g: int, count: int, where: str) -> None:
        m = self.machine
        if count <= 0 or count % m.wave_size or count > m.block_threads:
            raise EmulationError(f"barrier {self.bid}: thread count {count} is not a positive multiple of the warp "
                                 f"size {m.wave_size} up to the {m.block_threads} threads of the block", where,
                                 int(m.groups[g]), None, None)
        if self.count[g] and self.count[g] != count:
            raise EmulationError(f"barrier {self.bid}: arrival with count {count} while the phase in progress expects "
                                 f"{int(self.count[g])}", where, int(m.groups[g]), None, None)
        self.count[g] = count

    def _complete(self, g: int, waiters: np.ndarray) -> None:
        """The phase completes; ``waiters`` (the warps of the completing ``bar.sync``) and the waves of an
        earlier ``bar.sync`` blocked on it (another task's: ``emulator.tasks``) are ordered after the
        arrived waves."""
        m = self.machine
        waiters = np.union1d(waiters, np.flatnonzero(self.waiting[g])).astype(np.int64)
        m.seen[g, waiters] = np.maximum(m.seen[g, waiters], self.join[g][None, :])
        self.count[g] = self.arrived[g] = 0
        self.phase[g] += 1
        self.arrivers[g] = self.waiting[g] = False
        self.join[g] = 0

    def _deadlock(self, g: int, waiting) -> str:
        return (f"deadlock on barrier {self.bid}: warps {[int(w) for w in waiting]} wait with "
                f"{int(self.arrived[g])} of {int(self.count[g])} threads arrived (warps "
                f"{[int(w) for w in np.flatnonzero(self.arrivers[g])]}); the missing arrivals never come before "
                "this point of the emulator's lockstep order (a missing bar.arrive, or a wrong count)")

    def unfinished(self) -> str | None:
        """At the end of the kernel: a phase with arrivals but never completed, described; else None."""
        for g in np.flatnonzero(self.arrived):
            return (f"barrier {self.bid}: {int(self.arrived[g])} of {int(self.count[g])} threads arrived (warps "
                    f"{[int(w) for w in np.flatnonzero(self.arrivers[g])]}) and the phase never completed "
                    f"(workgroup {int(self.machine.groups[g])}): a bar.sync is missing or the count is wrong")
        return None
