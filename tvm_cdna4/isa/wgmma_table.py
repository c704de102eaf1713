"""Hopper ``wgmma.mma_async``: the forms the package registers, their fragment owner maps, the shared
matrix descriptor and its canonical layouts. Pure data and integer formulas (no TIRx import).

Public source: NVIDIA PTX ISA 8.x (8.0+, ``sm_90a``), §9.7.15 "Asynchronous Warpgroup Level Matrix
Multiply-Accumulate Instructions" (numbered §9.7.17 in later editions, whose numbers are quoted here):

- §9.7.17.2 "Matrix Shape": ``m64nNkK``, N a multiple of 8 in [8, 256]; K = 16 for f16/bf16, 32 for
  e4m3/e5m2 (``KIND``, ``N_DOMAIN``).
- §9.7.17.5.1 "Register Fragments": the accumulator D (``acc_owner``) and the A fragment of the
  register (RS) form (``a_owner``), per thread of the 128-thread warpgroup.
- §9.7.17.5.1.2 "Shared Memory Matrix Layout" / "Matrix Descriptor Format": the 64-bit descriptor
  (``encode_descriptor``: start address >> 4 in bits 0-13, leading dimension byte offset >> 4 in
  16-29, stride dimension byte offset >> 4 in 32-45, swizzle mode in 62-63) and the canonical
  layouts built of 8-row x 16-byte "core matrices" (``canonical_offset``). The roles of LBO and SBO
  per major order and swizzle follow CUTLASS's ``make_gmma_desc``
  (``cute/atom/mma_traits_sm90_gmma.hpp``), which spells the same layouts in CuTe notation.
- §9.7.17.5.2 ``wgmma.mma_async``: ``imm-trans-a/b`` (an MN-major shared operand) exist for
  f16/bf16 only; the RS form takes no ``imm-trans-a``; ``imm-scale-a/b`` in {-1, 1}.
- §9.7.17.7 ``wgmma.fence`` / ``commit_group`` / ``wait_group``.
"""

from __future__ import annotations

from dataclasses import dataclass

WARPGROUP_THREADS = 128  # 4 consecutive warps, the first a multiple of 4 (§9.7.17.1 "warpgroup")
WARP = 32
M = 64  # every wgmma shape has M = 64
N_DOMAIN = tuple(range(8, 257, 8))  # §9.7.17.2: f16/bf16/fp8 lines
CORE_ROWS = 8  # a core matrix: 8 rows of 16 bytes
CORE_ROW_BYTES = 16
DESCRIPTOR_ALIGNMENT = 16  # the descriptor addresses 16-byte units


@dataclass(frozen=True)
class WgmmaKind:
    """One input type group with an f32 accumulator: the PTX type names, element bits and K."""

    atype: str
    btype: str
    bits: int
    k: int
    tir_dtypes: tuple[str, ...]
    """TIR dtypes a shared/register tile of these elements may have (bit-pattern spellings too)."""
    transposable: bool
    """Whether a shared operand may be MN-major (``imm-trans``: f16/bf16 only)."""

    @property
    def elems_per_register(self) -> int:
        return 32 // self.bits


# the registered input types (f32 accumulator); fp8 A and B types may differ (§9.7.17.5.2)
KIND = {
    "f16": WgmmaKind("f16", "f16", 16, 16, ("float16", "uint16", "int16"), True),
    "bf16": WgmmaKind("bf16", "bf16", 16, 16, ("bfloat16", "uint16", "int16"), True),
    "e4m3": WgmmaKind("e4m3", "e4m3", 8, 32, ("float8_e4m3fn", "uint8", "int8"), False),
    "e5m2": WgmmaKind("e5m2", "e5m2", 8, 32, ("float8_e5m2", "uint8", "int8"), False),
}
FP8 = ("e4m3", "e5m2")
ACC_DTYPE = "float32"  # the registered forms accumulate in f32 (dtype .f32)
FORMS = ("ss", "rs")  # A from shared memory (descriptor) or from registers

