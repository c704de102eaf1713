"""64-bit element offsets (issue 35): which tensors of an sm80 kernel an element offset can reach 2^31 in,
and what no plan can index. Pure Python, no TIRx.

The CUDA kernels compute element offsets in TIR's index type: ``int`` (32 bits) for every index of
a small problem. A tensor of 2^31 elements or more (an LM head's C: 32,768 tokens x a 128,256
vocabulary) needs the offsets of its rows in 64 bits. A plan names those tensors (``offsets64``, the
largest offset its kernel computes in each, ``reach``, tested against ``LIMIT``); the emission casts
their leading indices to ``int64`` (``kernels.sm80.gemm_emit_common.wide_index``), so
``row * leading dimension`` is computed in 64 bits, and leaves every other tensor's index
arithmetic, so the code of every smaller problem, as it was. What stays 32-bit and is refused
(``ContractError``, ``check_extent`` / ``check_view``): an extent of 2^31 or more (TIR's shapes and
loop variables are ``int``) and a copy whose view of a tile steps 2^31 bits or more between rows
(TIRx's ``cp.async`` pattern computes its strides in bits, as 32-bit constants).
"""

from __future__ import annotations

from ..common import ceil_div

LIMIT = 2**31
"""Element offsets below this fit ``int``, the index type of the kernels' 32-bit arithmetic."""


def reach(shape, over=()) -> int:
    """The largest element offset of a row-major tensor of ``shape`` (ints) that a kernel computes
    when its last ``len(over)`` indices may run ``over`` past their extents (a tile overhanging the edge
    whose copies are masked: the address is computed, nothing is read), the others 0."""
    over = (0,) * (len(shape) - len(over)) + tuple(over)
    offset, stride = 0, 1
    for extent, extra in zip(reversed(tuple(shape)), reversed(over)):
        offset += (int(extent) + extra - 1) * stride
        stride *= int(extent)
    return offset


def wide(shape, over=()) -> bool:
    """Whether the kernel needs 64-bit offsets in a tensor of ``shape`` (``reach`` at least ``LIMIT``)."""
    return reach(shape, over) >= LIMIT


def offsets64(tensors: dict) -> tuple[str, ...]:
    """The names of ``tensors`` (name -> ``(shape, over)``) whose offsets need 64 bits, in order."""
    return tuple(name for name, (shape, over) in tensors.items() if wide(shape, over))


def refusal(kernel: str, operand: str, rule: str, expected: str, found: str, suggestion: str):
    """The ``ContractError`` of a tensor no plan indexes (``check="shape"``)."""
    from ...errors import ContractError

    return ContractError(rule, opcode=kernel, operand=operand, expected=expected, found=found, suggestion=suggestion,
                         check="shape")


def check_extent(kernel: str, operand: str, what: str, extent: int) -> None:
    """``extent`` (one dimension of ``operand``, or a count the kernel loops over) must fit ``int``:
    ``ContractError`` naming the operand and the limit otherwise."""
    if extent >= LIMIT:
        raise refusal(kernel, operand, f"{what} is a 32-bit index of the kernel", f"{what} < 2^31 = {LIMIT}",
                      str(extent), "split the problem along that dimension")


def check_view(kernel: str, operand: str, strides, bits: int) -> None:
    """A ``cp.async`` view of ``operand`` (a thread's or a CTA's chunks of one tile: ``strides`` in elements
    of ``bits`` bits) must have every stride below 2^31 bits: TIRx's copy pattern computes them in bits,
    as 32-bit constants ("Literal value ... exceeds range of int32" otherwise: a 128-row tile of 16-bit
    rows of 2^22 elements). A ``ContractError`` naming the operand and the limit otherwise."""
    largest = max((int(s) for s in strides), default=0)
    if largest * bits >= LIMIT:
        raise refusal(kernel, operand, f"a tile's cp.async view steps {largest} elements between its rows, a 32-bit "
                      "constant in bits", f"stride x {bits} bits < 2^31 = {LIMIT}", f"{largest * bits} bits",
                      "a tile of fewer rows (block_m / block_n), or split the row length (K, N or M)")


def int32_rows(*row_elems: int, over_rows: int = 256, over_cols: int = 2048) -> int:
    """The largest M whose ``[M, row]`` tensors (rows of each of ``row_elems``: A's K, C's N) a kernel
    indexes in 32 bits although a tile may overhang the last row by ``over_rows`` and a row by
    ``over_cols`` (the largest tile and split-K padding of the sm80 plans): the end of a dynamic-M GEMM's
    last 32-bit bucket (0: none)."""
    return max(0, (LIMIT - 1 - over_cols) // max(row_elems) - over_rows)


def grid_limit(N: int, block_m: int, block_n: int) -> int:
    """The largest M whose launch of ``block_m x block_n`` tiles has fewer than 2^31 CTAs and whose rows,
    a tile past them included, fit ``int`` (what a CUDA kernel with 64-bit offsets still indexes in 32
    bits: ``blockIdx.x``, the tile's rows)."""
    tiles_n = ceil_div(N, block_n)
    return min(LIMIT - 1 - block_m, (LIMIT - 1) // tiles_n * block_m)


__all__ = ["LIMIT", "check_extent", "check_view", "grid_limit", "int32_rows", "offsets64", "reach", "refusal", "wide"]
