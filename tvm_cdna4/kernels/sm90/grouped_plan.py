"""The sm90 grouped GEMM's plan (mixture of experts, ``kernels.gemm.grouped``): pure Python, no TIRx.

G GEMMs sharing N and K in one launch: A ``[T, K]`` (tokens sorted by expert), B ``[G, N, K]`` (layout ``nt``:
what wgmma reads without a transpose), C ``[T, N]``, the device offsets ``int32 [G + 1]`` (``OFFSETS``) after
C, the fused epilogue's inputs after them (``bias`` and ``col_scale`` per group, ``[G, N]``). T is the run-time
M (the TIR variable A's shape binds), up to what A and C index in 32 bits (``kernels.sm80.gemm_plan.check_grouped``:
the sm80 grouped kernel's limit, the same offsets).

The kernel (``grouped_emit``) is the dense sm90 kernel's (``gemm_plan``'s docstring: a producer warpgroup's TMA
loads into a ring of stages, consumer warpgroups' wgmma) with persistent CTAs over the work units (row tile
``r`` of ``Groups``, column tile) in the dense grouped order (``Sm90Plan.tile_of`` over ``Groups.row_tiles(T)``
row tiles): each unit's group found on the device from the offsets (``kernels.gemm.grouped_emit.find_group``,
``Groups.origin``), a unit without rows skipped by both roles (the ring positions count the units with rows:
both roles skip the same ones). That is the ``gaps`` walk (``Sm90Config.tile_walk``); the cost model's configs
take the ``prefix`` walk: each CTA sums the groups' ``ceil(rows / block_m)`` row tiles into shared memory
(``gemm_plan.prefix_bytes`` beside the ring; ``prefix_tiles``) and walks only the row tiles with rows, a unit's
group by a binary search over that prefix (``prefix_locate``), so the CTAs share the units with rows evenly.
A's boxes come through a tensor map over the whole ``[T, K]`` (rows of the next group loaded into a tile are
computed, never stored; rows past T are zero-filled), B's through one over
``[G N, K]`` at row ``g N + n0`` (columns past N, the next group's weights, are never stored). C is stored from
registers, masked at the group's ``m_end`` and at N, or, with ``epilogue="tma"`` (the dense kernel's TMA
epilogue, ``gemm_epilogue.store_tma``, ``epilogue_tile`` included), a consumer warpgroup whose rows lie wholly inside
the group (``m0 + (wg + 1) rows <= m_end``: every tile but a group's last at 128 or more rows per group) stores
them through shared memory and TMA stores over a tensor map of C ``[T, N]``, and only the rest (a group's last,
partial tile: a TMA box would write the next group's rows) from registers, masked; the fused epilogue's
per-group inputs read at the group's row (``Input.at``), as the sm80 grouped kernel reads them. Scope: f16/bf16
inputs, the cooperative schedule, no K split (``check_grouped_config``: a ``ContractError`` naming the field
otherwise).

Which kernel serves a bucket of rows per group (``plan_bucket``; ``GroupedGemm``'s buckets): up to
``DECODE_ROWS`` rows per group the sm80 grouped kernel (built for ``sm_90a``), its tiling and K split chosen by
``kernels.sm80.gemm_cost.choose_decode`` over the bucket's totals T (the expected active groups ``min(G, T)``:
few groups with long K split K across CTAs so that every SM streams weights):
measured 1.35x ``torch._grouped_mm`` on the H200 at decode (benchmarks/RESULTS.md, DeepSeek-V3-like decode,
2 rows per group), where a 64-row wgmma tile would compute 32 times the rows; above it this kernel, its config
(tile, ring, epilogue) chosen by ``gemm_cost.choose_grouped`` over the bucket's range of rows per group
(``gemm_dynamic.planned_range``): one kernel serves 257 to 1024 rows per group, and the tile best at 1024 is
not the one that loses least at 257.
"""

from __future__ import annotations

import attrs

from ...errors import ContractError
from ..common import Param, ceil_div, check_config
from ..gemm.dynamic_m import MBucket, resolve_m
from ..gemm.epilogue import Fusion
from ..gemm.grouped import OFFSETS, Groups
from .gemm_plan import (BARRIER_BYTES, DTYPES, OUT_DTYPES, PREFIX_WORDS, SWIZZLE_COLUMNS, Sm90Config, Sm90Plan, _min,
                        block_k, check_fused, check_problem, grouped_index,
                        prefix_bytes)

DECODE_ROWS = 16
"""The rows per group up to which a bucket keeps the sm80 grouped kernel (the module docstring: its measured
decode lead; the dense target's weight-streaming decode kernel keeps M <= 16 the same way)."""
GROUPED_DTYPES = ("f16", "bf16")
"""The inputs the grouped kernel runs (fp8 grouped: not planned yet; the sm80 decode buckets have no fp8)."""


