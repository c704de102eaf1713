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

import contextlib
import threading
from itertools import islice, product

import tvm_ffi
from tvm_tirx.ir import Bind, IntImm, Range, TensorRegion, TensorStore, Var, is_prim_expr
from tvm_tirx.ir.prim import Let
from tvm_tirx.runtime import MemoryScope
from tvm_tirx.script import tirx as T
from tvm_tirx.sym import Analyzer, ConstraintContext, RangeConstraint

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..isa.formats import BIT_STORAGE
from ..tirx_private import WAVE_ID_AXIS, WAVE_LANE_AXIS, CudaContext, CudaRegion
from . import wave

SCOPES = ("wave", "workgroup")
COUNTEREXAMPLE_POINTS = 1 << 14  # most coordinate points searched for a counterexample
STORAGE_KINDS = {"local": "a register fragment", "shared": "an LDS tile", "shared.dyn": "an LDS tile"}
APPLY_AT = {"workgroup": 'apply it with scope="workgroup" (wave w works on slice w of every operand\'s leading axis)',
            "wave": 'apply it with scope="wave" (each wave runs its own instance)'}
SCOPE_SUGGESTION = {  # for operands laid out for that scope (WaveContext.laid_out_for)
    "workgroup": APPLY_AT["workgroup"],
    "wave": APPLY_AT["wave"] + ", or give every operand a leading wave axis laid out with layouts.mfma_fragment / "
                               "tr_fragment(..., waves=n)",
}

# bfloat16 / float8_* tensors (TIRx widens their allocations on ROCm to one float32 per element) are
# accepted while lowering under ``keep_bit_storage()``: the pass that installs it (rocm.storage) turns
# them into 16/8-bit storage after the patterns lower, before TIRx's legalization.
_lowering = threading.local()


@contextlib.contextmanager
def keep_bit_storage():
    """Patterns lowered inside keep the dtypes of ``BIT_STORAGE`` (the caller keeps their bits)."""
    previous = getattr(_lowering, "bits_kept", False)
    _lowering.bits_kept = True
    try:
        yield
    finally:
        _lowering.bits_kept = previous

def printed_call(operands: tuple, parameters: dict) -> tuple[tuple, dict]:
    """The operands and parameters of a tile ``apply`` call as the printer spells the registered
    three-argument op, ``(instruction, (operands...), ((name, value), ...))``, so printed IR parses
    back; a call as written passes through."""
    from tvm_tirx.ir import StringImm, Tuple

    if not (len(operands) == 2 and all(isinstance(x, Tuple | tuple | list) for x in operands)):
        return operands, parameters
    operands, encoded = operands
    decoded = {}
    for pair in encoded.fields if isinstance(encoded, Tuple) else encoded:
        pair = pair.fields if isinstance(pair, Tuple) else pair
        decoded[pair[0].value if isinstance(pair[0], StringImm) else pair[0]] = pair[1]
    decoded.update(parameters)
    return tuple(operands.fields if isinstance(operands, Tuple) else operands), decoded


def unpacked(view) -> tuple:
    """``(instruction, operands, parameters)`` of a registered three-argument tile op at lowering (its
    ``view.args``: the instruction, the packed operands, the packed ``(name, value)`` parameters or None): the
    instruction's string, the operands as a list, the parameters as a dict."""
    instruction, packed_args, packed_params = view.args
    params = {p.fields[0].value: p.fields[1] for p in (packed_params.fields if packed_params is not None else ())}
    return instruction.value, list(packed_args.fields), params


def check_scope(opcode: str, scope) -> None:
    """Refuse any scope but the two wave-collective ones (``scope`` a name or a ``ThreadScope``).
    ``T.rocm.tile.apply`` calls it; TIRx's own validation (``SCOPES`` are the registered scopes)
    refuses other scopes in IR built any other way."""
    name = str(getattr(scope, "local_name", scope)).rsplit(".", 1)[-1]
    if name not in SCOPES:
        raise ContractError(
            f"scope={name!r} is not allowed: the instruction is wave-collective (all 64 lanes execute it together)",
            opcode=opcode, expected="scope='wave' or scope='workgroup'", found=f"scope={name!r}", check="scope")


