"""The 38 CDNA4 MFMA builtins of the seed (36 dense, 2 scaled), one row each.

Columns: catalog name, M, N, K, blocks, A/B format, accumulator format, elements per lane,
LLVM A-operand type, LLVM intrinsic suffix, gfx950 mnemonic, ops, cycles, blgp role.
Ops and cycles are the seed's "Instruction throughput" table (ops = 2*M*N*K*blocks, checked by
tests). Intrinsic names and mnemonics were checked with llc 22 for gfx950 (``sources.SOURCES``).
"""

from __future__ import annotations

from .records import MfmaOp, Modifier

_CBSZ = "A broadcast: blocks form groups of 2**cbsz; each group uses A of block abid of the group"
_ABID = "A broadcast: which block inside a group of 2**cbsz supplies A"
_BLGP = "B lane-group pattern (0 normal, 1-3 swaps/rotations of 32/16-lane halves, 4-7 broadcast 16 lanes)"
_NEG = "FP64 negation bits: bit0 negates A, bit1 negates B, bit2 negates C"

# name, M, N, K, blocks, in, acc, elems/lane, A LLVM type, intrinsic tail, mnemonic tail, ops, cycles, blgp max
_ROWS = [
    ("f32_32x32x1f32", 32, 32, 1, 2, "f32", "f32", 1, "float", "f32.32x32x1f32", "f32_32x32x1_2b_f32", 4096, 64, 7),
    ("f32_16x16x1f32", 16, 16, 1, 4, "f32", "f32", 1, "float", "f32.16x16x1f32", "f32_16x16x1_4b_f32", 2048, 32, 7),
    ("f32_4x4x1f32", 4, 4, 1, 16, "f32", "f32", 1, "float", "f32.4x4x1f32", "f32_4x4x1_16b_f32", 512, 8, 7),
    ("f32_32x32x2f32", 32, 32, 2, 1, "f32", "f32", 1, "float", "f32.32x32x2f32", "f32_32x32x2_f32", 4096, 64, 7),
    ("f32_16x16x4f32", 16, 16, 4, 1, "f32", "f32", 1, "float", "f32.16x16x4f32", "f32_16x16x4_f32", 2048, 32, 7),
    ("f32_32x32x4f16", 32, 32, 4, 2, "f16", "f32", 4, "<4 x half>", "f32.32x32x4f16", "f32_32x32x4_2b_f16", 16384, 64, 7),
    ("f32_16x16x4f16", 16, 16, 4, 4, "f16", "f32", 4, "<4 x half>", "f32.16x16x4f16", "f32_16x16x4_4b_f16", 8192, 32, 7),
    ("f32_4x4x4f16", 4, 4, 4, 16, "f16", "f32", 4, "<4 x half>", "f32.4x4x4f16", "f32_4x4x4_16b_f16", 2048, 8, 7),
    ("f32_32x32x8f16", 32, 32, 8, 1, "f16", "f32", 4, "<4 x half>", "f32.32x32x8f16", "f32_32x32x8_f16", 16384, 32, 7),
    ("f32_16x16x16f16", 16, 16, 16, 1, "f16", "f32", 4, "<4 x half>", "f32.16x16x16f16", "f32_16x16x16_f16", 8192, 16, 7),
    ("f32_32x32x16_f16", 32, 32, 16, 1, "f16", "f32", 8, "<8 x half>", "f32.32x32x16.f16", "f32_32x32x16_f16", 32768, 32, 7),
    ("f32_16x16x32_f16", 16, 16, 32, 1, "f16", "f32", 8, "<8 x half>", "f32.16x16x32.f16", "f32_16x16x32_f16", 16384, 16, 7),
    ("f32_32x32x4bf16_1k", 32, 32, 4, 2, "bf16", "f32", 4, "<4 x i16>", "f32.32x32x4bf16.1k", "f32_32x32x4_2b_bf16", 16384, 64, 7),
    ("f32_16x16x4bf16_1k", 16, 16, 4, 4, "bf16", "f32", 4, "<4 x i16>", "f32.16x16x4bf16.1k", "f32_16x16x4_4b_bf16", 8192, 32, 7),
    ("f32_4x4x4bf16_1k", 4, 4, 4, 16, "bf16", "f32", 4, "<4 x i16>", "f32.4x4x4bf16.1k", "f32_4x4x4_16b_bf16", 2048, 8, 7),
    ("f32_32x32x8bf16_1k", 32, 32, 8, 1, "bf16", "f32", 4, "<4 x i16>", "f32.32x32x8bf16.1k", "f32_32x32x8_bf16", 16384, 32, 7),
    ("f32_16x16x16bf16_1k", 16, 16, 16, 1, "bf16", "f32", 4, "<4 x i16>", "f32.16x16x16bf16.1k", "f32_16x16x16_bf16", 8192, 16, 7),
    ("f32_32x32x16_bf16", 32, 32, 16, 1, "bf16", "f32", 8, "<8 x bfloat>", "f32.32x32x16.bf16", "f32_32x32x16_bf16", 32768, 32, 7),
    ("f32_16x16x32_bf16", 16, 16, 32, 1, "bf16", "f32", 8, "<8 x bfloat>", "f32.16x16x32.bf16", "f32_16x16x32_bf16", 16384, 16, 7),
    *[
        (f"f32_{s}_{a}_{b}", m, m, k, 1, (a, b), "f32", 8, "i64", f"f32.{s}.{a}.{b}", f"f32_{s}_{a}_{b}", ops, cyc, 0)
        for (s, m, k, ops, cyc) in (("32x32x16", 32, 16, 32768, 32), ("16x16x32", 16, 32, 16384, 16))
        for a in ("fp8", "bf8")
        for b in ("fp8", "bf8")
    ],
    ("f64_16x16x4f64", 16, 16, 4, 1, "f64", "f64", 1, "double", "f64.16x16x4f64", "f64_16x16x4_f64", 2048, 64, 7),
    ("f64_4x4x4f64", 4, 4, 4, 4, "f64", "f64", 1, "double", "f64.4x4x4f64", "f64_4x4x4_4b_f64", 512, 32, 7),
    ("i32_32x32x4i8", 32, 32, 4, 2, "i8", "i32", 4, "i32", "i32.32x32x4i8", "i32_32x32x4_2b_i8", 16384, 64, 7),
    ("i32_16x16x4i8", 16, 16, 4, 4, "i8", "i32", 4, "i32", "i32.16x16x4i8", "i32_16x16x4_4b_i8", 8192, 32, 7),
    ("i32_4x4x4i8", 4, 4, 4, 16, "i8", "i32", 4, "i32", "i32.4x4x4i8", "i32_4x4x4_16b_i8", 2048, 8, 7),
    ("i32_32x32x16_i8", 32, 32, 16, 1, "i8", "i32", 8, "i64", "i32.32x32x16.i8", "i32_32x32x16_i8", 32768, 32, 0),
    ("i32_16x16x32_i8", 16, 16, 32, 1, "i8", "i32", 8, "i64", "i32.16x16x32.i8", "i32_16x16x32_i8", 16384, 16, 0),
    ("i32_32x32x32_i8", 32, 32, 32, 1, "i8", "i32", 16, "<4 x i32>", "i32.32x32x32.i8", "i32_32x32x32_i8", 65536, 32, 7),
    ("i32_16x16x64_i8", 16, 16, 64, 1, "i8", "i32", 16, "<4 x i32>", "i32.16x16x64.i8", "i32_16x16x64_i8", 32768, 16, 7),
]

