"""The CUDA GEMM's tiling (:class:`GemmConfig`, ``default_config``) and the names its plan shares: the
input and output dtypes (``DTYPES``, ``OUT_DTYPES``), the layouts, the ``ldmatrix`` and ``mma.sync``
instructions of every sm80 kernel, ``Extent``. Pure Python, no TIRx; part of the plan
(``kernels.sm80.gemm_plan``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from ...errors import ContractError
from ..gemm.grouped import SEARCHES


DTYPES = {"f16": "float16", "bf16": "bfloat16"}
OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
LAYOUTS = ("nn", "nt", "tn", "tt")

LDMATRIX = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
LDMATRIX_TRANS = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32"  # every sm80 kernel's MMA; t: f16 or bf16 (DTYPES' keys)


@dataclass(frozen=True)
class GemmConfig:
    """Tiling of the CUDA GEMM. Warp tile = (block_m / warps_m) x (block_n / warps_n)."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 4
    group_m: int = 8  # block rasterization: this many block rows share a sweep over N
    mma_order: str = "serpentine"  # "row": mi-major; "serpentine": reverse ni on odd mi (B reuse)
    sync_after_mma: bool = True  # barrier after the k-step's mma issue instead of before it
    split_loads: bool = True  # spread a stage's cp.async over the k-steps (A, then B)
    precompute: bool = True  # per-thread swizzled addresses hoisted out of the k-loop (see docs)
    unroll_stages: bool = True  # k-loop unrolled by `stages` (constant stage offsets) when K is long
    # persistent kernel: this many CTAs (use the GPU's SM count) each loop over output tiles, and
    # the cp.async pipeline runs on across tile boundaries, so the next tile's first stages load
    # while the current tile's epilogue stores; 0 = one CTA per tile. Takes effect when the k-loop
    # is unrolled and K has a whole number of `stages` k-tiles (see `persistent_for`).
    ctas: int = 0
    # split-K: this many CTAs share one output tile, each taking a contiguous range of its k-tiles;
    # the epilogue reduces their f32 partials (``reduction``) and the tile's last CTA stores C
    split_k: int = 1
    # "atomic": red.global.add.f32 into an f32 workspace; "ordered": each slice stores its partial
    # tile and the last CTA sums the slices in index order (deterministic, bit-reproducible)
    reduction: str = "atomic"
    # elements per workspace store and load of the split-K reduction: 1, or 2 (``reduction =
    # "ordered"``: ``st.global.v2.f32`` partials and ``ld.global.cg.v2.f32`` gathers of column pairs,
    # where N is even; half the instructions of the element-wise ones)
    reduce_vector: int = 1
    # grouped GEMM only: a row tile with fewer than block_m rows (a group's last) runs a second copy
    # of the k-loop in which each warp issues its ldmatrix and mma only for the 16-row mma tiles
    # that hold rows (a warp without rows: only the copies and barriers); full tiles run the
    # unchanged loop (``Groups.live_rows``, docs/grouped_gemm.md "Short tiles")
    live_rows: bool = False
    # grouped GEMM only: how a CTA finds its group (``kernels.gemm.grouped.Groups.search``): "binary" (ceil(log2 G)
    # dependent loads of the offsets) or "cta" (each thread tests its own groups at once: ceil(G /
    # threads) independent loads and a barrier)
    group_search: str = "binary"
    # the fused residual through shared memory (``Epilogue.residual_rows``): copied by cp.async into the
    # stages freed in the last k-tiles instead of loaded from global memory in the epilogue; opt-in (at
    # 4096^3 it took the residual alone from +4.2 % to +2.6 % over the plain GEMM but all five steps from
    # +6.1 % to +8.6 %: benchmarks/journal/2026-12.md, "Issue 25's last two gaps")
    residual_stage: bool = False

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def warp_m(self) -> int:
        return self.block_m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.block_n // self.warps_n

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        return self.stages * (self.block_m + self.block_n) * self.block_k * elem_bytes

    def check(self) -> None:
        for name in ("block_m", "block_n", "block_k", "warps_m", "warps_n", "group_m"):
            if getattr(self, name) < 1:
                raise ContractError(f"sm80 GEMM config {name}: at least one", operand=name, check="parameters",
                                    expected=">= 1", found=getattr(self, name))
        if self.warp_m % 16 or self.warp_n % 16:
            raise ValueError(f"warp tile {self.warp_m}x{self.warp_n} must be a multiple of 16x16")
        if self.block_k % 32:
            raise ValueError("block_k must be a multiple of 32 (two mma k-steps per stage)")
        if self.stages < 2:
            raise ValueError("stages must be at least 2")
        if self.mma_order not in ("row", "serpentine"):
            raise ValueError("mma_order must be 'row' or 'serpentine'")
        if self.ctas < 0:
            raise ValueError("ctas must be 0 (one CTA per tile) or the number of persistent CTAs")
        if self.split_k < 1:
            raise ValueError("split_k must be at least 1")
        if self.split_k > 1 and self.ctas:
            raise ValueError("split_k and persistent CTAs (ctas > 0) do not combine")
        if self.reduction not in ("atomic", "ordered"):
            raise ValueError("reduction must be 'atomic' or 'ordered'")
        if self.reduce_vector not in (1, 2) or (self.reduce_vector == 2 and self.reduction != "ordered"):
            raise ValueError("reduce_vector must be 1, or 2 with reduction='ordered' (sm_80 has no vector f32 red)")
        if self.group_search not in SEARCHES:
            raise ValueError(f"group_search must be one of {SEARCHES}")
        if self.live_rows and self.block_m <= 16:
            raise ValueError("live_rows needs more than one 16-row mma tile per CTA (block_m > 16)")
        if self.smem_bytes() > 227 * 1024:
            raise ValueError(f"{self.smem_bytes()} B of shared memory exceeds 227 KiB")
        for n in (self.block_m, self.block_n, self.block_k):
            if n & (n - 1):
                raise ValueError("block sizes must be powers of two")

    def as_dict(self) -> dict:
        return asdict(self)

    def unrolled_for(self, K: int, layout: str = "nt") -> bool:
        """Whether the k-loop is unrolled by the stage count: K has at least two stage groups.
        Every layout: with B stored [K, N] the ldmatrix offsets are view offsets
        (``LdmatrixPlan.offset_in_view``), which keeps the unrolled loop within 255 registers
        without spills under NVRTC 13.0, the compiler TIRx builds with."""
        del layout  # every layout unrolls (kept for callers that pass it)
        kt = self.slice_k_tiles(K)
        return self.unroll_stages and kt >= 2 * self.stages

    def slice_k_tiles(self, K: int) -> int:
        """k-tiles per K slice: the k-tiles of K shared out over ``split_k`` slices (the last slice's
        k-tiles past K are zero-filled)."""
        return math.ceil(math.ceil(K / self.block_k) / self.split_k)

    def persistent_for(self, K: int, layout: str = "nt") -> bool:
        """Whether the kernel is persistent: ``ctas`` > 0, the unrolled k-loop, and K a whole
        number of stage groups (every tile starts at stage 0)."""
        kt = math.ceil(K / self.block_k)
        return self.ctas > 0 and self.unrolled_for(K, layout) and kt % self.stages == 0


