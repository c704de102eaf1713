"""The values of the LDS synchronization check (``rocm.lds_sync``), the loop iterations and the
workgroups (``grid``: every ``blockIdx`` value of a static grid) it runs, and how it reads calls
(``callee``, remembered during one check; ``lds_pointer``: a pointer into LDS passed to a call).

A value is an ``int``, a numpy array over the workgroup's threads (a second axis for vector lanes)
or, where it differs between the workgroups of a run, a ``PerBlock``: one such value per workgroup
(``values``: an int array when each is one integer, else a list). ``apply`` computes on them
(elementwise over the workgroups; a result the same for all of them is a plain value again).
``Deferred``: a let-bound value that depends on a ``PerBlock``, evaluated only where the check uses
it (most of them, global offsets, are never used). Where the check must use one value (a loop
bound, a branch, an LDS index) and a ``PerBlock`` is there, it splits the run's workgroups into
groups with one value each (``groups``; a trip count: ``trip_count_groups``) and runs each group.
"""

from __future__ import annotations

import numpy as np
import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.ir import prim

PERIOD = 6  # consecutive-iteration coverage: index periods dividing 6 (double, triple buffering)
POINTERS = ("tirx.address_of", "tirx.tensor_data_ptr")  # what makes a pointer into a tensor
BINARY = {prim.Add: np.add, prim.Sub: np.subtract, prim.Mul: np.multiply, prim.FloorDiv: np.floor_divide,
          prim.FloorMod: np.mod, prim.Min: np.minimum, prim.Max: np.maximum, prim.EQ: np.equal,
          prim.NE: np.not_equal, prim.LT: np.less, prim.LE: np.less_equal, prim.GT: np.greater,
          prim.GE: np.greater_equal, prim.And: np.logical_and, prim.Or: np.logical_or,
          prim.BitwiseAnd: np.bitwise_and, prim.BitwiseOr: np.bitwise_or, prim.BitwiseXor: np.bitwise_xor,
          prim.LShift: np.left_shift, prim.RShift: np.right_shift,
          prim.Div: lambda a, b: np.trunc(np.true_divide(a, b)).astype(np.int64),
          prim.Mod: np.fmod}
CALLS = {"tirx.shift_right": np.right_shift, "tirx.shift_left": np.left_shift, "tirx.bitwise_and": np.bitwise_and,
         "tirx.bitwise_or": np.bitwise_or, "tirx.bitwise_xor": np.bitwise_xor}


def iterations(n: int) -> list[int]:
    """The iterations of a loop of ``n`` that the check runs: ``0 .. 5``, then the last ones from a
    multiple of 6 on (all of them when ``n <= 12``)."""
    if n <= 2 * PERIOD:
        return list(range(n))
    tail = (n - 2) // PERIOD * PERIOD
    return list(range(PERIOD)) + list(range(tail, n))


