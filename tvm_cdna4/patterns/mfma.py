"""MFMA: the 36 dense and 2 scaled CDNA4 matrix instructions.

``T.rocm.tile.apply(T.amdgcn[op], D, A, B, C, scope="wave", cbsz=0, abid=0, blgp=0)``

Operands are ``(*group, *repeat, *atom)`` regions of ``local`` register tensors:

====  ==========================  =====================================================
D     (*batch, M, N, *acc atom)   accumulator out; f32 / i32 / f64 as the opcode says
A     (*batch, M, K, *A atom)     repeat axes M, K
B     (*batch, N, K, *B atom)     repeat axes N, K
C     like D, or a scalar         accumulator in, used by the first K repeat; later K
                                  repeats accumulate into D
====  ==========================  =====================================================

Atoms, in the catalog's coordinates (``tvm_cdna4.isa.lanes``):

- single-block: A ``(m, k)``, B ``(n, k)``, D/C ``(m, n)``; multi-block: a leading ``blocks`` axis.
- A and B elements (``ELEMENT_DTYPES``, from ``isa.formats``): the format's own dtype (``float16``,
  ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2``, ``int8``, ``float32``, ``float64``) or, for
  16/8-bit floats, the integer bits (``int16``/``uint16``, ``uint8``). ``bfloat16``/``float8_*``
  tensors are kept as bit storage by ``rocm.storage`` (docs/patterns.md states the rule).
- Owners: A element ``(b, i, k)`` lives in lane/register ``lanes.a_lane(op, b, i, k)``, B element
  ``(b, j, k)`` in ``lanes.b_lane(op, b, j, k)``, D/C element ``(b, i, j)`` in
  ``lanes.acc_lane(op, b, i, j)``; a lane's elements occupy consecutive registers.

Scaled MFMA (``mfma_scale_*``): ``T.rocm.tile.apply(op, D, A, B, C, scale_a, scale_b, cbsz=fa,
blgp=fb, op_sel_a=0, op_sel_b=0)``. ``cbsz``/``blgp`` are the A/B format codes (0 fp8, 1 bf8,
2 fp6, 3 bf6, 4 fp4). Sub-byte elements are not addressable in TIR, so A/B atoms are 32-bit words:
A ``(m, k/32, w_A)``, B ``(n, k/32, w_B)`` with ``w`` = 8/6/4 words for 8/6/4-bit formats; lane
``row + M*kb`` holds the 32 K positions ``[32 kb, 32 kb + 32)`` of its row packed little-endian.
8-bit formats (fp8, bf8) may instead be 8-bit element tiles (``BYTE_DTYPES``) with the dense atoms A ``(m, k)``,
B ``(n, k)`` and the owner maps above (``a_elems`` = 32 consecutive K positions per lane, 4 per
register): the pattern packs them into the words; this is how dense fp8/bf8 GEMMs and
``ds_read_tr8`` fragments feed the scaled MFMA. Each operand takes either form, independently.
Scales: ``(m, k/32)`` / ``(n, k/32)`` 32-bit registers, one per lane; byte ``op_sel`` holds the
E8M0 scale of that lane's 32 K positions (127 = 2^0: unit scales for dense fp8/bf8 GEMMs). Or, per
operand, ``uint8`` byte tiles of the same atom: the layout puts each scale in a byte of the lane's
registers, and each repeat takes the register (byte ``// 4``) holding its scale with ``op_sel`` = byte
``% 4``, so that four repeats share one register (``op_sel_a``/``op_sel_b`` are then not given). The
byte must be the same for every lane and known at compile time (``op_sel`` is an immediate): the
repeats are then emitted one by one, not as loops. The tile's storage starts a register (its data
4-byte aligned); the bytes beyond its last one in that register are read with it and unused.

Parameters are the builtin's immediates, checked against the catalog's legal ranges.
"""

from __future__ import annotations

from itertools import product

import attrs

from tvm_tirx.ir import Bind, IntImm, SeqStmt, TensorRegion, Var
from tvm_tirx.script import tirx as T

from ..errors import ContractError
from ..isa import SCALE_FORMAT_CODES, MfmaOp, lanes, scaled_intrinsic
from ..isa.formats import fmt, tir_dtypes
from ..isa.llvm_types import tir_dtype
from ..isa.mfma_table import SCALE_BLOCK_K, SCALE_VECTOR_WORDS
from ..isa.llvm_helpers import bf16_mfma_helper
from .common import WaveContext, check_operands, parameter, substitute