# Defaults per input dtype (mma.sync f16 and bf16 run at the same rate, so they match).
DEFAULT_CONFIGS = {
    "f16": GemmConfig(),
    "bf16": GemmConfig(),
}


def default_config(dtype: str = "f16", M: int | None = None, N: int | None = None) -> GemmConfig:
    """The default tiling; small problems get a 128x128 tile so they launch more blocks."""
    cfg = DEFAULT_CONFIGS[_short_dtype(dtype)]
    if M is not None and N is not None:
        blocks = math.ceil(M / cfg.block_m) * math.ceil(N / cfg.block_n)
        if blocks < 132 * 2:
            cfg = replace(cfg, block_n=128, block_k=32, warps_n=2)
    return cfg


def _short_name(dtype: str, table: dict, what: str) -> str:
    """``table``'s short name for ``dtype`` given as a short name or a TIR dtype."""
    if dtype in table:
        return dtype
    for short, tir in table.items():
        if tir == dtype:
            return short
    raise ValueError(f"unsupported {what} dtype {dtype!r}; use one of {sorted(table)}")


def _short_dtype(dtype: str) -> str:
    return _short_name(dtype, DTYPES, "input")


def _short_out(dtype: str) -> str:
    return _short_name(dtype, OUT_DTYPES, "output")


def operand_shapes(M: int, N: int, K: int, layout: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Storage shapes of A and B for a layout string."""
    layout = layout.lower()
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    a = (M, K) if layout[0] == "n" else (K, M)
    b = (K, N) if layout[1] == "n" else (N, K)
    return a, b


Extent = int
"""An extent that depends on M: an int, or a TIR expression of the symbolic M of a dynamic-M plan
(``GemmPlan.dynamic_m``); the emission uses the fields typed ``Extent`` as values and never calls
``int`` on them."""


def fit_stages(cfg: GemmConfig, K: int) -> GemmConfig:
    """``cfg`` with its stage count capped at its k-tiles per K slice (and at least 2, the pipeline's
    least): a stage beyond the k-tiles is never loaded, only shared memory the last k-step's fragment
    prefetch reads unwritten. A checked ``cfg`` stays checked (fewer stages, less shared memory)."""
    return replace(cfg, stages=min(cfg.stages, max(2, cfg.slice_k_tiles(K))))