def parameter(opcode: str, name: str, value) -> int | bool:
    """A modifier stored as an IR operand, as a Python int (a Python ``bool`` stays a ``bool``, which
    the catalog refuses: TIRx stores ``True`` as a 1-bit ``IntImm``)."""
    if isinstance(value, IntImm):
        value = bool(value.value) if str(value.ty.dtype) == "bool" else int(value.value)
    if not isinstance(value, int):
        raise ContractError(f"parameter {name} must be a compile-time integer", opcode=opcode, found=repr(value),
                            check="modifier range")
    return value


def check_operands(opcode: str, names: tuple[str, ...], args, scalars: tuple[str, ...] = ()) -> None:
    """Arity, and that each operand is a tensor region (those in ``scalars`` may be a scalar instead)."""
    if len(args) != len(names):
        raise ContractError(f"expects operands {', '.join(names)}", opcode=opcode, found=len(args), check="operands")
    for name, arg in zip(names, args):
        if isinstance(arg, TensorRegion) or (name in scalars and is_prim_expr(arg)):
            continue
        kind = "a tensor region or a scalar" if name in scalars else "a tensor region (a register fragment or LDS tile)"
        raise ContractError(f"must be {kind}", opcode=opcode, operand=name, found=_describe(arg), check="operands")


def uses_wave_axis(layout) -> bool:
    """Whether a register layout puts an axis on the wave axis (``WAVE_ID_AXIS``: scope ``workgroup``)."""
    return any(str(it.axis).rsplit(".", 1)[-1] == WAVE_ID_AXIS for it in (*layout.shard, *layout.replica))


def _describe(value) -> str:
    if is_prim_expr(value):
        return f"the {value.ty.dtype} scalar {value}"
    return type(value).__name__


def substitute(expr, var, value):
    return tvm_ffi.structural_map(expr, (Var, lambda v: value if v.same_as(var) else v), order="post")


# Static ranges of enclosing variables already simplified: var -> (begin, extent, range or None),
# keyed like TIRx's own var_range_map (object identity); cleared when large.
_STATIC_RANGES: dict = {}


