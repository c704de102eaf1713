"""The weight-streaming decode GEMM for CUDA (small M, layout ``nt``): pure Python, no TIRx.

``C[M, N] = x[M, K] @ W[N, K]^T`` for M <= ``DECODE_MAX_M`` tokens is a stream over the weights W: each element of
W is used M times, so the kernel has to read W at the memory roofline, and nothing else matters.
The decode kernel (``kernels.sm80.decode_emit.emit_decode``) computes ``C^T = W x^T`` with
``mma.sync.m16n8k16``: W's rows are the MMA's M dimension (16 output columns per m16 tile), the
tokens its N dimension (``token_tiles``: one n8 MMA per 8 tokens, up to four). The planners weigh it up to
``decode_limit()``: ``DECODE_WEIGHED_M`` (timed), ``DECODE_MAX_M`` where ``WEIGH_WIDE_DECODE`` is on (3 and 4 token
tiles, untimed). W and x reach the fragments in
16-byte chunks through each warp's own ``cp.async`` pipeline (``stages``; ``ld.shared.v4.b32`` into the
fragment words), or, where K is not a multiple of 8, by element loads straight into registers:

* **K permutation.** The m16n8k16 A fragment gives lane (g = lane / 4, t = lane % 4) the rows g and
  g + 8 at the k-slots {2t, 2t+1, 2t+8, 2t+9}. A permutation of K applied to both operands leaves
  the sum unchanged, so a 16-byte load of ``W[row, k0 + 8t .. k0 + 8t + 7]`` feeds two consecutive
  k16 MMA steps (words 0, 1 -> step 0, words 2, 3 -> step 1): the 4 lanes of a group cover 32
  consecutive k. The B fragment (x) then needs ``x[token g, k0 + 8t .. k0 + 8t + 7]``: one 16-byte
  chunk as well (``cp.async.ca``, L1-allocating: every CTA reads x; W ``cp.async.cg``).
* **Warps split K.** The ``warps`` warps of a CTA share its ``16 * row_tiles`` rows and take the
  K iterations (``32 * unroll`` k each) round robin; their f32 partials are added in shared memory.
* **Split-K across CTAs** (``split_k``) when the row blocks do not fill the GPU: the same workspace
  and ticket epilogue as the tile kernel (``"atomic"``: ``red.global.add.f32``; ``"ordered"``:
  one slice each, summed in index order by the last CTA).
* **Edges.** Rows past N and tokens past M load clamped addresses (their outputs are never stored);
  chunks past K and iterations past a slice copy zeros (``src-size`` 0); K not a multiple of 8 (rows
  not 16-byte aligned) reads W and x element by element (``DecodePlan.vector`` 1), correct and slow.

:func:`plan_decode` returns a frozen :class:`DecodePlan`; :func:`decode_estimate` is its cost model
(docs/cuda_gemm.md, "The decode kernel"); :func:`choose_kernel` picks, for any problem, the decode
plan or the tile GEMM (``kernels.sm80.gemm_plan.choose_config``), whichever the models say is faster;
:func:`plan_any` plans either kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import attrs

from ..common import PlanRecord, check_config

from .gemm_config import DTYPES, MMA, OUT_DTYPES, GemmConfig, _short_dtype, _short_out
from .gemm_cost import H200_SMS, Device, candidates, choose_config, estimate
from .gemm_plan import bucket_summary, check_dynamic, check_fusion, plan, planned_m
from ..gemm.dynamic_m import MBucket, ceil_div, extent_record, resolve_m
from ..gemm.epilogue import Fusion, Param
from ..gemm import offsets
from ...errors import ContractError

DECODE_MAX_M = 32
"""Largest M the decode kernel takes (four n8 MMA tiles of tokens: ``token_tiles``)."""
DECODE_WEIGHED_M = 16
"""Largest M the planners give the decode kernel while ``WEIGH_WIDE_DECODE`` is off: the M it was timed at
(1.0x torch.matmul and more at M = 1 and 8 on the H100, benchmarks/RESULTS.md)."""
WEIGH_WIDE_DECODE = False
"""Whether the planners weigh the decode kernel up to ``DECODE_MAX_M`` (3 and 4 token tiles: sm80's
``choose_kernel`` / ``ranked_configs``, sm90's ``choose`` and dynamic-M bucket; ``decode_limit``); off until timed
(benchmarks/torch_gemm.py ``--wide-decode off,on``)."""
PLAN_FLAGS = (("sm80.decode_plan", "WEIGH_WIDE_DECODE"),)
"""The decode kernel's switches (``kernels.flags``: ``(module, name)`` dotted from ``tvm_cdna4.kernels``): what
``decode_limit`` reads; in every family's that plans a decode bucket."""

LOAD_W = "ld.global.nc.L1::no_allocate.v4.b32"
"""W: read once, so it bypasses L1."""
LOAD_X = "ld.global.nc.v4.b32"
"""x: read by every CTA, so L1-cached."""
COPY_W = "cp.async.cg.shared.global"
COPY_X = "cp.async.ca.shared.global"


@dataclass(frozen=True)
class DecodeConfig:
    """Tiling of the decode kernel (``kind`` "decode"; the tile GEMM's ``GemmConfig`` is "tile")."""

    warps: int = 8
    """Warps per CTA; they split the CTA's K range round robin and add their partials in shared memory."""
    row_tiles: int = 2
    """m16 tiles of W rows per CTA (``block_m``-like: the CTA computes 16 * row_tiles outputs per token)."""
    unroll: int = 2
    """16-byte chunks per lane per row in one K iteration: an iteration covers ``32 * unroll`` k."""
    split_k: int = 1
    """CTAs per row block, each a contiguous range of the K iterations."""
    reduction: str = "atomic"
    """Split-K reduction, as in ``GemmConfig``: ``"atomic"`` or ``"ordered"`` (bit-reproducible)."""
    stages: int = 3
    """cp.async stages of each warp's own pipeline (K a multiple of 8): ``stages - 1`` iterations of
    W and x are in flight while the warp computes one."""
    line_copy: bool = True
    """How the lanes copy a stage: True, whole lines (lane l copies chunk l of each slot's 8 rows x
    ``64 * unroll`` bytes: 128-byte lines per row at unroll 2), stored XOR-swizzled so the fragment reads
    stay conflict-free, with ``__syncwarp`` around the reads (measured 1.10x faster on the H200); False,
    each lane its own fragment chunks (a warp instruction reads 8 rows x 64 bytes, and no lane reads
    another's chunk: no barrier)."""

    kind = "decode"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def block_rows(self) -> int:
        return 16 * self.row_tiles

    def stage_chunks(self, token_tiles: int) -> int:
        """16-byte chunks per lane in one stage: ``unroll x (2 row halves x row_tiles + token_tiles)``."""
        return self.unroll * (2 * self.row_tiles + token_tiles)

    def smem_bytes(self, token_tiles: int) -> int:
        """Dynamic shared memory: every warp's ``stages`` stages of ``32 x stage_chunks`` 16-byte chunks."""
        return self.warps * self.stages * 32 * 16 * self.stage_chunks(token_tiles)

    def check(self) -> None:
        if self.warps not in (1, 2, 4, 8, 16):
            raise ValueError("decode warps must be 1, 2, 4, 8 or 16")
        if self.row_tiles not in (1, 2, 4):
            raise ValueError("decode row_tiles must be 1, 2 or 4")
        if self.unroll not in (1, 2, 4, 8):
            raise ValueError("decode unroll must be 1, 2, 4 or 8")
        if self.stages < 2:
            raise ValueError("decode stages must be at least 2")
        if self.smem_bytes(2) > Device().smem:  # at two token tiles; more tiles: check_decode, at the plan's
            raise ValueError(f"decode config needs {self.smem_bytes(2)} B of shared memory (> {Device().smem} B)")
        if self.split_k < 1:
            raise ValueError("split_k must be at least 1")
        if self.reduction not in ("atomic", "ordered"):
            raise ValueError("reduction must be 'atomic' or 'ordered'")

    def as_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


def config_from_dict(d: dict) -> GemmConfig | DecodeConfig:
    """A config from its ``as_dict`` (``kind`` "decode" or a tile ``GemmConfig`` without one)."""
    d = dict(d)
    if d.pop("kind", "tile") == "decode":
        return DecodeConfig(**d)
    return GemmConfig(**d)


@attrs.frozen
class DecodeLoop:
    """The K iterations of one CTA."""

    span: int
    """k per iteration: ``32 * unroll`` (4 lanes x 8 elements per chunk, ``unroll`` chunks)."""
    iters: int
    """Iterations over the whole K: ``ceil(K / span)``."""
    full: int
    """Iterations wholly inside K (``K // span``); iteration ``full`` (when ``< iters``) is masked."""
    slice_iters: int
    """Iterations per K slice (CTA); the last slice may hold fewer."""
    per_warp: int
    """Loop trips per warp: ``ceil(slice_iters / warps)`` (warp w takes iterations w, w + warps, ...)."""


@attrs.frozen
class DecodePlan(PlanRecord, family="gemm"):
    """The whole decode kernel for one static problem (or a bucket of M: ``dynamic_m``): what
    ``kernels.sm80.decode_emit.emit_decode`` spells."""

    M: int
    """Tokens: an int, or the TIR variable ``M`` of a dynamic-M plan (``kernels.sm80.gemm_plan.Extent``)."""
    N: int
    K: int
    dtype: str
    """TIR dtype of x and W."""
    out_dtype: str
    """TIR dtype of C."""
    layout: str
    """``nt`` (x [M, K], W [N, K]: both K-contiguous)."""
    config: DecodeConfig
    token_tiles: int
    """n8 MMA tiles of tokens: ``token_tiles(M)`` (1 to 4) of the largest M."""
    vector: int
    """Elements per W / x load: 8 (one 16-byte ``ld.global.nc.v4.b32``; K a multiple of 8) or 1 (plain
    element loads packed in pairs)."""
    load_w: str
    load_x: str
    mma_instr: str
    loop: DecodeLoop
    row_blocks: int
    """CTAs along N: ``ceil(N / (16 * row_tiles))``."""
    k_splits: int
    """CTAs along K (``split_k``, less any slice that would be empty)."""
    ctas: int
    """``row_blocks * k_splits``; CTA ``pid`` takes row block ``pid % row_blocks``, slice ``pid // row_blocks``."""
    threads: int
    pipelined: bool
    """W and x through each warp's cp.async pipeline (``stages``; K a multiple of 8), else straight to
    registers (element loads)."""
    copy_w: str
    copy_x: str
    """``cp.async.cg`` (W: L2 only) and ``cp.async.ca`` (x: L1 too, every CTA reads it)."""
    line_copy: bool
    """``DecodeConfig.line_copy`` (pipelined plans only)."""
    smem_bytes: int
    """Dynamic shared memory of the pipeline (0 without it)."""
    smem_floats: int
    """Shared f32 words of the warps' partials (``warps x row_tiles x token_tiles x 4 x 32``)."""
    out_per_thread: int
    """Output elements per thread in the epilogue (``ceil(min(M, 8 * token_tiles) * block_rows / threads)``)."""
    reduce_instr: str | None
    """Split-K: ``red.global.add.f32`` (atomic) or ``st.global.f32`` (ordered); None without a split."""
    params: tuple[Param, ...]
    """A (x), B (W), C, the fused epilogue's inputs (``Fusion.params``), and with a split the workspace
    ``W`` and tickets ``S`` (as ``GemmPlan.params``)."""
    fusion: Fusion = Fusion()
    """The fused epilogue (``kernels.gemm.epilogue``), applied to each output's f32 sum (after the split-K
    reduction: by the last CTA) just before its conversion and store; ``Fusion()`` fuses nothing."""
    dynamic_m: MBucket | None = None
    """Dynamic M (``GemmPlan.dynamic_m``): the bucket of token counts served (the token tiles and the
    workspace are sized for its largest); None: M is static."""
    offsets64: tuple[str, ...] = ()
    """The parameters indexed with 64-bit offsets (``GemmPlan.offsets64``; the decode kernel clamps or
    guards every index, so: those of 2^31 elements or more, W's ``[N, K]`` weights of a large vocabulary)."""

    @property
    def kind(self) -> str:
        return "decode"


def token_tiles(M: int) -> int:
    """n8 MMA tiles of tokens for M tokens (``DecodePlan.token_tiles``)."""
    return ceil_div(M, 8)


def decode_fits(M: int, layout: str) -> bool:
    """Whether the decode kernel takes the problem: M <= ``DECODE_MAX_M`` and layout ``nt``."""
    return M <= DECODE_MAX_M and layout.lower() == "nt"


def decode_limit() -> int:
    """The largest M the planners weigh the decode kernel at: ``DECODE_MAX_M`` where ``WEIGH_WIDE_DECODE``, else
    ``DECODE_WEIGHED_M``."""
    return DECODE_MAX_M if WEIGH_WIDE_DECODE else DECODE_WEIGHED_M


def decode_weighed(M: int, layout: str) -> bool:
    """Whether the planners weigh the decode kernel for the problem: it fits and M <= ``decode_limit()``."""
    return decode_fits(M, layout) and M <= decode_limit()


def plan_decode(M: int | MBucket, N: int, K: int, dtype: str = "bf16", layout: str = "nt", out_dtype: str = "bf16",
                config: DecodeConfig | None = None, fusion: Fusion = Fusion()) -> DecodePlan:
    """The decode plan of ``C[M, N] = epilogue(x @ W^T)`` (``config`` None: ``DecodeConfig()``; ``fusion``:
    the fused epilogue; ``M`` an ``MBucket``: dynamic M, for every token count of the bucket)."""
    cfg = config or DecodeConfig()
    cfg.check()
    M, bucket, m_max = resolve_m(M, "plan_decode")
    if min(m_max, N, K) < 1:
        raise ValueError("M, N, K must be positive")
    check_decode(m_max, layout, cfg)
    dt, ot = DTYPES[_short_dtype(dtype)], OUT_DTYPES[_short_out(out_dtype)]
    span = 32 * cfg.unroll
    iters = ceil_div(K, span)
    slice_iters = ceil_div(iters, min(cfg.split_k, iters))
    splits = ceil_div(iters, slice_iters)
    loop = DecodeLoop(span, iters, K // span, slice_iters, ceil_div(slice_iters, cfg.warps))
    tt = token_tiles(m_max)
    rows = ceil_div(N, cfg.block_rows)
    ab = "f16" if dt == "float16" else "bf16"
    params = (Param("A", (M, K), dt), Param("B", (N, K), dt), Param("C", (M, N), ot),
              *check_fusion(fusion).params(M, N, ot))
    reduce_instr = None
    if splits > 1:
        ordered = cfg.reduction == "ordered"
        reduce_instr = "st.global.f32" if ordered else "red.global.add.f32"
        params += (Param("W", (splits if ordered else 1, m_max, N), "float32"), Param("S", (rows,), "uint32"))
    outs = ceil_div(min(m_max, 8 * tt) * cfg.block_rows, cfg.threads)
    wide = decode_offsets(params, m_max, rows * splits)
    return DecodePlan(M, N, K, dt, ot, "nt", replace(cfg, split_k=splits), tt, 8 if K % 8 == 0 else 1, LOAD_W, LOAD_X,
                      MMA.format(t=ab), loop, rows, splits, rows * splits,
                      cfg.threads, K % 8 == 0, COPY_W, COPY_X, cfg.line_copy and K % 8 == 0,
                      cfg.smem_bytes(tt) if K % 8 == 0 else 0,
                      cfg.warps * cfg.row_tiles * tt * 4 * 32, outs, reduce_instr, params, fusion, bucket, wide)


def check_decode(m_max: int, layout: str, cfg: DecodeConfig) -> None:
    """A ``ContractError`` naming the operand where the decode kernel does not take the problem: layout ``nt``, x's
    (A's) M <= ``DECODE_MAX_M`` (the largest M of a bucket), the pipeline's stages of ``token_tiles(M)`` within
    shared memory."""
    if layout.lower() != "nt":
        raise ContractError("sm80 decode GEMM layout: x [M, K] and W [N, K], both K-contiguous", operand="layout",
                            check="shape", expected="nt", found=layout)
    if m_max > DECODE_MAX_M:
        raise ContractError(f"sm80 decode GEMM A: the decode kernel takes M <= {DECODE_MAX_M} tokens (n8 token tiles)",
                            operand="A", check="shape", expected=f"M <= {DECODE_MAX_M}", found=f"M={m_max}")
    smem = cfg.smem_bytes(token_tiles(m_max))
    if smem > Device().smem:
        raise ContractError("sm80 decode GEMM config: the pipeline's stages exceed shared memory", operand="config",
                            check="parameters", expected=f"<= {Device().smem} B",
                            found=f"{smem} B at {token_tiles(m_max)} token tiles")


def decode_offsets(params, m_max: int, ctas: int) -> tuple[str, ...]:
    """``DecodePlan.offsets64``: the parameters of 2^31 elements or more (every index of the kernel is
    clamped into its tensor or guarded); a ``ContractError`` naming the operand for an extent, or CTAs,
    of 2^31 or more (``kernels.gemm.offsets``)."""
    tensors = {}
    for q in params:
        shape = tuple(d if isinstance(d, int) else m_max for d in q.shape)
        for axis, extent in enumerate(shape):
            offsets.check_extent("sm80 decode GEMM", q.name, f"dimension {axis}", extent)
        tensors[q.name] = (shape, ())
    offsets.check_extent("sm80 decode GEMM", "C", "the CTAs", ctas)
    return offsets.offsets64(tensors)


# ----------------------------------------------------------------------------------------------
# The cost model of the decode kernel (docs/cuda_gemm.md, "The decode kernel")
# ----------------------------------------------------------------------------------------------


@attrs.frozen
class DecodeEstimate:
    """The decode cost model's figures for one config of one problem."""

    ctas: int
    per_sm: int
    """CTAs resident per SM (threads, registers, shared memory)."""
    waves: int
    inflight_bytes: int
    """W bytes one CTA has in flight (every warp's loads of one iteration)."""
    bytes: int
    """HBM traffic: W, x and C once, plus the split-K workspace."""
    time_s: float
    roofline_s: float

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_s / self.time_s


def decode_registers(cfg: DecodeConfig, token_tiles: int) -> int:
    """Registers per thread the model assumes: 24 (addresses, loop) + half the W and x words of an iteration
    (ptxas interleaves the shared loads with the MMAs) + the accumulators; ptxas -v gave 42-60 for the
    configs of benchmarks/journal/2026-12.md, 140-141 (model 136, no spills) for four token tiles of 4 row tiles
    at unroll 2 (sm_90a, journal "Stop 50: decode32")."""
    return min(255, 24 + 2 * cfg.unroll * (2 * cfg.row_tiles + token_tiles) + 4 * cfg.row_tiles * token_tiles)


def decode_estimate(M: int, N: int, K: int, cfg: DecodeConfig, out_bytes: int = 2, dev: Device = Device()) -> DecodeEstimate:
    """The busiest SM streams its CTAs' W and x rows at what its resident CTAs' bytes in flight allow
    (``min(decode_sm_bytes_s, CTAs x bytes in flight / decode_latency_s)``, Little's law); the whole
    GPU streams W, plus the flush's dirty lines (``dirty_bytes``),
    at ``decode_bytes_s``; the larger of the two, plus the fixed costs (``launch_s``, ``stream_ramp_s``),
    x, C and a split's workspace at HBM speed and the split's ``split_s``; ``half_line`` for plans whose
    copies take half lines."""
    tt = token_tiles(M)
    rows = ceil_div(N, cfg.block_rows)
    iters = ceil_div(K, 32 * cfg.unroll)
    splits = ceil_div(iters, ceil_div(iters, min(cfg.split_k, iters)))
    ctas = rows * splits
    smem = cfg.warps * cfg.row_tiles * tt * 4 * 32 * 4 + (cfg.smem_bytes(tt) if K % 8 == 0 else 0)
    per_sm = max(1, min(2048 // cfg.threads, dev.regs // (decode_registers(cfg, tt) * cfg.threads),
                        dev.smem // max(smem, 1), 32))
    n = ceil_div(ctas, dev.sms)  # CTAs on the busiest SM
    waves = ceil_div(n, per_sm)
    # W bytes in flight per CTA: each warp keeps ``stages - 1`` iterations of its pipeline in flight
    inflight = cfg.warps * 512 * cfg.unroll * 2 * cfg.row_tiles * (cfg.stages - 1)
    if K % 8:  # element loads straight to registers (rows not 16-byte aligned): 2 bytes a load, no pipeline
        inflight = cfg.warps * 64 * cfg.unroll * 2 * cfg.row_tiles
    k_len = min(K, ceil_div(iters, splits) * 32 * cfg.unroll)
    cta_bytes = (cfg.block_rows + min(M, 8 * tt)) * 2 * k_len  # its W rows and the x rows it reads
    bw = min(dev.decode_sm_bytes_s, min(per_sm, n) * inflight / dev.decode_latency_s)
    sm = n * cta_bytes / bw
    w_bytes = 2 * N * K
    stream = max(sm, (w_bytes + min(w_bytes, dev.dirty_bytes)) / dev.decode_bytes_s)
    work = 4 * M * N * (splits + 1) if splits > 1 else 0
    x_bytes, base = 2 * M * K, 2 * (M * K + N * K) + out_bytes * M * N
    time = dev.launch_s + dev.stream_ramp_s + stream + (x_bytes + out_bytes * M * N + work) / dev.hbm_bytes_s
    if splits > 1:
        time += dev.split_s
    if not (cfg.line_copy and cfg.unroll >= 2 and K % 8 == 0):
        time *= dev.half_line
    roof = max(2 * M * N * K / dev.roof_flops, base / dev.roof_bytes_s)
    return DecodeEstimate(ctas, per_sm, waves, inflight, base + work, time, roof)


def decode_candidates(M: int, N: int, K: int) -> list[DecodeConfig]:
    """The decode configs the planner weighs: whole-line copies (``line_copy``; 1.10x faster than the
    fragment-chunk copies on the H200, benchmarks/journal/2026-12.md), 8 or 4 warps, 2/4/1 row tiles, unroll
    2 or 4, 3/4/6 stages, K split in 1..16 slices of at least one iteration per warp, within shared memory at
    ``token_tiles(M)`` (at least 2: M <= 16 weighs the same list at 1 and 2). Ties keep the earlier candidate."""
    out, tt = [], max(2, token_tiles(M))
    for stages in (3, 4, 6):
        for warps in (8, 4):
            for rt in (2, 4, 1):
                for unroll in (2, 4):
                    iters = ceil_div(K, 32 * unroll)
                    for split in (1, 2, 3, 4, 6, 8, 12, 16):
                        if split > 1 and iters < split * warps:
                            break
                        cfg = DecodeConfig(warps, rt, unroll, split, stages=stages, line_copy=True)
                        if cfg.smem_bytes(tt) <= Device().smem:
                            out.append(cfg)
    return out


def choose_decode(M: int, N: int, K: int, out_dtype: str = "bf16", sms: int = H200_SMS) -> tuple[DecodeConfig, DecodeEstimate]:
    """The decode config of least estimated time (ties keep the earlier candidate) and its estimate."""
    dev = Device(sms=sms)
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    scored = [(decode_estimate(M, N, K, c, ob, dev), i, c) for i, c in enumerate(decode_candidates(M, N, K))]
    est, _, cfg = min(scored, key=lambda s: (s[0].time_s, s[1]))
    return cfg, est


def choose_kernel(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
                  sms: int = H200_SMS) -> GemmConfig | DecodeConfig:
    """The planner's choice over both kernels: the decode kernel where the planners weigh it (``decode_weighed``:
    M <= ``decode_limit()``, layout ``nt``) and its estimate beats the tile GEMM's (``kernels.sm80.gemm_plan.choose_config``, ``estimate``),
    else the tile GEMM's choice."""
    tile = choose_config(M, N, K, dtype, layout, out_dtype, sms)
    if not decode_weighed(M, layout):
        return tile
    cfg, est = choose_decode(M, N, K, out_dtype, sms)
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    return cfg if est.time_s < estimate(M, N, K, tile, ob, Device(sms=sms)).time_s else tile


def ranked_configs(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
                   sms: int = H200_SMS) -> list[GemmConfig | DecodeConfig]:
    """Every candidate of both kernels (``kernels.sm80.gemm_plan.candidates``, and ``decode_candidates`` where the
    planners weigh the decode kernel: ``decode_weighed``), fastest estimate first: what ``kernels.sm80.gemm.tune_config`` times."""
    dev = Device(sms=sms)
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    scored = [(estimate(M, N, K, c, ob, dev).time_s, c) for c in candidates(M, N, K, dtype)]
    if decode_weighed(M, layout):
        scored += [(decode_estimate(M, N, K, c, ob, dev).time_s, c) for c in decode_candidates(M, N, K)]
    return [c for _, c in sorted(scored, key=lambda s: s[0])]


CONFIGS = (GemmConfig, DecodeConfig)
"""The configs an sm80 GEMM plan takes (``plan_any``): the tile GEMM's and the decode kernel's."""


def plan_any(M: int | MBucket, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
             config: GemmConfig | DecodeConfig | None = None, sms: int = H200_SMS, fusion: Fusion = Fusion()):
    """The plan of either kernel: a ``DecodePlan`` for a ``DecodeConfig``, a ``GemmPlan`` for a
    ``GemmConfig``; without a config, the planner's choice (``choose_kernel``, fusion-blind; for an
    ``MBucket`` of dynamic M, at its representative M); ``fusion``: the fused epilogue either kernel applies."""
    check_config(config, CONFIGS, "sm80 GEMM config")
    if min(planned_m(M), N, K) < 1:
        raise ValueError("M, N, K must be positive")
    if isinstance(M, MBucket):
        check_dynamic(M, layout.lower(), config)
    cfg = config or choose_kernel(planned_m(M), N, K, dtype, layout, out_dtype, sms)
    if isinstance(cfg, DecodeConfig):
        return plan_decode(M, N, K, dtype, layout, out_dtype, cfg, fusion)
    return plan(M, N, K, dtype, layout, out_dtype, cfg, sms, fusion)


def decode_summary(p: DecodePlan, sms: int = H200_SMS) -> dict:
    """A decode plan as one JSON object (``--emit config``): ``kind``, ``block_m`` (W rows per CTA: the
    MMA's M dimension), ``split_k``, the grid, the fused epilogue (as ``plan_summary``) and the cost
    model's estimate."""
    ob = 4 if p.out_dtype == "float32" else 2
    est = decode_estimate(planned_m(p.dynamic_m or p.M), p.N, p.K, p.config, ob, Device(sms=sms))
    return dict(kind="decode", M=extent_record(p.M), **bucket_summary(p.dynamic_m), N=p.N, K=p.K, dtype=p.dtype, layout=p.layout, out_dtype=p.out_dtype,
                block_m=p.config.block_rows, block_n=8 * p.token_tiles, block_k=p.loop.span, warps=p.config.warps,
                row_tiles=p.config.row_tiles, unroll=p.config.unroll, split_k=p.k_splits,
                reduction=p.config.reduction, vector=p.vector, fusion=p.fusion.as_dict(),
                epilogue=p.fusion.describe(), launched_ctas=p.ctas, sms=sms, waves=est.waves,
                per_sm=est.per_sm, estimated_us=round(est.time_s * 1e6, 3), roofline_us=round(est.roofline_s * 1e6, 3),
                roofline_fraction=round(est.roofline_fraction, 4))


__all__ = ["CONFIGS", "DECODE_MAX_M", "DECODE_WEIGHED_M", "PLAN_FLAGS", "WEIGH_WIDE_DECODE", "DecodeConfig", "DecodeEstimate", "DecodeLoop", "DecodePlan", "choose_decode",
           "check_decode", "choose_kernel", "config_from_dict", "decode_candidates", "decode_estimate",
           "decode_fits", "decode_limit", "decode_summary", "decode_weighed", "plan_any", "plan_decode", "ranked_configs",
           "token_tiles"]
