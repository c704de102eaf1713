"""Hopper (sm90) data layouts as pure functions over ints (or integer numpy arrays, elementwise):
the shared-memory swizzle, the ``wgmma`` matrix descriptor and its canonical operand layouts, the
``wgmma`` register fragments (accumulator D, the RS form's A) and the TMA (tensor map) enums.

The one copy of these formulas: the CUDA emulator (``emulator.ptx_wgmma``, ``emulator.ptx_tma``)
reads them, and so can tile patterns that need the same maps.

Sources (``e`` = element bytes, ``T = 16 // e`` elements per 16-byte row of a core matrix):

* PTX ISA 9.4 §9.7.17.5.1 (wgmma: "Matrix Descriptor" and the register fragments of
  §9.7.17.5.1.1; §9.7.15.5.1 in 8.x editions), cross-checked with CUTLASS ``cute/atom/mma_traits_sm90_gmma.hpp``
  (``make_gmma_desc``'s canonical layouts) and TIRx's ``encode_smem_descriptor_base_uint64``.
* CUDA Driver API ``cuTensorMapEncodeTiled`` (``CUtensorMapSwizzle``: 32B/64B/128B) and CUTLASS
  ``Swizzle<B,4,3>``: the 16-byte chunk index (address bits [4, 4+B)) XOR the 128-byte row index
  (bits [7, 7+B)); B = 1, 2, 3 for 32, 64, 128 bytes. The same function on the same shared
  addresses serves TMA's box placement and wgmma's descriptor reads, so a TMA 128B-swizzled box is
  what a 128B-swizzle descriptor reads.
"""

from __future__ import annotations

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


# TMA: CUtensorMapSwizzle enum value -> width (CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B)
TMA_SWIZZLE = {0: 0, 1: 32, 2: 64, 3: 128}
# TMA: CUtensorMapFloatOOBfill (0: zeros, 1: NaN, "request zero FMA" for float formats)
TMA_OOB_NAN = 1

# --------------------------------------------------------------------------------------------
# wgmma matrix descriptor (64 bits)

# layout type (bits 62-63) -> swizzle width: 0 interleave (none), 1 128B, 2 64B, 3 32B
DESCRIPTOR_SWIZZLE = {0: 0, 1: 128, 2: 64, 3: 32}


def decode_descriptor(desc: int) -> dict:
    """Fields of a wgmma shared-memory matrix descriptor: ``start`` (byte address, bits 0-13 << 4),
    ``lbo`` (leading-dimension byte offset, bits 16-29 << 4), ``sbo`` (stride-dimension byte offset,
    bits 32-45 << 4), ``base_offset`` (bits 49-51) and ``swizzle`` (width in bytes, bits 62-63)."""
    desc = int(desc)
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 0x7,
        "swizzle": DESCRIPTOR_SWIZZLE[(desc >> 62) & 0x3],
    }


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle_width: int) -> int:
    """The descriptor of :func:`decode_descriptor`'s fields (base offset 0)."""
    layout = {w: t for t, w in DESCRIPTOR_SWIZZLE.items()}[swizzle_width]
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) | (layout << 62)


def operand_offset(mn, k, elem_bytes: int, major: str, lbo: int, sbo: int, swizzle_width: int):
    """Byte offset (from the descriptor's start address, before the swizzle) of element ``(mn, k)``
    of a wgmma shared operand (A: ``mn`` = row m; B: ``mn`` = column n), per the canonical layouts
    (CUTLASS ``make_gmma_desc``; ``W`` = swizzle width, ``T = 16 // e``):

    * K-major, no swizzle: ``((8,m),(T,2)):((16B,SBO),(e,LBO))`` — core matrices of 8 rows x 16 B;
    * K-major, swizzle W: ``((8,m),(W/e)):((W,SBO),(e))`` — 8 rows of W bytes, then SBO;
    * MN-major, no swizzle: ``((T,m),(8,k)):((e,SBO),(16B,LBO))``;
    * MN-major, swizzle W: ``((W/e,m),(8,k)):((e,LBO),(W,SBO))``.
    """
    e = elem_bytes
    t = 16 // e
    if major == "K":
        if swizzle_width == 0:
            return (mn % 8) * 16 + (mn // 8) * sbo + (k % t) * e + (k // t) * lbo
        return (mn % 8) * swizzle_width + (mn // 8) * sbo + k * e
    if major != "MN":
        raise ValueError(f"major {major!r} is not 'K' or 'MN'")
    if swizzle_width == 0:
        return (mn % t) * e + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
    w = swizzle_width // e
    return (mn % w) * e + (mn // w) * lbo + (k % 8) * swizzle_width + (k // 8) * sbo


def operand_address(mn, k, elem_bytes: int, major: str, desc: dict):
    """The shared byte address wgmma reads element ``(mn, k)`` from, for a decoded descriptor."""
    raw = desc["start"] + operand_offset(mn, k, elem_bytes, major, desc["lbo"], desc["sbo"], desc["swizzle"])
    return swizzle(raw, desc["swizzle"])


# --------------------------------------------------------------------------------------------
# wgmma register fragments (warpgroup of 4 warps, 128 threads; m64)

WARPGROUP = 128
M = 64


def k_of(elem_bytes: int) -> int:
    """The K of one dense wgmma for an element size: 32 bytes of K (k16 f16/bf16, k32 fp8)."""
    return 32 // elem_bytes


def accumulator_coords(thread, reg):
    """(row, col) of D held by warpgroup thread ``thread`` (0-127) in accumulator register ``reg``
    (0 .. N/2-1; one f32 each): warp ``w = thread // 32`` owns rows 16w..16w+15; lane ``l``,
    ``g = l // 4``, ``t = l % 4``: row ``16w + g + 8*((reg//2) % 2)``, col ``8*(reg//4) + 2t + reg%2``."""
    w, lane = thread // 32, thread % 32
    g, t = lane // 4, lane % 4
    return 16 * w + g + 8 * ((reg // 2) % 2), 8 * (reg // 4) + 2 * t + reg % 2


def accumulator_owner(row, col):
    """(thread, reg) holding D[row][col]: the inverse of :func:`accumulator_coords`."""
    w, r = row // 16, row % 16
    g, hi = r % 8, r // 8
    thread = 32 * w + 4 * g + (col % 8) // 2
    return thread, 4 * (col // 8) + 2 * hi + col % 2


def a_fragment_coords(thread, elem, elem_bytes: int):
    """(row, k) of element ``elem`` (0 .. 16/e - 1 ... the four 32-bit registers' elements, register
    ``elem // (4/e)``, low bytes first) of the RS form's A fragment of warpgroup thread ``thread``:
    with ``p = 4 // e`` elements per register, row ``16w + g + 8*((elem//p) % 2)``,
    k ``p*t + elem%p + 4p*(elem // 2p)`` (the mma.m16n8k16/k32 A fragment, one per warp)."""
    p = 4 // elem_bytes
    w, lane = thread // 32, thread % 32
    g, t = lane // 4, lane % 4
    return 16 * w + g + 8 * ((elem // p) % 2), p * t + elem % p + 4 * p * (elem // (2 * p))