# TIR dtypes accepted for each element format: its own (bfloat16, float8_*: kept as bit storage by
# rocm.storage) and the integer bit-pattern spellings (isa.formats)
ELEMENT_DTYPES = {name: tir_dtypes(name) for name in ("f16", "bf16", "fp8", "bf8", "i8", "f32", "f64")}
ACC_DTYPES = {name: fmt(name).tir_dtype for name in ("f32", "i32", "f64")}
WORD_DTYPES = ("int32", "uint32")
BYTE_FORMATS = ("fp8", "bf8")  # scaled-MFMA formats whose operands may be element tiles (one byte each)
BYTE_DTYPES = tuple(dict.fromkeys(("int8", *(d for f in BYTE_FORMATS for d in tir_dtypes(f)))))

def _atoms(op: MfmaOp, fmt_a: str | None = None, fmt_b: str | None = None, byte_tiles: bool = False):
    """(A, B, D) atoms; scaled MFMAs: packed words, or with ``byte_tiles`` the element tiles."""
    lead = (op.blocks,) if op.blocks > 1 else ()
    if op.kind == "mfma_scale" and not byte_tiles:
        kb = op.k // SCALE_BLOCK_K
        return (op.m, kb, SCALE_VECTOR_WORDS[fmt_a]), (op.n, kb, SCALE_VECTOR_WORDS[fmt_b]), (op.m, op.n)
    return (*lead, op.m, op.k), (*lead, op.n, op.k), (*lead, op.m, op.n)


def _params(op: MfmaOp, params: dict) -> dict[str, int]:
    legal = [m.name for m in op.modifiers]
    unknown = sorted(set(params) - set(legal))
    if unknown:
        raise ContractError(f"unknown parameter(s) {unknown}", opcode=op.name, expected=f"parameters from {legal}",
                            check="parameters")
    values = {name: parameter(op.name, name, params.get(name, 0)) for name in legal}
    op.check_modifiers(**values)
    return values


def _operand_vector(region, base, op: MfmaOp, fmt: str, llvm_type: str):
    """Load a lane's operand registers and view them as the intrinsic's LLVM operand type."""
    n = op.a_elems
    value = region.load(base, n)
    target = tir_dtype(llvm_type)
    if str(value.ty.dtype) != target:
        value = T.reinterpret(value, ty=target)
    return value


def is_byte_tile(region) -> bool:
    """A scaled-MFMA A/B operand given as 8-bit elements (not packed 32-bit words)."""
    return isinstance(region, TensorRegion) and str(region.source.ty.dtype) in BYTE_DTYPES


