"""Ampere-class tiled GEMM for CUDA (sm_80, also runs on sm_90) written in TVM TIRx.

``C[M, N] = op(A) @ op(B)`` with f16 or bf16 inputs, f32 accumulation and f32/f16/bf16 output.

Layout letters follow BLAS on row-major storage: ``n`` means the operand is stored as it appears in
``A @ B`` (A as ``[M, K]``, B as ``[K, N]``), ``t`` means it is stored transposed (A as ``[K, M]``,
B as ``[N, K]``). So ``nt`` has both operands K-contiguous; the operand whose K is not contiguous
(A in ``t*``, B in ``*n``) is read from shared memory with ``ldmatrix ... .trans``.

Every hardware instruction of the main loop is issued through ``T.cuda.tile.apply``:

* global -> shared: ``cp.async.cg.shared.global`` 16 B chunks (``cp.async.ca`` 8/4 B when the
  leading dimension is not a multiple of 8 elements), zero-filled with ``src_size`` at the edges;
  a multistage pipeline (``commit_group`` / ``wait_group``) of ``config.stages`` tiles, the k-loop
  unrolled by the stage count so that every shared-memory stage offset is an immediate;
* shared -> registers: ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`` from XOR-swizzled
  shared tiles (``ComposeLayout``), so every ldmatrix phase and every cp.async store is
  bank-conflict free; fragments are double-buffered in registers;
* ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`` on the register tiles;
* epilogue: ``st.global.v2.f32`` or ``cvt.rn.{f16,bf16}x2.f32`` + ``st.global.b32``.

Blocks are rasterized in groups of ``config.group_m`` block rows so that consecutive blocks share
their A panel and B panels in L2. With ``config.ctas`` > 0 the kernel is persistent: that many CTAs
loop over the rasterized tiles and the cp.async pipeline runs on from one tile into the next.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

DTYPES = {"f16": "float16", "bf16": "bfloat16"}
OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
LAYOUTS = ("nn", "nt", "tn", "tt")


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
        if self.smem_bytes() > 227 * 1024:
            raise ValueError(f"{self.smem_bytes()} B of shared memory exceeds 227 KiB")
        for n in (self.block_m, self.block_n, self.block_k):
            if n & (n - 1):
                raise ValueError("block sizes must be powers of two")

    def as_dict(self) -> dict:
        return asdict(self)

    def unrolled_for(self, K: int, layout: str = "nt") -> bool:
        """Whether the k-loop is unrolled by the stage count: K has at least two stage groups and
        B is stored [N, K]. With B [K, N] the unrolled loop needs more than 255 registers under
        NVRTC 13.0, the compiler TIRx builds with (496 B of spills at 4096^3; nvcc 13.0 fits it
        in 232), and ran ~40 % slower on the H200."""
        kt = math.ceil(K / self.block_k)
        return self.unroll_stages and kt >= 2 * self.stages and layout.lower()[1] == "t"

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


# ----------------------------------------------------------------------------------------------
# Shared-memory swizzle
# ----------------------------------------------------------------------------------------------


def swizzle_shift(row_elems: int) -> int:
    """CUTLASS ``Swizzle<3, 3, S>`` shift for a shared tile whose rows hold ``row_elems`` halves.

    The XOR takes the 16-byte chunk index (element bits 3..5) and flips it with three row bits.
    For rows of >= 64 halves those are the three lowest row bits; for 32-half rows two rows share a
    128-byte line, so the row bits 1..3 are used. Either way the eight 16-byte rows that one ldmatrix
    phase reads (and the 16-byte chunks that eight consecutive cp.async threads write) land in eight
    different bank groups.
    """
    return max(3, int(math.log2(row_elems)) - 3)


def swizzle_elem(offset: int, row_elems: int) -> int:
    """The swizzled element offset (reference implementation of the shared layout)."""
    s = swizzle_shift(row_elems)
    return offset ^ (((offset >> (3 + s)) & 7) << 3)


# ----------------------------------------------------------------------------------------------
# Operand description (pure Python; also used by tests)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operand:
    """One input operand's tile in shared memory and its copy plan."""

    name: str
    rows: int  # tile rows (the non-contiguous dimension)
    cols: int  # tile columns (contiguous in global and shared memory)
    grows: int  # global extent along rows
    gcols: int  # global extent along columns (== leading dimension)
    trans: bool  # ldmatrix .trans (K is the row dimension)
    vec: int  # elements per cp.async chunk (8, 4, 2) or 1 for plain loads
    threads: int

    @property
    def chunks_per_row(self) -> int:
        return self.cols // self.vec

    @property
    def reps(self) -> int:
        return self.rows * self.chunks_per_row // self.threads

    @property
    def elems(self) -> int:
        return self.rows * self.cols

    def chunk_coord(self, tid, rep):
        """(row, col) in the tile of the chunk copied by thread ``tid`` in repeat ``rep``."""
        cpr, nt = self.chunks_per_row, self.threads
        if cpr <= nt:
            return rep * (nt // cpr) + tid // cpr, (tid % cpr) * self.vec
        per = cpr // nt
        return rep // per, ((rep % per) * nt + tid) * self.vec

    def copy_iters(self, row_stride: int):
        """Shard factors (extent, stride) of the (warp, lane, rep, elem) chunk view."""
        cpr, nt, v = self.chunks_per_row, self.threads, self.vec
        if cpr <= nt:
            return [(nt // cpr, row_stride), (cpr, v), (self.reps, (nt // cpr) * row_stride), (v, 1)]
        per = cpr // nt
        return [(nt, v), (self.reps // per, row_stride), (per, nt * v), (v, 1)]


def _vec_for(ld: int) -> int:
    for v in (8, 4, 2):
        if ld % v == 0:
            return v
    return 1


def make_operands(M, N, K, layout, cfg: GemmConfig):
    layout = layout.lower()
    nt = cfg.threads
    if layout[0] == "n":  # A [M, K]
        a = _Operand("A", cfg.block_m, cfg.block_k, M, K, False, _vec_for(K), nt)
    else:  # A [K, M]
        a = _Operand("A", cfg.block_k, cfg.block_m, K, M, True, _vec_for(M), nt)
    if layout[1] == "t":  # B [N, K]
        b = _Operand("B", cfg.block_n, cfg.block_k, N, K, False, _vec_for(K), nt)
    else:  # B [K, N]
        b = _Operand("B", cfg.block_k, cfg.block_n, K, N, True, _vec_for(N), nt)
    for op in (a, b):
        total = op.rows * op.chunks_per_row
        if total % nt:
            raise ValueError(f"{op.name} tile {op.rows}x{op.cols} does not split over {nt} threads")
        cpr = op.chunks_per_row
        if not (cpr <= nt and nt % cpr == 0) and not (cpr > nt and cpr % nt == 0):
            raise ValueError(f"{op.name}: {cpr} chunks per row vs {nt} threads")
    return a, b


def _check_warp_offsets_neutral(op: _Operand, cfg: GemmConfig) -> None:
    """The per-warp base offset must commute with the swizzle (it is added to the pointer)."""
    if op.trans:
        off = (cfg.warp_m if op.name == "A" else cfg.warp_n)
        span = [(r, c) for r in range(op.rows) for c in range(off)]
        offsets = [w * off for w in range((op.cols // off))]
        to = lambda r, c: r * op.cols + c  # noqa: E731
    else:
        off = (cfg.warp_m if op.name == "A" else cfg.warp_n)
        span = [(r, c) for r in range(off) for c in range(op.cols)]
        offsets = [w * off * op.cols for w in range(op.rows // off)]
        to = lambda r, c: r * op.cols + c  # noqa: E731
    for base in offsets:
        for r, c in span[:: max(1, len(span) // 4096)]:
            x = to(r, c)
            if swizzle_elem(base + x, op.cols) != base + swizzle_elem(x, op.cols):
                raise ValueError(
                    f"{op.name}: warp tile offset {base} does not commute with the shared swizzle; "
                    "use a warp tile of at least 64 along the contiguous dimension"
                )


# ----------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------


def cuda_gemm(
    M: int,
    N: int,
    K: int,
    dtype: str = "f16",
    layout: str = "nt",
    out_dtype: str = "f32",
    config: GemmConfig | None = None,
):
    """Build the TIRx PrimFunc ``main(A, B, C)`` for one static problem size."""
    from tvm_tirx.backend.cuda.axis import laneid
    from tvm_tirx.script import ir as I
    from tvm_tirx.script import tirx as T
    from tvm_tirx.tirx.layout import S, ComposeLayout, TileLayout

    dt = DTYPES[_short_dtype(dtype)]
    ot = OUT_DTYPES[_short_out(out_dtype)]
    layout = layout.lower()
    cfg = config or default_config(dtype, M, N)
    cfg.check()
    if min(M, N, K) < 1:
        raise ValueError("M, N, K must be positive")

    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    WM, WN = cfg.warps_m, cfg.warps_n
    NT = cfg.threads
    WTM, WTN = cfg.warp_m, cfg.warp_n
    MI, NI, KI = WTM // 16, WTN // 8, BK // 16
    STAGES = cfg.stages
    GM, GN = math.ceil(M / BM), math.ceil(N / BN)
    KT = math.ceil(K / BK)
    GROUP = max(1, min(cfg.group_m, GM))

    opa, opb = make_operands(M, N, K, layout, cfg)
    a_shape, b_shape = operand_shapes(M, N, K, layout)
    A_ELEMS, B_ELEMS = opa.elems, opb.elems
    STAGE_ELEMS = A_ELEMS + B_ELEMS
    SMEM_ELEMS = STAGES * STAGE_ELEMS

    mma_op = f"mma.sync.aligned.m16n8k16.row.col.f32.{'f16' if dt == 'float16' else 'bf16'}.{'f16' if dt == 'float16' else 'bf16'}.f32"
    ldm = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
    ldm_t = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"

    # ---- layouts -------------------------------------------------------------------------
    def swz_elem_layout(op, tile):  # element-level XOR swizzle over a tile of op.cols-wide rows
        return ComposeLayout(3, 3, swizzle_shift(op.cols), tile)

    def swz_word_layout(op, tile):  # the same swizzle seen through b32 words
        return ComposeLayout(2, 3, swizzle_shift(op.cols), tile)

    def copy_layouts(op):
        gl = TileLayout(S[tuple(e for e, _ in op.copy_iters(op.gcols)) : tuple(s for _, s in op.copy_iters(op.gcols))])
        sl_tile = TileLayout(S[tuple(e for e, _ in op.copy_iters(op.cols)) : tuple(s for _, s in op.copy_iters(op.cols))])
        return gl, swz_elem_layout(op, sl_tile)

    a_gl, a_sl = copy_layouts(opa)
    b_gl, b_sl = copy_layouts(opb)
    NW = NT // 32

    # ldmatrix sources: (KI, reps, matrix, row, word) in b32 words of one warp's slice of a stage.
    def ldm_iters(op, reps):
        rw = op.cols // 2
        if op.name == "A" and not op.trans:  # rows m, cols k; matrix j = (k half j//2, m half j%2)
            it = [(KI, 8), (reps, 16 * rw), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
        elif op.name == "A":  # rows k, cols m; j = (k half j//2, m half j%2)
            it = [(KI, 16 * rw), (reps, 8), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
        elif not op.trans:  # B rows n, cols k; j = (n half j//2, k half j%2)
            it = [(KI, 8), (reps, 16 * rw), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
        else:  # B rows k, cols n; j = (n half j//2, k half j%2)
            it = [(KI, 16 * rw), (reps, 8), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
        return it

    def ldm_layout(op, reps):
        it = ldm_iters(op, reps)
        tile = TileLayout(S[tuple(e for e, _ in it) : tuple(s for _, s in it)])
        return swz_word_layout(op, tile)

    a_ldm = ldm_layout(opa, MI)
    b_ldm = ldm_layout(opb, NI // 2)
    # register images
    frag_ldm = lambda reps: TileLayout(S[(reps, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])  # noqa: E731
    a_frag_ldm = frag_ldm(MI)
    b_frag_ldm = frag_ldm(NI // 2)
    a_frag_mma = TileLayout(S[(MI, 2, 8, 2, 4) : (4, 1, 4 @ laneid, 2, 1 @ laneid)])
    b_frag_mma = TileLayout(S[(NI, 8, 2, 4) : (2, 4 @ laneid, 1, 1 @ laneid)])
    acc_mma = TileLayout(S[(MI, NI, 2, 8, 4, 2) : (NI * 4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    acc_thread = TileLayout(S[(MI, NI, 2, 2) : (NI * 4, 4, 2, 1)])
    out_thread = TileLayout(S[(MI, NI, 2, 2) : (16 * N, 8, 8 * N, 1)])
    pack_thread = TileLayout(S[(MI, NI, 2, 1) : (NI * 2, 2, 1, 1)])

    # masks are needed whenever a tile can run past the global extent
    def need_row_mask(op):
        return op.grows % op.rows != 0

    def need_col_mask(op):
        return op.gcols % op.cols != 0

    a_wstride = WTM if opa.trans else WTM * opa.cols
    b_wstride = WTN if opb.trans else WTN * opb.cols
    out_vec = 2 if N % 2 == 0 else 1
    need_out_mask = (M % BM != 0) or (N % BN != 0)
    cvt_op = "cvt.rn.f16x2.f32" if ot == "float16" else "cvt.rn.bf16x2.f32"

    cp_name = {
        op.name: ("cp.async.cg.shared.global" if op.vec == 8 else "cp.async.ca.shared.global")
        for op in (opa, opb)
    }
    ldm_name = {op.name: (ldm_t if op.trans else ldm) for op in (opa, opb)}
    slow_layout = {
        op.name: swz_elem_layout(op, TileLayout(S[(op.rows, op.cols)])) for op in (opa, opb)
    }
    out_align = 8 if ot == "float32" else 4

    # ---- precomputed per-thread addresses ------------------------------------------------------
    # The swizzle XORs three row bits into the 16-byte chunk index. For every ldmatrix issued by a
    # lane, the address is swz(x_lane + d) with d a compile-time offset (k-step, repeat). When d
    # splits into bits the XOR never reads (added) and bits of the chunk index the lane part never
    # sets (XORed), swz(x + d) == (swz(x) ^ dx) + da: the lane computes swz(x) once, outside the
    # k-loop, and each ldmatrix is one XOR/add (or a register+immediate address). The split is
    # verified here for every warp and lane; an operand for which it fails keeps the generic path.
    def swz_w_expr(x, op):
        sh = swizzle_shift(op.cols)
        return x ^ (((x >> (2 + sh)) & 7) << 2)

    def swz_e_expr(x, op):
        sh = swizzle_shift(op.cols)
        return x ^ (((x >> (3 + sh)) & 7) << 3)

    def swz_w(x, op):
        return swizzle_elem(2 * x, op.cols) // 2

    def warp_word_base(op):
        w = WTM if op.name == "A" else WTN
        return w // 2 if op.trans else w * op.cols // 2

    def ldm_plan(op, reps):
        (_, skk), (_, srep), (_, sjh), (_, sjl), (_, srow), _ = ldm_iters(op, reps)
        nw = WM if op.name == "A" else WN
        wb = warp_word_base(op)
        lanes = [
            w * wb + (lane // 16) * sjh + ((lane // 8) % 2) * sjl + (lane % 8) * srow
            for w in range(nw)
            for lane in range(32)
        ]
        plan = {}
        for kk in range(KI):
            parts = []
            for rep in range(reps):
                d = kk * skk + rep * srep
                dx, da = d & 0x1C, d - (d & 0x1C)
                if any((swz_w(x, op) ^ dx) + da != swz_w(x + d, op) for x in lanes):
                    return None
                parts.append((dx, da))
            dxs = {dx for dx, _ in parts}
            steps = {parts[i + 1][1] - parts[i][1] for i in range(reps - 1)}
            if len(dxs) == 1 and len(steps) <= 1:
                plan[kk] = [(0, reps, parts[0][0], parts[0][1], steps.pop() if steps else 0)]
            else:
                plan[kk] = [(rep, 1, dx, da, 0) for rep, (dx, da) in enumerate(parts)]
        return dict(sjh=sjh, sjl=sjl, srow=srow, wb=wb, kk=plan)

    def copy_plan(op):
        if op.vec == 1:
            return None
        cpr, v = op.chunks_per_row, op.vec
        if cpr <= NT:
            reps_f = [(op.reps, NT // cpr, 0)]
        else:
            per = cpr // NT
            reps_f = [(op.reps // per, 1, 0), (per, 0, NT * v)]
        deltas = []
        for rep in range(op.reps):
            r0, c0 = op.chunk_coord(0, 0)
            r1, c1 = op.chunk_coord(0, rep)
            deltas.append((r1 - r0, c1 - c0))
        for tid in range(NT):
            r0, c0 = op.chunk_coord(tid, 0)
            base = swizzle_elem(r0 * op.cols + c0, op.cols)
            for rep, (dr, dc) in enumerate(deltas):
                r1, c1 = op.chunk_coord(tid, rep)
                if (r1 - r0, c1 - c0) != (dr, dc):
                    return None
                if swizzle_elem(r1 * op.cols + c1, op.cols) != base + dr * op.cols + dc:
                    return None
        shape = tuple(e for e, _, _ in reps_f) + (v,)
        gstr = tuple(dr * op.gcols + dc for _, dr, dc in reps_f) + (1,)
        sstr = tuple(dr * op.cols + dc for _, dr, dc in reps_f) + (1,)
        return dict(
            glayout=TileLayout(S[shape:gstr]),
            slayout=TileLayout(S[shape:sstr]),
            drow=[d[0] for d in deltas],
            dcol=[d[1] for d in deltas],
        )

    fast_ldm = {
        "A": ldm_plan(opa, MI) if cfg.precompute else None,
        "B": ldm_plan(opb, NI // 2) if cfg.precompute else None,
    }
    for op in (opa, opb):
        if fast_ldm[op.name] is None:  # generic path: the warp offset goes into the view's base
            _check_warp_offsets_neutral(op, cfg)
    fast_cp = {
        "A": copy_plan(opa) if cfg.precompute else None,
        "B": copy_plan(opb) if cfg.precompute else None,
    }
    tile_off = {"A": 0, "B": A_ELEMS}

    def warp_coord(op):  # plain Python (not parsed): the warp's index along op's tile dimension
        return T.cuda.warp_id() % WM if op.name == "A" else T.cuda.warp_id() // WM

    def copy_origin(op, kt, brow, bcol, tid):  # this thread's first chunk in global coordinates
        r0, c0 = op.chunk_coord(tid, 0)
        return ((kt * BK if op.trans else brow) + r0, (bcol if op.trans else kt * BK) + c0, r0, c0)

    @T.macro
    def store_tiles(st_op, dst, src, row_t, col_t):
        """Epilogue store of the (MI, NI, 2 row halves, *) accumulator tiles, each row half
        predicated on being inside C when the tile can cross its edge."""
        if I.constexpr(need_out_mask):
            for mi in T.unroll(MI):
                for ni in T.unroll(NI):
                    for rh in T.unroll(2):
                        T.cuda.tile.apply(
                            T.ptx[st_op],
                            dst[mi : mi + 1, ni : ni + 1, rh : rh + 1, :],
                            src[mi : mi + 1, ni : ni + 1, rh : rh + 1, :],
                            scope="thread",
                            pred=T.and_(row_t + mi * 16 + rh * 8 < M, col_t + ni * 8 < N),
                        )
        else:
            T.cuda.tile.apply(T.ptx[st_op], dst, src, scope="thread")

    @T.macro
    def cp_one(op, sv, gv, r, grow, gcol):
        ok = T.and_(grow + fast_cp[op.name]["drow"][r] < op.grows, gcol + fast_cp[op.name]["dcol"][r] < op.gcols)
        T.cuda.tile.apply(
            T.ptx[cp_name[op.name]], sv[r : r + 1, :], gv[r : r + 1, :], scope="thread",
            chunk_bytes=2 * op.vec,
            src_size=T.if_then_else(ok, T.uint32(2 * op.vec), T.uint32(0)),
        )

    @T.macro
    def load_operand_fast(op, G, SMH, stage, kt, brow, bcol):
        # per-thread views: this thread's chunks only (scope="thread"); rep offsets are immediates
        tid = T.cuda.thread_idx("x")
        org = copy_origin(op, kt, brow, bcol, tid)
        grow = org[0]
        gcol = org[1]
        r0 = org[2]
        c0 = org[3]
        gv = T.decl_tensor(
            G.ptr_to([grow, gcol]),
            ty_args=[T.Tensor((op.reps, op.vec), dt, layout=fast_cp[op.name]["glayout"], align=2 * op.vec)],
        )
        sv = T.decl_tensor(
            SMH.ptr_to([stage * STAGE_ELEMS + tile_off[op.name] + swz_e_expr(r0 * op.cols + c0, op)]),
            ty_args=[T.Tensor((op.reps, op.vec), dt, scope="shared.dyn", layout=fast_cp[op.name]["slayout"], align=2 * op.vec)],
        )
        if I.constexpr(need_row_mask(op) or need_col_mask(op)):
            _ = [cp_one(op, sv, gv, r, grow, gcol) for r in range(op.reps)]
        else:
            T.cuda.tile.apply(T.ptx[cp_name[op.name]], sv, gv, scope="thread", chunk_bytes=2 * op.vec)

    @T.macro
    def ldm_one(op, SMW, dst, stage, e):
        # e = (first repeat, repeats, xor part, add part, repeat stride) of one ldmatrix group
        lane = T.cuda.lane_id()
        w = warp_coord(op)
        pl = fast_ldm[op.name]
        lof = swz_w_expr(w * pl["wb"] + (lane // 16) * pl["sjh"] + ((lane // 8) % 2) * pl["sjl"] + (lane % 8) * pl["srow"], op)
        src = T.decl_tensor(
            SMW.ptr_to([(stage * STAGE_ELEMS + tile_off[op.name]) // 2 + (lof ^ e[2]) + e[3]]),
            ty_args=[T.Tensor((1, e[1], 4, 8, 4), "uint32", scope="shared.dyn", layout=TileLayout(S[(e[1], 4, 8, 4) : (e[4], 0, 0, 1)]), align=16)],
        )
        T.cuda.tile.apply(T.ptx[ldm_name[op.name]], dst[:, e[0] : e[0] + e[1], :, :, :], src, scope="warp")

    @T.macro
    def load_operand(op, G, SMH, stage, kt, row0, col0, gl, sl, soff):
        # Copy one (op.rows x op.cols) tile of G into stage `stage` of shared memory.
        tid = T.cuda.thread_idx("x")
        if I.constexpr(op.vec > 1):
            gv = T.decl_tensor(
                G.ptr_to([row0, col0]),
                ty_args=[T.Tensor((NW, 32, op.reps, op.vec), dt, layout=gl, align=2 * op.vec)],
            )
            sv = T.decl_tensor(
                SMH.ptr_to([stage * STAGE_ELEMS + soff]),
                ty_args=[T.Tensor((NW, 32, op.reps, op.vec), dt, scope="shared.dyn", layout=sl, align=128)],
            )
            if I.constexpr(need_row_mask(op) or need_col_mask(op)):
                for r in T.unroll(op.reps):
                    rr, cc = op.chunk_coord(tid, r)
                    ok = T.and_(row0 + rr < op.grows, col0 + cc < op.gcols)
                    T.cuda.tile.apply(
                        T.ptx[cp_name[op.name]], sv[:, :, r : r + 1, :], gv[:, :, r : r + 1, :], scope="cta",
                        chunk_bytes=2 * op.vec,
                        src_size=T.if_then_else(ok, T.uint32(2 * op.vec), T.uint32(0)),
                    )
            else:
                T.cuda.tile.apply(T.ptx[cp_name[op.name]], sv, gv, scope="cta", chunk_bytes=2 * op.vec)
        else:
            # Leading dimension not a multiple of 2 elements: no aligned cp.async exists.
            # Plain (synchronous) element copies into the same swizzled tile.
            sv1 = T.decl_tensor(
                SMH.ptr_to([stage * STAGE_ELEMS + soff]),
                ty_args=[T.Tensor((op.rows, op.cols), dt, scope="shared.dyn", layout=slow_layout[op.name], align=128)],
            )
            for r in T.unroll(op.reps):
                e = r * NT + tid
                rr = e // op.cols
                cc = e % op.cols
                ok = T.and_(row0 + rr < op.grows, col0 + cc < op.gcols)
                sv1[rr, cc] = T.if_then_else(ok, G[T.min(row0 + rr, op.grows - 1), T.min(col0 + cc, op.gcols - 1)], T.cast(0, dt))

    split = cfg.split_loads and KI >= 3  # B must still go out before the commit at k-step KI-2
    # short K loops gain nothing from the unroll; with B stored [K, N] (ldmatrix .trans for B) the
    # unrolled loop spills under NVRTC (255 registers + 496 B) and measured 242-268 TFLOP/s against
    # ~430 rolled, so those layouts stay rolled (see GemmConfig.unrolled_for)
    unrolled = cfg.unrolled_for(K, layout)
    persistent = cfg.persistent_for(K, layout)
    NTILES = GM * GN
    GRID = min(cfg.ctas, NTILES) if persistent else NTILES

    def may_load(kt):  # False for the static tail k-tiles, whose loads would all be past K
        return not isinstance(kt, int) or kt + STAGES - 1 < KT

    @T.macro
    def load_a(A, SMH, stage, kt, m0):
        if I.constexpr(fast_cp["A"] is not None):
            load_operand_fast(opa, A, SMH, stage, kt, m0, m0)
        elif I.constexpr(opa.trans):
            load_operand(opa, A, SMH, stage, kt, kt * BK, m0, a_gl, a_sl, 0)
        else:
            load_operand(opa, A, SMH, stage, kt, m0, kt * BK, a_gl, a_sl, 0)

    @T.macro
    def load_b(B, SMH, stage, kt, n0):
        if I.constexpr(fast_cp["B"] is not None):
            load_operand_fast(opb, B, SMH, stage, kt, n0, n0)
        elif I.constexpr(opb.trans):
            load_operand(opb, B, SMH, stage, kt, kt * BK, n0, b_gl, b_sl, A_ELEMS)
        else:
            load_operand(opb, B, SMH, stage, kt, n0, kt * BK, b_gl, b_sl, A_ELEMS)

    @T.macro
    def load_stage(A, B, SMH, stage, kt, m0, n0):
        load_a(A, SMH, stage, kt, m0)
        load_b(B, SMH, stage, kt, n0)

    @T.macro
    def load_frags(SMW, af, bf, buf, stage, kk, a_base, b_base):
        asrc = T.decl_tensor(
            SMW.ptr_to([(stage * STAGE_ELEMS + a_base) // 2]),
            ty_args=[T.Tensor((KI, MI, 4, 8, 4), "uint32", scope="shared.dyn", layout=a_ldm, align=16)],
        )
        bsrc = T.decl_tensor(
            SMW.ptr_to([(stage * STAGE_ELEMS + A_ELEMS + b_base) // 2]),
            ty_args=[T.Tensor((KI, NI // 2, 4, 8, 4), "uint32", scope="shared.dyn", layout=b_ldm, align=16)],
        )
        adst = T.decl_tensor(
            af.ptr_to([buf * MI * 4]),
            ty_args=[T.Tensor((1, MI, 4, 8, 4), "uint32", scope="local", layout=a_frag_ldm)],
        )
        bdst = T.decl_tensor(
            bf.ptr_to([buf * NI * 2]),
            ty_args=[T.Tensor((1, NI // 2, 4, 8, 4), "uint32", scope="local", layout=b_frag_ldm)],
        )
        if I.constexpr(fast_ldm["A"] is not None):
            _ = [ldm_one(opa, SMW, adst, stage, e) for e in fast_ldm["A"]["kk"][kk]]
        else:
            T.cuda.tile.apply(T.ptx[ldm_name["A"]], adst, asrc[kk : kk + 1, :, :, :, :], scope="warp")
        if I.constexpr(fast_ldm["B"] is not None):
            _ = [ldm_one(opb, SMW, bdst, stage, e) for e in fast_ldm["B"]["kk"][kk]]
        else:
            T.cuda.tile.apply(T.ptx[ldm_name["B"]], bdst, bsrc[kk : kk + 1, :, :, :, :], scope="warp")

    # mma issue order over the warp tile: serpentine keeps one B fragment live across the turn
    mma_pairs = [
        (mi, ni)
        for mi in range(MI)
        for ni in (range(NI) if (mi % 2 == 0 or cfg.mma_order == "row") else reversed(range(NI)))
    ]

    @T.macro
    def mma_step(acc, af, bf, buf):
        d = T.decl_tensor(acc.ptr_to([0]), ty_args=[T.Tensor((MI, NI, 16, 8), "float32", scope="local", layout=acc_mma)])
        a = T.decl_tensor(af.ptr_to([buf * MI * 4]), ty_args=[T.Tensor((MI, 1, 16, 8), "uint32", scope="local", layout=a_frag_mma)])
        b = T.decl_tensor(bf.ptr_to([buf * NI * 2]), ty_args=[T.Tensor((NI, 1, 8, 8), "uint32", scope="local", layout=b_frag_mma)])
        if I.constexpr(cfg.mma_order == "row"):
            T.cuda.tile.apply(T.ptx[mma_op], d, a, b, d, scope="warp")
        else:
            _ = [
                T.cuda.tile.apply(
                    T.ptx[mma_op],
                    d[pr[0] : pr[0] + 1, pr[1] : pr[1] + 1, :, :],
                    a[pr[0] : pr[0] + 1, :, :, :],
                    b[pr[1] : pr[1] + 1, :, :, :],
                    d[pr[0] : pr[0] + 1, pr[1] : pr[1] + 1, :, :],
                    scope="warp",
                )
                for pr in mma_pairs
            ]

    @T.macro
    def load_part(A, B, SMH, stage, kt, m0, n0, part):
        if I.constexpr(part == "A"):
            load_a(A, SMH, stage, kt, m0)
        elif I.constexpr(part == "B"):
            load_b(B, SMH, stage, kt, n0)
        else:
            load_stage(A, B, SMH, stage, kt, m0, n0)

    @T.macro
    def ahead_load(A, B, SMH, rs, kt, m0, n0, nxt, part):
        # k-tile kt+STAGES-1 of this tile, or (persistent kernel) past the end of the tile the
        # first k-tiles of the CTA's next tile, nxt = (m0, n0, exists)
        if I.constexpr(nxt is None):
            if kt + STAGES - 1 < KT:
                load_part(A, B, SMH, (rs + STAGES - 1) % STAGES, kt + STAGES - 1, m0, n0, part)
        else:
            # one copy of the load code with selected coordinates (two would double the body)
            if T.or_(kt + STAGES - 1 < KT, nxt[2]):
                over = kt + STAGES - 1 >= KT
                lkt = T.Select(over, kt + STAGES - 1 - KT, kt + STAGES - 1)
                lm0 = T.Select(over, nxt[0], m0)
                ln0 = T.Select(over, nxt[1], n0)
                load_part(A, B, SMH, (rs + STAGES - 1) % STAGES, lkt, lm0, ln0, part)

    @T.macro
    def kstep(A, B, SMH, SMW, acc, af, bf, kt, rs, kk, m0, n0, a_base, b_base, nxt):
        # fragments of the next k-step (of the next stage after the last k-step)
        if I.constexpr(kk == KI - 1):
            load_frags(SMW, af, bf, (kk + 1) % 2, (rs + 1) % STAGES, 0, a_base, b_base)
        else:
            load_frags(SMW, af, bf, (kk + 1) % 2, rs, kk + 1, a_base, b_base)
        # cp.async of tile kt+STAGES-1 into the stage every warp finished reading before the
        # previous barrier; A and B go out in different k-steps when there are enough of them
        if I.constexpr(kk == 0 and may_load(kt)):
            ahead_load(A, B, SMH, rs, kt, m0, n0, nxt, "A" if split else "AB")
        if I.constexpr(split and kk == 1 and may_load(kt)):
            ahead_load(A, B, SMH, rs, kt, m0, n0, nxt, "B")
        if I.constexpr(kk == KI - 2 and not cfg.sync_after_mma):
            T.ptx["cp.async.commit_group"]()
            T.ptx["cp.async.wait_group"](STAGES - 2)
            T.cuda.cta_sync()
        mma_step(acc, af, bf, kk % 2)
        if I.constexpr(kk == KI - 2 and cfg.sync_after_mma):
            # the barrier only orders shared memory: this k-step's mma (registers only) is issued
            # first so the tensor pipe has queued work while the warp waits
            T.ptx["cp.async.commit_group"]()
            T.ptx["cp.async.wait_group"](STAGES - 2)
            T.cuda.cta_sync()

    @T.macro
    def kstep_scoped(A, B, SMH, SMW, acc, af, bf, kt, rs, kk, m0, n0, a_base, b_base, nxt):
        # a one-trip loop closes the scope of the k-step's variables, so TIRx's layout and flatten
        # passes do not carry every earlier k-step's bindings (3x faster on the unrolled loop); it
        # disappears in lowering and the CUDA is unchanged (tests/test_cuda_gemm_golden.py)
        for _scope in T.unroll(1):
            kstep(A, B, SMH, SMW, acc, af, bf, kt, rs, kk, m0, n0, a_base, b_base, nxt)

    @T.macro
    def k_tiles(A, B, SMH, SMW, acc, af, bf, kt0, count, m0, n0, a_base, b_base, nxt):
        # k-tiles kt0 .. kt0+count-1 with static stages 0 .. count-1 (kt0 a multiple of STAGES)
        _ = [
            kstep_scoped(A, B, SMH, SMW, acc, af, bf, kt0 + s, s, kk, m0, n0, a_base, b_base, nxt)
            for s in range(count)
            for kk in range(KI)
        ]

    def tile_origin(t):  # plain Python: (m0, n0) of output tile t >= 0 in the rasterized order
        # GROUP block rows sweep N together (L2 reuse of A and B panels); bind the results to
        # variables before use (a runtime divisor lowers to a let-expression)
        width = GROUP * GN
        first_m = T.truncdiv(t, width) * GROUP
        gsz = T.min(GM - first_m, GROUP)
        return (first_m + T.truncmod(T.truncmod(t, width), gsz)) * BM, T.truncdiv(T.truncmod(t, width), gsz) * BN

    @T.macro
    def prologue(A, B, SMH, SMW, af, bf, m0, n0, a_base, b_base):
        # STAGES-1 k-tiles in flight, then the first k-step's fragments
        for s in T.unroll(STAGES - 1):
            if s < KT:
                load_stage(A, B, SMH, s, s, m0, n0)
            T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](STAGES - 2)
        T.cuda.cta_sync()
        load_frags(SMW, af, bf, 0, 0, 0, a_base, b_base)

    @T.macro
    def zero(acc):
        for i in T.unroll(MI * NI * 4):
            acc[i] = T.float32(0)

    @T.macro
    def epilogue(C, acc, m0, n0, wm, wn, lane):
        row_t = m0 + wm * WTM + lane // 4
        col_t = n0 + wn * WTN + (lane % 4) * 2
        accv = T.decl_tensor(acc.ptr_to([0]), ty_args=[T.Tensor((MI, NI, 2, 2), "float32", scope="local", layout=acc_thread)])
        if I.constexpr(out_vec == 2):
            cview = T.decl_tensor(C.ptr_to([row_t, col_t]), ty_args=[T.Tensor((MI, NI, 2, 2), ot, layout=out_thread, align=out_align)])
            if I.constexpr(ot == "float32"):
                store_tiles("st.global.v2.f32", cview, accv, row_t, col_t)
            else:
                packed = T.alloc_tensor(ty_args=[T.Tensor((MI * NI * 2,), "uint32", scope="local", layout="default")])
                pv = T.decl_tensor(packed.ptr_to([0]), ty_args=[T.Tensor((MI, NI, 2, 1), "uint32", scope="local", layout=pack_thread)])
                # cvt.rn.{f16,bf16}x2.f32 d, hi, lo: column c2=1 goes to the high half
                T.cuda.tile.apply(T.ptx[cvt_op], pv, accv[:, :, :, 1:2], accv[:, :, :, 0:1], scope="thread")
                cw = T.decl_tensor(C.ptr_to([row_t, col_t]), ty_args=[T.Tensor((MI, NI, 2, 1), "uint32", layout=TileLayout(S[(MI, NI, 2, 1) : (8 * N, 4, 4 * N, 1)]), align=4)])
                store_tiles("st.global.b32", cw, pv, row_t, col_t)
        else:
            # odd N: rows are not 4/8-byte aligned; scalar stores
            for mi in T.unroll(MI):
                for ni in T.unroll(NI):
                    for rh in T.unroll(2):
                        for c2 in T.unroll(2):
                            r = row_t + mi * 16 + rh * 8
                            c = col_t + ni * 8 + c2
                            if T.and_(r < M, c < N):
                                C[r, c] = T.cast(accv[mi, ni, rh, c2], ot)

    @T.function
    def main(A: T.Tensor(a_shape, dt), B: T.Tensor(b_shape, dt), C: T.Tensor((M, N), ot)):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=GRID, block=NT, dynamic_smem_bytes=SMEM_ELEMS * 2)
        )
        pid = T.cuda.block_idx("x")
        warp = T.cuda.warp_id()
        lane = T.cuda.lane_id()
        wm = warp % WM
        wn = warp // WM

        SMH = T.alloc_tensor(ty_args=[T.Tensor((SMEM_ELEMS,), dt, scope="shared.dyn", layout="default", align=1024)])
        SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((SMEM_ELEMS // 2,), "uint32", scope="shared.dyn", layout="default", align=1024)])
        acc = T.alloc_tensor(ty_args=[T.Tensor((MI * NI * 4,), "float32", scope="local", layout="default")])
        af = T.alloc_tensor(ty_args=[T.Tensor((2 * MI * 4,), "uint32", scope="local", layout="default")])
        bf = T.alloc_tensor(ty_args=[T.Tensor((2 * NI * 2,), "uint32", scope="local", layout="default")])
        zero(acc)
        a_base = wm * a_wstride
        b_base = wn * b_wstride

        if I.constexpr(persistent):
            # tiles pid, pid + GRID, ...; the pipeline runs on from one tile into the next
            org0 = tile_origin(pid)
            first_m0 = org0[0]
            first_n0 = org0[1]
            prologue(A, B, SMH, SMW, af, bf, first_m0, first_n0, a_base, b_base)
            for it in range(T.truncdiv(NTILES - 1 - pid, GRID) + 1):
                t = pid + it * GRID
                org = tile_origin(t)
                m0 = org[0]
                n0 = org[1]
                nxt = tile_origin(T.min(t + GRID, NTILES - 1))
                next_m0 = nxt[0]
                next_n0 = nxt[1]
                has_next = t + GRID < NTILES
                for ko in range(KT // STAGES):
                    k_tiles(A, B, SMH, SMW, acc, af, bf, ko * STAGES, STAGES, m0, n0, a_base, b_base, (next_m0, next_n0, has_next))
                epilogue(C, acc, m0, n0, wm, wn, lane)
                zero(acc)
            T.ptx["cp.async.wait_group"](0)
        else:
            org = tile_origin(pid)
            m0 = org[0]
            n0 = org[1]
            prologue(A, B, SMH, SMW, af, bf, m0, n0, a_base, b_base)
            if I.constexpr(unrolled):
                # unrolled by the stage count: every shared-memory stage offset is a constant
                for ko in range(KT // STAGES):
                    k_tiles(A, B, SMH, SMW, acc, af, bf, ko * STAGES, STAGES, m0, n0, a_base, b_base, None)
                k_tiles(A, B, SMH, SMW, acc, af, bf, KT - KT % STAGES, KT % STAGES, m0, n0, a_base, b_base, None)
            else:
                for kt in range(KT):
                    _ = [kstep(A, B, SMH, SMW, acc, af, bf, kt, kt % STAGES, kk, m0, n0, a_base, b_base, None) for kk in range(KI)]
            T.ptx["cp.async.wait_group"](0)
            epilogue(C, acc, m0, n0, wm, wn, lane)

    return main


@dataclass(frozen=True)
class CudaBuild:
    """A compiled CUDA GEMM: the generated CUDA C and the exported TIRx library (host code plus the
    CUDA module, which the loading machine compiles with the chosen device compiler)."""

    source: str
    library: bytes

    def export_library(self, path) -> str:
        """Write the library for ``tvm_ffi.load_module`` (see ``cuda_runner.load_kernel``)."""
        with open(path, "wb") as f:
            f.write(self.library)
        return str(path)


def build(M, N, K, dtype="f16", layout="nt", out_dtype="f32", config=None, arch="sm_80", compiler=None,
          cache=True) -> CudaBuild:
    """Compile for CUDA.

    ``compiler``: the device compiler that turns the generated CUDA C into machine code when the
    module is loaded: None for TIRx's default (NVRTC), or ``"nvcc"`` / ``"nvrtc"`` (TIRx's
    ``backend_config``; the loading machine must have it). ``cache``: read and write the on-disk
    build cache (``tvm_cdna4.cache``), keyed by every argument here and the resolved config."""
    from ..cache import cached

    if compiler is not None and compiler not in ("nvcc", "nvrtc"):
        raise ValueError(f"compiler must be 'nvcc' or 'nvrtc' (or None for TIRx's default), got {compiler!r}")
    cfg = config or default_config(dtype, M, N)
    key = dict(M=M, N=N, K=K, dtype=_short_dtype(dtype), layout=layout.lower(), out_dtype=_short_out(out_dtype),
               config=cfg.as_dict(), arch=arch, compiler=compiler)
    blobs = cached("cuda-gemm", key, lambda: _compile(M, N, K, dtype, layout, out_dtype, cfg, arch, compiler),
                   enabled=cache)
    return CudaBuild(source=blobs["source"].decode(), library=blobs["library"])


def _compile(M, N, K, dtype, layout, out_dtype, cfg, arch, compiler) -> dict[str, bytes]:
    """Run TIRx: the CUDA source and the exported library, as cache blobs."""
    import os
    import tempfile

    import tvm_tirx
    from tvm_tirx.target import Target

    from ..tirx_private import shared_cuda_lowering

    func = cuda_gemm(M, N, K, dtype, layout, out_dtype, cfg)
    attrs = {"kind": "cuda", "arch": arch}
    if compiler is not None:
        attrs["backend_config"] = {"cuda": {"compiler": compiler}}
    with shared_cuda_lowering():
        exe = tvm_tirx.tirx.compile(func, target=Target(attrs), pipeline="tirx")
    with tempfile.TemporaryDirectory(prefix="tvm_cdna4_cuda_") as tmp:
        path = os.path.join(tmp, "gemm.so")
        exe.export_library(path)
        with open(path, "rb") as f:
            library = f.read()
    return {"source": exe.mod.imports[0].inspect_source().encode(), "library": library}


def cuda_source(exe) -> str:
    """The generated CUDA C source of a built kernel."""
    return exe.source
