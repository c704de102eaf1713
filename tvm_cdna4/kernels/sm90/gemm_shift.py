"""The sm90 GEMM's shifted last tile row (``Sm90Config.shift_last``, issue 36): the tile row that would run past the
tokens (unswapped: A's rows past M; ``swap_ab``: the kernel's B role, A's rows, C^T's columns) loads its box at
``tokens - block`` instead of ``tile * block``, so that every row of the box exists: no zero fill, the tile's whole box
through the same tensor map. The consumers compute ``block`` real rows from that origin; the epilogue maps accumulator
row ``r`` to token ``origin + r`` (the fused inputs read there) and stores only the tokens in ``[tile * block, tokens)``
(``kept``): the ones below belong to the previous tile row, never written twice (a K split's partials and atomics and
its workspace clearing masked alike). Where the tokens are fewer than one tile the box cannot lie inside them: the
kernel is today's (``shifts``; a dynamic M's origin ``min(tile * block, max(M - block, 0))`` is the tile's own there).

Why: the same kernel ran far slower where TMA zero-fills most of the last tile's box (H100, 2026-12-07, 64x112: Qwen2.5-7B
down 94.4 us at M = 200, 64.4 at 240), and loading smaller boxes instead (``trim_loads``) lost: the zero fill is avoided,
not shrunk. A leaf module: ``gemm_plan`` reads ``SHIFT_LAST`` without importing the emitter.
"""

from __future__ import annotations

SHIFT_LAST = True
"""Whether the cost model's configs take ``Sm90Config.shift_last`` where the config allows it
(``gemm_plan.planned_loads``: the register epilogue, ``cluster_m`` 1). On since its timing through the torch op (stop
53, an H100, ``bash benchmarks/gpu_stop45.sh shiftbox``: ``benchmarks/torch_gemm.py --ms 96,200,260,300,1200 --projs
qkv,o,down --shift-last off,on``, 45 rows exact, ``runs/torch_gemm_shift_h100_2026-12-07e.md``): every row it shifted
ran 1.00-1.40x (Qwen2.5-7B down 86.4 -> 63.7 us at M = 200, Gemma-2-9B down 85.7 -> 61.0 at 260), geo-mean 1.01 /
1.08 / 1.19 / 1.05x at M = 96 / 200 / 260 / 300; the plans it cannot shift (TMA stores) ran 0.92-1.08x, the same
kernel twice."""

HALF = "half"
"""``SHIFT_TMA``'s third value: as on, but a TMA-store plan shifts its last token tile only where that tile holds at most
half a tile of tokens (``shallow``; a static M decided in ``shifts``, a dynamic M's at run time in ``origin``); a deeper
one keeps its box at its own first row and stores through TMA. The register epilogue's plans shift at any depth. Why:
stop 55's H100 run gained most where the box zero-filled most (on / off 1.25x at M = 260, 1.12x at 300) and lost up to
3 % on three rows at 333 (``runs/torch_gemm_shifttma_h100_2026-12-07f.md``). The default since stop 56 (``SHIFT_TMA``)."""

SHIFT_TMA = HALF
"""Whether ``SHIFT_LAST`` shifts the TMA-store configs' last tile row too (``gemm_plan.planned_loads``; the options'
``--epilogue tma`` keeps a planned shift, ``gemm_target._replaced``): the shifted tile stores its own rows from
registers (``gemm_epilogue.store_shifted``: a box store at its origin would rewrite the previous tile row's rows),
every other tile with TMA. ``True``: at any depth; ``HALF`` (the default, the string ``HALF`` names): only where the
last tile is shallow (``shallow``); ``False``: never. ``HALF`` since stop 56 (an H100, 2026-12-08 00:1x UTC, ``bash
benchmarks/gpu_stop45.sh shiftdepth``: ``benchmarks/torch_gemm.py --ms 260,300,333,3000 --projs qkv,o --shift-tma
off,on,half``, 72 rows exact, ``runs/torch_gemm_shiftdepth_h100_2026-12-08.md``): every row whose kernel it changes
ran 1.00-1.71x off (geo-mean half / off 1.25 / 1.13 / 1.00 / 1.00x at M = 260 / 300 / 333 / 3000; the dynamic
kernels' run-time test costs nothing at 3000), the rows it leaves 0.97-1.01x (the same kernel twice); ``True`` won
more at 333 on two rows (1.10 / 1.22x) and lost 2-3 % on two others (0.97 / 0.98x), hence the depth rule."""


