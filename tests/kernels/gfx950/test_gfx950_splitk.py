"""gfx950 plans for every M: small-M tiles (16 rows on 1 x 4 waves, 32-128 on 2 x 2), split-K across
workgroups (f32 atomics into an f32 C; any output through the f32 workspace and a per-tile ticket,
atomic or ordered), and the planner that picks them by the whole-GPU cost model. Emulated on odd
shapes (seconds each).

Tolerance: a split-K result differs from the unsplit one by the f32 reassociation of the
``k_splits`` partial sums (atomics land in any order): |C - A@B| <= 1e-5 * (|A| @ |B|), the CLI's f32
tolerance, against a float64 reference; a bf16 C adds its rounding, 2^-8 |A@B|. The ordered
reduction adds the slices in index order: with small-integer data every partial sum is exact, so
C is the exact product rounded once, bit for bit."""

import attrs
import numpy as np
import pytest

from tvm_cdna4 import build
from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels.gfx950.emit import tile_origin
from tvm_cdna4.kernels.gfx950.gemm import Gfx950GemmConfig, gfx950_gemm, plan_gfx950_gemm
from tvm_cdna4.kernels.gfx950.gemm_plan import plan_for, planned_estimate

import ml_dtypes

SMALL = Gfx950GemmConfig(32, 64, 64)


DECODE = Gfx950GemmConfig(16, 64, 128, waves_m=1)


def _run(M, N, K, dtype, layout, out, cfg, k_splits, seed=0, ints=False, workspace=None):
    rng = np.random.default_rng(seed)
    np_t = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    draw = (lambda shape: rng.integers(-3, 4, shape)) if ints else rng.standard_normal
    a, b = draw((M, K)).astype(np_t), draw((K, N)).astype(np_t)
    A = np.ascontiguousarray(a.T) if layout[0] == "t" else a
    B = np.ascontiguousarray(b.T) if layout[1] == "t" else b
    c = np.zeros((M, N), ml_dtypes.bfloat16 if out == "bf16" else np.float32)
    plan = plan_gfx950_gemm(M, N, K, dtype, layout, out, cfg, k_splits=k_splits)
    extra = [np.zeros(p.shape, p.dtype) for p in plan.epilogue.params]  # W and S: zeroed once
    emulate(gfx950_gemm(M, N, K, dtype, layout, out, cfg, k_splits=k_splits), A, B, c, *extra)
    if workspace is not None:
        workspace.extend(extra)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return c.astype(np.float64), a64 @ b64, np.abs(a64) @ np.abs(b64)


@pytest.mark.parametrize("M, N, K, dtype, layout, k_splits", [
    (1, 70, 300, "bf16", "nt", 3),    # M = 1, N and K not multiples of the tile, a short last range
    (7, 40, 200, "f16", "nn", 2),
    (33, 65, 330, "bf16", "tn", 4),   # two tile rows; the last K range past K reads zeros
])
def test_split_k_atomics_match_within_f32_reassociation(M, N, K, dtype, layout, k_splits):
    got, want, mag = _run(M, N, K, dtype, layout, "f32", SMALL, k_splits)
    assert np.all(np.abs(got - want) <= 1e-5 * mag + 1e-6)


def test_small_m_tile_without_split_is_exact_to_bf16_rounding():
    got, want, mag = _run(7, 70, 130, "bf16", "nt", "bf16", SMALL, 1)
    assert np.all(np.abs(got - want) <= 8e-3 * mag)


def test_split_workgroups_decode_to_k_ranges():
    p = plan_gfx950_gemm(33, 130, 640, "bf16", "nt", "f32", SMALL, k_splits=4)
    assert (p.grid.tiles, p.grid.k_splits, p.k_steps, p.groups) == ((2, 3), 4, 3, 24)
    assert p.epilogue.ops == ("atomic_add",)
    origins = [tile_origin(p.grid, p.block, bid, p.k_steps) for bid in range(p.groups)]
    assert sorted({(o.m0, o.n0, o.kt) for o in origins}) == sorted(
        (m, n, k) for m in (0, 32) for n in (0, 64, 128) for k in (0, 3, 6, 9))


@pytest.mark.parametrize("M, N, K, layout, cfg, k_splits", [
    (1, 70, 300, "nt", DECODE, 3),    # 16-row tile on 1 x 4 waves, M = 1, a short last K range
    (7, 40, 800, "nt", Gfx950GemmConfig(16, 64, 384, waves_m=1), 2),  # the long K tile: a partial and an empty one
    (33, 40, 200, "tn", SMALL, 3),    # 2 x 2 waves, two tile rows, the last K range wholly past K
], ids=["M1 16-row", "M7 K384", "M33 tn"])
def test_split_k_bf16_output_through_the_workspace_and_ticket(M, N, K, layout, cfg, k_splits):
    left = []
    got, want, mag = _run(M, N, K, "bf16", layout, "bf16", cfg, k_splits, workspace=left)
    assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-5 * mag + 1e-6)
    W, S = left
    assert not W.any() and not S.any()  # zeroed by the last workgroup of each tile for the next launch


def test_ordered_split_k_is_the_exact_sum_rounded_once():
    cfg = attrs.evolve(DECODE, reduction="ordered")
    left = []
    got, want, _ = _run(33, 65, 330, "bf16", "nt", "bf16", cfg, 3, ints=True, workspace=left)  # 3 x 2 tiles
    assert np.array_equal(got, want.astype(ml_dtypes.bfloat16).astype(np.float64))  # bit-exact
    W, S = left
    assert W.shape == (3 * 33 * 65,) and W.any() and not S.any()  # one slice per K split; tickets reset