_ACC_VECTOR_ELEM = {"f32": "float", "f64": "double", "i32": "i32"}


def _acc_layout(m: int, acc: str) -> str:
    return f"{m}x{m}" + ("_f64" if acc == "f64" else "")


def _mfma(row) -> MfmaOp:
    name, m, n, k, blocks, fin, acc, elems, a_vec, intr, mnem, ops, cycles, blgp_max = row
    fa, fb = fin if isinstance(fin, tuple) else (fin, fin)
    acc_elems = m * n * blocks // 64
    acc_vector = _ACC_VECTOR_ELEM[acc] if acc_elems == 1 else f"<{acc_elems} x {_ACC_VECTOR_ELEM[acc]}>"
    cb_max = blocks.bit_length() - 1  # log2(blocks); single-block shapes: 0
    notes = []
    if acc == "f64":
        blgp = Modifier("blgp", 0, 7, _NEG)
        notes.append("FP64: blgp is reused as negation bits (seed); bit order from the calculator and LLVM")
    else:
        blgp = Modifier("blgp", 0, blgp_max, _BLGP if blgp_max else "must be 0 (seed)")
    if name in ("f32_16x16x32_f16", "f32_32x32x16_f16", "f32_16x16x32_bf16", "f32_32x32x16_bf16"):  # builtin tails
        notes.append(
            "The seed's FP16 example says blgp 'must be 0' for 16x16x32_f16 while the builtin "
            "reference calls it a lane-group pattern; we follow the reference (LLVM accepts 0..7)"
        )
    if blocks > 1 or fin in ("f32", "f64"):
        notes.append("The seed gives no input lane map for this multi-block/scalar-input shape: calculator formula")
    return MfmaOp(
        name=f"mfma_{name}",
        builtin=f"__builtin_amdgcn_mfma_{name}",
        llvm_intrinsic=f"llvm.amdgcn.mfma.{intr}",
        mnemonic=f"v_mfma_{mnem}",
        kind="mfma",
        m=m,
        n=n,
        k=k,
        blocks=blocks,
        a_format=fa,
        b_format=fb,
        acc_format=acc,
        a_elems=elems,
        b_elems=elems,
        acc_elems=acc_elems,
        a_vector=a_vec,
        b_vector=a_vec,
        acc_vector=acc_vector,
        acc_layout=_acc_layout(m, acc),
        modifiers=(
            Modifier("cbsz", 0, cb_max, _CBSZ if cb_max else "must be 0 (single block)"),
            Modifier("abid", 0, blocks - 1, _ABID if cb_max else "must be 0 (single block)"),
            blgp,
        ),
        ops=ops,
        cycles=cycles,
        notes=tuple(notes),
        sources=("hip-mfma", "llc22", "calculator") + (("llvm-td",) if acc == "f64" else ()),
    )