def shallow(depth, block: int):
    """Whether a last token tile of ``depth`` rows (``M - first``) holds at most half a tile (``HALF``'s rule); a
    TIR condition where ``depth`` is one."""
    return depth <= block // 2


def shallow_only(config) -> bool:
    """Whether a plan of ``config`` shifts its last token tile only where it is ``shallow``: TMA stores where
    ``SHIFT_TMA`` is ``HALF``."""
    return SHIFT_TMA == HALF and config.epilogue == "tma"


def allows(cluster_m: int, epilogue: str, residual_read: str = "global") -> bool:
    """Whether a config of ``cluster_m``, ``epilogue`` and ``residual_read`` may take ``shift_last`` (the planners'
    and the options' rule): unclustered (a cluster's pair shares the weights' box), the residual not staged in the
    chunk buffers (``"chunks"``: the producer loads the tile's own rows, ``gemm_chunkres``), with the register
    epilogue, or TMA stores where ``SHIFT_TMA``."""
    return (cluster_m == 1 and residual_read != "chunks"
            and (epilogue == "registers" or bool(SHIFT_TMA)))  # a bool: SHIFT_TMA may be HALF


def token_rows(p) -> tuple:
    """(the tokens' rows M, the kernel's tile of them): unswapped the A role's ``block_m``, swapped the B role's
    ``block_n``."""
    return p.M, (p.config.block_n if p.config.swap_ab else p.config.block_m)


def shifts(p) -> bool:
    """Whether the plan's kernel shifts its last token tile (``shift_last``, and a last tile that can run past the
    tokens with the tokens at least a tile: a static M past one tile and not a multiple of it, or a dynamic M whose
    bucket reaches past one tile)."""
    if not p.config.shift_last:
        return False
    rows, block = token_rows(p)
    if p.dynamic_m is not None:
        return p.dynamic_m.hi > block
    return rows > block and rows % block != 0 and (not p.shallow_shift or shallow(rows % block, block))


def origin(p, first, max_, min_, align: int = 1, select_=None):
    """The token row at which the tile whose own first token row is ``first`` loads and computes: ``first``, or where
    ``shifts`` the least of it and ``M - block`` rounded up to ``align`` (a dynamic M: ``max(M - block, 0)``;
    ``max_``/``min_``/``select_``: TIR's ``T.max``/``T.min``/``T.if_then_else``). ``align`` 2: the swapped K split's
    workspace pairs of tokens (``gemm_emit.shift_align``), whose 8-byte stores need an even first token: its box then has
    one row past M. A dynamic M's plan of ``shallow_shift`` (``shallow_only`` when planned): ``first`` where the tile is not ``shallow`` (an unshifted tile's
    origin is its first row: ``kept`` keeps its every row, the epilogue stores it through TMA)."""
    if not shifts(p):
        return first
    rows, block = token_rows(p)
    if p.dynamic_m is None:
        return min_(first, -(-(rows - block) // align) * align)
    low = max_(rows - block, 0)
    moved = min_(first, low if align == 1 else (low + align - 1) // align * align)
    return select_(shallow(rows - first, block), moved, first) if p.shallow_shift else moved


def tile_origin(p, m0, n0, max_, min_, align: int = 1, select_=None) -> tuple:
    """(``m0``, ``n0``): the first rows of a tile's A and B role boxes, the token one through ``origin``."""
    if p.config.swap_ab:
        return m0, origin(p, n0, max_, min_, align, select_)
    return origin(p, m0, max_, min_, align, select_), n0


def first_token(p, m0, n0):
    """The tile's own first token row (``kept``'s ``first``): ``n0`` swapped, else ``m0``; None where not ``shifts``."""
    if not shifts(p):
        return None
    return n0 if p.config.swap_ab else m0


def kept(p, token, first, ok, and_):
    """The store predicate ``ok`` of an element at token row ``token`` of a tile whose own first token row is
    ``first`` (None: not shifted): also ``token >= first`` where ``shifts`` (the rows below are the previous tile
    row's); ``ok`` itself otherwise (the kernel's code unchanged)."""
    if first is None or not shifts(p):
        return ok
    return and_(first <= token, ok)


__all__ = ["HALF", "SHIFT_LAST", "SHIFT_TMA", "allows", "first_token", "kept", "origin", "shallow", "shallow_only", "shifts",
           "tile_origin", "token_rows"]
