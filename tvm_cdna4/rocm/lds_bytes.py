"""The per-byte state of one LDS allocation in the LDS synchronization check (``rocm.lds_sync``)
and the conflicts of an access with it.

Each byte keeps its last writer (wave, event, the epoch from which other waves may access it:
``NEVER`` until the write completes, then the epoch after the completing wait; whether it is a
direct-to-LDS load still in flight) and, per wave, its last read (epoch, event). An access of wave
``w`` conflicts with a write of another wave not yet visible in this epoch, a write conflicts with
a read of another wave in this epoch (no barrier between them), and a read of a wave's own
direct-to-LDS bytes before its wait reads them in flight. ``read`` and ``write`` return the first
``Conflict`` (the caller words it) or record the access.
"""

from __future__ import annotations

import attrs
import numpy as np

NEVER = np.iinfo(np.int32).max


@attrs.frozen
class Conflict:
    """Byte ``byte``: wave ``wave`` did ``verb`` ("wrote", "read", "writes") in ``event``; ``in_flight``:
    it is the reading wave's own direct-to-LDS load, not yet waited for."""

    byte: int
    wave: int
    verb: str
    event: int
    in_flight: bool = False


class LdsBytes:
    """One LDS allocation of ``nbytes`` for ``waves`` waves (module docstring)."""

    def __init__(self, name: str, nbytes: int, waves: int):
        self.name = name
        self.w_wave = np.full(nbytes, -1, np.int16)
        self.w_event = np.full(nbytes, -1, np.int32)
        self.w_visible = np.full(nbytes, NEVER, np.int64)
        self.w_dma_pending = np.zeros(nbytes, bool)
        self.r_epoch = np.full((waves, nbytes), -1, np.int64)
        self.r_event = np.full((waves, nbytes), -1, np.int32)

    def __len__(self) -> int:
        return len(self.w_wave)

    def _unpublished(self, w: int, b, epoch: int) -> Conflict | None:
        writer = self.w_wave[b]
        hit = (writer >= 0) & (writer != w) & (self.w_visible[b] > epoch)
        if hit.any():
            k = int(np.argmax(hit))
            return Conflict(int(b[k]), int(writer[k]), "wrote", int(self.w_event[b[k]]))
        return None

    def read(self, w: int, b, epoch: int, event: int) -> Conflict | None:
        """Wave ``w`` reads bytes ``b`` in ``epoch``: its conflict, or None (the read recorded)."""
        found = self._unpublished(w, b, epoch)
        if found is not None:
            return found
        own = (self.w_wave[b] == w) & self.w_dma_pending[b]
        if own.any():
            k = int(np.argmax(own))
            return Conflict(int(b[k]), w, "wrote", int(self.w_event[b[k]]), in_flight=True)
        self.r_epoch[w, b] = epoch
        self.r_event[w, b] = event
        return None

    def write(self, w: int, b, epoch: int, event: int, dma: bool) -> Conflict | None:
        """Wave ``w`` writes bytes ``b`` in ``epoch`` (a direct-to-LDS load: ``dma``): its conflict,
        or None (the write recorded, visible to no other wave until ``complete``)."""
        found = self._unpublished(w, b, epoch)
        if found is not None:
            return found
        read = self.r_epoch[:, b] == epoch  # (waves, bytes): read by each wave in this epoch
        read[w] = False
        if read.any():
            other = int(np.argmax(read.any(1)))
            k = int(np.argmax(read[other]))
            return Conflict(int(b[k]), other, "read", int(self.r_event[other, b[k]]))
        self.w_wave[b], self.w_event[b], self.w_visible[b], self.w_dma_pending[b] = w, event, NEVER, dma
        return None

    def complete(self, event: int, epoch: int) -> None:
        """The writes of ``event`` complete: visible to other waves from the next epoch on."""
        done = self.w_event == event
        self.w_visible[done] = epoch + 1
        self.w_dma_pending[done] = False
