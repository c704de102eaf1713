"""Global memory's race checks over a whole launch (every batch of workgroups), and their records.

* Plain stores (``record_store``, every target): a byte stored by two workgroups in one launch is a
  race (the hardware keeps either value); on gfx950 a release by the first and an acquire by the
  second order them (``GlobalAtomics``).
* sm80 ``st`` / ``red`` / ``atom`` (``cta_writes``): two threads storing one byte in one instruction,
  a plain store to a byte another CTA stored or (last) updated atomically, an atomic update of a byte
  another CTA stored.
* gfx950 atomics and agent-scope fences (``GlobalAtomics``, docs/emulator.md "Global atomics and fences").

The records (``Records``, one per global buffer that is written, ``Buffer.records``) hold, per byte,
which workgroup stored it, which updated it atomically, and what the fences published. They are
kept per *granule*, the greatest common divisor of every access's offset and size so far (an f32
output written by 4- or 16-byte stores: one record per 4 or 16 bytes; a narrower access refines
them, each record repeated over the finer granules, so a record always stands for bytes that were
accessed together and the checks see what per-byte records would), in the narrowest integer type
that holds the values so far (int8 up to int64, widened when a larger workgroup number or count
comes), each field allocated on first use. A 1 GiB f32 output of 16384 workgroups takes 512 MiB of
store records (int16 per 4 bytes), where int64 per byte took 8 GiB per field.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .errors import EmulationError

_WIDTHS = (np.int8, np.int16, np.int32, np.int64)
FILL = {"owner": -1, "atomic_owner": -1, "unpublished": 0, "published_at": 0, "last": -1}


class Records:
    """Per-granule integer fields of one global buffer's bytes (the module docstring)."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.granule = 0  # 0: no access yet
        self.fields: dict[str, np.ndarray] = {}
        self.base = next(GlobalAtomics.clock)  # "published_at" holds fence clocks after it, minus it (small numbers)
        self.origin = 0  # the buffer's address of offset 0 (a buffer held in part: arguments.Window)

    def byte(self, granule) -> int:
        """The buffer's address of ``granule`` (what an error names)."""
        return self.origin + int(granule) * self.granule

    @property
    def size(self) -> int:
        """The bytes the records take."""
        return sum(a.nbytes for a in self.fields.values())

    def spans(self, starts, size: int) -> np.ndarray:
        """The granules of accesses of ``size`` bytes at byte offsets ``starts``, each access's in
        order (``size // granule`` each); an access that splits a granule refines them first."""
        starts = np.asarray(starts, np.int64).ravel()
        g = self.granule
        if g == 0 or size % g or (starts.size and (starts % g).any()):
            g = math.gcd(size, g, int(np.gcd.reduce(starts)) if starts.size else 0)
        if self.granule == 0:
            self.granule = g
        elif g < self.granule:
            self._refine(g)
        per = size // self.granule
        first = starts // self.granule
        return first if per == 1 else (first[:, None] + np.arange(per)).ravel()

    def regrain(self, idx: np.ndarray, granule: int) -> tuple[np.ndarray, int]:
        """Granules ``idx`` of an earlier granule size, in today's; each became ``factor`` of them."""
        factor = granule // self.granule
        return (idx if factor == 1 else (idx[:, None] * factor + np.arange(factor)).ravel()), factor

    def _refine(self, g: int) -> None:
        factor, count = self.granule // g, -(-self.nbytes // g)
        self.fields = {name: np.repeat(a, factor)[:count] for name, a in self.fields.items()}
        self.granule = g

    def get(self, name: str, idx: np.ndarray) -> np.ndarray:
        a = self.fields.get(name)
        return np.full(len(idx), FILL[name], np.int8) if a is None else a[idx]

    def has(self, name: str) -> bool:
        return name in self.fields

    def put(self, name: str, idx: np.ndarray, values) -> None:
        values = np.asarray(values)
        a = self.fields.get(name)
        if a is None:
            a = self.fields[name] = np.full(-(-self.nbytes // self.granule), FILL[name], np.int8)
        if values.size and (values.min() < np.iinfo(a.dtype).min or values.max() > np.iinfo(a.dtype).max):
            lo, hi = min(int(values.min()), FILL[name]), max(int(values.max()), FILL[name])
            wide = next(t for t in _WIDTHS if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
            a = self.fields[name] = a.astype(wide)
        a[idx] = values

    def add(self, name: str, idx: np.ndarray, delta: int) -> None:
        """``field[i] += delta`` for each occurrence of ``i`` in ``idx``."""
        if idx.size:
            uniq, count = np.unique(idx, return_counts=True)
            self.put(name, uniq, self.get(name, uniq).astype(np.int64) + delta * count)


def records_of(buf) -> Records:
    if buf.records is None:
        buf.records = Records(buf.held)  # offsets in the bytes held (memory.held_offsets)
        buf.records.origin = buf.origin
    return buf.records


def _first_clash(idx: np.ndarray, who: np.ndarray) -> tuple[int, int]:
    """Of granules written by two different ``who`` in one access list: (position of the later
    writer's entry, position of the earlier one), in list order."""
    order = np.argsort(idx, kind="stable")
    s_idx, s_who = idx[order], who[order]
    start = np.r_[True, s_idx[1:] != s_idx[:-1]]
    head = np.maximum.accumulate(np.where(start, np.arange(len(s_idx)), 0))  # each entry's run start
    bad = s_who != s_who[head]
    k = int(np.flatnonzero(bad)[np.argmin(order[bad])])
    return int(order[k]), int(order[head[k]])


def store_owners(machine, buf, idx: np.ndarray, t: np.ndarray, where: str, ordered: bool = False) -> None:
    """Record granules ``idx`` as stored by threads ``t`` (of this batch); a race where another
    workgroup stored one before (unless ``ordered``: ``GlobalAtomics`` checked the order) or in
    this same instruction."""
    rec = buf.records
    grp = machine.groups[machine.wg_of[t]]
    if not ordered and rec.has("owner"):
        cur = rec.get("owner", idx)
        bad = (cur >= 0) & (cur != grp)
        if bad.any():
            k = int(np.argmax(bad))
            raise EmulationError(f"race on global '{buf.name}' byte {rec.byte(idx[k])}: stored by workgroup "
                                 f"{int(cur[k])} and by workgroup {int(grp[k])} in one launch (plain stores of "
                                 "different workgroups are unordered)", where, *machine.coords(int(t[k])))
    rec.put("owner", idx, grp)
    if (rec.get("owner", idx) != grp).any():  # two workgroups of the batch, one instruction
        k, j = _first_clash(idx, grp)
        raise EmulationError(f"race on global '{buf.name}' byte {rec.byte(idx[k])}: stored by workgroup "
                             f"{int(grp[j])} and by workgroup {int(grp[k])} in one launch (plain stores of different "
                             "workgroups are unordered)", where, *machine.coords(int(t[k])))


def record_store(machine, buf, byte, size: int, threads, where: str) -> None:
    """A plain store of ``size`` bytes at each ``byte`` by ``threads`` into a global buffer."""
    rec = records_of(buf)
    idx = rec.spans(byte, size)
    t = np.repeat(np.asarray(threads).ravel(), size // rec.granule)
    atomics = machine.state.get("atomics")
    if atomics is not None:
        atomics.record(machine, buf, idx, t, False, where)
    else:
        store_owners(machine, buf, idx, t, where)


def cta_writes(machine, buf, threads, addr, size: int, atomic: bool, where: str) -> None:
    """Record plain (``st``) or atomic (``red`` / ``atom``) writes of ``size`` bytes at ``addr`` by
    ``threads`` into a global buffer, for the length of the launch (the record lives on the
    buffer, which every batch of CTAs shares). Races are errors: two threads storing one byte in
    one instruction; a plain store to a byte another CTA stored or atomically updated; an atomic
    update of a byte another CTA stored. Atomics of any CTAs to one byte are ordered (per address,
    PTX ISA 8.x memory consistency model) and never race with each other."""
    rec = records_of(buf)
    idx = rec.spans(addr, size)
    who = np.repeat(machine.groups[machine.wg_of[np.asarray(threads)]], size // rec.granule)
    if not atomic and len(np.unique(idx)) != len(idx):
        order = np.argsort(idx, kind="stable")
        k = int(np.argmax(idx[order][1:] == idx[order][:-1]))
        i, j = order[k], order[k + 1]
        raise EmulationError(f"race on global '{buf.name}' byte {rec.byte(idx[i])}: stored by CTA "
                             f"{int(who[i])} and by CTA {int(who[j])} in one instruction", where)
    for field, what in (("owner", "stored"), *(() if atomic else (("atomic_owner", "atomically updated"),))):
        cur = rec.get(field, idx)
        bad = (cur >= 0) & (cur != who)
        if bad.any():
            k = int(np.argmax(bad))
            raise EmulationError(
                f"race on global '{buf.name}' byte {rec.byte(idx[k])}: {what} by CTA {int(cur[k])} and "
                f"{'atomically updated' if atomic else 'stored'} by CTA {int(who[k])} in one launch", where)
    rec.put("atomic_owner" if atomic else "owner", idx, who)


class GlobalAtomics:
    """Ordering checks between global atomics and plain accesses in one launch
    (``machine.state["atomics"]``, created when a kernel with a global atomic or an agent-scope
    fence is compiled). The records live on the global buffers, so they hold over every batch of
    workgroups of the launch; the fences' clocks are one emulation-wide sequence.

    * Atomics to one address are ordered among themselves (coherence); an atomic update of a byte
      a plain store wrote in the launch is a race.
    * An atomic update is *published* once its thread runs ``T.rocm.fence_release`` after it
      (``release``); a thread that runs ``T.rocm.fence_acquire`` (``acquire``) after that release
      may then load or plainly store the byte (the split-K reduction reading, then zeroing, its
      workspace). A load or plain store of an atomically updated byte is a race otherwise, unless
      the accessing thread made the byte's last atomic update itself with an atomic that returns the
      old value (program order and coherence: the ticket's reset by the thread that drew the last
      ticket, whose returned value shows that every other update came before its own).
    * A plain store is published the same way, and a load or a plain store of a byte another
      workgroup stored in the launch needs the same release/acquire pair (the deterministic split-K
      reduction: each K slice stores its partial tile, the last workgroup adds the slices)."""

    clock = itertools.count(1)  # one order of the fences of every launch and batch

    def __init__(self):
        self.pending: list[tuple] = []  # (threads, buffer, granules, granule size) not yet released
        self.acquired: np.ndarray | None = None  # per thread of the batch: the clock of its last acquire

    @staticmethod
    def _gid(machine, threads) -> np.ndarray:
        """Launch-wide thread ids (workgroup, thread in the workgroup) of batch threads."""
        t = np.asarray(threads, np.int64)
        return machine.groups[machine.wg_of[t]].astype(np.int64) * machine.block_threads + machine.tid[t]

    def record_atomic(self, machine, buf, byte, size: int, threads, where: str, returns: bool = False) -> None:
        """Atomic updates of ``size`` bytes at each ``byte`` by ``threads`` (``returns``: atomics that
        return the old value, which proves where in the byte's order of updates each landed)."""
        rec = records_of(buf)
        idx = rec.spans(byte, size)
        self.record(machine, buf, idx, np.repeat(np.asarray(threads).ravel(), size // rec.granule), True, where,
                    returns)

    def record(self, machine, buf, idx, t, atomic: bool, where: str, returns: bool = False) -> None:
        """Granules ``idx`` written by threads ``t``: by an atomic, or a plain store (``record_store``)."""
        if not idx.size:
            return
        rec = buf.records
        if atomic:
            hit = rec.get("owner", idx) >= 0
            if hit.any():
                k = int(np.argmax(hit))
                raise EmulationError(f"race on global '{buf.name}' byte {rec.byte(idx[k])}: written by a "
                                     "plain store and by an atomic in one launch (atomics order only among themselves)",
                                     where, *machine.coords(int(t[k])))
            rec.put("atomic_owner", idx, machine.groups[machine.wg_of[t]])
            if returns or rec.has("last"):
                rec.put("last", idx, self._gid(machine, t) if returns else -1)
        else:
            self.check_ordered(machine, buf, idx, t, "written by an atomic and by a plain store in one launch", where,
                               store=True)
            store_owners(machine, buf, idx, t, where, ordered=True)
        rec.add("unpublished", idx, 1)
        self.pending.append((t, buf, idx, rec.granule))

    def check_ordered(self, machine, buf, idx, t, what: str, where: str, load: bool = False,
                      store: bool = False) -> None:
        """Raise unless every atomically updated granule of ``idx`` (accessed by batch threads ``t``)
        and, for a ``load`` or a plain ``store``, every one another workgroup stored, is ordered
        before the access (the class docstring)."""
        rec = buf.records
        upd = rec.get("atomic_owner", idx) >= 0
        if load or store:
            owner = rec.get("owner", idx)
            other = (owner >= 0) & (owner != machine.groups[machine.wg_of[t]])
            upd = upd | other
        if not upd.any():
            return
        own = rec.get("last", idx) == self._gid(machine, t)
        acq = (self.acquired[t] if self.acquired is not None else np.zeros(len(t), np.int64)) - rec.base
        unreleased = upd & ~own & (rec.get("unpublished", idx) > 0)
        unacquired = upd & ~own & ~unreleased & (acq <= rec.get("published_at", idx))
        for bad, why in ((unreleased, "a write of it was not released (T.rocm.fence_release after the write)"),
                         (unacquired, "the accessing thread did not acquire after its release (T.rocm.fence_acquire)")):
            if bad.any():
                k = int(np.argmax(bad))
                if (load or store) and other[k] and rec.get("atomic_owner", idx[k:k + 1])[0] < 0:
                    what = (f"stored by workgroup {int(owner[k])} and by workgroup "
                            f"{int(machine.groups[machine.wg_of[t[k]]])} in one launch" if store
                            else "stored by another workgroup and read by a plain load in one launch")
                    order = "plain accesses of different workgroups order only by a release and an acquire"
                else:
                    order = "atomics order only among themselves"
                raise EmulationError(f"race on global '{buf.name}' byte {rec.byte(idx[k])}: {what} ({order}; "
                                     f"{why})", where, *machine.coords(int(t[k])))

    def check_load(self, machine, buf, byte, size: int, threads, where: str) -> None:
        """A plain load of global bytes: ordered after the atomics (and the other workgroups' stores)
        of the launch that wrote them."""
        rec = buf.records
        if rec is None:
            return
        idx = rec.spans(byte, size)
        t = np.repeat(np.asarray(threads).ravel(), size // rec.granule)
        self.check_ordered(machine, buf, idx, t, "updated by an atomic and read by a plain load in one launch", where,
                           load=True)

    def release(self, machine, mask) -> None:
        """``T.rocm.fence_release`` by the active threads: their writes so far are published."""
        active = machine.active(mask)
        now = next(self.clock)
        kept = []
        for t, buf, idx, granule in self.pending:
            rec = buf.records
            idx, factor = rec.regrain(idx, granule)
            t = np.repeat(t, factor) if factor > 1 else t
            done = active[t]
            if done.any():
                rec.add("unpublished", idx[done], -1)
                rec.put("published_at", idx[done], now - rec.base)
            if not done.all():
                kept.append((t[~done], buf, idx[~done], rec.granule))
        self.pending = kept

    def acquire(self, machine, mask) -> None:
        """``T.rocm.fence_acquire`` by the active threads."""
        if self.acquired is None:
            self.acquired = np.zeros(machine.nthreads, np.int64)
        self.acquired[machine.active(mask)] = next(self.clock)