@attrs.frozen
class Sm90GroupedPlan(Sm90Plan):
    """The frozen plan of one bucket of an sm90 grouped GEMM: an ``Sm90Plan`` whose ``M`` is the run-time T,
    ``tiles_m`` the launched row tiles (``grouping.row_tiles(T)``, a TIR expression), ``dynamic_m`` the bucket
    of T (``1 .. t_limit``), and ``grouping`` the ``Groups`` record (G, the row tile, the rows-per-group
    bucket the tile was chosen for)."""

    grouping: Groups | None = None

    @property
    def groups(self) -> int:
        return self.grouping.count

    @property
    def prefix_at(self) -> int:
        """The prefix walk's first shared element (2-byte elements of the kernel's shared memory: after the ring
        and C's staging; ``PREFIX_WORDS``)."""
        return (self.config.stages * self.config.stage_bytes() + self.config.staging_bytes()) // 2


def prefix_tiles(offsets, block_m: int) -> list[int]:
    """The row tiles before each group and their total (``[G + 1]``, Python ints): what the prefix walk's CTAs sum
    into shared memory, each group ``ceil(max(rows, 0) / block_m)`` tiles."""
    out = [0]
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        out.append(out[-1] + ceil_div(max(int(hi) - int(lo), 0), block_m))
    return out


def prefix_locate(r: int, offsets, prefix, block_m: int) -> tuple[int, int, int]:
    """``(g, m0, m_end)`` of the prefix walk's row tile ``r < prefix[G]`` (the kernel's binary search over
    ``prefix``: the last group whose first tile is at most ``r``, which has tiles), ``m_end`` clipped at T."""
    g = max(i for i in range(len(prefix) - 1) if prefix[i] <= r)
    return g, int(offsets[g]) + (r - prefix[g]) * block_m, min(int(offsets[g + 1]), int(offsets[-1]))