class WaveContext(CudaContext):
    """A wave-collective instruction repeated over repeat axes (and over waves at workgroup scope).

    Every failed check raises a ``ContractError``; ``require`` names a concrete counterexample (the
    lane and repeat coordinates where the rule breaks) when the coordinates are static."""

    def __init__(self, sctx, opcode: str, first_operand: TensorRegion, operands=()):
        self.sctx = sctx
        self.opcode = opcode
        self.operands = operands  # all of the call's (laid_out_for)
        self.analyzer = Analyzer()
        self.constraints = ConstraintContext()
        self._static_ranges = None  # see static_ranges
        # every enclosing variable's range, synchronized once (add_range synchronizes the whole list
        # each time: quadratic in the variables in scope, which an unrolled kernel has hundreds of)
        for var, bound in sctx.var_range_map.items():
            self.constraints.append(RangeConstraint(var, Range.from_min_extent(bound.begin, bound.extent)))
        self.analyzer.sync_constraint_context(self.constraints)
        self.bindings, self.group, self.group_shape, self.owners = [], [], [], {}
        self.repeat = self.repeat_shape = None
        self.lane = Var("wave_lane", "int32")
        self.bindings.append(Bind(self.lane, wave.lane_id()))
        if sctx.scope_kind == "workgroup":
            var = Var("group_wave", "int32")
            extent = self.wave_axis(first_operand)
            self.add_range(var, Range(0, extent))
            self.group.append(var)
            self.group_shape.append(extent)
            self.owners[WAVE_ID_AXIS] = var
            self.bindings.append(Bind(var, wave.wave_id()))
        # the symbolic lane over which ownership is proven
        self.proof_lane = Var("atom_lane", "int32")
        self.add_range(self.proof_lane, Range(0, WAVE_SIZE))
        # lets require() fall back to checking all 64 lanes (e.g. XOR-swizzled LDS layouts)
        self._proof_lane_range = {self.proof_lane: range(WAVE_SIZE)}

    @property
    def static_ranges(self) -> dict:
        """The static ranges of the enclosing variables (those whose bounds simplify to constants),
        then the proof lane's: read only where a proof failed (``require``'s fallback enumeration and
        its counterexample), so made at the first read."""
        if self._static_ranges is None:
            ranges = {}
            for var, bound in self.sctx.var_range_map.items():
                static = self._static_range(var, bound)
                if static is not None:
                    ranges[var] = static
            self._static_ranges = ranges | self._proof_lane_range
        return self._static_ranges

    def _static_range(self, var, bound) -> range | None:
        """``var``'s range when its bounds simplify to constants. A variable's bounds depend only on
        the variables around it, the same in every context it appears in, so the answer is kept
        (keyed by the variable and its bound objects) for the next pattern of the kernel."""
        hit = _STATIC_RANGES.get(var)
        if hit is not None and hit[0].same_as(bound.begin) and hit[1].same_as(bound.extent):
            return hit[2]
        low, ext = (x if isinstance(x, IntImm) else self.analyzer.simplify(x) for x in (bound.begin, bound.extent))
        static = range(int(low), int(low) + int(ext)) if hasattr(low, "value") and hasattr(ext, "value") else None
        if len(_STATIC_RANGES) > 65536:
            _STATIC_RANGES.clear()
        _STATIC_RANGES[var] = (bound.begin, bound.extent, static)
        return static

    def wave_axis(self, region: TensorRegion) -> int:
        extents = [self.analyzer.simplify(r.extent) for r in region.region]
        if not extents or not isinstance(extents[0], IntImm):
            raise self.error("scope='workgroup' needs a leading wave axis of static extent on every operand",
                             found=f"region extents {[str(x) for x in extents]}", check="scope",
                             suggestion=SCOPE_SUGGESTION["wave"] if self.laid_out_for() == "wave" else None)
        return int(extents[0])

    @property
    def scope(self) -> str:
        return "workgroup" if self.sctx.scope_kind == "workgroup" else "wave"

    def laid_out_for(self) -> str | None:
        """The other scope when the call's register operands are all laid out for it: ``"workgroup"``
        at scope ``wave`` (every layout has the wave axis), ``"wave"`` at ``workgroup`` (none has)."""
        layouts = [a.source.ty.layout for a in self.operands if isinstance(a, TensorRegion)
                   and str(a.source.ty.scope) == "local" and a.source.ty.layout is not None]
        on_waves = [uses_wave_axis(layout) for layout in layouts]
        if self.scope == "wave" and on_waves and all(on_waves):
            return "workgroup"
        if self.scope == "workgroup" and on_waves and not any(on_waves):
            return "wave"
        return None

    def scope_error(self, other: str, operand=None) -> ContractError:
        """The scope rule broken by operands laid out for scope ``other`` (``laid_out_for``)."""
        if other == "workgroup":
            rule = (f"laid out for scope='workgroup' (its layout puts an axis on the wave axis '{WAVE_ID_AXIS}'), "
                    "applied at scope='wave', where each wave runs its own instance on lanes and registers only")
            expected, found = f"a layout of '{WAVE_LANE_AXIS}' and 'm' only", f"the wave axis '{WAVE_ID_AXIS}'"
        else:
            rule = (f"laid out for scope='wave' (no register operand's layout has the wave axis '{WAVE_ID_AXIS}'), "
                    "applied at scope='workgroup', where the leading axis of every operand is the wave axis")
            expected, found = f"register layouts with the wave axis '{WAVE_ID_AXIS}'", "layouts of lanes and registers only"
        return ContractError(rule, opcode=self.opcode, operand=operand, expected=expected, found=found,
                             suggestion=SCOPE_SUGGESTION[other], check="scope")

    def error(self, rule, *, check: str, operand=None, **fields) -> ContractError:
        """A ``ContractError`` of this call; a shape or owner-map failure of operands laid out for the
        other scope is that scope rule's error instead (``scope_error``)."""
        other = self.laid_out_for() if check in ("shape", "owner map") else None
        if other is not None:
            return self.scope_error(other, operand)
        return ContractError(rule, opcode=self.opcode, operand=operand, check=check, **fields)

    def require(self, condition, rule, *, check: str | None = None, operand=None, expected=None, found=None,
                suggestion=None):
        """Prove ``condition`` over every lane, wave and repeat, or raise a ``ContractError`` (``check``: the
        rule's name; None only from TIRx's inherited region checks).

        ``rule``, ``expected`` and ``found`` are text or callables ``describe(at)``, where
        ``at(expr)`` evaluates ``expr`` at the first counterexample (symbolically when none is
        enumerable); the analyzer's residue follows the sentence."""
        try:
            super().require(condition, "")
        except ValueError as err:
            at = self._evaluator(self._counterexample(condition))
            text = [x(at) if callable(x) else x for x in (rule, expected, found)]
            raise self.error(text[0], operand=operand, expected=text[1], found=text[2], suggestion=suggestion,
                             proof=str(err).removeprefix(": "), check=check) from None

    def _domain(self) -> dict:
        domain = dict(self.static_ranges)
        domain.update(zip(self.group, (range(n) for n in self.group_shape)))
        domain.update(zip(self.repeat or (), (range(n) for n in self.repeat_shape or ())))
        return domain

    def _counterexample(self, condition) -> dict:
        """The first point of the static coordinate domain where ``condition`` is false ({} if none
        is found, or the condition reads a variable without a static range)."""
        used, bound = [], []
        tvm_ffi.structural_map(condition, (Var, lambda v: used.append(v) or v))
        tvm_ffi.structural_map(condition, (Let, lambda e: bound.append(e.var) or e))
        domain = self._domain()
        if any(not any(u.same_as(v) for v in [*domain, *bound]) for u in used):
            return {}
        # the pattern's own coordinates always (the lane fastest), then any enclosing loop it reads
        names = [*self.group, *(self.repeat or ()), self.proof_lane]
        names = [v for v in domain if any(v.same_as(u) for u in used) and not any(v.same_as(n) for n in names)] + names
        for values in islice(product(*(domain[v] for v in names)), COUNTEREXAMPLE_POINTS):
            point = dict(zip(names, values))
            value = self._at(condition, point)
            if isinstance(value, IntImm) and not value.value:
                return point
        return {}

    def _at(self, expr, point: dict):
        def replace(var):
            for known, value in point.items():
                if var.same_as(known):
                    return IntImm(var.ty.dtype, value)
            return var

        return self.analyzer.simplify(tvm_ffi.structural_map(expr, (Var, replace), order="pre"))

    def _evaluator(self, point: dict):
        def at(expr):
            if isinstance(expr, tuple | list):
                return tuple(at(x) for x in expr)
            value = self._at(expr, point) if point else self.analyzer.simplify(expr)
            return int(value.value) if isinstance(value, IntImm) else value

        return at

    def index_coordinates(self, expr):  # no CUDA index calls to rewrite
        return expr

    def region(self, name, region, atom_shape, scopes, *, repeat_axes=None, bounds=True):
        if not isinstance(region, TensorRegion):
            raise self.error("must be a tensor region (a register fragment or LDS tile)", operand=name,
                             found=_describe(region), check="operands")
        return WaveRegion(self, name, region, atom_shape, scopes, repeat_axes, bounds)

    def at_runtime(self, expr):
        """Replace the proof lane by the lane id bound at run time."""
        return substitute(expr, self.proof_lane, self.lane)


