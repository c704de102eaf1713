"""Randomized contract checker: valid programs and single mutations over all 44 opcodes.

A *case* is one ``T.rocm.tile.apply`` program built by :mod:`tvm_cdna4.probes` (opcode, scope,
waves, repeat shape, modifiers, operand dtypes), either exactly as the pattern contracts allow
(``mutation is None``) or with one mutation: an operand layout (owner map), the LDS row pitch or
allocation alignment of a ds_read_tr source, an operand's repeat shape, the scope or the number of
launched waves, a modifier value (out of range, ``bool``, ``float``, unknown name) or an operand
dtype. :func:`check` builds the case for gfx950 and, when the build accepts it, runs it in the
emulator and compares every register the destination layout covers with :mod:`tvm_cdna4.isa.reference`
applied to the *logical* operands (the register images read through the kernel's own layouts), so a
harmless mutation (e.g. swapped repeat strides) must still compute the right values.

*Storage cases* (``Case.storage``, :func:`storage_cases`, drawn with probability ``storage_rate``)
put bf16 / fp8 storage anywhere: each operand of a dense MFMA (f16, bf16, fp8, bf8, i8) or of a
16/8-bit ds_read_tr travels global -> (LDS) -> register buffer -> operand view
(``tests/storage_kernels.py``), each dtype drawn from the operand format's *storage dtypes*
(:data:`STORAGE_DTYPES`: the natural ``bfloat16`` / ``float8_*`` dtype and the integer bit-storage
spellings of the same width; one float dtype per chain, so every copy is a bit move). Their expected
outcome follows issue 23: valid (exact against the reference) when the view dtype is one of
:func:`view_dtypes` (the pattern contract's dtypes plus the natural one), a ``ContractError``
otherwise (``must_refuse``).

Outcomes (:data:`OUTCOMES`): ``valid_ok``, ``mutant_refused`` and ``mutant_harmless`` are fine;
``mutant_accepted_violation`` (accepted and correct although the contract says to refuse) and the
rest are bugs. A refusal is a ``tvm_cdna4.ContractError``; any other exception from the build is an
internal error.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from math import prod

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from tvm_tirx.tirx.layout import S, TileLayout

import tvm_cdna4
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, SCALE_FORMAT_CODES, formats, reference
from tvm_cdna4.isa.mfma_table import SCALE_VECTOR_WORDS
from tvm_cdna4.patterns.ds_read_tr import ELEMENT_DTYPES_BY_BITS, RESULT_DTYPES
from tvm_cdna4.patterns.mfma import ACC_DTYPES, ELEMENT_DTYPES
from tvm_cdna4.patterns.layouts import mfma_fragment, tr_fragment
from tvm_cdna4.probes import STORAGE, mfma_probe, tr_probe
from tvm_cdna4.tirx_private import register_rocm_axes

OUTCOMES = {
    "valid_ok": "valid program accepted and correct",
    "mutant_refused": "mutant refused with a contract error",
    "mutant_harmless": "mutant accepted and correct (the mutation did not change the meaning)",
    "valid_refused": "BUG: valid program refused",
    "valid_wrong": "BUG: valid program accepted, wrong result",
    "mutant_wrong": "BUG: mutant accepted, wrong result (silent miscompile)",
    "mutant_accepted_violation": "BUG: mutant breaks the documented contract but was accepted (result correct)",
    "internal_error": "BUG: internal error (not a ContractError)",
    "checker_error": "the checker itself failed (a bug of tests/contract_fuzz.py)",
}
BUGS = [k for k, v in OUTCOMES.items() if v.startswith("BUG")]

# dtypes a mutation may give an operand (every numeric TIR dtype the patterns could meet)
DTYPES = ("float16", "bfloat16", "int16", "uint16", "int8", "uint8", "float8_e4m3fn", "float8_e5m2",
          "float32", "int32", "uint32", "float64")
NP_DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
             "float8_e5m2": ml_dtypes.float8_e5m2}
WAVE = 64
# issue 23: the natural dtype of each element format, and (with the contract's integer spellings) the
# dtypes a buffer holding its bits may have (a copy between them is a bit move)
NATURAL = {"f16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn", "bf8": "float8_e5m2", "i8": "int8"}
STORAGE_DTYPES = {"f16": ("float16",), "bf16": ("bfloat16", "int16", "uint16"), "fp8": ("float8_e4m3fn", "uint8"),
                  "bf8": ("float8_e5m2", "uint8"), "i8": ("int8",), "i16": ("int16", "uint16"),
                  "tr8": ("uint8", "int8")}
TR8_FLOATS = ("float8_e4m3fn", "float8_e5m2")


def np_dtype(name: str) -> np.dtype:
    return np.dtype(NP_DTYPES.get(name, name))


@dataclass
class Case:
    """One program: the probe keywords, the scope design and (for a mutant) what was changed."""

    opcode: str
    scope: str  # the design's scope: "wave" or "workgroup"
    waves: int  # workgroup: extent of the wave axis; wave: number of waves launched (each its own instance)
    repeats: tuple  # MFMA (M, N, K); ds_read_tr (R,)
    mods: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=dict)  # operand -> declared dtype (design)
    seed: int = 0
    mutation: str | None = None
    must_refuse: bool = False  # the documented contract refuses this mutant
    overrides: dict = field(default_factory=dict)  # probe keywords set by the mutation
    storage: dict = field(default_factory=dict)  # storage case: operand -> {"glob", "lds", "regs", "view"} dtypes

    @property
    def op(self):
        return CATALOG[self.opcode]

    def describe(self) -> str:
        design = (f"{self.opcode} scope={self.scope} waves={self.waves} repeats={self.repeats} mods={self.mods} "
                  f"dtypes={self.dtypes}") + (f" storage={self.storage}" if self.storage else "")
        return design + (f" | mutation: {self.mutation}" if self.mutation else " | valid")


# ---------------------------------------------------------------------------------------------
# Generation


def accepted_dtypes(op, operand: str) -> tuple[str, ...]:
    """The dtypes the pattern contract documents for ``operand`` (first: the probes' storage dtype)."""
    if op.kind == "ds_read_tr":
        if op.element_bits < 8:
            return ("uint8", "int8")  # bytes of packed 4/6-bit chunks
        own = STORAGE.get(op.result_format, "int16") if op.element_bits == 16 else "uint8"
        allowed = RESULT_DTYPES.get(op.result_format, ELEMENT_DTYPES_BY_BITS[op.element_bits])
        return (own, *[d for d in allowed if d != own])
    if operand in ("C", "D"):
        return (ACC_DTYPES[op.acc_format],)
    if op.kind == "mfma_scale":
        return ("uint32", "int32")  # packed words and E8M0 scale registers
    fmt = op.a_format if operand == "A" else op.b_format
    return (STORAGE[fmt], *[d for d in ELEMENT_DTYPES[fmt] if d != STORAGE[fmt]])


def _valid_mods(draw, op) -> dict:
    if op.kind == "ds_read_tr":
        return {}
    mods = {m.name: draw(st.integers(m.lo, m.hi)) for m in op.modifiers}
    if op.kind == "mfma" and mods.get("abid", 0) >= 1 << mods.get("cbsz", 0):
        mods["abid"] = draw(st.integers(0, (1 << mods["cbsz"]) - 1))
    op.check_modifiers(**mods)
    return mods


@st.composite
def valid_cases(draw, opcodes=tuple(CATALOG)):
    op = CATALOG[draw(st.sampled_from(opcodes))]
    scope = draw(st.sampled_from(("wave", "workgroup")))
    waves = draw(st.sampled_from((1, 2)) if scope == "wave" else st.sampled_from((1, 2, 4)))
    if op.kind == "ds_read_tr":
        repeats = (draw(st.integers(1, 2)),)
        dtypes = {"src": draw(st.sampled_from(accepted_dtypes(op, "src")))}
    else:
        big = op.acc_elems >= 16
        repeats = tuple(draw(st.integers(1, 1 if big else 2)) for _ in range(3))
        names = ("scale",) if op.kind == "mfma_scale" else ("A", "B", "C", "D")
        dtypes = {k: draw(st.sampled_from(accepted_dtypes(op, k))) for k in names}
    return Case(op.name, scope, waves, repeats, _valid_mods(draw, op), dtypes, seed=draw(st.integers(0, 2**31 - 1)))


def _layout_of(case: Case, operand: str) -> TileLayout:
    op, w = case.op, case.waves if case.scope == "workgroup" else 0
    if op.kind == "ds_read_tr":
        return tr_fragment(op, case.repeats, waves=w)[0]
    m, n, k = case.repeats
    reps = {"A": (m, k), "B": (n, k), "C": (m, n), "D": (m, n), "scale_a": (m, k), "scale_b": (n, k)}[operand]
    if op.kind == "mfma_scale" and operand in "AB":
        fa, fb = SCALE_FORMAT_CODES[case.mods["cbsz"]], SCALE_FORMAT_CODES[case.mods["blgp"]]
        return mfma_fragment(op, operand, reps, fa, fb, waves=w)[0]
    return mfma_fragment(op, "D" if operand == "C" else operand, reps, waves=w)[0]


def _iters(layout: TileLayout) -> list[tuple[int, int, str]]:
    return [(int(it.extent), int(it.stride), str(it.axis).rsplit(".", 1)[-1]) for it in layout.shard]


def _from_iters(iters) -> TileLayout:
    wl, wave = register_rocm_axes()
    axis = {"wave_lane": wl, "wave_id": wave}
    strides = tuple(s @ axis[a] if a in axis else s for _, s, a in iters)
    return TileLayout(S[tuple(e for e, _, _ in iters) : strides])


def _mutate_layout(draw, case: Case, operands) -> None:
    name = draw(st.sampled_from(operands))
    iters = _iters(_layout_of(case, name))
    pairs = [(i, j) for i in range(len(iters)) for j in range(i + 1, len(iters))
             if iters[i][0] == iters[j][0] and iters[i][0] > 1 and iters[i][1:] != iters[j][1:]]
    if not pairs:
        return
    i, j = draw(st.sampled_from(pairs))
    iters[i], iters[j] = (iters[i][0], *iters[j][1:]), (iters[j][0], *iters[i][1:])
    key = "dst_layout" if case.op.kind == "ds_read_tr" else "layouts"
    layout = _from_iters(iters)
    case.overrides[key] = layout if key == "dst_layout" else {name: layout}
    case.mutation = f"layout {name}: swap iterators {i} and {j} ({_iters(_layout_of(case, name))[i]} <-> " \
                    f"{_iters(_layout_of(case, name))[j]})"


def _mutate_modifier(draw, case: Case) -> None:
    op = case.op
    if op.kind != "ds_read_tr" and draw(st.booleans()):
        mod = op.modifier(draw(st.sampled_from([m.name for m in op.modifiers])))
        value = draw(st.one_of(st.integers(mod.lo - 2, mod.hi + 3), st.booleans(), st.just(float(mod.hi))))
        mods = dict(case.mods, **{mod.name: value})
        try:
            ok = type(value) is int and (op.check_modifiers(**mods) is None)
        except ValueError:
            ok = False
        case.overrides["params"] = mods
        case.mutation, case.must_refuse = f"modifier {mod.name}={value!r}", not ok
    else:
        case.overrides["params"] = dict(case.mods, neg=1) if op.kind != "ds_read_tr" else {"cbsz": 0}
        case.mutation, case.must_refuse = "unknown parameter", True


def _mutate_dtype(draw, case: Case, operands) -> None:
    name = draw(st.sampled_from(operands))
    dtype = draw(st.sampled_from([d for d in DTYPES if d != case.dtypes.get(name)]))
    case.overrides["dtypes"] = {name: dtype}
    case.mutation = f"dtype {name}={dtype}"
    case.must_refuse = dtype not in accepted_dtypes(case.op, name)


def _mutate_repeats(draw, case: Case, operands) -> None:
    name = draw(st.sampled_from(operands))
    if case.op.kind == "ds_read_tr":
        case.overrides["dst_repeats"] = case.repeats[0] + 1
        case.mutation = f"repeats dst={case.repeats[0] + 1} vs src={case.repeats[0]}"
    else:
        m, n, k = case.repeats
        reps = {"A": (m, k), "B": (n, k), "C": (m, n), "D": (m, n)}[name]
        axis = draw(st.integers(0, 1))
        bad = tuple(r + (i == axis) for i, r in enumerate(reps))
        case.overrides["operand_repeats"] = {name: bad}
        case.mutation = f"repeats {name}={bad} vs design {reps}"
    case.must_refuse = True


def _mutate_scope(draw, case: Case) -> None:
    choices = ["thread", "wave" if case.scope == "workgroup" else "workgroup"]
    if case.scope == "workgroup":
        choices += ["fewer waves", "more waves"] if case.waves > 1 else ["more waves"]
    kind = draw(st.sampled_from(choices))
    if kind.endswith("waves"):
        threads = WAVE * (case.waves + (1 if kind == "more waves" else -1))
        case.overrides["threads"] = threads
        case.mutation, case.must_refuse = f"{kind}: {threads} threads for a wave axis of {case.waves}", True
    else:
        case.overrides["scope"] = kind
        case.mutation, case.must_refuse = f"scope={kind!r} on a {case.scope}-scope program", kind == "thread"


def _mutate_alignment(draw, case: Case) -> None:
    op = case.op
    esize = 1 if op.element_bits < 8 else op.element_bits // 8
    width = 16 if op.element_bits < 8 else 16  # elements (bytes for sub-byte) of one canonical row
    row = draw(st.sampled_from([width + d for d in (1, 2, 4, 6, 8, 12, 16)]))
    align = draw(st.sampled_from((4, 8, 16, 32)))
    case.overrides.update(row_pitch=row, align=align)
    case.mutation = f"LDS row pitch {row} elements ({row * esize} B), allocation align {align}"
    case.must_refuse = (row * esize) % op.lds_alignment != 0 or align < op.lds_alignment


@st.composite
def cases(draw, opcodes=tuple(CATALOG), mutant_rate: float = 0.5, storage_rate: float = 0.0):
    """A valid case or (with probability ``mutant_rate``) one single mutation of one; with
    probability ``storage_rate`` a storage case (:func:`storage_cases`) instead."""
    storage_ops = tuple(o for o in opcodes if storage_format(CATALOG[o]) is not None)
    if storage_ops and storage_rate and draw(st.floats(0, 1)) < storage_rate:
        return draw(storage_cases(storage_ops))
    case = draw(valid_cases(opcodes))
    if draw(st.floats(0, 1)) >= mutant_rate:
        return case
    op = case.op
    if op.kind == "ds_read_tr":
        kinds = ["layout", "alignment", "repeats", "scope", "modifier", "dtype"]
        operands = ["dst"]
    else:
        kinds = ["layout", "repeats", "scope", "modifier", "dtype"]
        operands = ["A", "B", "C", "D"] + (["scale_a", "scale_b"] if op.kind == "mfma_scale" else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "layout":
        _mutate_layout(draw, case, operands)
    elif kind == "alignment":
        _mutate_alignment(draw, case)
    elif kind == "repeats":
        _mutate_repeats(draw, case, operands[:4])
    elif kind == "scope":
        _mutate_scope(draw, case)
    elif kind == "modifier":
        _mutate_modifier(draw, case)
    else:
        _mutate_dtype(draw, case, ["src"] if op.kind == "ds_read_tr" else
                      (["scale"] if op.kind == "mfma_scale" else ["A", "B", "C", "D"]))
    return case


# ---------------------------------------------------------------------------------------------
# Storage cases (issue 23: bf16 / fp8 storage anywhere, mixed storage and view dtypes)


def storage_format(op) -> str | None:
    """The element format whose storage a case of ``op`` varies (None: no storage cases for it)."""
    if op.kind == "mfma" and op.a_format in NATURAL and op.b_format in NATURAL:
        return op.a_format
    if op.kind == "ds_read_tr" and op.element_bits in (8, 16):
        return "tr8" if op.element_bits == 8 else op.result_format
    return None


def _operand_format(op, operand: str) -> str:
    if op.kind == "ds_read_tr":
        return storage_format(op)
    return op.a_format if operand == "A" else op.b_format


def view_dtypes(op, operand: str, fp8: str | None = None) -> tuple[str, ...]:
    """The view dtypes issue 23 makes valid: the pattern contract's, plus the natural dtype."""
    fmt = _operand_format(op, operand)
    natural = (fp8,) if fmt == "tr8" else ((NATURAL[fmt],) if fmt in NATURAL else ())
    return tuple(dict.fromkeys(accepted_dtypes(op, operand) + natural))


def _chain_dtypes(op, operand: str, fp8: str | None) -> tuple[str, ...]:
    fmt = _operand_format(op, operand)
    return STORAGE_DTYPES[fmt] + ((fp8,) if fmt == "tr8" else ())


@st.composite
def storage_cases(draw, opcodes):
    """One storage case: valid, or (a quarter of them) with a view dtype the contract refuses."""
    op = CATALOG[draw(st.sampled_from(opcodes))]
    fp8 = draw(st.sampled_from(TR8_FLOATS)) if storage_format(op) == "tr8" else None
    operands = ("src",) if op.kind == "ds_read_tr" else ("A", "B")
    storage, mutation, refuse = {}, None, False
    for name in operands:
        pick = lambda: draw(st.sampled_from(_chain_dtypes(op, name, fp8)))  # noqa: E731
        lds = pick() if op.kind == "ds_read_tr" or draw(st.booleans()) else None
        storage[name] = {"glob": pick(), "lds": lds, "regs": pick(), "view": draw(st.sampled_from(view_dtypes(op, name, fp8)))}
    if draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(operands))
        wrong = [d for d in DTYPES if d not in view_dtypes(op, name, fp8)]
        storage[name]["view"] = draw(st.sampled_from(wrong))
        mutation, refuse = f"storage view {name}={storage[name]['view']}", True
    mods = {} if op.kind == "ds_read_tr" else {m.name: 0 for m in op.modifiers}
    dtypes = {k: v["view"] for k, v in storage.items()}
    return Case(op.name, "wave", 1, (1,) if op.kind == "ds_read_tr" else (1, 1, 1), mods, dtypes,
                seed=draw(st.integers(0, 2**31 - 1)), mutation=mutation, must_refuse=refuse, storage=storage)


def storage_kernel(case: Case):
    import storage_kernels

    if case.op.kind == "ds_read_tr":
        return storage_kernels.tr_storage_kernel(case.op, case.storage["src"])
    return storage_kernels.mfma_storage_kernel(case.op, case.storage, case.mods, ACC_DTYPES[case.op.acc_format])


# ---------------------------------------------------------------------------------------------
# Building


def kernel_of(case: Case):
    if case.storage:
        return storage_kernel(case)
    op, o = case.op, dict(case.overrides)
    workgroup = case.scope == "workgroup"
    common = dict(scope=o.pop("scope", case.scope), waves=case.waves if workgroup else 0,
                  threads=o.pop("threads", WAVE * case.waves))
    if op.kind == "ds_read_tr":
        dtype = o.pop("dtypes", {}).get("src", case.dtypes["src"])
        return tr_probe(op, repeats=case.repeats[0], dtype=dtype, **common, **o)
    dtypes = dict(case.dtypes) | o.pop("dtypes", {})
    mods = {k: v for k, v in case.mods.items() if k in ("cbsz", "abid", "blgp", "op_sel_a", "op_sel_b")}
    return mfma_probe(op, **mods, repeats=case.repeats, dtypes=dtypes, **common, **o)


def _refusal(err: BaseException, opcode: str) -> bool:
    """A refusal is a ``tvm_cdna4.ContractError``; any other exception is an internal error."""
    return isinstance(err, ContractError)


# ---------------------------------------------------------------------------------------------
# The reference, applied to the logical operands


def _iters_placement(layout: TileLayout, shape) -> np.ndarray:
    """(3, *shape) int array: wave, lane and register of every element of a register tensor."""
    out = np.zeros((3, prod(shape)), np.int64)
    rest = np.arange(prod(shape))
    slot = {"wave_id": 0, "wave_lane": 1, "m": 2}
    for extent, stride, axis in reversed(_iters(layout)):
        out[slot[axis]] += rest % extent * stride
        rest = rest // extent
    return out.reshape(3, *shape)


def register_tensors(kernel) -> dict[str, tuple]:
    """name -> (shape, dtype, layout) of every tensor the kernel declares (``Af = T.decl_tensor(...)``)."""
    found = {}

    def visit(node):
        for child in getattr(node, "seq", None) or ():
            visit(child)
        body = getattr(node, "body", None)
        if body is not None and hasattr(body, "same_as"):
            visit(body)
        ty = getattr(getattr(node, "var", None), "ty", None)
        if type(node).__name__ == "Bind" and getattr(ty, "layout", None) is not None:
            found[node.var.name] = (tuple(int(x) for x in ty.shape), str(ty.dtype), ty.layout)

    visit(kernel.body)
    return found


class Operand:
    """A register tensor of the kernel read through its layout: ``values(inst)`` has its logical shape."""

    def __init__(self, decl, image: np.ndarray):
        self.shape, self.dtype, layout = decl
        self.where = _iters_placement(layout, self.shape)
        self.image = image

    def values(self, inst: int) -> np.ndarray:
        wave, lane, reg = self.where
        return self.image[WAVE * (wave + inst) + lane, reg]

    def threads(self, inst: int) -> tuple[np.ndarray, np.ndarray]:
        wave, lane, reg = self.where
        return WAVE * (wave + inst) + lane, reg


def _as_format(values: np.ndarray, fmt_dtype) -> np.ndarray:
    """Values of an operand in the format's dtype: a bit view when the widths agree, else a value cast."""
    fmt_dtype = np.dtype(fmt_dtype)
    values = np.ascontiguousarray(values)
    if values.dtype.itemsize == fmt_dtype.itemsize:
        return values.view(fmt_dtype)
    return values.astype(np.float64).astype(fmt_dtype)


def _instances(case: Case) -> list[int]:
    """First wave of each independent instance: every wave at wave scope, one per workgroup."""
    return [0] if case.scope == "workgroup" else list(range(case.waves))


def _lanes(op, operand: str, atom: np.ndarray) -> np.ndarray:
    """An operand atom (logical coordinates) -> per-lane elements of the canonical owner map."""
    tiles = atom if op.blocks > 1 else atom[None]
    if operand == "A":
        return reference.scatter_a(op, tiles)
    if operand == "B":
        return reference.scatter_b(op, np.swapaxes(tiles, -1, -2))  # B atom (col, k) -> tiles (k, col)
    return reference.scatter_acc(op, tiles)


def _atom(op, lanes_: np.ndarray) -> np.ndarray:
    tiles = reference.gather_acc(op, lanes_)
    return tiles if op.blocks > 1 else tiles[0]


def _mods(case: Case) -> dict:
    mods = case.overrides.get("params", case.mods)
    return {k: int(v) for k, v in mods.items()}


def _dense_step(op, mods, a, b, acc):
    fa, fb, fc = (formats.fmt(f).dtype for f in (op.a_format, op.b_format, op.acc_format))
    return reference.mfma(op, _lanes(op, "A", _as_format(a, fa)), _lanes(op, "B", _as_format(b, fb)),
                          acc.astype(fc), **mods)


def _scaled_step(op, mods, a, b, sa, sb, acc):
    fa, fb = SCALE_FORMAT_CODES[mods["cbsz"]], SCALE_FORMAT_CODES[mods["blgp"]]
    lane = np.arange(WAVE)
    row, kb = lane % op.m, lane // op.m  # lane row + M*kb holds K block kb of row `row` (mfma docstring)
    words = lambda x: _as_format(x, np.uint32)  # noqa: E731
    return reference.mfma_scale(
        op, formats.from_words(fa, words(a)[row, kb], 32), formats.from_words(fb, words(b)[row, kb], 32),
        acc.astype(np.float32), cbsz=mods["cbsz"], blgp=mods["blgp"], scale_a=words(sa)[row, kb],
        scale_b=words(sb)[row, kb], op_sel_a=mods["op_sel_a"], op_sel_b=mods["op_sel_b"])


def expected_mfma(case: Case, ops: dict[str, Operand]) -> tuple[tuple, np.ndarray]:
    """((threads, registers), values) the reference puts in D, for every element of D's layout."""
    op, mods = case.op, _mods(case)
    m, n, k = case.repeats
    wg = case.scope == "workgroup"
    threads, regs, values = [], [], []
    for inst in _instances(case):
        v = {name: o.values(inst) for name, o in ops.items()}
        where = ops["Df"].threads(inst)
        for lead in [(g,) for g in range(case.waves)] if wg else [()]:
            for i in range(m):
                for j in range(n):
                    acc = _lanes(op, "C", _as_format(v["Cf"][lead + (i, j)], formats.fmt(op.acc_format).dtype))
                    for kk in range(k):
                        a, b = v["Af"][lead + (i, kk)], v["Bf"][lead + (j, kk)]
                        if op.kind == "mfma_scale":
                            acc = _scaled_step(op, mods, a, b, v["Sa"][lead + (i, kk)], v["Sb"][lead + (j, kk)], acc)
                        else:
                            acc = _dense_step(op, mods, a, b, acc)
                    threads.append(where[0][lead + (i, j)].ravel())
                    regs.append(where[1][lead + (i, j)].ravel())
                    values.append(_atom(op, acc).ravel())
    return (np.concatenate(threads), np.concatenate(regs)), np.concatenate(values)


def _tr_tile_result(op, tile_bytes: np.ndarray) -> np.ndarray:
    """One canonical ds_read_tr of a tile-form src (4, rows, row bytes) through the reference:
    dst atom bits, (4, n, 16) elements (uint) or (4, 16, words) for sub-byte loads."""
    lane = np.arange(WAVE)
    g, j = lane // 16, lane % 16
    if op.element_bits < 8:
        lds = np.zeros((4, 16, 16), np.uint8)  # rows padded to 16 B (tr6: 12-byte chunks)
        lds[:, :, : tile_bytes.shape[-1]] = tile_bytes
        words = reference.ds_read_tr(op, lds.ravel(), (g * 16 + j) * 16)
        return words.reshape(4, 16, -1)
    n, esize = op.elements, op.element_bits // 8
    row, col = j // (16 // n), j % (16 // n) * n  # lane 16g + j supplies src[g, row, col] (docstring)
    words = reference.ds_read_tr(op, tile_bytes.ravel(), ((g * n + row) * 16 + col) * esize)
    elems = words.view(np.dtype(f"u{esize}")).reshape(4, 16, n)  # [g, c, i]
    return elems.transpose(0, 2, 1)  # dst[g, i, c]


def expected_tr(case: Case, src: np.ndarray, dst: Operand) -> tuple[tuple, np.ndarray]:
    op = case.op
    wg = case.scope == "workgroup"
    reps = case.repeats[0]
    tiles = src.view(np.uint8).reshape((case.waves,) * wg + (reps, 4, -1, src.dtype.itemsize * 16 if op.element_bits >= 8 else op.load_bits // 8))
    threads, regs, values = [], [], []
    for inst in _instances(case):
        where = dst.threads(inst)
        for lead in [(g,) for g in range(case.waves)] if wg else [()]:
            for r in range(reps):
                threads.append(where[0][lead + (r,)].ravel())
                regs.append(where[1][lead + (r,)].ravel())
                values.append(_tr_tile_result(op, tiles[lead + (r,)]).ravel())
    return (np.concatenate(threads), np.concatenate(regs)), np.concatenate(values)


# ---------------------------------------------------------------------------------------------
# Arguments


def _random_elements(rng, fmt: str, shape) -> np.ndarray:
    if fmt == "i8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if fmt == "i32":
        return rng.integers(-(2**20), 2**20, shape).astype(np.int32)
    return rng.normal(size=shape).astype(formats.fmt(fmt).dtype)


def _image(values: np.ndarray, declared: str) -> np.ndarray:
    """An argument of the declared dtype holding ``values``: bit view when widths agree, else a cast."""
    dt = np_dtype(declared)
    values = np.ascontiguousarray(values)
    return values.view(dt) if dt.itemsize == values.dtype.itemsize else values.astype(np.float64).astype(dt)


def mfma_arguments(case: Case, kernel, rng) -> dict[str, np.ndarray]:
    op, mods = case.op, _mods(case)
    args = {}
    for p in kernel.params:
        shape, dtype = tuple(int(x) for x in p.ty.shape), str(p.ty.dtype)
        if p.name == "D":
            args[p.name] = np.full(shape, _sentinel(dtype), np_dtype(dtype))
        elif p.name in ("SA", "SB"):
            sel = mods.get("op_sel_a" if p.name == "SA" else "op_sel_b", 0) % 4
            other = rng.integers(0, 256, shape + (4,)).astype(np.uint8)
            other[..., sel] = rng.integers(118, 136, shape)
            args[p.name] = other.view("<u4").reshape(shape)
        elif op.kind == "mfma_scale" and p.name in "AB":
            fmt = SCALE_FORMAT_CODES.get(mods.get("cbsz" if p.name == "A" else "blgp", 0), "fp8")
            n_words = SCALE_VECTOR_WORDS[fmt]
            els = _random_elements(rng, fmt, (shape[0] * shape[1] // n_words, 32))
            args[p.name] = formats.to_words(fmt, els).reshape(shape)
        else:
            fmt = {"A": op.a_format, "B": op.b_format, "C": op.acc_format}[p.name]
            args[p.name] = _image(_random_elements(rng, fmt, shape), dtype)
    return args


def _sentinel(dtype: str):
    """A value the kernel never computes by chance: registers D's layout misses keep it."""
    dt = np_dtype(dtype)
    return dt.type(np.nan) if dt.kind == "f" or dtype in NP_DTYPES else dt.type(-7)


def tr_arguments(case: Case, kernel, rng) -> dict[str, np.ndarray]:
    args = {}
    for p in kernel.params:
        shape, dt = tuple(int(x) for x in p.ty.shape), np_dtype(str(p.ty.dtype))
        raw = rng.integers(0, 256, prod(shape) * dt.itemsize).astype(np.uint8)
        args[p.name] = raw.view(dt).reshape(shape) if p.name == "SRC" else np.zeros(shape, dt)
    return args


# ---------------------------------------------------------------------------------------------
# The checker


@dataclass
class Result:
    outcome: str
    case: Case
    detail: str = ""


def _first_line(err: BaseException) -> str:
    lines = [l for l in str(err).splitlines() if l.strip()]
    text = " / ".join(lines[:2]) if lines and lines[0].startswith("Tensor instruction lowering failed") else (lines[0] if lines else "")
    return f"{type(err).__name__}: {text[:300]}"


MFMA_ARGS = {"Af": "A", "Bf": "B", "Cf": "C", "Df": "D", "Sa": "SA", "Sb": "SB"}  # register tensor -> argument


def check(case: Case) -> Result:
    """Build ``case`` for gfx950, emulate it when accepted, compare with the reference; classify."""
    valid = case.mutation is None
    try:
        kernel = kernel_of(case)
        tvm_cdna4.build(kernel)
    except Exception as err:  # noqa: BLE001 - every exception is classified
        if _refusal(err, case.opcode):
            return Result("valid_refused" if valid else "mutant_refused", case, _first_line(err))
        return Result("internal_error", case, _first_line(err) + "\n" + traceback.format_exc(limit=-3))
    rng = np.random.default_rng(case.seed)
    tensors = register_tensors(kernel)
    args = tr_arguments(case, kernel, rng) if case.op.kind == "ds_read_tr" else mfma_arguments(case, kernel, rng)
    try:
        if case.op.kind == "ds_read_tr":
            where, want = expected_tr(case, args["SRC"], Operand(tensors["Df"], args["D"]))
        else:
            rows = args["A"].shape[0]  # one row of registers per launched thread
            ops = {name: Operand(tensors[name], args[arg].reshape(rows, -1)) for name, arg in MFMA_ARGS.items()
                   if name in tensors}
            where, want = expected_mfma(case, ops)
    except IndexError:  # the layouts place operand elements in threads the kernel does not launch
        return Result("valid_wrong" if valid else "mutant_wrong", case,
                      "accepted, but operand elements live in waves that are not launched: never computed")
    except Exception as err:  # noqa: BLE001
        if valid:
            raise
        return Result("mutant_accepted_violation", case, f"accepted; the reference has no meaning for it: {_first_line(err)}")
    try:
        emulate(kernel, *args.values())
    except Exception as err:  # noqa: BLE001
        outcome = "valid_wrong" if valid else "mutant_wrong"
        return Result(outcome, case, f"accepted, then the emulator reports {_first_line(err)}")
    got = _compare_values(case, args["D"], where)
    bad = ~_same(got, want)
    if bad.any():
        first = int(np.argmax(bad))
        detail = (f"{int(bad.sum())} of {bad.size} D elements wrong; first at thread {int(where[0][first])} register "
                  f"{int(where[1][first])}: got {got[first]!r}, expected {want[first]!r}")
        return Result("valid_wrong" if valid else "mutant_wrong", case, detail)
    if valid:
        return Result("valid_ok", case)
    return Result("mutant_accepted_violation" if case.must_refuse else "mutant_harmless", case)


def _compare_values(case: Case, d: np.ndarray, where) -> np.ndarray:
    threads, regs = where
    d2 = d.reshape(d.shape[0], -1)
    if threads.max(initial=0) >= d2.shape[0]:
        valid_rows = threads < d2.shape[0]
        out = np.full(threads.shape, np.nan)
        out[valid_rows] = _decode(case, d2[threads[valid_rows], regs[valid_rows]])
        return out
    return _decode(case, d2[threads, regs])


def _decode(case: Case, raw: np.ndarray) -> np.ndarray:
    op = case.op
    if op.kind == "ds_read_tr":
        return raw.view(np.dtype(f"u{raw.dtype.itemsize}")).astype(np.float64)
    return _as_format(raw, formats.fmt(op.acc_format).dtype).astype(np.float64)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    want = np.asarray(want).astype(np.float64)
    return (got == want) | (np.isnan(got) & np.isnan(want))


# ---------------------------------------------------------------------------------------------
# Running


def run(n_cases: int, seed: int, on_result=None, opcodes=tuple(CATALOG), storage_rate: float = 0.0) -> list[Result]:
    """Check ``n_cases`` cases drawn by hypothesis from ``seed`` (deterministic: same seed, same cases),
    storage cases with probability ``storage_rate``; ``on_result(result)`` sees each as it is classified."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    results = []

    @hseed(seed)
    @settings(max_examples=n_cases, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=cases(opcodes, storage_rate=storage_rate))
    def one(case):
        try:
            result = check(case)
        except Exception:  # noqa: BLE001 - keep going; the report lists it
            result = Result("checker_error", case, traceback.format_exc(limit=-4))
        results.append(result)
        if on_result:
            on_result(result)

    one()
    return results