def test_split_plan_records_the_workspace():
    p = plan_gfx950_gemm(7, 130, 640, "bf16", "nt", "bf16", DECODE, k_splits=4)
    assert (p.warp_tile, p.repeats, p.grid.tiles) == ((16, 16), (1, 1, 4), (1, 3))
    assert p.epilogue.ops == ("reduce", "bf16_rne") and (p.epilogue.reduction, p.epilogue.slices) == ("atomic", 1)
    assert [(q.name, q.shape, q.dtype) for q in p.params[2:]] == [("C", (7, 130), "int16"), ("W", (7 * 130,), "float32"),
                                                                   ("S", (3,), "uint32")]
    o = plan_gfx950_gemm(7, 130, 640, "f16", "nt", "f32", attrs.evolve(DECODE, reduction="ordered"), k_splits=4)
    assert o.epilogue.ops == ("reduce",) and o.epilogue.params[0].shape == (4 * 7 * 130,)
    # an f32 output with atomics adds into C itself
    assert plan_gfx950_gemm(7, 130, 640, "f16", "nt", "f32", DECODE, k_splits=4).epilogue.ops == ("atomic_add",)


def test_split_k_refusals():
    with pytest.raises(ValueError, match="reduction must be one of"):
        plan_gfx950_gemm(1, 64, 256, "bf16", "nt", "bf16", attrs.evolve(SMALL, reduction="tree"), k_splits=2)
    with pytest.raises(ValueError, match="does not tile 1 x 4 waves"):
        plan_gfx950_gemm(1, 32, 256, "bf16", "nt", "bf16", Gfx950GemmConfig(16, 32, 128, waves_m=1))
    with pytest.raises(ValueError, match="k_splits 5 must be in"):
        plan_gfx950_gemm(1, 64, 256, "bf16", "nt", "f32", SMALL, k_splits=5)
    with pytest.raises(ValueError, match="f32 accumulators"):
        plan_gfx950_gemm(1, 64, 256, "i8", "nt", "i32", Gfx950GemmConfig(32, 64, 128), k_splits=2)


def test_split_k_kernel_adds_with_the_native_atomic():
    asm = build(gfx950_gemm(16, 64, 512, "bf16", "nt", "f32", SMALL, k_splits=4)).asm
    mnemonics = [ln.split()[0] for ln in asm.split("s_endpgm")[0].splitlines() if ln.startswith("\t") and ln.strip()]
    assert mnemonics.count("global_atomic_add_f32") == 8  # 1 x 2 MFMA tiles of 4 accumulators per lane
    assert not any(m.startswith(("global_store", "buffer_store")) for m in mnemonics)


def test_planner_keeps_the_big_shape_plans():
    for dtype, layout in (("f16", "nn"), ("bf16", "nt"), ("fp8", "nt")):
        assert plan_for(4096, 4096, 4096, dtype, layout) == plan_gfx950_gemm(4096, 4096, 4096, dtype, layout)


def test_planner_splits_k_and_shrinks_tiles_for_decode_shapes():
    p = plan_for(1, 1024, 14336, "bf16", "nt", "f32")
    assert p.block[0] == 16 and p.grid.k_splits > 1 and p.epilogue.ops == ("atomic_add",)
    assert planned_estimate(p).roofline_fraction > 2 * planned_estimate(plan_gfx950_gemm(1, 1024, 14336, "bf16", "nt",
                                                                                           "f32")).roofline_fraction
    # M <= 16 takes 16-row tiles on 1 x 4 waves; 64 of them fill HBM with long K tiles, no split
    q = plan_for(1, 4096, 14336, "bf16", "nt", "bf16")
    assert q.block[0] == 16 and q.config.waves == (1, 4) and q.grid.k_splits == 1
    assert planned_estimate(q).roofline_fraction > 0.85
    # 16 such tiles cannot: the 16-bit output splits K through the workspace and the tickets
    r = plan_for(1, 1024, 14336, "bf16", "nt", "bf16")
    assert r.block[0] == 16 and r.grid.k_splits > 1 and r.epilogue.ops == ("reduce", "bf16_rne")
    unsplit = plan_gfx950_gemm(1, 1024, 14336, "bf16", "nt", "bf16", r.config)
    assert planned_estimate(r).time_s < 0.8 * planned_estimate(unsplit).time_s


def test_planner_takes_the_cu_count():
    few = plan_for(1, 1024, 14336, "bf16", "nt", "f32", cus=16)
    many = plan_for(1, 1024, 14336, "bf16", "nt", "f32")
    assert few.groups < many.groups


def test_workspace_split_compiles_to_atomics_ticket_and_agent_fences():
    result = build(gfx950_gemm(16, 64, 512, "bf16", "nt", "bf16", DECODE, k_splits=2))  # the LDS sync check passes
    lines = [ln.strip() for ln in result.asm.split("s_endpgm")[0].splitlines() if ln.startswith("\t")]
    first = lambda pred: next(i for i, ln in enumerate(lines) if pred(ln))  # noqa: E731
    partial = first(lambda ln: ln.startswith("global_atomic_add_f32"))
    release = first(lambda ln: ln == "buffer_wbl2 sc1")
    ticket = first(lambda ln: ln.startswith("global_atomic_add ") and ln.endswith("sc0"))
    acquire = first(lambda ln: ln == "buffer_inv sc1")
    assert partial < release < ticket < acquire
    assert sum(ln.startswith("global_atomic_add_f32") for ln in lines) == 4  # 1 x 1 MFMA tile of 4 per lane
    assert result.kernel().scratch_bytes == 0