class WaveRegion(CudaRegion):
    """An operand of a wave-collective instruction; every failed check is a ``ContractError``."""

    def __init__(self, ctx, name, region, atom_shape, scopes, repeat_axes, bounds):
        self.ctx, self.name = ctx, name
        self._check_storage(region.source.ty, scopes)
        self._check_shape(region, tuple(atom_shape), repeat_axes)
        super().__init__(ctx, name, region, atom_shape, scopes, repeat_axes, bounds=False)
        if bounds:
            self._check_bounds()

    def _check_storage(self, ty, scopes):
        kinds = " or ".join(dict.fromkeys(STORAGE_KINDS[s] for s in scopes))
        if ty.scope not in tuple(MemoryScope(s) for s in scopes):
            self.fail(f"must be {kinds}", expected=f"storage scope {' or '.join(map(repr, scopes))}",
                      found=f"a {ty.scope} tensor", check="storage scope")
        if ty.layout is None and str(ty.scope) != "global":
            self.fail(f"{kinds} needs an explicit layout (which lane and register hold each element)",
                      found="a tensor declared without layout=",
                      suggestion="declare it with layout=tvm_cdna4.patterns.layouts.mfma_fragment(...) or "
                                 "tr_fragment(...), or a T.TileLayout", check="layout")

    def _check_shape(self, region, atom, repeat_axes):
        ctx, analyzer = self.ctx, self.ctx.analyzer
        extents = [analyzer.simplify(r.extent) for r in region.region]
        if not all(isinstance(x, IntImm) and x.value > 0 for x in extents):
            self.fail("region extents must be positive compile-time integers", found=[str(x) for x in extents],
                      check="shape")
        shape, ng, na = tuple(int(x) for x in extents), len(ctx.group_shape), len(atom)
        if shape[:ng] != tuple(ctx.group_shape):
            self.fail("the leading wave axis (scope='workgroup') must have the same extent on every operand",
                      expected=f"{tuple(ctx.group_shape)} first", found=shape, check="shape")
        if len(shape) < ng + na or shape[len(shape) - na:] != atom:
            self.fail(f"the region must end in the instruction's atom {atom}",
                      expected=f"(*{'wave, ' if ng else ''}repeats, {', '.join(map(str, atom))})", found=shape,
                      check="shape")
        if ctx.repeat is not None:
            repeats = shape[ng : len(shape) - na]
            axes = range(len(ctx.repeat)) if repeat_axes is None else repeat_axes
            want = tuple(ctx.repeat_shape[i] for i in axes)
            if repeats != want:
                self.fail("repeat axes must agree with the other operands", expected=want, found=repeats,
                          check="shape")

    def _check_bounds(self):
        for axis, (r, size) in enumerate(zip(self.region.region, self.ty.shape)):
            self.require(r.begin >= 0, f"region axis {axis} starts before the tensor",
                         found=lambda at, r=r: f"start {at(r.begin)}", check="shape")
            self.require(r.begin + r.extent <= size,
                         lambda at, axis=axis, size=size: f"region axis {axis} runs past the tensor's extent {size}",
                         found=lambda at, r=r: f"end {at(r.begin + r.extent)}", check="shape")

    def fail(self, rule: str, *, check: str, **fields):
        raise self.ctx.error(rule, operand=self.name, check=check, **fields)

    def require(self, condition, rule, *, check: str, **fields):
        self.ctx.require(condition, rule, operand=self.name, check=check, **fields)

    @contextlib.contextmanager
    def inherited(self, check: str):
        """Checks of TIRx's CUDA region raise ``ValueError("<operand>: <rule>")``: a ContractError."""
        try:
            yield
        except ContractError:
            raise
        except ValueError as err:
            self.fail(str(err).removeprefix(f"{self.name}: "), check=check)

    def physical(self, atom, repeat=None):
        phys = super().physical(atom, repeat)
        phys.setdefault("m", T.int32(0))  # a layout of one register per lane may have no storage axis
        return phys

    def owner(self, atom, *, lane):
        phys = self.physical(atom)
        allowed = {"m", WAVE_LANE_AXIS, *self.ctx.owners}
        for axis in tuple(set(phys) - allowed):
            if self.ctx.analyzer.can_prove(phys[axis] == 0):
                del phys[axis]
        if WAVE_ID_AXIS in set(phys) - allowed:  # scope='wave': a layout on the wave axis is one for 'workgroup'
            other = self.ctx.laid_out_for()
            error = self.ctx.scope_error("workgroup", self.name)
            if other is None:  # other register operands are laid out for scope='wave'
                error.suggestion = (f"lay it out without the wave axis (layouts.mfma_fragment / tr_fragment, "
                                    f"waves=0), or apply it with scope=\"workgroup\" and every operand on that axis")
            raise error
        if set(phys) - allowed:
            self.fail(f"layout uses axes {sorted(set(phys) - allowed)}; a wave register fragment may use only "
                      f"'{WAVE_LANE_AXIS}' (lane), 'm' (register){' and the wave axis' if self.ctx.owners else ''}",
                      check="layout")
        for axis, owner in self.ctx.owners.items():
            self.require(phys.get(axis, 0) == owner,
                         lambda at, owner=owner: f"element {at(atom)} of wave {at(owner)} is not owned by that wave",
                         found=lambda at, axis=axis: f"{axis} {at(phys.get(axis, 0))}",
                         suggestion="put the leading wave axis on the layout's wave_id axis "
                                    "(layouts.mfma_fragment(..., waves=n))", check="owner map")
        self.require(phys.get(WAVE_LANE_AXIS, 0) == lane,
                     lambda at: f"owner map violated: atom element {at(atom)} must live in lane {at(lane)}",
                     found=lambda at: f"lane {at(phys.get(WAVE_LANE_AXIS, 0))}",
                     suggestion="build the layout with tvm_cdna4.patterns.layouts (mfma_fragment / tr_fragment)",
                     check="owner map")
        return phys["m"]

    def slots(self, coords, lane):
        """Prove ownership of ``coords`` (one lane's elements, in register order) and that they
        occupy consecutive registers; return the first register index."""
        coords = list(coords)
        base = self.owner(coords[0], lane=lane)
        for i, coord in enumerate(coords[1:], 1):
            reg = self.owner(coord, lane=lane)
            self.require(
                reg == base + i,
                lambda at, i=i, coord=coord: f"a lane's {len(coords)} elements must occupy consecutive registers "
                                             f"(element {i}, atom {at(coord)}, of lane {at(lane)})",
                expected=lambda at, i=i: f"register {at(base + i)}", found=lambda at, reg=reg: f"register {at(reg)}",
                check="registers",
            )
        return base

    def aligned(self, atom, byte_alignment):
        base = int(self.ty.data_alignment)
        if base < byte_alignment or base % byte_alignment:
            self.fail(f"the tile's base address must be {byte_alignment}-byte aligned for its chunk loads",
                      found=f"align={base}", suggestion=f"allocate it with align={byte_alignment} (or a multiple)",
                      check="alignment")
        element = self.memory(atom)
        # the region's own start (a column offset into the tile), when it is known and misaligned
        origin = self.ctx.analyzer.simplify(self.memory(tuple(0 for _ in self.atom_shape)) * self.bits // 8)
        shifted = isinstance(origin, IntImm) and origin.value % byte_alignment != 0
        self.require(element * self.bits % (8 * byte_alignment) == 0,
                     lambda at: f"the chunk that lane {at(self.ctx.proof_lane)} reads must start "
                                f"{byte_alignment}-byte aligned",
                     expected=f"the region to start at a multiple of {byte_alignment} bytes" if shifted else None,
                     found=lambda at: f"byte offset {at(element * self.bits // 8)} (atom element {at(atom)})"
                                      + (f": the region starts at byte {origin.value} of the tile" if shifted else ""),
                     suggestion=(f"start the region at an element offset (column) that is a multiple of "
                                 f"{max(1, 8 * byte_alignment // self.bits)} elements" if shifted else
                                 f"make the row pitch of the LDS layout a multiple of {byte_alignment} bytes"),
                     check="alignment")

    def contiguous(self, coordinates, byte_alignment):
        coordinates = list(coordinates)
        self.aligned(coordinates[0], byte_alignment)
        base = self.memory(coordinates[0])
        for offset, coord in enumerate(coordinates):
            here = self.memory(coord)
            self.require(here == base + offset,
                         lambda at, offset=offset: f"the {len(coordinates)} elements of the chunk lane "
                                                   f"{at(self.ctx.proof_lane)} reads must be consecutive in LDS "
                                                   f"(element {offset})",
                         expected=lambda at, offset=offset: f"offset {at(base + offset)}",
                         found=lambda at, here=here: f"offset {at(here)}", check="provider map")

    def memory(self, atom):
        with self.inherited("layout"):
            return super().memory(atom)

    def nonoverlapping(self):
        with self.inherited("registers"):
            super().nonoverlapping()

    def check_dtype(self, allowed: tuple[str, ...], what: str):
        found = str(self.dtype)
        if found in BIT_STORAGE and not getattr(_lowering, "bits_kept", False):
            self.fail(f"dtype {found} is supported only through the 'tirx' and 'default' pipelines of "
                      f"tvm_tirx.tirx.compile (tvm_cdna4.build, emulate), whose pass keeps {found} tensors as "
                      f"{BIT_STORAGE[found]} storage; elsewhere TIRx stores them on ROCm as one float32 per element",
                      suggestion=f"declare the tensor and its allocation as {BIT_STORAGE[found]} holding the "
                                 f"{found} bit patterns (numpy: ml_dtypes.{found} data .view(np.{BIT_STORAGE[found]}))",
                      check="dtype")
        if found not in allowed:
            self.fail(f"dtype {found} does not fit {what}", expected=f"one of {list(allowed)}", check="dtype")

    def _raw(self):
        if self.raw is None:
            with self.inherited("layout"):
                self.value(tuple(0 for _ in self.atom_shape))
        return self.raw

    def load(self, base, n: int):
        raw = self._raw()
        return raw[base] if n == 1 else raw[T.ramp(base, 1, n)]

    def store(self, base, n: int, value):
        raw = self._raw()
        return TensorStore(raw, [base if n == 1 else T.ramp(base, 1, n)], value)
