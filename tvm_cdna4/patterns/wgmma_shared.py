"""The shared operands of ``wgmma`` (``patterns.wgmma``): the swizzle read from the declared layout,
LBO / SBO from its strides, the proof that every element of the atom sits where the matrix
descriptor says (``isa.hopper_layout.canonical_offset``), and the descriptor itself."""

from __future__ import annotations

import math

from tvm_tirx.ir import IntImm, Range, Var
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import ComposeLayout

from ..errors import ContractError
from ..isa import hopper_layout as L

SWIZZLE_SPELLING = {0: "none", 32: "32 B", 64: "64 B", 128: "128 B"}


def _fail(ctx, operand, rule, *, check, expected=None, found=None, suggestion=None):
    return ContractError(rule, opcode=ctx.form, operand=operand, expected=expected, found=found,
                         suggestion=suggestion, check=check)


def layout_swizzle(ctx, smem) -> int:
    """The swizzle (bytes; 0 none) of the tile's declared layout, or a ContractError naming the
    hardware's four."""
    layout = smem.layout
    if not isinstance(layout, ComposeLayout):
        return 0
    unit = (1 << int(layout.per_element)) * smem.bits
    b, atom = int(layout.swizzle_len), int(layout.atom_len)
    if unit == 8 * L.CORE_ROW_BYTES and atom == 3 and b in (1, 2, 3) and bool(layout.swizzle_inner):
        return L.CORE_ROW_BYTES << b
    per_element = int(math.log2(8 * L.CORE_ROW_BYTES // smem.bits))
    raise _fail(ctx, smem.name, "the declared swizzle is not one of the descriptor's (none, 32, 64, 128 B: "
                "16-byte units XOR'd by address bits 7-9)", check="swizzle",
                expected=f"a TileLayout or ComposeLayout(per_element={per_element}, swizzle_len=1/2/3, atom_len=3)",
                found=f"ComposeLayout(per_element={int(layout.per_element)}, swizzle_len={b}, atom_len={atom}, "
                      f"swizzle_inner={bool(layout.swizzle_inner)})")


def _pre_swizzle(smem, coord):
    """The element offset of atom coordinate ``coord`` before the layout's swizzle."""
    layout = smem.layout
    tile = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    result = dict(tile.apply(*smem.indices(coord), shape=smem.ty.shape))
    return smem.ctx.analyzer.simplify(result["m"])


def _stride(ctx, smem, coord, what) -> int:
    diff = ctx.analyzer.simplify((_pre_swizzle(smem, coord) - _pre_swizzle(smem, (0, 0))) * smem.bits // 8)
    if not isinstance(diff, IntImm) or diff.value < 0 or diff.value % 16 or diff.value >= 1 << 18:
        raise _fail(ctx, smem.name, f"the descriptor's {what} is the layout's byte step to atom element {coord}",
                    check="layout", expected="a compile-time multiple of 16 bytes in [0, 2^18)", found=str(diff))
    return int(diff.value)


def strides(ctx, smem, major: str, swizzle: int, mn_extent: int, k_extent: int) -> tuple[int, int]:
    """(LBO, SBO) in bytes read off the layout, per ``canonical_offset``'s table (an unobserved one:
    LBO 16, SBO 0, as CUTLASS and TIRx encode them)."""
    per16 = 8 * L.CORE_ROW_BYTES // smem.bits  # elements per 16 bytes
    lbo, sbo = 16, 0
    if major == "k":
        if mn_extent > 8:
            sbo = _stride(ctx, smem, (8, 0), "SBO (8 rows along M/N)")
        if swizzle == 0 and k_extent > per16:
            lbo = _stride(ctx, smem, (0, per16), "LBO (the next 16 bytes along K)")
        return lbo, sbo
    row = L.CORE_ROW_BYTES if swizzle == 0 else swizzle
    step = row * 8 // smem.bits
    if k_extent > 8:
        name = "LBO (8 rows along K)" if swizzle == 0 else "SBO (8 rows along K)"
        value = _stride(ctx, smem, (0, 8), name)
        lbo, sbo = (value, sbo) if swizzle == 0 else (lbo, value)
    if mn_extent > step:
        name = "SBO (the next 16 bytes along M/N)" if swizzle == 0 else f"LBO (the next {row} bytes along M/N)"
        value = _stride(ctx, smem, (step, 0), name)
        lbo, sbo = (lbo, value) if swizzle == 0 else (value, sbo)
    return lbo, sbo


def _walk(ctx, smem, major, swizzle, lbo, sbo, atom):
    """Prove, over symbolic atom coordinates, that element (mn, k) is at the canonical offset."""
    mn, k = Var(f"{smem.name}_mn", "int32"), Var(f"{smem.name}_k", "int32")
    ctx.add_range(mn, Range(0, atom[0]))
    ctx.add_range(k, Range(0, atom[1]))
    found = (_pre_swizzle(smem, (mn, k)) - _pre_swizzle(smem, (0, 0))) * smem.bits // 8
    expected = L.canonical_offset(major, swizzle, lbo, sbo, mn, k, smem.bits)
    if ctx.analyzer.can_prove(found == expected):
        return
    for i in range(atom[0]):  # the first element off the canonical layout, for the message
        for j in range(atom[1]):
            got = ctx.analyzer.simplify((_pre_swizzle(smem, (i, j)) - _pre_swizzle(smem, (0, 0))) * smem.bits // 8)
            want = L.canonical_offset(major, swizzle, lbo, sbo, i, j, smem.bits)
            if not (isinstance(got, IntImm) and got.value == want):
                raise _fail(ctx, smem.name, f"the declared layout is not the {major.upper()}-major canonical layout "
                            f"of swizzle {SWIZZLE_SPELLING[swizzle]} (LBO {lbo}, SBO {sbo}) at element (mn={i}, k={j})",
                            check="layout", expected=f"byte offset {want} from the atom's start",
                            found=f"byte offset {got}",
                            suggestion=None if major == "mn" else "an M/N-major tile needs a_major/b_major='mn'")


def _distinct(ctx, smem, major, swizzle, lbo, sbo, atom):
    """The descriptor's LBO / SBO give every atom element its own address (a layout whose strides make
    two canonical steps coincide passes the walk yet aliases elements)."""
    import numpy as np

    mn, k = np.meshgrid(np.arange(atom[0]), np.arange(atom[1]), indexing="ij")
    offsets = L.canonical_offset(major, swizzle, lbo, sbo, mn, k, smem.bits)
    if len(np.unique(offsets)) < offsets.size:
        raise _fail(ctx, smem.name, f"the declared layout puts two atom elements at one address (LBO {lbo}, SBO {sbo}: "
                    f"the {major.upper()}-major canonical steps of swizzle {SWIZZLE_SPELLING[swizzle]} overlap)",
                    check="layout", expected="distinct byte offsets for the atom's elements",
                    found=f"{offsets.size - len(np.unique(offsets))} repeated offsets")


def _alignment(ctx, smem, swizzle):
    period = L.swizzle_period(swizzle)
    alignment = int(smem.ty.data_alignment)
    if alignment % period:
        raise _fail(ctx, smem.name, f"the tile's data must be aligned to the swizzle period "
                    f"({SWIZZLE_SPELLING[swizzle]} swizzle: {period} bytes)", check="alignment",
                    expected=f"align={period} (or a multiple)", found=f"align={alignment}")
    start = ctx.analyzer.simplify(_pre_swizzle(smem, (0, 0)) * smem.bits % 128)
    if not ctx.analyzer.can_prove(start == 0):
        raise _fail(ctx, smem.name, "the atom's start address must be 16-byte aligned (the descriptor addresses "
                    "16-byte units)", check="alignment", expected="a start offset multiple of 16 bytes",
                    found=f"bit offset {ctx.analyzer.simplify(_pre_swizzle(smem, (0, 0)) * smem.bits)}")
    if swizzle:  # the descriptor's base offset is 0: the start lies in the first 128-byte row of a swizzle period
        bits = ctx.analyzer.simplify(_pre_swizzle(smem, (0, 0)) * smem.bits)
        if not ctx.analyzer.can_prove(bits % (period * 8) < 128 * 8):
            raise _fail(ctx, smem.name, f"a swizzled operand starts in the first 128-byte row of a swizzle period "
                        f"({period} bytes: the descriptor's base offset is 0; PTX ISA Matrix Descriptor)",
                        check="alignment", expected=f"a start byte offset % {period} < 128",
                        found=f"byte offset {ctx.analyzer.simplify(bits // 8)}")


def descriptor(ctx, smem, major: str, atom: tuple[int, int], hoist: bool = False):
    """Check the shared operand against its canonical layout; the 64-bit descriptor expression.

    ``hoist``: the low word as the start field of the tile's data start (element 0's address less the layout's
    origin: loop-invariant) or'ed with the fixed bits, plus the atom's unswizzled byte offset / 16
    (``_pre_swizzle``, origin included, a multiple of 16 bytes: ``_alignment``), so that an instruction adds one
    constant or a stage's multiple to a hoisted value. It equals the masked start of the default wherever the
    atom's offset in the CTA's shared memory (the address's low 18 bits; ptxas puts the cluster rank at bit 24)
    stays below 2^18 (the field's 14 bits of 16 bytes), as every one of sm_90 does (228 KiB a CTA at most):
    the sum does not carry into the reserved bits 14-15, nor into LBO. Not checked here (the address is a
    run-time value): the bound is the CTA's shared memory, which the kernel's launch enforces."""
    swizzle = layout_swizzle(ctx, smem)
    _alignment(ctx, smem, swizzle)
    lbo, sbo = strides(ctx, smem, major, swizzle, *atom)
    _walk(ctx, smem, major, swizzle, lbo, sbo, atom)
    _distinct(ctx, smem, major, swizzle, lbo, sbo, atom)
    fixed = L.encode_descriptor(0, lbo, sbo, swizzle)
    if hoist:
        zeros = [0] * len(smem.ty.shape)
        base = T.cuda.cvta_generic_to_shared(smem.tensor.ptr_to(zeros))
        # element 0 at the layout's origin (its offset, a TileLayout's ``+ offset``, swizzled): the data's start is
        # that much below, as the default's address less ``physical``; ``_pre_swizzle`` counts the offset again
        origin = ctx.analyzer.simplify(smem.layout.apply(*zeros, shape=smem.ty.shape)["m"] * smem.bits // 8)
        if not (isinstance(origin, IntImm) and origin.value == 0):
            base = base - T.cast(origin, ty="uint32")
        field = T.bitwise_and(base // T.uint32(16), T.uint32(0x3FFF))
        offset = T.cast(_pre_swizzle(smem, (0, 0)) * smem.bits // 128, ty="uint32")
        low = T.bitwise_or(T.uint32(fixed & 0xFFFFFFFF), field) + offset
        return (T.bitwise_or(T.uint64(fixed >> 32) << T.uint64(32), T.cast(low, ty="uint64")),
                (swizzle, lbo, sbo))
    # the descriptor's start: the unswizzled shared address of the atom's origin
    physical = smem.memory((0, 0)) * smem.bits // 8
    address = T.cuda.cvta_generic_to_shared(smem.pointer((0, 0)))
    if swizzle:
        address = address - T.cast(physical, ty="uint32") + T.cast(_pre_swizzle(smem, (0, 0)) * smem.bits // 8,
                                                                    ty="uint32")
    start = T.bitwise_and(T.cast(address // T.uint32(16), ty="uint64"), T.uint64(0x3FFF))
    high, low = fixed >> 32, fixed & 0xFFFFFFFF
    return T.bitwise_or((T.uint64(high) << T.uint64(32)) | T.uint64(low), start), (swizzle, lbo, sbo)