# swizzle mode: its row width in bytes (a row of the canonical layout) and the descriptor's code
SWIZZLE_BYTES = (0, 32, 64, 128)
SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}  # bits 62-63
MAJORS = ("k", "mn")


@dataclass(frozen=True)
class WgmmaShape:
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{atype}.{btype}``."""

    n: int
    atype: str
    btype: str

    def __post_init__(self):
        if self.atype not in KIND or self.btype not in KIND:
            raise ValueError(f"input types must be among {sorted(KIND)}, got {self.atype}/{self.btype}")
        if (self.atype in FP8) != (self.btype in FP8) or (self.atype not in FP8 and self.atype != self.btype):
            raise ValueError(f"A and B types must be the same 16-bit type or both fp8, got {self.atype}/{self.btype}")
        if self.n not in N_DOMAIN:
            raise ValueError(f"N must be a multiple of 8 in [8, 256], got {self.n}")

    @property
    def k(self) -> int:
        return KIND[self.atype].k

    @property
    def ptx(self) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n{self.n}k{self.k}.f32.{self.atype}.{self.btype}"

    @property
    def acc_registers(self) -> int:
        """f32 accumulator registers per thread: M*N/128 = N/2."""
        return M * self.n // WARPGROUP_THREADS

    @property
    def a_elements(self) -> int:
        """A elements per thread in the RS form: M*K/128 (4 registers)."""
        return M * self.k // WARPGROUP_THREADS


def parse(name: str) -> WgmmaShape:
    """A registered form from its PTX spelling, with or without the ``wgmma.mma_async.sync.aligned.``
    prefix: ``m64n128k16.f32.bf16.bf16``. ValueError when it is not one."""
    text = str(name).removeprefix("wgmma.mma_async.sync.aligned.")
    parts = text.split(".")
    if len(parts) != 4 or not parts[0].startswith("m64n") or "k" not in parts[0] or parts[1] != "f32":
        raise ValueError(f"{name!r} is not a registered wgmma form: expected 'm64n<N>k<K>.f32.<atype>.<btype>' "
                         f"with atype/btype among {sorted(KIND)}")
    n_text, k_text = parts[0][4:].split("k", 1)
    shape = WgmmaShape(int(n_text), parts[2], parts[3])
    if int(k_text) != shape.k:
        raise ValueError(f"{name!r}: {shape.atype} takes K = {shape.k}, not {k_text}")
    return shape


def acc_owner(thread, r):
    """(row, column) of accumulator register ``r`` of warpgroup thread ``thread`` (§9.7.17.5.1.1,
    "WGMMA .m64nNk* accumulator D"): warp ``w`` holds rows 16w..16w+15; registers go in fours over
    8-column blocks: pairs of columns, rows ``lane/4`` and ``lane/4 + 8``."""
    warp, lane = thread // WARP, thread % WARP
    return 16 * warp + lane // 4 + 8 * ((r % 4) // 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2


def a_owner(kind: WgmmaKind, thread, e):
    """(row, k) of A element ``e`` (0 .. M*K/128-1) of warpgroup thread ``thread`` in the RS form
    (§9.7.17.5.1.1, "WGMMA .m64nNk16/.m64nNk32 register fragment layout for matrix A"): ``p`` elements
    per 32-bit register; registers 0/1 rows ``lane/4`` / ``+8``, registers 2/3 the same rows at
    ``k + K/2``."""
    p = kind.elems_per_register
    warp, lane = thread // WARP, thread % WARP
    return 16 * warp + lane // 4 + 8 * ((e // p) % 2), p * (lane % 4) + e % p + (kind.k // 2) * (e // (2 * p))


def canonical_offset(major: str, swizzle: int, lbo: int, sbo: int, mn, k, bits: int):
    """Byte offset of element ``(mn, k)`` from the descriptor's start address, before the swizzle
    (the hardware XORs the absolute address: ``swizzle_address``). CUTLASS ``make_gmma_desc``'s
    canonical layouts, ``T`` = 16 bytes, ``W`` = the swizzle's row bytes (16 for none):

    - K-major, no swizzle: ``((8,m),(T,2)):((1T,SBO),(1,LBO))``: core matrices of 8 MN rows x 16 K
      bytes; SBO steps 8 MN rows, LBO steps 16 K bytes.
    - K-major, swizzle W: ``((8,m),(T,W/16)):((W/16 T,SBO),(1,T))``: rows of W bytes along K (one
      instruction's K fits a row; LBO unused), SBO steps 8 MN rows.
    - MN-major, no swizzle: ``((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))``: SBO steps 16 MN bytes, LBO 8 K rows.
    - MN-major, swizzle W: ``((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO))``: rows of W bytes along MN;
      LBO steps W MN bytes, SBO steps 8 K rows.

    ``mn``/``k``: ints or TIR expressions (``//`` and ``%`` only)."""
    row = CORE_ROW_BYTES if swizzle == 0 else swizzle
    if major == "k":
        kb = k * bits // 8
        if swizzle == 0:
            return (mn % 8) * row + (mn // 8) * sbo + kb % row + (kb // row) * lbo
        return (mn % 8) * row + (mn // 8) * sbo + kb
    mb = mn * bits // 8
    if swizzle == 0:
        return mb % row + (mb // row) * sbo + (k % 8) * row + (k // 8) * lbo
    return mb % row + (mb // row) * lbo + (k % 8) * row + (k // 8) * sbo


def swizzle_period(swizzle: int) -> int:
    """Bytes a swizzled layout repeats after (8 rows of ``swizzle`` bytes); its base must be aligned
    to it. 16 (the descriptor's unit) without a swizzle."""
    return CORE_ROWS * swizzle if swizzle else DESCRIPTOR_ALIGNMENT


def swizzle_address(address: int, swizzle: int) -> int:
    """The hardware's swizzle of a shared byte address: bits [4, 4+b) XOR bits [7, 7+b), b = 1/2/3
    for 32/64/128 B (CuTe ``Swizzle<b,4,3>``)."""
    if not swizzle:
        return address
    b = {32: 1, 64: 2, 128: 3}[swizzle]
    return address ^ ((address >> 3) & (((1 << b) - 1) << 4))


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle: int) -> int:
    """The 64-bit matrix descriptor (§9.7.17.5.1.2): ``start`` (shared byte address), ``lbo``/``sbo``
    (bytes), all multiples of 16; ``swizzle`` 0/32/64/128. Base offset (bits 49-51) 0: the pattern
    requires the swizzle-period-aligned base that makes it 0."""
    for name, value in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        if value % 16 or not 0 <= value >> 4 < 1 << 14:
            raise ValueError(f"{name}={value}: a descriptor field is a multiple of 16 below 2^18 bytes")
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | SWIZZLE_CODE[swizzle] << 62


def descriptor_fields(descriptor: int) -> dict[str, int]:
    """The fields of a descriptor in bytes (``swizzle`` in bytes, 0 for none): ``encode_descriptor``'s inverse."""
    code = descriptor >> 62 & 3
    return {"start": (descriptor & 0x3FFF) << 4, "lbo": (descriptor >> 16 & 0x3FFF) << 4,
            "sbo": (descriptor >> 32 & 0x3FFF) << 4, "base_offset": descriptor >> 49 & 7,
            "swizzle": {v: k for k, v in SWIZZLE_CODE.items()}[code]}


def registered_forms() -> list[tuple[str, WgmmaShape]]:
    """The forms the selftest compiles: ``(form, shape)`` for bf16/f16 SS and RS, e4m3/e5m2 SS and RS
    (the smallest N that exercises two 8-column accumulator blocks, 16)."""
    return [(form, WgmmaShape(16, t, t)) for t in KIND for form in FORMS]


__all__ = ["ACC_DTYPE", "FORMS", "FP8", "KIND", "M", "MAJORS", "N_DOMAIN", "SWIZZLE_BYTES", "SWIZZLE_CODE",
           "WARPGROUP_THREADS", "WgmmaKind", "WgmmaShape", "a_owner", "acc_owner", "canonical_offset",
           "descriptor_fields", "encode_descriptor", "parse", "registered_forms", "swizzle_address", "swizzle_period"]
