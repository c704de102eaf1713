"""Element formats of CDNA4 matrix operands, and how they pack into 32-bit registers.

A format names a matrix element type (``f16``, ``fp8``, ``fp4`` ...). Per-lane register contents are
modelled two ways: *elements* (a numpy array of the format's dtype, shape ``(64, n)``) and *words*
(``uint32`` array, shape ``(64, nwords)``). Element ``e`` of a lane occupies bits
``[e*bits, (e+1)*bits)`` of the little-endian bit string formed by the lane's words; this is how
LLVM packs ``<8 x half>``, ``i64`` (eight fp8) and ``<6 x i32>`` (thirty-two fp6) alike.

In TIR a format's elements are tensors of ``tir_dtype``, or of an integer dtype of ``bit_dtypes``
holding the same bit patterns (the two spellings the patterns accept). ``widened`` marks the dtypes
that TIRx's BF16/FP8 legalization widens to float32 on ROCm: ``tvm_cdna4.rocm.storage`` keeps their
tensors as 16/8-bit storage (``bit_dtypes[0]``) instead.
"""

from __future__ import annotations

import attrs
import ml_dtypes
import numpy as np


@attrs.frozen
class Format:
    name: str  # catalog spelling: f32, f16, bf16, fp8, bf8, fp6, bf6, fp4, i8, i32, f64, e8m0
    bits: int
    dtype: np.dtype = attrs.field(converter=np.dtype)
    llvm_scalar: str  # LLVM element type when the operand is a vector of this format
    description: str
    tir_dtype: str | None = None  # TIR dtype of one element; None: sub-byte, only packed in 32-bit words
    bit_dtypes: tuple[str, ...] = ()  # integer TIR dtypes that may carry the bit patterns instead
    widened: bool = False  # TIRx's BF16/FP8 legalization widens tensors of tir_dtype on ROCm

    @property
    def is_float(self) -> bool:
        return self.name not in ("i8", "i32")

    @property
    def tir(self) -> str:
        """The TIR dtype (the numpy dtype's name: ``float16``, ``bfloat16``, ``float8_e4m3fn`` ...)."""
        return self.dtype.name


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("f64", 64, np.float64, "double", "IEEE binary64", "float64"),
        Format("f32", 32, np.float32, "float", "IEEE binary32", "float32"),
        Format("f16", 16, np.float16, "half", "IEEE binary16", "float16", ("int16", "uint16")),
        Format("bf16", 16, ml_dtypes.bfloat16, "bfloat", "bfloat16 (1-8-7)", "bfloat16", ("int16", "uint16"), True),
        Format("fp8", 8, ml_dtypes.float8_e4m3fn, "i8", "OCP FP8 E4M3 (e4m3fn; CDNA4 uses OCP, not FNUZ)",
               "float8_e4m3fn", ("uint8",), True),
        Format("bf8", 8, ml_dtypes.float8_e5m2, "i8", "OCP FP8 E5M2", "float8_e5m2", ("uint8",), True),
        Format("fp6", 6, ml_dtypes.float6_e2m3fn, "i32", "OCP MX FP6 E2M3"),
        Format("bf6", 6, ml_dtypes.float6_e3m2fn, "i32", "OCP MX FP6 E3M2"),
        Format("fp4", 4, ml_dtypes.float4_e2m1fn, "i32", "OCP MX FP4 E2M1"),
        Format("i8", 8, np.int8, "i8", "signed 8-bit integer", "int8"),
        Format("i32", 32, np.int32, "i32", "signed 32-bit integer", "int32"),
        Format("e8m0", 8, ml_dtypes.float8_e8m0fnu, "i8", "OCP MX E8M0 scale (2**(x-127))", None, ("uint8",)),
    )
}


# TIRx-widened dtype -> the integer dtype that stores its bits (bfloat16 -> int16, float8_* -> uint8)
BIT_STORAGE: dict[str, str] = {f.tir_dtype: f.bit_dtypes[0] for f in FORMATS.values() if f.widened}


def tir_dtypes(name: str) -> tuple[str, ...]:
    """The TIR element dtypes of format ``name``: its own dtype first, then its bit-pattern spellings."""
    f = fmt(name)
    return (*((f.tir_dtype,) if f.tir_dtype else ()), *f.bit_dtypes)