def window_locate(u: int, offsets, prefix, block_m: int, tiles_n: int, group_m: int) -> tuple[int, int, int, int]:
    """``(g, m0, m_end, column)`` of the windows walk's unit ``u < prefix[G] tiles_n`` (``grouped_emit.window_tile``):
    the group whose units (``prefix[g] tiles_n ..``) hold ``u``, then ``gemm_plan.grouped_index`` over that group's
    row tiles alone (windows of ``group_m`` row tiles, a group's last window what is left)."""
    g = max(i for i in range(len(prefix) - 1) if prefix[i] * tiles_n <= u)
    row, col = grouped_index(u - prefix[g] * tiles_n, prefix[g + 1] - prefix[g], tiles_n, group_m,
                             lambda a, b: a // b, lambda a, b: a % b, min)
    return g, int(offsets[g]) + row * block_m, min(int(offsets[g + 1]), int(offsets[-1])), col


def check_grouped_config(config: Sm90Config, out_dtype: str = "bf16", N: int = 8) -> None:
    """A ContractError naming the field of ``config`` the grouped kernel does not run (the module docstring):
    the cooperative schedule, no K split, and TMA stores (``epilogue="tma"``) only of a 16-bit C whose rows are
    whole 16-byte chunks (the dense kernel's rule, ``gemm_plan.plan``)."""
    for field, value, want in (("schedule", config.schedule, "cooperative"), ("split_k", config.split_k, 1),
                               ("cluster_m", config.cluster_m, 1), ("raster", config.raster, "m"),
                               ("trim_loads", config.trim_loads, False), ("shift_last", config.shift_last, False)):
        if value != want:
            raise ContractError(f"sm90 grouped GEMM config {field}: the grouped kernel runs cooperatively, without "
                                "a K split, one CTA a cluster, its order down the row tiles, whole boxes", operand=field, check="parameters", expected=repr(want), found=repr(value))
    if config.swap_ab:
        raise ContractError("sm90 grouped GEMM config swap_ab: the grouped kernel is not swapped (C^T = B A^T is the "
                            "dense kernel's)", operand="swap_ab", check="parameters", expected="False", found="True")
    if config.residual_read != "global":
        raise ContractError("sm90 grouped GEMM config residual_read: the grouped kernel reads a residual from "
                            "global memory", operand="residual_read", check="parameters", expected="'global'",
                            found=repr(config.residual_read))
    if config.epilogue == "tma" and (out_dtype == "f32" or N % 8):
        raise ContractError("sm90 grouped GEMM config epilogue: TMA stores of a 16-bit C whose rows are whole "
                            "16-byte chunks", operand="epilogue", check="parameters",
                            expected="f16/bf16 C, N % 8 == 0", found=f"{out_dtype} C, N = {N}")
    if config.tail_columns:  # the dense kernel's tail map (gemm_emit.tail_maps) is not the grouped kernel's yet
        raise ContractError("sm90 grouped GEMM config epilogue: the grouped kernel's TMA stores are of whole "
                            f"{SWIZZLE_COLUMNS}-column blocks", operand="epilogue", check="parameters",
                            expected=f"block_n % {SWIZZLE_COLUMNS} == 0 or epilogue='registers'",
                            found=f"block_n = {config.block_n}, epilogue='tma'")


def check_grouped_problem(G: int, N: int, K: int, dtype: str, layout: str, out_dtype: str) -> int:
    """What the sm90 grouped kernel runs (a ContractError naming the operand otherwise); the largest T."""
    from ..sm80.gemm_plan import check_grouped

    check_problem(MBucket(1, 1), N, K, dtype, layout, out_dtype)
    if dtype not in GROUPED_DTYPES:
        raise ContractError("sm90 grouped GEMM dtype: f16 or bf16 inputs (fp8 grouped is not planned yet)",
                            operand="dtype", check="dtype", expected=GROUPED_DTYPES, found=dtype)
    if isinstance(G, bool) or not isinstance(G, int) or G < 1:
        raise ContractError("sm90 grouped GEMM groups: at least one group", operand="B", check="shape",
                            expected="G >= 1", found=repr(G))
    return check_grouped(MBucket(1, 1), G, N, K, layout)[2]


def plan_grouped(rows: MBucket, G: int, N: int, K: int, dtype: str, out_dtype: str, config: Sm90Config, sms: int,
                 smem_bytes: int, fusion: Fusion = Fusion(), layout: str = "nt") -> Sm90GroupedPlan:
    """Check the problem and ``config`` and freeze the plan of the bucket ``rows`` (rows per group) of a
    grouped GEMM of ``G`` groups (``sms``: the SMs the persistent grid fills)."""
    t_limit = check_grouped_problem(G, N, K, dtype, layout, out_dtype)
    check_config(config, (Sm90Config,), "sm90 grouped GEMM config")
    config.check(smem_bytes)
    check_grouped_config(config, out_dtype, N)
    check_fused(config, fusion, out_dtype)
    M, bucket, _ = resolve_m(MBucket(1, t_limit), "kernels.sm90.grouped_plan.plan_grouped")
    grouping = Groups(G, config.block_m, rows)
    tiles_m, tiles_n = grouping.row_tiles(M), ceil_div(N, config.block_n)
    ctas = _min(tiles_m * tiles_n, config.ctas or sms)
    params = (Param("A", (M, K), DTYPES[dtype]), Param("B", (G, N, K), DTYPES[dtype]),
              Param("C", (M, N), OUT_DTYPES[out_dtype]), Param(OFFSETS, (G + 1,), "int32"),
              *fusion.params(M, N, OUT_DTYPES[out_dtype], G))
    smem = config.stages * config.stage_bytes() + config.staging_bytes() + prefix_bytes(G, config.tile_walk)
    if smem + BARRIER_BYTES > smem_bytes:
        raise ContractError("sm90 grouped GEMM config stages: the ring, C's staging and the prefix walk's "
                            f"{PREFIX_WORDS} words a group within the SM's shared memory", operand="stages",
                            check="parameters", expected=f"<= {smem_bytes - BARRIER_BYTES} bytes" + (
                                ", or tile_walk='gaps' (no shared words)" if config.tile_walk != "gaps" else ""),
                            found=f"{smem} bytes ({config.stages} stages, {G} groups)")
    return Sm90GroupedPlan(M, N, K, dtype, out_dtype, config, tiles_m, tiles_n, ceil_div(K, block_k(dtype)), ctas,
                           smem, params, layout, fusion, bucket, grouping=grouping)


def plan_bucket(rows: MBucket, G: int, N: int, K: int, dtype: str, out_dtype: str, device, fusion: Fusion = Fusion(),
                config: Sm90Config | None = None, layout: str = "nt"):
    """The plan of one bucket of rows per group (the module docstring): the sm80 grouped kernel's plan (the
    tiling and K split of ``choose_decode``) up to ``DECODE_ROWS`` rows per group, else this kernel's with the config of
    ``gemm_cost.choose_grouped`` over the bucket's range of rows per group (``gemm_dynamic.planned_range``: the
    minimax regret, as the dense dynamic-M buckets), on ``device`` (a ``devices.DeviceSpec``).
    ``config``: this tiling for every bucket (the sm90 kernel at every count)."""
    from . import gemm_cost

    if config is None and rows.hi <= DECODE_ROWS:
        from ..sm80.gemm_cost import choose_decode, device_model
        from ..sm80.gemm_plan import plan as plan_sm80

        check_grouped_problem(G, N, K, dtype, layout, out_dtype)
        cfg = choose_decode(rows, N, K, dtype, layout, out_dtype, device_model(device), G)
        return plan_sm80(rows, N, K, dtype, layout, out_dtype, cfg, device.units, fusion=fusion, groups=G)
    from .gemm_dynamic import out_bytes, planned_range

    cfg = config or gemm_cost.choose_grouped(*planned_range(rows)[:1], G, N, K, out_bytes(out_dtype), device,
                                             dtype, hi=planned_range(rows)[1])
    return plan_grouped(rows, G, N, K, dtype, out_dtype, cfg, device.units, device.smem_per_unit, fusion, layout)


__all__ = ["DECODE_ROWS", "GROUPED_DTYPES", "Sm90GroupedPlan", "check_grouped_config", "check_grouped_problem", "plan_bucket",
           "plan_grouped", "prefix_locate", "prefix_tiles",
           "window_locate"]
