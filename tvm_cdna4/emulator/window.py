"""``Window``: a global tensor the emulator holds in part (an argument of ``emulate``; numpy only)."""

from __future__ import annotations

import numpy as np


class Window:
    """A global tensor of ``shape`` and ``dtype`` of which the emulator holds only the elements ``start ..
    start + data.size - 1`` (flat, C order): ``data``, a C-contiguous numpy array of ``dtype`` (writable
    for an output; results are written into it). Passed to ``emulate`` in place of the whole array: the
    kernel sees the whole tensor (its bounds checks too), and an access outside the part held is an
    ``EmulationError`` naming it. With ``emulate(..., workgroups=...)`` it emulates a few workgroups of
    a problem whose tensors do not fit in memory (the sm80 GEMM's 2^31-element operands). sm80 only."""

    def __init__(self, shape, dtype, start: int, data: np.ndarray):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.start = int(start)
        self.data = data
        total = int(np.prod(self.shape, dtype=object))
        if not isinstance(data, np.ndarray) or data.dtype != self.dtype or not data.flags.c_contiguous:
            raise ValueError(f"emulate: Window: data must be a C-contiguous numpy array of dtype {self.dtype}; found "
                             f"{getattr(data, 'dtype', type(data).__name__)}")
        if not 0 <= self.start <= self.start + data.size <= total:
            raise ValueError(f"emulate: Window: elements [{self.start}, {self.start + data.size}) are not inside the "
                             f"{total} elements of shape {self.shape}")

    @classmethod
    def rows(cls, data: np.ndarray, shape, first: int) -> Window:
        """The rows ``first .. first + len(data) - 1`` of a tensor of ``shape`` (``data``: those rows)."""
        return cls(shape, data.dtype, first * int(np.prod(tuple(shape)[1:], dtype=object)), data)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def byte_range(self) -> tuple[int, int]:
        """(first byte held, the tensor's bytes)."""
        return self.start * self.dtype.itemsize, int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize


__all__ = ["Window"]
