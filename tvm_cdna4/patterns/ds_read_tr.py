"""ds_read_tr: transposing LDS loads (``ds_read_b64_tr_b{4,8,16}``, ``ds_read_b96_tr_b6``).

Each lane supplies one LDS address; the hardware reads the lane's chunk (64 bits; tr6: 96 bits)
and, inside each 16-lane group, hands lane ``L`` element ``i`` from the chunk of lane
``lanes.tr_provider(op, L, i)`` (n = elements per lane: 4 for b16, 8 for b8, 16 for b4/b6).

**Tile form** ``T.rocm.tile.apply(T.amdgcn[op], dst, src, scope="wave")``: one instruction per
repeat. ``dst`` (``local``) and ``src`` (``shared``) are ``(*group, *repeat, 4, n, 16)`` tiles: group
``g`` of 16 lanes, row ``i``, column ``c``. Lane ``16g + c`` receives column ``c`` (rows ``0..n-1``
in consecutive registers); lane ``16g + j`` supplies the address of ``src[g, j // (16/n), (j % (16/n))*n]``,
the start of ``n`` consecutive elements, aligned to ``lds_alignment`` bytes. Sub-byte loads (tr4,
tr6) use packed units: ``dst (*, 4, 16, w)`` 32-bit words (w = 2 or 3) of lane ``16g + c`` and
``src (*, 4, 16, bytes)`` one chunk (8 or 12 bytes) per row.

Elements are 16-bit (``float16``, ``bfloat16``, ``int16``, ``uint16``) or 8-bit (``float8_e4m3fn``,
``float8_e5m2``, ``int8``, ``uint8``): ``ELEMENT_DTYPES_BY_BITS``, from ``isa.formats``; the
transpose moves packed bytes, and ``rocm.storage`` keeps ``bfloat16``/``float8_*`` tiles packed.

**Operand form** ``T.rocm.tile.apply(T.amdgcn[op], frag, src, scope="wave", mfma=name, operand="B")``
fills one MFMA operand fragment with ``b_elems / n`` calls. ``frag`` has the MFMA's B atom ``(n, k)``
(A: ``(m, k)``) and ``src`` is the operand stored M/N-contiguous in LDS: ``(k, n)`` for B, ``(k, m)``
for A. ``mfma`` may also name a scaled MFMA: its fp8/bf8 operand as an 8-bit element tile
(``patterns.mfma``), 8-bit transposes only. The pattern checks that the calls cover every K
position exactly once (the seed's K split), that each provider's chunk is a contiguous, aligned run
of ``src`` and that each lane ends with the MFMA owner map.
"""

from __future__ import annotations

import numpy as np
from tvm_tirx.script import tirx as T

from ..errors import ContractError
from ..isa import CATALOG, DsReadTrOp, MfmaOp, lanes
from ..isa.formats import FORMATS, tir_dtypes
from ..isa.llvm_types import tir_dtype
from ..isa.llvm_helpers import bf16_tr_helper
from .common import WaveContext, check_operands
from .mfma import BYTE_FORMATS, ELEMENT_DTYPES

GROUPS = 4  # 16-lane groups per wave
# element dtypes by width: every format's own and bit-pattern spellings (isa.formats); the
# transpose moves packed LDS bytes, whatever the elements mean
ELEMENT_DTYPES_BY_BITS = {
    bits: tuple(dict.fromkeys(d for f in FORMATS.values() if f.bits == bits for d in tir_dtypes(f.name)))
    for bits in (16, 8)
}
BYTE_TILE_DTYPES = tuple(dict.fromkeys(d for f in BYTE_FORMATS for d in ELEMENT_DTYPES[f]))  # scaled MFMA
RESULT_DTYPES = {"f16": tir_dtypes("f16"), "bf16": tir_dtypes("bf16"), "i16": ("int16", "uint16")}

def _load(op: DsReadTrOp, ctx, src, coords):
    ptr = T.address_of(src.tensor[src.indices(coords)])
    if "bfloat" in op.result_vector:
        return T.call_extern(bf16_tr_helper(op.name), ptr, ty=tir_dtype(op.result_vector))
    return T.call_llvm_intrin(op.llvm_intrinsic, ptr, ty=tir_dtype(op.result_vector))


