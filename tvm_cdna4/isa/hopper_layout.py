"""Hopper (sm90) data layouts as pure functions over ints (integer numpy arrays, elementwise, or TIR
expressions where a docstring says so): the shared-memory swizzle (TMA and ``wgmma`` read it alike),
the ``wgmma`` matrix descriptor and its canonical operand layouts, the ``wgmma`` register fragments
(accumulator D, the RS form's A) and the TMA (tensor map) enums. No TIRx import.

The one copy of these formulas and numbers: the tile pattern (``patterns.wgmma``,
``patterns.wgmma_shared``, ``probes_wgmma``) proves and builds with them, the CUDA emulator
(``emulator.ptx_wgmma``, ``emulator.ptx_tma``) decodes and places with them; ``isa.wgmma_table``
holds the instruction forms that exist.

Sources:

* PTX ISA 9.4 §9.7.17.5.1 (§9.7.15.5.1 in 8.x editions) "Register Fragments and Shared Memory
  Matrix Layouts": the accumulator D and RS A fragments (§9.7.17.5.1.1), the canonical layouts of
  8-row x 16-byte core matrices and the 64-bit "Matrix Descriptor" (§9.7.17.5.1.2: start address >> 4
  in bits 0-13, leading dimension byte offset >> 4 in 16-29, stride dimension byte offset >> 4 in
  32-45, base offset in 49-51, swizzle mode in 62-63). The roles of LBO and SBO per major order and
  swizzle follow CUTLASS ``make_gmma_desc`` (``cute/atom/mma_traits_sm90_gmma.hpp``; the layout
  type codes: ``cute/arch/mma_sm90_desc.hpp`` ``LayoutType``: INTERLEAVE 0, B128 1, B64 2, B32 3).
* CUDA Driver API ``cuTensorMapEncodeTiled`` (``CUtensorMapSwizzle``: none/32B/64B/128B) and
  CUTLASS ``Swizzle<B,4,3>`` (``cute/atom/copy_traits_sm90_tma_swizzle.hpp``): the 16-byte chunk
  index (address bits [4, 4+B)) XOR the 128-byte row index (bits [7, 7+B)); B = 1, 2, 3 for 32, 64,
  128 bytes. The same function on the same shared addresses serves TMA's box placement and wgmma's
  descriptor reads, so a TMA 128B-swizzled box is what a 128B-swizzle descriptor reads.
"""

from __future__ import annotations

# --------------------------------------------------------------------------------------------
# warpgroup and core matrix

WARP = 32
WARPGROUP_THREADS = 128  # 4 consecutive warps, the first a multiple of 4 (§9.7.17.1 "warpgroup")
SETMAXNREG = range(24, 257, 8)  # setmaxnreg's register counts a thread: a multiple of 8 in [24, 256] ("setmaxnreg")
M = 64  # every wgmma shape has M = 64
K_BYTES = 32  # one dense wgmma's K is 32 bytes of input: k16 f16/bf16, k32 e4m3/e5m2 (§9.7.17.2)
CORE_ROWS = 8  # a core matrix: 8 rows of 16 bytes
CORE_ROW_BYTES = 16
DESCRIPTOR_ALIGNMENT = 16  # the descriptor addresses 16-byte units
MAJORS = ("k", "mn")  # a shared operand's canonical family: K-major, or M/N-major (``imm-trans``)


def k_of(bits: int) -> int:
    """The K of one dense wgmma for an element of ``bits`` bits."""
    return 8 * K_BYTES // bits


# --------------------------------------------------------------------------------------------
# swizzle

SWIZZLE_BYTES = (0, 32, 64, 128)  # a swizzle width; 0: none


