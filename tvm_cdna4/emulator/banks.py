"""Shared-memory bank conflicts of a warp's access (NVIDIA model), counted by :func:`emulate` when it
is given a ``stats`` dict.

Shared memory has 32 banks of 4-byte words. A warp's access is served in phases of lanes that move at
most 128 bytes each (16-byte accesses: 8 lanes; 8-byte: 16 lanes; up to 4 bytes: all 32; ldmatrix:
one 8x8 matrix, i.e. the 8 lanes that supply its row addresses). Within a phase a bank returns one
distinct word per wavefront (lanes reading the same word share it), so a phase needs as many
wavefronts as the largest number of distinct words that fall into one bank; every wavefront past
the first is a conflict. This is the CUDA programming guide's bank model; ncu's
``l1tex__data_bank_conflicts_pipe_lsu_mem_shared`` counts the same excess wavefronts on hardware.
"""

from __future__ import annotations

import numpy as np

BANKS = 32
WORD = 4


def lanes_per_phase(size: int) -> int:
    """Lanes served together for ``size``-byte accesses per lane (128 bytes per phase)."""
    return max(1, min(32, 128 // max(size, WORD)))


def phases_and_conflicts(phase: np.ndarray, addr: np.ndarray, size: int) -> tuple[int, int]:
    """``(phases, conflicts)`` of lane accesses of ``size`` bytes at byte offsets ``addr``; ``phase``
    gives each lane's phase (any integer labels). Conflicts are excess wavefronts, summed."""
    phase, addr = np.asarray(phase, np.int64).ravel(), np.asarray(addr, np.int64).ravel()
    if not phase.size:
        return 0, 0
    nwords = max(1, size // WORD)
    words = (addr // WORD)[:, None] + np.arange(nwords)
    labels, ph = np.unique(np.repeat(phase, nwords), return_inverse=True)
    pairs = np.unique(ph.astype(np.int64) * (1 << 40) + words.ravel())  # distinct (phase, word)
    p, w = pairs >> 40, pairs & ((1 << 40) - 1)
    per_bank = np.bincount(p * BANKS + w % BANKS, minlength=len(labels) * BANKS).reshape(len(labels), BANKS)
    return len(labels), int((per_bank.max(axis=1) - 1).sum())


def record(stats: dict | None, what: str, phase: np.ndarray, addr: np.ndarray, size: int) -> None:
    """Add one access's phases and conflicts to ``stats[f"{what} phases"]`` / ``[f"{what} conflicts"]``."""
    if stats is None:
        return
    n, c = phases_and_conflicts(phase, addr, size)
    stats[f"{what} phases"] = stats.get(f"{what} phases", 0) + n
    stats[f"{what} conflicts"] = stats.get(f"{what} conflicts", 0) + c
