"""TIR dtypes of the LLVM operand types the catalog records (``<8 x half>`` -> ``float16x8``).

bf16 vectors map to ``int16`` lanes: TIR cannot carry bf16 vectors on ROCm (BF16ComputeLegalize),
so they travel as bit patterns and our LLVM helpers bitcast them (``tvm_cdna4.isa.llvm_helpers``).
"""

from __future__ import annotations

from .formats import FORMATS

# LLVM float element -> TIR dtype from the formats (bfloat: its bit storage), and the integers
_SCALAR = {f.llvm_scalar: f.bit_dtypes[0] if f.widened else f.tir_dtype
           for f in FORMATS.values() if f.llvm_scalar in ("double", "float", "half", "bfloat")}
_SCALAR |= {"i16": "int16", "i32": "int32", "i64": "int64"}


def tir_dtype(llvm_type: str) -> str:
    if " x " not in llvm_type:
        return _SCALAR[llvm_type]
    count, elem = llvm_type.strip("<>").split(" x ")
    return f"{_SCALAR[elem]}x{count}"


_LLVM_SCALAR = {"float32": "float", "float64": "double", "float16": "half", "int8": "i8", "uint8": "i8",
                "int16": "i16", "int32": "i32", "uint32": "i32", "int64": "i64"}


def llvm_type(dtype: str) -> str:
    """The LLVM type of a TIR dtype (``float16x8`` -> ``<8 x half>``; int16 stays ``i16``)."""
    elem, _, lanes = dtype.partition("x")
    return f"<{lanes} x {_LLVM_SCALAR[elem]}>" if lanes else _LLVM_SCALAR[elem]
