"""The 64-lane wavefront execution model for tile patterns.

Same convention as TIRx's CUDA patterns: every operand region is ``(*group, *repeat, *atom)``.

- scope ``"wave"``: no group axes; each wave runs its own instance.
- scope ``"workgroup"``: one leading group axis, the wave index in the workgroup
  (``threadIdx.x // 64``); wave ``w`` works on slice ``w`` of every operand.
- repeat axes become unrolled loops (K repeats accumulate through D for MFMA).
- atom axes are the fixed hardware fragment, whose coordinates the catalog's lane maps assign.

Register operands are ``local`` tensors whose layout maps atom coordinates to the ``wave_lane``
thread axis and the per-lane storage axis ``m``. ``WaveRegion.slots`` proves, over a symbolic lane,
that each lane holds exactly the elements the hardware uses, in consecutive registers.
"""

from __future__ import annotations

import tvm_ffi
from tvm_tirx.ir import Bind, Range, TensorRegion, TensorStore, Var
from tvm_tirx.script import tirx as T
from tvm_tirx.sym import Analyzer, ConstraintContext

from ..isa import WAVE_SIZE
from ..tirx_private import WAVE_ID_AXIS, WAVE_LANE_AXIS, CudaContext, CudaRegion
from . import wave

SCOPES = ("wave", "workgroup")

# Element dtypes that TIRx widens on ROCm (BF16/FP8 ComputeLegalize): an allocation of them, register
# or LDS, becomes one float32 slot per element while a view of it becomes 16/8-bit storage, so no
# operand of these dtypes holds the packed bits an instruction reads. Their bit patterns travel in
# integer storage instead (the dtype named here).
BIT_STORAGE = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def scalar(value):
    """A constant parameter stored as an IR operand, as a Python int."""
    value = value.value if hasattr(value, "value") else value
    if not isinstance(value, int):
        raise TypeError(f"expected a compile-time integer, found {value!r}")
    return value


def substitute(expr, var, value):
    return tvm_ffi.structural_map(expr, (Var, lambda v: value if v.same_as(var) else v), order="post")


class WaveContext(CudaContext):
    """A wave-collective instruction repeated over repeat axes (and over waves at workgroup scope)."""

    def __init__(self, sctx, opcode: str, group_extent: int | None = None):
        self.sctx = sctx
        self.opcode = opcode
        self.analyzer = Analyzer()
        self.constraints = ConstraintContext()
        self.static_ranges = {}
        for var, bound in sctx.var_range_map.items():
            self.add_range(var, Range.from_min_extent(bound.begin, bound.extent))
            low, ext = (self.analyzer.simplify(x) for x in (bound.begin, bound.extent))
            if hasattr(low, "value") and hasattr(ext, "value"):
                self.static_ranges[var] = range(int(low), int(low) + int(ext))
        if sctx.scope_kind not in SCOPES:
            raise ValueError(
                f"{opcode}: scope={sctx.scope_kind!r} is not allowed: the instruction is wave-collective "
                f"(all 64 lanes execute it together); use scope='wave' or scope='workgroup'"
            )
        self.bindings, self.group, self.group_shape, self.owners = [], [], [], {}
        self.repeat = self.repeat_shape = None
        self.lane = Var("wave_lane", "int32")
        self.bindings.append(Bind(self.lane, wave.lane_id()))
        if sctx.scope_kind == "workgroup":
            if group_extent is None:
                raise ValueError(f"{opcode}: scope='workgroup' needs a leading wave axis on every operand")
            var = Var("group_wave", "int32")
            self.add_range(var, Range(0, group_extent))
            self.group.append(var)
            self.group_shape.append(group_extent)
            self.owners[WAVE_ID_AXIS] = var
            self.bindings.append(Bind(var, wave.wave_id()))
        # the symbolic lane over which ownership is proven
        self.proof_lane = Var("atom_lane", "int32")
        self.add_range(self.proof_lane, Range(0, WAVE_SIZE))
        # lets require() fall back to checking all 64 lanes (e.g. XOR-swizzled LDS layouts)
        self.static_ranges[self.proof_lane] = range(WAVE_SIZE)

    def index_coordinates(self, expr):  # no CUDA index calls to rewrite
        return expr

    def region(self, name, region, atom_shape, scopes, *, repeat_axes=None, bounds=True):
        if not isinstance(region, TensorRegion):
            raise TypeError(f"{self.opcode}: operand {name} must be a tensor region, found {type(region).__name__}")
        return WaveRegion(self, name, region, atom_shape, scopes, repeat_axes, bounds)

    def at_runtime(self, expr):
        """Replace the proof lane by the lane id bound at run time."""
        return substitute(expr, self.proof_lane, self.lane)