def _store(dst, base, count, value):
    want = f"{dst.dtype}x{count}"
    if str(value.ty.dtype) != want:
        value = T.reinterpret(value, ty=want)
    return dst.store(base, count, value)


def operand_names(op: DsReadTrOp) -> tuple[str, ...]:
    return ("dst", "src")


def lower(op: DsReadTrOp, args, params, sctx):
    unknown = sorted(set(params) - {"mfma", "operand"})
    if unknown:
        raise ContractError(f"unknown parameter(s) {unknown}", opcode=op.name,
                            expected="parameters from ['mfma', 'operand']", check="parameters")
    if "mfma" in params:
        return _lower_operand(op, args, params, sctx)
    if "operand" in params:
        raise ContractError("parameter 'operand' needs 'mfma' (the MFMA whose operand is loaded)", opcode=op.name,
                            check="parameters")
    check_operands(op.name, operand_names(op), args)
    ctx = WaveContext(sctx, op.name, args[0], args)
    n, sub_byte = op.elements, op.element_bits < 8
    words, nbytes = op.load_bits // 32, op.load_bits // 8
    dst_atom = (GROUPS, 16, words) if sub_byte else (GROUPS, n, 16)
    src_atom = (GROUPS, 16, nbytes) if sub_byte else (GROUPS, n, 16)
    dst = ctx.region("dst", args[0], dst_atom, ("local",))
    src = ctx.region("src", args[1], src_atom, ("shared", "shared.dyn"))
    if sub_byte:
        dst.check_dtype(("uint32", "int32"), f"{op.element_bits}-bit elements packed in 32-bit words")
        src.check_dtype(("uint8", "int8"), f"bytes of {op.element_bits}-bit element chunks")
    else:
        dst.check_dtype(RESULT_DTYPES.get(op.result_format, ELEMENT_DTYPES_BY_BITS[op.element_bits]),
                        f"{op.element_bits}-bit elements of {op.result_vector}")
        src.check_dtype(ELEMENT_DTYPES_BY_BITS[op.element_bits], f"{op.element_bits}-bit elements")
        if dst.bits != src.bits:
            dst.fail(f"dtype {dst.dtype} and src dtype {src.dtype} differ in width", expected=f"{src.bits}-bit elements",
                     check="dtype")
    dst.nonoverlapping()
    lane = ctx.proof_lane
    g, c = lane // 16, lane % 16
    if sub_byte:
        base = dst.slots([(g, c, w) for w in range(words)], lane)
        start = (g, lane % 16, 0)  # provider lane j reads row j of its group
        src.contiguous([(g, lane % 16, b) for b in range(nbytes)], op.lds_alignment)
        count = words
    else:
        base = dst.slots([(g, i, c) for i in range(n)], lane)
        consumer, row = lanes.tr_consumer(op, lane, 0)  # the chunk of lane j starts at column consumer % 16
        start = (g, row, consumer % 16)
        src.contiguous([(g, row, consumer % 16 + s) for s in range(n)], op.lds_alignment)
        count = n
    run = ctx.at_runtime
    value = _load(op, ctx, src, tuple(run(x) for x in start))
    return ctx.finish([_store(dst, run(base), count, value)])


# ---------------------------------------------------------------------------------------------
# Operand form


