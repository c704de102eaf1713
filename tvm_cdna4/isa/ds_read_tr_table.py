"""The 6 CDNA4 ``ds_read_tr`` builtins of the seed.

The seed's K-split table (rows in builtin order: tr4, tr6, tr8, tr16 x3) gives, for the pair of
calls that fills one MFMA operand, the K positions each call covers wavefront-wide. The seed does not
name the MFMA each row refers to; ``k_split_mfma`` is the one whose B owner map reproduces the row
(tests/patterns/test_ds_read_tr.py derives the split from the maps and compares).
"""

from __future__ import annotations

from .records import DsReadTrOp

_SPLIT_B4_B6 = (((0, 15), (32, 47)), ((16, 31), (48, 63)))
_SPLIT_B8 = (((0, 7), (16, 23), (32, 39), (48, 55)), ((8, 15), (24, 31), (40, 47), (56, 63)))
_SPLIT_B16 = (((0, 3), (8, 11)), ((4, 7), (12, 15)))

_TR6_NOTE = (
    "LDS alignment: the seed says 12 B for b96; AMD's rocRoller (hardware-tested) pads 6-bit "
    "transpose loads to 'the 128b alignment requirement of 6-bit transpose loads'. The catalog "
    "requires 16 B, the stricter rule: a kernel it accepts is right under both readings. Not "
    "confirmed on hardware."
)


def _tr(name, bits, load, vec, res_fmt, align, split, mfma, feeds, notes=()):
    _, _, kind, width, overload = name.split("_")  # ds_read_tr4_b64_v2i32
    return DsReadTrOp(
        name=name,
        builtin=f"__builtin_amdgcn_{name}",
        llvm_intrinsic=f"llvm.amdgcn.ds.read.{kind}.{width}.{overload}",
        mnemonic=f"ds_read_{width}_tr_b{bits}",
        element_bits=bits,
        load_bits=load,
        elements=load // bits,
        result_vector=vec,
        result_format=res_fmt,
        lds_alignment=align,
        k_split=split,
        k_split_mfma=mfma,
        feeds=feeds,
        notes=tuple(notes),
        sources=("hip-tr", "llc22", "tr-rule") + (("rocroller-tr6",) if bits == 6 else ()),
    )




DS_READ_TR_OPS: tuple[DsReadTrOp, ...] = (
    _tr("ds_read_tr4_b64_v2i32", 4, 64, "<2 x i32>", "i32", 8, _SPLIT_B4_B6, "mfma_scale_f32_32x32x64_f8f6f4", ("fp4",)),
    _tr("ds_read_tr6_b96_v3i32", 6, 96, "<3 x i32>", "i32", 16, _SPLIT_B4_B6, "mfma_scale_f32_32x32x64_f8f6f4",
        ("fp6", "bf6"), (_TR6_NOTE,)),
    _tr("ds_read_tr8_b64_v2i32", 8, 64, "<2 x i32>", "i32", 8, _SPLIT_B8, "mfma_i32_16x16x64_i8", ("fp8", "bf8", "i8")),
    _tr("ds_read_tr16_b64_v4i16", 16, 64, "<4 x i16>", "i16", 8, _SPLIT_B16, "mfma_f32_32x32x16_f16", ("i8",),
        ("The seed documents v4i16 as 'eight packed INT8 values'; the transpose moves 16-bit units, "
         "so two adjacent INT8 along M/N travel together",)),
    _tr("ds_read_tr16_b64_v4f16", 16, 64, "<4 x half>", "f16", 8, _SPLIT_B16, "mfma_f32_32x32x16_f16", ("f16",)),
    _tr("ds_read_tr16_b64_v4bf16", 16, 64, "<4 x bfloat>", "bf16", 8, _SPLIT_B16, "mfma_f32_32x32x16_bf16", ("bf16",)),
)