def swizzle(addr, width: int):
    """The shared byte address where byte ``addr`` of a ``width``-byte-swizzled layout lives
    (``Swizzle<B,4,3>``, B = log2(width / 16); ``width`` 0: unchanged). Its own inverse."""
    if width == 0:
        return addr
    if width not in SWIZZLE_BYTES:
        raise ValueError(f"swizzle width {width} is not one of {SWIZZLE_BYTES}")
    mask = width // 16 - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def swizzle_period(width: int) -> int:
    """Bytes a swizzled layout repeats after (8 rows of ``width`` bytes); its base must be aligned
    to it. 16 (the descriptor's unit) without a swizzle."""
    return CORE_ROWS * width if width else DESCRIPTOR_ALIGNMENT


# TMA: CUtensorMapSwizzle enum value -> width (CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B)
TMA_SWIZZLE = {0: 0, 1: 32, 2: 64, 3: 128}
TMA_SWIZZLE_MODE = {width: mode for mode, width in TMA_SWIZZLE.items()}
"""The ``CUtensorMapSwizzle`` value of a swizzle width in bytes (0: none): what a tensor map's encoding takes."""
# TMA: CUtensorMapFloatOOBfill (0: zeros, 1: NaN, "request zero FMA" for float formats)
TMA_OOB_NAN = 1

# --------------------------------------------------------------------------------------------
# wgmma matrix descriptor (64 bits)

# layout type (bits 62-63) -> swizzle width: 0 interleave (none), 1 128B, 2 64B, 3 32B
DESCRIPTOR_SWIZZLE = {0: 0, 1: 128, 2: 64, 3: 32}
SWIZZLE_CODE = {w: t for t, w in DESCRIPTOR_SWIZZLE.items()}  # swizzle width -> layout type


def encode_descriptor(start: int, lbo: int, sbo: int, width: int) -> int:
    """The 64-bit matrix descriptor: ``start`` (shared byte address), ``lbo``/``sbo`` (bytes), all
    multiples of 16 below 2^18; ``width`` the swizzle, 0/32/64/128. Base offset (bits 49-51) 0: the
    pattern requires the swizzle-period-aligned base that makes it 0. ValueError off those domains."""
    for name, value in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        if value % 16 or not 0 <= value >> 4 < 1 << 14:
            raise ValueError(f"{name}={value}: a descriptor field is a multiple of 16 below 2^18 bytes")
    if width not in SWIZZLE_CODE:
        raise ValueError(f"swizzle width {width} is not one of {SWIZZLE_BYTES}")
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | SWIZZLE_CODE[width] << 62


def decode_descriptor(desc: int) -> dict[str, int]:
    """The fields of a descriptor in bytes: ``start``, ``lbo``, ``sbo``, ``base_offset`` (bits 49-51)
    and ``swizzle`` (the width in bytes, 0 none). :func:`encode_descriptor`'s inverse."""
    desc = int(desc)
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 0x7,
            "swizzle": DESCRIPTOR_SWIZZLE[(desc >> 62) & 0x3]}


