"""Warp-specialized branches as tasks: the CUDA emulator's scheduling of an ``if`` / ``else`` whose two
sides wait on mbarriers the other side arrives on (a Hopper GEMM's producer warpgroup, which runs
``stages`` k-tiles ahead of its consumers and waits on their "empty" barriers, and the consumers, which
wait on its "full" ones).

Lockstep, the emulator would run the whole producer branch before the consumers: its first wait on a
stage the consumers have not released yet could never complete. So an ``if`` whose condition differs
between threads, with both branches present and an mbarrier wait in either (``forks``), runs its two
branches as two tasks (each its threads' lockstep, as before), one at a time: the ``then`` branch first;
a blocking wait on an incomplete phase hands the run to the other task (:meth:`Tasks.block`) and is
tried again once an mbarrier has changed (an arrival, a transaction, a landed copy: :meth:`progressed`).
When neither task can go on (each waits, and no barrier changed since it last tried), the wait is the
deadlock error it always was. The branches of a nested ``if`` run in the task's lockstep.

A branch with a named-barrier ``bar.arrive`` (``SPLITS``: warps that signal others which ``bar.sync``
later, as the ping-pong schedule's two consumer warpgroups order their mainloops) runs as one task per
warpgroup of its threads (:func:`branch_tasks`), each with its own variables: in one lockstep a
warpgroup's ``bar.sync`` would come before the other's ``bar.arrive`` later in program order. A
``bar.sync`` whose phase is incomplete hands the run over as an mbarrier wait does
(:class:`~.machine.NamedBarrier`); an arrival counts as progress.

A task is a Python thread that runs only while it holds the baton (the scheduler passes it; one thread
runs at a time, so the emulated machine's state needs no lock). An error in a task ends both and is
raised by ``emulate``'s thread.
"""

from __future__ import annotations

import threading

import numpy as np

from ..isa.hopper_layout import WARPGROUP_THREADS

WAITS = ("tirx.cuda.mbarrier_wait",)
"""The blocking waits a forked branch may hand the run over at."""

SPLITS = ("tirx.ptx.bar_arrive", "tirx.ptx.barrier_arrive")
"""The calls that make a forked branch run as one task per warpgroup (module docstring)."""


class _Abort(BaseException):
    """Unwinds a task when the other one failed."""


class _Task:
    def __init__(self, run=None):
        self.run = run
        self.go = threading.Event()
        self.state = "new"  # new, running, blocked, done
        self.blocked_at = -1
        self.thread = None


class Tasks:
    """The launch batch's scheduler (``machine.state["tasks"]``)."""

    def __init__(self, machine=None):
        self.progress = 0  # mbarrier changes so far
        self.current = None  # the task holding the baton (None: no fork in progress)
        self.kids: list[_Task] = []
        self.main = None
        self.error = None
        self.lock = threading.Lock()

    def progressed(self) -> None:
        self.progress += 1

    def forking(self) -> bool:
        """Whether a fork may start here (not inside a task: a nested ``if`` runs in lockstep)."""
        return self.current is None

    def fork(self, branches) -> None:
        """Run ``branches`` (callables) as tasks, the first one first; return when all are done."""
        main = self.main = self.current = _Task()
        main.state = "running"
        self.kids = [_Task(fn) for fn in branches]
        self.error = None
        for k in self.kids:
            k.thread = threading.Thread(target=self._main, args=(k,), daemon=True, name="emulated-branch")
            k.thread.start()
        self._switch(main, self.kids[0])
        for k in self.kids:
            k.thread.join()
        self.current, self.kids = None, []
        error, self.error = self.error, None
        if error is not None:
            raise error

    def block(self) -> bool:
        """The current task waits on an incomplete phase: run another task until an mbarrier changed and
        return True, or False when no other task can run (a deadlock: the caller reports it)."""
        task = self.current
        if task is None or task not in self.kids:
            return False
        task.state, task.blocked_at = "blocked", self.progress
        nxt = self._pick(task)
        if nxt is None:
            task.state = "running"
            return False
        self._switch(task, nxt)
        if self.error is not None:
            raise _Abort
        task.state = "running"
        return True

    def _pick(self, after):
        i = self.kids.index(after)
        for k in self.kids[i + 1:] + self.kids[:i + 1]:
            if k.state == "new" or (k.state == "blocked" and k.blocked_at < self.progress):
                return k
        return None

    def _switch(self, frm, to) -> None:
        self.current = to
        frm.go.clear()
        to.state = "running" if to.state == "new" else to.state
        to.go.set()
        frm.go.wait()

    def _main(self, task) -> None:
        task.go.wait()
        try:
            if self.error is None:
                task.state = "running"
                task.run()
        except _Abort:
            pass
        except BaseException as e:  # noqa: BLE001 (raised again by emulate's thread)
            if self.error is None:
                self.error = e
        with self.lock:
            task.state = "done"
            self.progress += 1
            if self.error is not None:  # wake the others: they unwind
                for k in self.kids:
                    if k.state != "done":
                        k.go.set()
            live = [k for k in self.kids if k.state != "done"]
            if not live:
                self.current = self.main
                self.main.go.set()
                return
            if self.error is None:
                nxt = self._pick(task)
                self.current = nxt
                nxt.go.set()


def _calls(stmt, names) -> bool:
    """Whether ``stmt`` calls one of ``names``."""
    import tvm_ffi
    from tvm_tirx import ir

    found = []

    def visit(call):
        if getattr(call.op, "name", None) in names:
            found.append(call)

    tvm_ffi.structural_walk(stmt, [(ir.Call, visit)])
    return bool(found)


def forks(node) -> bool:
    """Whether an ``if`` statement's branches are run as tasks when its threads diverge: both present,
    and a blocking mbarrier wait in either."""
    if node.else_case is None:
        return False
    return _calls(node.then_case, WAITS) or _calls(node.else_case, WAITS)


def splits(stmt) -> bool:
    """Whether a forked branch runs as one task per warpgroup (a named-barrier arrive in it: ``SPLITS``)."""
    return _calls(stmt, SPLITS)


def branch_tasks(machine, env, branches) -> list:
    """The tasks (callables) of a fork's ``branches``, (run, mask, split) each: ``run(env, mask)``, or,
    ``split``, one ``run`` per warpgroup of the mask's threads, on a copy of ``env`` each."""
    out = []
    for run, mask, split in branches:
        if not split:
            out.append(lambda run=run, mask=mask: run(env, mask))
            continue
        wg = machine.tid // WARPGROUP_THREADS
        for k in np.unique(wg[mask]):
            out.append(lambda run=run, sub=mask & (wg == k), own=env.copy(): run(own, sub))
    return out