def trip_count_groups(counts) -> list[np.ndarray]:
    """The workgroups (indices into ``counts``, their trip counts of one loop) that the check runs,
    grouped by trip count (in its order). A loop of ``n <= 12`` runs all its iterations, so each
    such ``n`` is a group; a longer one runs ``iterations(n)``, whose tail ``n - (n - 2) // 6 * 6``
    (2 to 7 iterations) is all that tells two of them apart (``iterations``: the hazards of loop
    stages repeat with a period dividing 6), so of each tail length the smallest and the largest
    ``n`` are run, the others not."""
    counts = np.asarray(counts)
    values = np.unique(counts)
    tails: dict[int, list[int]] = {}
    for n in values[values > 2 * PERIOD].tolist():
        tails.setdefault(n - (n - 2) // PERIOD * PERIOD, []).append(n)
    kept = sorted([n for n in values.tolist() if n <= 2 * PERIOD] + [x for ns in tails.values() for x in {ns[0], ns[-1]}])
    return [np.nonzero(counts == n)[0] for n in kept]


def grid(func, limit: int) -> tuple[list, np.ndarray | None, str | None]:
    """``([(blockIdx var, axis name)], workgroups (count x axes) or None, why not)`` of the launch."""
    axes, extents, why = [], [], None

    def region(node):
        nonlocal why
        if node.op.name == "tirx.launch_thread" and str(node.args[0].value).startswith("blockIdx."):
            axes.append((node.body_params[0], str(node.args[0].value)))
            extent = node.args[1]
            extents.append(int(extent.value) if isinstance(extent, ir.IntImm) else 0)
            if not extents[-1]:
                why = f"the extent of {node.args[0].value} is not known at compile time"

    tvm_ffi.structural_walk(func.body, [(ir.RegionStmt, region)])
    size = int(np.prod(extents)) if extents else 1
    if why is None and size > limit:
        why = f"a grid of {size} workgroups (more than {limit})"
    if why is not None:
        return axes, None, why
    return axes, np.stack(np.unravel_index(np.arange(size), extents), 1) if extents else np.zeros((1, 0), int), None


class PerBlock:
    """One value per workgroup of the run (see the module docstring); build with ``per_block``."""

    __slots__ = ("values", "scalar")

    def __init__(self, values):
        self.values = values
        self.scalar = isinstance(values, np.ndarray)

    def __len__(self) -> int:
        return len(self.values)

    def at(self, i: int):
        return self.values[i].item() if self.scalar else self.values[i]

    def groups(self) -> list[np.ndarray]:
        """The workgroups grouped by value (indices), in value order (integers) or first seen."""
        if self.scalar:
            _, inverse = np.unique(self.values, return_inverse=True)
            return [np.nonzero(inverse == k)[0] for k in range(inverse.max() + 1)]
        keys: dict = {}
        for i, v in enumerate(self.values):
            a = np.asarray(v)
            keys.setdefault((a.shape, a.dtype.str, a.tobytes()), []).append(i)
        return [np.array(g) for g in keys.values()]


def per_block(values):
    """``values`` (one per workgroup) as a ``PerBlock``, or the one value when they are all the same."""
    if not isinstance(values, np.ndarray) and all(np.ndim(v) == 0 for v in values):
        values = np.array(values)
    if isinstance(values, np.ndarray):
        return values[0].item() if (values == values[0]).all() else PerBlock(values)
    first = values[0]
    return first if all(np.array_equal(v, first) for v in values[1:]) else PerBlock(values)


def apply(fn, *args, elementwise: bool = True):
    """``fn(*args)``, per workgroup where an argument is a ``PerBlock`` (at once over an int array of
    them when ``fn`` is ``elementwise`` and the other arguments are scalars)."""
    if all(type(a) is not PerBlock for a in args):
        return fn(*args)
    blocked = [a for a in args if isinstance(a, PerBlock)]
    if elementwise and all(b.scalar for b in blocked) and all(np.ndim(a) == 0 for a in args if not isinstance(a, PerBlock)):
        out = fn(*(a.values if isinstance(a, PerBlock) else a for a in args))
        if np.ndim(out) == 1 and len(out) == len(blocked[0]):
            return per_block(out)
    return per_block([fn(*(a.at(i) if isinstance(a, PerBlock) else a for a in args)) for i in range(len(blocked[0]))])


MISSING = object()  # a variable without a value (in a ``Deferred``'s ``env``)


class Deferred:
    """A let-bound ``expr`` and the values of its free variables when it was bound (``MISSING``:
    none); ``result`` once evaluated (``done``), or the ``error`` that evaluating it raised."""

    __slots__ = ("expr", "env", "result", "error", "done")

    def __init__(self, expr, env: dict):
        self.expr, self.env, self.result, self.error, self.done = expr, env, None, None, False


BLOCKED = (PerBlock, Deferred)


_CALLEES: dict = {}  # hash(call) -> (call, its callee), during one check (IR calls are read many times)


def forget_callees() -> None:
    _CALLEES.clear()


def callee(call) -> str:
    """``analysis._callee`` (the intrinsic, extern symbol or op a call stands for), remembered."""
    from .analysis import _callee

    key = hash(call)
    found = _CALLEES.get(key)
    if found is None:
        found = _CALLEES[key] = (call, _callee(call))  # the call kept alive: its hash is its address
    return found[1]


def lds_pointer(expr, lds) -> bool:
    """Whether ``expr`` is (arithmetic on) a pointer into one of the LDS tensors ``lds``."""
    if isinstance(expr, ir.Call):
        name = callee(expr)
        if name in POINTERS:
            target = expr.args[0].source if name == "tirx.address_of" and isinstance(expr.args[0], ir.TensorLoad) else expr.args[0]
            return target in lds
        return name == "tirx.reinterpret" and lds_pointer(expr.args[0], lds)
    if isinstance(expr, prim.Cast):
        return lds_pointer(expr.value, lds)
    if type(expr) in (prim.Add, prim.Sub):
        return lds_pointer(expr.a, lds) or lds_pointer(expr.b, lds)
    return False