def _scaled_operand(ctx, op: MfmaOp, name: str, arg, fmt: str, code: str, mods: dict, repeat_axes, lane):
    """Region, first register, value count and words of a scaled MFMA's A or B: packed words
    ``(m, k/32, w)``, or for fp8/bf8 an 8-bit element tile ``(m, k)`` (module docstring)."""
    words = SCALE_VECTOR_WORDS[fmt]
    selects = f"{code}={mods[code]} selects {fmt}"
    if is_byte_tile(arg):
        if fmt not in BYTE_FORMATS:
            raise ContractError(f"{selects}, whose elements are not whole bytes: pass packed 32-bit words",
                                opcode=op.name, operand=name, expected=f"an int32/uint32 tile (m, k/32, {words})",
                                found=f"a {arg.source.ty.dtype} tile", check="dtype")
        atom = (op.m if name == "A" else op.n, op.k)
        region = ctx.region(name, arg, atom, ("local",), repeat_axes=repeat_axes)
        region.check_dtype(ELEMENT_DTYPES[fmt], f"{fmt} elements ({code}={mods[code]})")
        if name == "A":
            coords = [lanes.a_owner(op, lane, e).atom(op) for e in range(op.a_elems)]
        else:
            coords = [lanes.b_owner(op, lane, e).atom(op) for e in range(op.b_elems)]
        return region, region.slots(coords, lane), len(coords), words
    found = int(arg.region[-1].extent)
    if found != words:
        raise ContractError(f"{selects}, which takes {words} 32-bit words per lane", opcode=op.name, operand=name,
                            expected=f"a last axis of {words}", found=found, check="shape")
    region = ctx.region(name, arg, (op.m if name == "A" else op.n, op.k // SCALE_BLOCK_K, words), ("local",),
                        repeat_axes=repeat_axes)
    region.check_dtype(WORD_DTYPES, f"packed {fmt} words ({code}={mods[code]})")
    row, kb = lanes.scale_owner(op, lane)
    return region, region.slots([(row, kb, w) for w in range(words)], lane), words, words


class _Scale:
    """A scaled MFMA's ``scale_a``/``scale_b``: 32-bit registers, or ``uint8`` byte tiles whose byte
    position gives each repeat its register and ``op_sel`` (module docstring)."""

    def __init__(self, ctx, op: MfmaOp, name: str, arg, repeat_axes, params: dict, lane):
        self.ctx, self.op, self.name = ctx, op, name
        self.byte_tile = is_byte_tile(arg)
        self.region = ctx.region(name, arg, (op.m, op.k // SCALE_BLOCK_K), ("local",), repeat_axes=repeat_axes)
        self.words = None
        if self.byte_tile:
            self._check_byte_tile(params)
        else:
            self.region.check_dtype(WORD_DTYPES, "a 32-bit E8M0 scale register (or uint8 scale bytes)")
        row, kb = lanes.scale_owner(op, lane)
        self.base = self.region.slots([(row, kb)], lane)

    def _check_byte_tile(self, params: dict):
        op, name = self.op, self.name
        self.region.check_dtype(("uint8",), "E8M0 scale bytes")
        sel = "op_sel_a" if name == "scale_a" else "op_sel_b"
        if sel in params:
            raise ContractError(f"{sel} comes from the byte position of the uint8 scale tile; it is not given",
                                opcode=op.name, operand=name, expected=f"no {sel}", found=f"{sel}={params[sel]}",
                                check="parameters")
        alignment = int(self.region.ty.data_alignment)
        if alignment % 4:
            raise ContractError("a uint8 scale tile must start a 32-bit register (op_sel picks a byte of one)",
                                opcode=op.name, operand=name, expected="data 4-byte aligned", found=f"align={alignment}",
                                check="alignment")

    def register(self, run, op_sel: int):
        """(The int32 register, its ``op_sel``) at the repeat point ``run`` maps to."""
        if not self.byte_tile:
            value = self.region.load(run(self.base), 1)
            return (value if str(value.ty.dtype) == "int32" else T.reinterpret(value, ty="int32")), op_sel
        byte = run(self.base)
        if not isinstance(byte, IntImm):
            raise ContractError("the scale byte of each repeat must be known at compile time and the same for every "
                                "lane (op_sel is an immediate)", opcode=self.op.name, operand=self.name,
                                expected="a constant byte offset", found=f"byte {byte}",
                                suggestion="slice the scale tile with constant bounds (repeats, not a loop around the MFMA)",
                                check="compile-time value")
        return T.reinterpret(self._words()[byte.value // 4], ty="int32"), byte.value % 4

    def _words(self):
        """The tile's storage as 32-bit registers (bound once, before the MFMAs)."""
        if self.words is None:
            span = int(self.region.layout.span("m"))
            self.words = Var(f"tile_{self.name}_words", T.Tensor((-(-span // 4),), "uint32", scope="local", layout="default"))
            self.ctx.bindings.append(Bind(self.words, T.decl_tensor(self.region.tensor.data, ty_args=[self.words.ty])))
        return self.words


def _repeat_point(ctx, point: tuple[int, ...]):
    """Index map: an expression at the repeat coordinates ``point``, simplified."""
    def at(expr):
        for var, value in zip(ctx.repeat, point):
            expr = substitute(expr, var, IntImm("int32", value))
        return ctx.analyzer.simplify(expr)
    return at


def operand_names(op: MfmaOp) -> tuple[str, ...]:
    return ("D", "A", "B", "C", "scale_a", "scale_b") if op.kind == "mfma_scale" else ("D", "A", "B", "C")


@attrs.frozen
class _Frame:
    """The wave context of one MFMA application and its accumulator: D (and C, or a scalar C)
    regions with the registers of the proof lane's accumulators; ``mn``/``mk``/``nk`` the operand
    repeat axes among ``(*batch, M, N, K)``."""

    ctx: WaveContext
    mn: tuple[int, ...]
    mk: tuple[int, ...]
    nk: tuple[int, ...]
    d: object = None
    c: object = None
    d_base: object = None
    c_base: object = None


def _frame(op: MfmaOp, args, sctx, a_atom, d_atom) -> _Frame:
    """The context and repeat loops: ``(*batch, M, N, *atom)`` of D and ``(*batch, M, K, *atom)`` of A."""
    ctx = WaveContext(sctx, op.name, args[0], args)
    ng = len(ctx.group_shape)
    d_shape = tuple(int(r.extent) for r in args[0].region)[ng:]
    a_shape = tuple(int(r.extent) for r in args[1].region)[ng:]
    if len(d_shape) < len(d_atom) + 2 or len(a_shape) < len(a_atom) + 2:
        raise ctx.error(
            "operands need explicit repeat axes before the atom", operand="D" if len(d_shape) < len(d_atom) + 2 else "A",
            expected=f"D (*batch, M, N, *{d_atom}), A (*batch, M, K, *{a_atom})", found=f"D {d_shape}, A {a_shape}",
            check="shape")
    reps_d, reps_a = d_shape[: -len(d_atom)], a_shape[: -len(a_atom)]
    batch, m_rep, n_rep = reps_d[:-2], reps_d[-2], reps_d[-1]
    nb = len(batch)
    ctx.loops((*batch, m_rep, n_rep, reps_a[-1]))
    return _Frame(ctx, (*range(nb), nb, nb + 1), (*range(nb), nb, nb + 2), (*range(nb), nb + 1, nb + 2))


def _d_region(frame: _Frame, args, d_atom) -> _Frame:
    return attrs.evolve(frame, d=frame.ctx.region("D", args[0], d_atom, ("local",), repeat_axes=frame.mn))


def _c_region(frame: _Frame, op: MfmaOp, args, d_atom) -> _Frame:
    """C's region (None for a scalar C) and the accumulator dtype checks of D and C."""
    ctx, d, acc_dtype = frame.ctx, frame.d, ACC_DTYPES[op.acc_format]
    c = ctx.region("C", args[3], d_atom, ("local",), repeat_axes=frame.mn) if isinstance(args[3], TensorRegion) else None
    d.check_dtype((acc_dtype,), f"the {op.acc_format} accumulator of {op.name}")
    if c is not None:
        c.check_dtype((acc_dtype,), f"the {op.acc_format} accumulator of {op.name}")
    elif str(args[3].ty.dtype) != acc_dtype:
        raise ContractError("a scalar C must have the accumulator's dtype", opcode=op.name, operand="C",
                            expected=acc_dtype, found=args[3].ty.dtype, check="dtype")
    d.nonoverlapping()
    return attrs.evolve(frame, c=c)


def _acc_bases(frame: _Frame, op: MfmaOp) -> _Frame:
    lane = frame.ctx.proof_lane
    acc = [lanes.acc_owner(op, lane, r).atom(op) for r in range(op.acc_elems)]
    return attrs.evolve(frame, d_base=frame.d.slots(acc, lane),
                        c_base=frame.c.slots(acc, lane) if frame.c is not None else None)


def _accumulate(frame: _Frame, op: MfmaOp, scalar_c, at, value_of):
    """The store of D = ``value_of(run, c)`` at the repeat point that ``at`` substitutes (the
    identity inside the repeat loops); ``run`` maps a lane expression to that point at run time,
    ``c`` is the accumulator in: C for the first K repeat, D after it."""
    ctx, d, c = frame.ctx, frame.d, frame.c
    run = lambda expr: at(ctx.at_runtime(expr))  # noqa: E731
    dv = d.load(run(frame.d_base), op.acc_elems)
    cv = c.load(run(frame.c_base), op.acc_elems) if c is not None else (
        scalar_c if op.acc_elems == 1 else T.broadcast(scalar_c, op.acc_elems))
    cv = T.if_then_else(at(ctx.repeat[-1]) == 0, cv, dv)
    return d.store(run(frame.d_base), op.acc_elems, value_of(run, cv))


def lower(op: MfmaOp, args, params, sctx):
    check_operands(op.name, operand_names(op), args, scalars=("C",))
    mods = _params(op, params)
    if op.kind == "mfma_scale":
        return _lower_scaled(op, args, params, mods, sctx)
    return _lower_dense(op, args, mods, sctx)


def _lower_dense(op: MfmaOp, args, mods: dict, sctx):
    """A dense MFMA: element tiles of the opcode's formats, its LLVM intrinsic (bf16: our helper)."""
    a_atom, b_atom, d_atom = _atoms(op)
    frame = _d_region(_frame(op, args, sctx, a_atom, d_atom), args, d_atom)
    ctx, lane = frame.ctx, frame.ctx.proof_lane
    a = ctx.region("A", args[1], a_atom, ("local",), repeat_axes=frame.mk)
    b = ctx.region("B", args[2], b_atom, ("local",), repeat_axes=frame.nk)
    a.check_dtype(ELEMENT_DTYPES[op.a_format], f"{op.a_format} elements")
    b.check_dtype(ELEMENT_DTYPES[op.b_format], f"{op.b_format} elements")
    frame = _c_region(frame, op, args, d_atom)
    a_base = a.slots([lanes.a_owner(op, lane, e).atom(op) for e in range(op.a_elems)], lane)
    b_base = b.slots([lanes.b_owner(op, lane, e).atom(op) for e in range(op.b_elems)], lane)
    frame = _acc_bases(frame, op)
    acc_ty = tir_dtype(op.acc_vector)

    def mfma(run, cv):
        av = _operand_vector(a, run(a_base), op, op.a_format, op.a_vector)
        bv = _operand_vector(b, run(b_base), op, op.b_format, op.b_vector)
        if op.a_vector == "<8 x bfloat>":
            return T.call_pure_extern(bf16_mfma_helper(op, mods["blgp"]), av, bv, cv, ty=acc_ty)
        return T.call_llvm_pure_intrin(op.llvm_intrinsic, av, bv, cv, T.int32(mods["cbsz"]),
                                       T.int32(mods["abid"]), T.int32(mods["blgp"]), ty=acc_ty)

    return ctx.finish([_accumulate(frame, op, args[3], lambda expr: expr, mfma)])


def _lower_scaled(op: MfmaOp, args, params, mods: dict, sctx):
    """A scaled MFMA: A/B formats from ``cbsz``/``blgp`` (packed words or fp8/bf8 element tiles),
    E8M0 scales as registers or byte tiles (then each repeat on its own: ``op_sel`` differs)."""
    fmt_a, fmt_b = SCALE_FORMAT_CODES[mods["cbsz"]], SCALE_FORMAT_CODES[mods["blgp"]]
    # the A atom's rank (words or an element tile) separates the repeat axes from the atom
    a_atom, _, d_atom = _atoms(op, fmt_a, fmt_b, byte_tiles=is_byte_tile(args[1]))
    frame = _d_region(_frame(op, args, sctx, a_atom, d_atom), args, d_atom)
    ctx, lane = frame.ctx, frame.ctx.proof_lane
    a, a_base, a_count, a_words = _scaled_operand(ctx, op, "A", args[1], fmt_a, "cbsz", mods, frame.mk, lane)
    b, b_base, b_count, b_words = _scaled_operand(ctx, op, "B", args[2], fmt_b, "blgp", mods, frame.nk, lane)
    frame = _c_region(frame, op, args, d_atom)
    scales = [_Scale(ctx, op, name, arg, rep, params, lane)
              for name, arg, rep in (("scale_a", args[4], frame.mk), ("scale_b", args[5], frame.nk))]
    frame = _acc_bases(frame, op)
    acc_ty = tir_dtype(op.acc_vector)

    def mfma(run, cv):
        av = a.load(run(a_base), a_count)
        bv = b.load(run(b_base), b_count)
        av, bv = (v if str(v.ty.dtype).startswith("int32") else T.reinterpret(v, ty=f"int32x{n}")
                  for v, n in ((av, a_words), (bv, b_words)))
        (sa, sel_a), (sb, sel_b) = (scale.register(run, mods[sel]) for scale, sel in zip(scales, ("op_sel_a", "op_sel_b")))
        return T.call_llvm_pure_intrin(
            scaled_intrinsic(op, fmt_a, fmt_b), av, bv, cv, T.int32(mods["cbsz"]), T.int32(mods["blgp"]),
            T.int32(sel_a), sa, T.int32(sel_b), sb, ty=acc_ty)

    if any(scale.byte_tile for scale in scales):  # op_sel differs per repeat: each repeat on its own
        stores = [_accumulate(frame, op, args[3], _repeat_point(ctx, point), mfma)
                  for point in product(*map(range, ctx.repeat_shape))]
        return SeqStmt([*ctx.bindings, *stores])
    return ctx.finish([_accumulate(frame, op, args[3], lambda expr: expr, mfma)])