def fmt(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown element format {name!r}; expected one of {sorted(FORMATS)}") from None


def by_tir(name: str) -> Format:
    """The format of a TIR dtype name (``Format.tir``: ``float16``, ``bfloat16`` ...) or of a format name."""
    found = FORMATS.get(name) or next((f for f in FORMATS.values() if f.tir == name), None)
    if found is None:
        raise ValueError(f"unknown element format {name!r}; expected one of {sorted(FORMATS)} or their TIR dtypes")
    return found


def _codes(f: Format, values: np.ndarray) -> np.ndarray:
    """Raw bit codes (uint64) of ``values`` in format ``f``."""
    arr = np.asarray(values).astype(f.dtype)
    if f.bits >= 8:
        return arr.view(np.dtype(f"u{f.bits // 8}")).astype(np.uint64)
    # ml_dtypes stores sub-byte floats one per byte, code in the low bits.
    return (arr.view(np.uint8) & ((1 << f.bits) - 1)).astype(np.uint64)


def _from_codes(f: Format, codes: np.ndarray) -> np.ndarray:
    codes = np.asarray(codes, dtype=np.uint64)
    if f.bits >= 8:
        return codes.astype(np.dtype(f"u{f.bits // 8}")).view(f.dtype)
    return codes.astype(np.uint8).view(f.dtype)


def to_words(format_name: str, elements: np.ndarray) -> np.ndarray:
    """Pack per-lane elements ``(lanes, n)`` into ``uint32`` words ``(lanes, ceil(n*bits/32))``."""
    f = fmt(format_name)
    if f.bits % 8 == 0:  # whole bytes: the bit string is the elements' little-endian bytes, zero-padded
        arr = np.asarray(elements).astype(f.dtype).astype(f.dtype.newbyteorder("<"))
        lanes, n = arr.shape
        data = np.ascontiguousarray(arr).view(np.uint8).reshape(lanes, -1)
        nwords = -(-n * f.bits // 32)
        if data.shape[1] < nwords * 4:
            data = np.pad(data, ((0, 0), (0, nwords * 4 - data.shape[1])))
        return np.ascontiguousarray(data).view("<u4").reshape(lanes, nwords)
    codes = _codes(f, elements)
    lanes, n = codes.shape
    bits = np.zeros((lanes, n * f.bits), dtype=np.uint8)
    for b in range(f.bits):
        bits[:, b :: f.bits] = (codes >> np.uint64(b)) & np.uint64(1)
    nwords = -(-n * f.bits // 32)
    bits = np.pad(bits, ((0, 0), (0, nwords * 32 - n * f.bits)))
    return np.packbits(bits.reshape(lanes, nwords, 32), axis=-1, bitorder="little").view("<u4").reshape(lanes, nwords)


def from_words(format_name: str, words: np.ndarray, n: int) -> np.ndarray:
    """Unpack ``n`` elements per lane from ``uint32`` words ``(lanes, nwords)``."""
    f = fmt(format_name)
    words = np.ascontiguousarray(words, dtype="<u4")
    lanes = words.shape[0]
    if f.bits % 8 == 0:  # whole bytes: the first n * bits / 8 little-endian bytes are the elements
        data = words.view(np.uint8).reshape(lanes, -1)
        if data.shape[1] < n * f.bits // 8:
            raise ValueError(f"{words.shape[1]} words hold fewer than {n} {format_name} elements")
        return np.ascontiguousarray(data[:, : n * f.bits // 8]).view(f.dtype.newbyteorder("<")).astype(f.dtype)
    bits = np.unpackbits(words.view(np.uint8).reshape(lanes, -1), axis=-1, bitorder="little")
    if bits.shape[1] < n * f.bits:
        raise ValueError(f"{words.shape[1]} words hold fewer than {n} {format_name} elements")
    bits = bits[:, : n * f.bits].reshape(lanes, n, f.bits).astype(np.uint64)
    codes = (bits << np.arange(f.bits, dtype=np.uint64)).sum(axis=-1, dtype=np.uint64)
    return _from_codes(f, codes)


def to_float64(format_name: str, elements: np.ndarray) -> np.ndarray:
    """Exact value of each element as float64 (every CDNA4 input format fits)."""
    return np.asarray(elements).astype(fmt(format_name).dtype).astype(np.float64)
