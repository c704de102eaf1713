"""The error every emulator check raises."""

from __future__ import annotations


class EmulationError(RuntimeError):
    """A kernel bug found while emulating: what, where in the kernel, and which workgroup/wave/lane."""

    def __init__(self, message: str, where: str, workgroup=None, wave=None, lane=None):
        self.message, self.where = message, str(where)
        self.workgroup, self.wave, self.lane = workgroup, wave, lane
        who = ", ".join(f"{k} {v}" for k, v in (("workgroup", workgroup), ("wave", wave), ("lane", lane)) if v is not None)
        super().__init__(f"{message}\n  at: {where}\n  in: {who}")


class EmulationUnsupported(NotImplementedError):
    """A construct of the kernel the emulator does not run (a call, a statement, a dtype): one
    sentence naming it and where it is."""