def operand_plan(op: DsReadTrOp, mfma: MfmaOp, operand: str):
    """Per call: (K positions covered, provider start (k, mn) per lane) from the catalog maps.
    Raises a ContractError naming the rule when ``op`` cannot produce ``mfma``'s operand."""
    owner = lanes.b_owner if operand == "B" else lanes.a_owner
    elems = mfma.b_elems if operand == "B" else mfma.a_elems
    n = op.elements
    if mfma.kind == "mfma_scale" and op.element_bits != 8:
        raise ContractError(f"{mfma.name} takes element tiles only for its 8-bit formats (fp8, bf8); "
                            f"{op.name} moves {op.element_bits}-bit elements", opcode=op.name, check="operand form")
    if elems % n:
        raise ContractError(
            f"K coverage: {mfma.name} operand {operand} holds {elems} elements per lane, "
            f"not a whole number of {op.name} calls ({n} elements each)", opcode=op.name, check="operand form")
    lane, s = np.meshgrid(np.arange(64), np.arange(n), indexing="ij")
    covered, starts = [], []
    for call in range(elems // n):
        consumer, i = lanes.tr_consumer(op, lane, s)
        c = owner(mfma, consumer, lanes.tr_operand_element(op, call, i))
        blk, k, mn = c.block, c.k, c.mn
        if (blk != blk[:, :1]).any() or (k != k[:, :1]).any() or (mn - mn[:, :1] != s).any():
            bad = int(np.nonzero((k != k[:, :1]).any(1) | (mn - mn[:, :1] != s).any(1) | (blk != blk[:, :1]).any(1))[0][0])
            raise ContractError(
                f"cannot feed {mfma.name} operand {operand}: the chunk of lane {bad} would need "
                f"(k, {'n' if operand == 'B' else 'm'}) = {list(zip(k[bad].tolist(), mn[bad].tolist()))}, "
                "not consecutive elements of one K row", opcode=op.name, check="operand form")
        covered.append(sorted(set(k.ravel().tolist())))
        starts.append((blk[:, 0], k[:, 0], mn[:, 0]))
    flat = [x for call in covered for x in call]
    if sorted(flat) != list(range(mfma.k)):
        raise ContractError(f"K coverage: the calls must cover K positions 0..{mfma.k - 1} once each",
                            opcode=op.name, found=covered, check="operand form")
    return covered, starts


def _lower_operand(op: DsReadTrOp, args, params, sctx):
    try:
        name = params["mfma"].value if hasattr(params["mfma"], "value") else str(params["mfma"])
        mfma = CATALOG[name]
    except KeyError:
        raise ContractError(f"parameter mfma={params['mfma']!r} is not an MFMA opcode", opcode=op.name,
                            expected="an MFMA catalog name, e.g. mfma='mfma_f32_32x32x16_f16'", check="parameters") from None
    operand = params.get("operand", "B")
    operand = operand.value if hasattr(operand, "value") else str(operand)
    if operand not in ("A", "B"):
        raise ContractError("parameter operand names the MFMA operand loaded", opcode=op.name,
                            expected="'A' or 'B'", found=repr(operand), check="parameters")
    if mfma.blocks != 1:
        raise ContractError(f"operand form supports single-block MFMAs; {mfma.name} has {mfma.blocks} blocks",
                            opcode=op.name, check="operand form")
    covered, _ = operand_plan(op, mfma, operand)
    fmt = mfma.b_format if operand == "B" else mfma.a_format
    allowed = ELEMENT_DTYPES[fmt] if mfma.kind != "mfma_scale" else BYTE_TILE_DTYPES
    if mfma.kind == "mfma_scale":  # element tiles of its byte formats (operand_plan refused the others)
        fmt = "fp8/bf8"
    mn = mfma.n if operand == "B" else mfma.m
    check_operands(op.name, ("frag", "src"), args)
    ctx = WaveContext(sctx, op.name, args[0], args)
    frag = ctx.region("frag", args[0], (mn, mfma.k), ("local",))
    src = ctx.region("src", args[1], (mfma.k, mn), ("shared", "shared.dyn"))
    frag.check_dtype(allowed, f"{fmt} elements of {mfma.name} operand {operand}")
    src.check_dtype(allowed, f"{fmt} elements of {mfma.name} operand {operand}")
    if op.element_bits != frag.bits:
        frag.fail(f"{frag.bits}-bit elements cannot be loaded by {op.name} ({op.element_bits}-bit transpose)",
                  suggestion=f"use the ds_read_tr{frag.bits} opcode" if frag.bits in (8, 16) else None, check="dtype")
    frag.nonoverlapping()
    lane, n = ctx.proof_lane, op.elements
    owner = lanes.b_owner if operand == "B" else lanes.a_owner
    run, stmts = ctx.at_runtime, []
    for call in range(len(covered)):
        base = frag.slots([owner(mfma, lane, call * n + i).atom(mfma) for i in range(n)], lane)
        consumer, i = lanes.tr_consumer(op, lane, 0)
        first = owner(mfma, consumer, call * n + i)
        k, col = first.k, first.mn
        src.contiguous([(k, col + s) for s in range(n)], op.lds_alignment)
        value = _load(op, ctx, src, (run(k), run(col)))
        stmts.append(_store(frag, run(base), n, value))
    return ctx.finish(stmts)