class WaveRegion(CudaRegion):
    def __init__(self, ctx, name, region, atom_shape, scopes, repeat_axes, bounds):
        try:
            super().__init__(ctx, name, region, atom_shape, scopes, repeat_axes, bounds)
        except ValueError as err:
            raise ValueError(f"{ctx.opcode}: operand {err}") from None

    def fail(self, rule: str):
        raise ValueError(f"{self.ctx.opcode}: operand {self.name}: {rule}")

    def owner(self, atom, *, lane):
        phys = self.physical(atom)
        allowed = {"m", WAVE_LANE_AXIS, *self.ctx.owners}
        for axis in tuple(set(phys) - allowed):
            if self.ctx.analyzer.can_prove(phys[axis] == 0):
                del phys[axis]
        if set(phys) - allowed:
            self.fail(f"layout uses axes {sorted(set(phys) - allowed)}; a wave register fragment may use only "
                      f"'{WAVE_LANE_AXIS}' (lane), 'm' (register){' and the wave axis' if self.ctx.owners else ''}")
        for axis, owner in self.ctx.owners.items():
            self.ctx.require(phys.get(axis, 0) == owner, f"{self.ctx.opcode}: operand {self.name}: element of wave "
                             f"{owner} is not owned by that wave ({axis})")
        self.ctx.require(phys.get(WAVE_LANE_AXIS, 0) == lane,
                         f"{self.ctx.opcode}: operand {self.name}: owner map violated: atom element {tuple(atom)} "
                         f"must live in lane {lane}")
        return phys["m"]

    def slots(self, coords, lane):
        """Prove ownership of ``coords`` (one lane's elements, in register order) and that they
        occupy consecutive registers; return the first register index."""
        coords = list(coords)
        base = self.owner(coords[0], lane=lane)
        for i, coord in enumerate(coords[1:], 1):
            self.ctx.require(
                self.owner(coord, lane=lane) == base + i,
                f"{self.ctx.opcode}: operand {self.name}: a lane's {len(coords)} elements must occupy "
                f"consecutive registers (element {i} at atom {tuple(coord)})",
            )
        return base

    def check_dtype(self, allowed: tuple[str, ...], what: str):
        found = str(self.dtype)
        if found in BIT_STORAGE:
            self.fail(f"dtype {found} is not supported: TIRx stores {found} tensors on ROCm as one float32 "
                      f"per element, not as the packed bits the instruction reads; declare the tensor and its "
                      f"allocation as {BIT_STORAGE[found]} holding the {found} bit patterns "
                      f"(numpy: ml_dtypes.{found} data .view(np.{BIT_STORAGE[found]}))")
        if found not in allowed:
            self.fail(f"dtype {found} does not fit {what}; expected one of {list(allowed)}")

    def _raw(self):
        if self.raw is None:
            self.value(tuple(0 for _ in self.atom_shape))
        return self.raw

    def load(self, base, n: int):
        raw = self._raw()
        return raw[base] if n == 1 else raw[T.ramp(base, 1, n)]

    def store(self, base, n: int, value):
        raw = self._raw()
        return TensorStore(raw, [base if n == 1 else T.ramp(base, 1, n)], value)