def canonical_offset(major: str, width: int, lbo: int, sbo: int, mn, k, bits: int):
    """Byte offset of element ``(mn, k)`` (A: ``mn`` = row m; B: ``mn`` = column n) from the
    descriptor's start address, before the swizzle (the hardware swizzles the absolute address:
    :func:`operand_address`). CUTLASS ``make_gmma_desc``'s canonical layouts, ``T`` = 16 bytes,
    ``W`` = the swizzle's row bytes (16 for none):

    - K-major, no swizzle: ``((8,m),(T,2)):((1T,SBO),(1,LBO))``: core matrices of 8 MN rows x 16 K
      bytes; SBO steps 8 MN rows, LBO steps 16 K bytes.
    - K-major, swizzle W: ``((8,m),(T,W/16)):((W/16 T,SBO),(1,T))``: rows of W bytes along K (one
      instruction's K fits a row; LBO unused), SBO steps 8 MN rows.
    - MN-major, no swizzle: ``((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))``: SBO steps 16 MN bytes, LBO 8 K rows.
    - MN-major, swizzle W: ``((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO))``: rows of W bytes along MN;
      LBO steps W MN bytes, SBO steps 8 K rows.

    ``major`` one of :data:`MAJORS`; ``mn``/``k``: ints, integer arrays or TIR expressions (``//``
    and ``%`` only)."""
    row = CORE_ROW_BYTES if width == 0 else width
    if major == "k":
        kb = k * bits // 8
        if width == 0:
            return (mn % 8) * row + (mn // 8) * sbo + kb % row + (kb // row) * lbo
        return (mn % 8) * row + (mn // 8) * sbo + kb
    if major != "mn":
        raise ValueError(f"major {major!r} is not one of {MAJORS}")
    mb = mn * bits // 8
    if width == 0:
        return mb % row + (mb // row) * sbo + (k % 8) * row + (k // 8) * lbo
    return mb % row + (mb // row) * lbo + (k % 8) * row + (k // 8) * sbo


def operand_address(desc: dict, major: str, mn, k, bits: int):
    """The shared byte address wgmma reads element ``(mn, k)`` from, for a decoded descriptor."""
    raw = desc["start"] + canonical_offset(major, desc["swizzle"], desc["lbo"], desc["sbo"], mn, k, bits)
    return swizzle(raw, desc["swizzle"])


# --------------------------------------------------------------------------------------------
# wgmma register fragments (a warpgroup of 4 warps; m64)

def accumulator_coords(thread, reg):
    """(row, col) of D held by warpgroup thread ``thread`` (0-127) in accumulator register ``reg``
    (0 .. N/2-1; one f32 each; §9.7.17.5.1.1 "WGMMA .m64nNk* accumulator D"): warp ``w`` owns rows
    16w..16w+15; lane ``l``: registers go in fours over 8-column blocks, pairs of columns, rows
    ``l/4`` and ``l/4 + 8``. ``thread``: an int, array or TIR expression; ``reg`` an int or array."""
    warp, lane = thread // WARP, thread % WARP
    return 16 * warp + lane // 4 + 8 * ((reg % 4) // 2), 8 * (reg // 4) + 2 * (lane % 4) + reg % 2


def accumulator_owner(row, col):
    """(thread, reg) holding D[row][col]: the inverse of :func:`accumulator_coords`."""
    w, r = row // 16, row % 16
    g, hi = r % 8, r // 8
    return WARP * w + 4 * g + (col % 8) // 2, 4 * (col // 8) + 2 * hi + col % 2


def a_fragment_coords(thread, elem, bits: int):
    """(row, k) of element ``elem`` (0 .. M*K/128 - 1: the four 32-bit registers' elements, low bits
    first) of the RS form's A fragment of warpgroup thread ``thread`` (§9.7.17.5.1.1 "WGMMA
    .m64nNk16/.m64nNk32 register fragment layout for matrix A"): ``p = 32 / bits`` elements per
    register; registers 0/1 rows ``l/4`` / ``+8``, registers 2/3 the same rows at ``k + K/2``.
    ``thread``: an int, array or TIR expression; ``elem`` an int or array."""
    p = 32 // bits
    warp, lane = thread // WARP, thread % WARP
    return 16 * warp + lane // 4 + 8 * ((elem // p) % 2), p * (lane % 4) + elem % p + (k_of(bits) // 2) * (elem // (2 * p))


__all__ = ["CORE_ROWS", "CORE_ROW_BYTES", "DESCRIPTOR_ALIGNMENT", "DESCRIPTOR_SWIZZLE", "K_BYTES", "M", "MAJORS",
           "SWIZZLE_BYTES", "SWIZZLE_CODE", "TMA_OOB_NAN", "TMA_SWIZZLE", "TMA_SWIZZLE_MODE", "WARP", "WARPGROUP_THREADS",
           "a_fragment_coords", "accumulator_coords", "accumulator_owner", "canonical_offset", "decode_descriptor",
           "encode_descriptor", "k_of", "operand_address", "swizzle", "swizzle_period"]