# Scaled MFMA: cbsz / blgp are format codes of A / B.
SCALE_FORMAT_CODES: dict[int, str] = {0: "fp8", 1: "bf8", 2: "fp6", 3: "bf6", 4: "fp4"}
SCALE_VECTOR_WORDS: dict[str, int] = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4}
SCALE_BLOCK_K = 32  # one E8M0 scale per 32 K positions of a row (A) or column (B)


def _scaled(m: int, k: int, ops: int, cyc_f8: int, cyc_f4: int) -> MfmaOp:
    name = f"mfma_scale_f32_{m}x{m}x{k}_f8f6f4"
    fmt_doc = ", ".join(f"{c}={f}" for c, f in SCALE_FORMAT_CODES.items())
    return MfmaOp(
        name=name,
        builtin=f"__builtin_amdgcn_{name}",
        llvm_intrinsic=f"llvm.amdgcn.mfma.scale.f32.{m}x{m}x{k}.f8f6f4.v8i32.v8i32",
        mnemonic=f"v_{name}",
        kind="mfma_scale",
        m=m,
        n=m,
        k=k,
        blocks=1,
        a_format="f8f6f4",
        b_format="f8f6f4",
        acc_format="f32",
        a_elems=32,
        b_elems=32,
        acc_elems=m * m // 64,
        a_vector="<8 x i32>",
        b_vector="<8 x i32>",
        acc_vector=f"<{m * m // 64} x float>",
        acc_layout=f"{m}x{m}",
        modifiers=(
            Modifier("cbsz", 0, 4, f"A format code ({fmt_doc})"),
            Modifier("blgp", 0, 4, f"B format code ({fmt_doc})"),
            Modifier("op_sel_a", 0, 3, "byte of the A scale register holding the E8M0 scale"),
            Modifier("op_sel_b", 0, 3, "byte of the B scale register holding the E8M0 scale"),
        ),
        ops=ops,
        cycles=cyc_f8,
        cycles_by_format=(("fp8", cyc_f8), ("bf8", cyc_f8), ("fp6", cyc_f4), ("bf6", cyc_f4), ("fp4", cyc_f4)),
        notes=(
            "llvm_intrinsic is the fp8/fp8 overload; scaled_intrinsic(op, fmt_a, fmt_b) gives the others "
            "(.v8i32 fp8/bf8, .v6i32 fp6/bf6, .v4i32 fp4)",
            "Elements are K positions: lane L holds row/column L % M, K = 32*(L // M) + e; its scale "
            "byte covers exactly those 32 K positions (one E8M0 per 32 K, OCP MX). Not confirmed on hardware.",
            "op_sel bit0 prints as op_sel[i], bit1 as op_sel_hi[i] (llc 22)",
        ),
        sources=("hip-mfma", "llc22", "llvm-td", "triton-mx"),
    )


# In the order of the seed's builtin reference (its throughput table lists the scaled pair before FP64).
MFMA_OPS: tuple[MfmaOp, ...] = (
    *(_mfma(r) for r in _ROWS),
    _scaled(32, 64, 131072, 64, 32),
    _scaled(16, 128, 65536, 32, 16),
)


def scaled_intrinsic(op: MfmaOp, fmt_a: str, fmt_b: str) -> str:
    """The overloaded LLVM intrinsic of a scaled MFMA for the chosen A/B formats."""
    if op.kind != "mfma_scale":
        raise ValueError(f"{op.name} is not a scaled MFMA")
    base = op.llvm_intrinsic.rsplit(".", 2)[0]
    return f"{base}.v{SCALE_VECTOR_WORDS[fmt_a]}i32.v{SCALE_VECTOR_WORDS[fmt_b]}i32"
