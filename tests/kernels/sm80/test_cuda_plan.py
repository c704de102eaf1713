"""The CUDA GEMM's plan (tvm_cdna4.kernels.sm80.gemm_plan): pure Python, no TIRx build.

The plan is the schedule's every decision as named records; these tests read it directly: the
tiling, each operand's copy and ldmatrix plans, the k-loop and the epilogue.
"""

from __future__ import annotations

import json
from dataclasses import replace

import attrs
import pytest

from tvm_cdna4.kernels.sm80.gemm_plan import (
    LAYOUTS,
    LDMATRIX,
    LDMATRIX_TRANS,
    EpilogueOp,
    GemmConfig,
    LdmatrixGroup,
    Param,
    Swizzle,
    default_config,
    plan,
    swizzle_shift,
    swizzle_word,
)

SMALL = GemmConfig(block_m=128, block_n=128, block_k=32, warps_m=2, warps_n=2, stages=3)


@pytest.fixture(scope="module")
def default_plans():
    return {layout: plan(4096, 4096, 4096, "f16", layout) for layout in LAYOUTS}


def test_tiling_of_the_default(default_plans):
    t = default_plans["nt"].tiling
    assert (t.block_m, t.block_n, t.block_k, t.warps_m, t.warps_n, t.threads) == (128, 256, 64, 2, 4, 256)
    assert (t.warp_m, t.warp_n, t.mma_m, t.mma_n, t.k_steps, t.k_tiles) == (64, 64, 4, 8, 4, 64)
    p = default_plans["nt"]
    g = p.grid
    assert (g.grid_m, g.grid_n, g.group_m, g.k_splits, g.batches, g.tiles, g.ctas, g.persistent) == (
        32, 16, 8, 1, 1, 512, 512, False)
    assert p.stage_elems == (128 + 256) * 64 and p.smem_elems == 4 * p.stage_elems
    assert p.mma_instr == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert plan(64, 64, 64, "bf16", "nn").mma_instr.endswith(".f32.bf16.bf16.f32")
    # a small problem's default is the 128x128x32 tile (more CTAs); above SMALL_M rows it is the plan
    assert default_config("f16", 256, 256).block_n == 128 and plan(257, 256, 256).tiling.block_n == 128


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ldmatrix_trans_for_the_operand_whose_k_is_not_contiguous(default_plans, layout):
    p = default_plans[layout]
    assert p.a.ldmatrix.trans == (layout[0] == "t") and p.b.ldmatrix.trans == (layout[1] == "n")
    for op in (p.a, p.b):
        assert op.ldmatrix.instr == (LDMATRIX_TRANS if op.ldmatrix.trans else LDMATRIX)
        assert op.tile.trans == op.ldmatrix.trans
    # K-contiguous: rows of block_k halves (swizzle shift 3); K rows: rows of 128 or 256 halves
    assert (p.a.tile.rows, p.a.tile.cols, p.a.swizzle) == ((128, 64, Swizzle(3, 3, 3)) if layout[0] == "n" else (64, 128, Swizzle(3, 3, 4)))
    assert (p.b.tile.rows, p.b.tile.cols, p.b.swizzle) == ((256, 64, Swizzle(3, 3, 3)) if layout[1] == "t" else (64, 256, Swizzle(3, 3, 5)))
    assert p.b.smem_offset == p.a.tile.elems and p.a.smem_offset == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_plan_per_thread(default_plans, layout):
    # 16-byte cp.async.cg chunks, hoisted per-thread views: A 4 chunks and B 8 chunks per thread,
    # each repeat a whole number of rows further (an immediate offset in both memories)
    p = default_plans[layout]
    for op, chunks in ((p.a, 4), (p.b, 8)):
        c = op.copy
        assert (c.kind, c.instr, c.chunk_bytes, c.masked) == ("thread", "cp.async.cg.shared.global", 16, False)
        assert op.tile.reps == chunks and c.thread_shape == (chunks, 8)
        rows_per_rep = 256 // (op.tile.cols // 8)
        assert c.row_deltas == tuple(r * rows_per_rep for r in range(chunks)) and set(c.col_deltas) == {0}
        assert c.thread_shared_strides == (rows_per_rep * op.tile.cols, 1)
        assert c.thread_global_strides == (rows_per_rep * 4096, 1)


def test_copy_plan_forms():
    odd = plan(17, 33, 41, "f16", "tn", "f32", SMALL)  # odd leading dimensions: element copies
    assert odd.a.copy.kind == odd.b.copy.kind == "element" and odd.a.copy.instr is None
    edge = plan(200, 136, 100, "f16", "nt", "f32", SMALL)  # K = 100: 8-byte chunks, masked
    assert edge.a.copy.instr == "cp.async.ca.shared.global" and edge.a.copy.chunk_bytes == 8 and edge.a.copy.masked
    generic = plan(256, 256, 128, "f16", "nt", "f32", replace(SMALL, precompute=False))
    assert generic.a.copy.kind == "cta" and generic.a.copy.thread_shape == ()
    # 128 threads over 4 chunks per 32-half row: 32 rows per pass, 4 passes
    assert generic.a.copy.shared_iters == ((32, 32), (4, 8), (4, 1024), (8, 1))
    assert generic.a.ldmatrix.lane is None and generic.a.ldmatrix.steps == ()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ldmatrix_groups_address_the_swizzled_view(default_plans, layout):
    # every group's (swizzled lane address ^ xor) + add + i * stride is the generic view's swizzled
    # address of the same (k-step, repeat, lane), for every warp and lane
    p = default_plans[layout]
    for op in (p.a, p.b):
        ld, la = op.ldmatrix, op.ldmatrix.lane
        (_, skk), (_, srep), *_ = ld.view
        warps = p.tiling.warps_m if op.name == "A" else p.tiling.warps_n
        for kk, groups in enumerate(ld.steps):
            assert sorted(r for g in groups for r in range(g.first, g.first + g.count)) == list(range(ld.repeats))
            for g in groups:
                for w in range(warps):
                    for lane in range(32):
                        x = la.offset(w, lane)
                        for i in range(g.count):
                            want = swizzle_word(x + kk * skk + (g.first + i) * srep, op.tile.cols)
                            assert (swizzle_word(x, op.tile.cols) ^ g.xor) + g.add + i * g.stride == want


def test_ldmatrix_groups_of_the_default_tile(default_plans):
    # K-contiguous operands: one x4 group of 4 repeats per k-step (XOR selects the k16 chunk);
    # the .trans operand: 4 single groups per k-step (XOR selects the 8-column block), the k-step
    # an added row offset
    a = default_plans["nn"].a.ldmatrix
    assert a.steps[1] == (LdmatrixGroup(0, 4, 8, 0, 512),) and not a.offset_in_view
    b = default_plans["nn"].b.ldmatrix
    assert b.steps[1] == tuple(LdmatrixGroup(r, 1, 8 * r, 2048, 0) for r in range(4))
    assert b.offset_in_view  # B [K, N]: group offsets as immediate view offsets
    assert not default_plans["tn"].a.ldmatrix.offset_in_view and default_plans["tn"].b.ldmatrix.offset_in_view
    assert not default_plans["tt"].a.ldmatrix.offset_in_view and not default_plans["nt"].b.ldmatrix.offset_in_view


@pytest.mark.parametrize("layout", LAYOUTS)
def test_k_loop_form_per_layout(default_plans, layout):
    # every layout runs the stage-unrolled k-loop at 4096^3; short K stays rolled; ctas > 0 with
    # whole stage groups makes it persistent
    k = default_plans[layout].kloop
    assert (k.form, k.stages, k.k_tiles, k.groups, k.tail) == ("unrolled", 4, 64, 16, 0)
    assert plan(4096, 4096, 448, "f16", layout).kloop.form == "rolled"  # 7 k-tiles < 2 stage groups
    persistent = plan(4096, 4096, 4096, "f16", layout, config=replace(GemmConfig(), ctas=132))
    assert (persistent.kloop.form, persistent.grid.persistent, persistent.grid.ctas) == ("persistent", True, 132)
    tail = plan(4096, 4096, 4096 + 64, "f16", layout, config=replace(GemmConfig(), ctas=132)).kloop
    assert (tail.form, tail.groups, tail.tail) == ("unrolled", 16, 1)


def test_stages_are_capped_at_the_k_tiles():
    # the planner's choice at 16 x 64 x 320 is a 16x64x128 tile of 4 stages: its 3 k-tiles load 3
    # (a fourth would only be read unwritten by the last fragment prefetch); shared memory shrinks
    p = plan(16, 64, 320)
    assert (p.config.block_k, p.kloop.k_tiles, p.config.stages, p.kloop.stages) == (128, 3, 3, 3)
    assert p.smem_elems == 3 * p.stage_elems == 3 * (16 + 64) * 128
    # an explicit config too, per K slice, down to the pipeline's least (2 stages for one k-tile)
    stages = {K: plan(64, 64, K, config=SMALL).kloop.stages for K in (32, 64, 96, 128, 4096)}
    assert stages == {32: 2, 64: 2, 96: 3, 128: 3, 4096: 3}
    assert plan(64, 64, 256, config=replace(SMALL, split_k=4)).config.stages == 2  # 8 k-tiles, 2 per slice


def test_k_steps_schedule_loads_and_barrier(default_plans):
    # 4 k-steps: A ahead in k-step 0, B in k-step 1, the barrier after k-step 2's mma, and the last
    # k-step reads the next stage's first fragments
    steps = default_plans["nt"].kloop.steps
    assert [(s.kk, s.load, s.barrier, s.next_stage, s.next_kk) for s in steps] == [
        (0, "A", None, 0, 1), (1, "B", None, 0, 2), (2, None, "after_mma", 0, 3), (3, None, None, 1, 0)]
    # two k-steps (block_k 32): A and B together, the barrier in k-step 0
    two = plan(256, 256, 256, "f16", "nt", "f32", SMALL).kloop.steps
    assert [(s.load, s.barrier) for s in two] == [("AB", "after_mma"), (None, None)]
    unsplit = plan(4096, 4096, 4096, config=replace(GemmConfig(), split_loads=False, sync_after_mma=False)).kloop.steps
    assert [(s.load, s.barrier) for s in unsplit] == [("AB", None), (None, None), (None, "before_mma"), (None, None)]
    k = default_plans["nt"].kloop
    assert k.loads_ahead(60) and not k.loads_ahead(61)  # static tail k-tiles load nothing


def test_mma_order(default_plans):
    order = default_plans["nt"].kloop.mma_order
    assert len(order) == 32 and order[:9] == tuple((0, n) for n in range(8)) + ((1, 7),)
    assert plan(4096, 4096, 4096, config=replace(GemmConfig(), mma_order="row")).kloop.mma_order is None


def test_emission_loops_follow_the_plan(default_plans):
    """The emission writes a k-step's mma and per-repeat ldmatrix applies as loops that unroll after
    lowering; their index expressions evaluate to the plan's records."""
    from tvm_tirx.sym import Analyzer

    from tvm_cdna4.kernels.sm80.gemm_emit import serpentine

    p, simplify = default_plans["nt"], Analyzer().simplify
    order = tuple((mi, int(simplify(serpentine(p, mi, j)))) for mi in range(p.tiling.mma_m) for j in range(p.tiling.mma_n))
    assert order == p.kloop.mma_order
    b = default_plans["nn"].b.ldmatrix  # B stored [K, N]: one ldmatrix.trans apply per repeat
    assert all(b.per_repeat(kk) for kk in range(len(b.steps)))
    assert tuple(tuple(b.repeat_group(kk, rep) for rep in range(b.repeats)) for kk in range(len(b.steps))) == b.steps
    assert not default_plans["nt"].b.ldmatrix.per_repeat(0)  # K-contiguous B: one group per k-step


def test_epilogue_plan():
    f32 = plan(4096, 4096, 4096).epilogue
    assert (f32.out_dtype, f32.ops, f32.vector, f32.store_instr, f32.masked, f32.align) == (
        "float32", (), 2, "st.global.v2.f32", False, 8)
    assert f32.convert is None
    bf16 = plan(200, 136, 72, "bf16", "nn", "bf16").epilogue
    assert bf16.ops == (EpilogueOp("convert", "cvt.rn.bf16x2.f32", "uint32"),) and bf16.convert is bf16.ops[0]
    assert (bf16.store_instr, bf16.masked, bf16.align) == ("st.global.b32", True, 4)
    odd = plan(17, 33, 41, "f16", "tn", "f32", SMALL).epilogue  # odd N: one predicated store per element
    assert (odd.vector, odd.store_instr, odd.ops, odd.masked, odd.align) == (1, "st.global.f32", (), True, 4)
    odd16 = plan(1024, 1023, 64, "f16", "nt", "f16").epilogue
    assert (odd16.vector, odd16.store_instr, odd16.align) == (1, "st.global.b16", 2)
    assert odd16.ops == (EpilogueOp("convert", "cvt.rn.f16.f32", "uint16"),)


def test_kernel_parameters_come_from_the_plan():
    p = plan(200, 136, 72, "bf16", "tn", "f16", SMALL)
    assert p.params == (Param("A", (72, 200), "bfloat16"), Param("B", (72, 136), "bfloat16"), Param("C", (200, 136), "float16"))
    from tvm_cdna4.kernels.sm80.gemm_emit import emit, signature_source

    assert signature_source(p).splitlines()[1] == "def main(A: types[0], B: types[1], C: types[2]):"
    # one more parameter in the plan is one more in the PrimFunc's signature (same shape and dtype)
    extra = attrs.evolve(p, params=p.params + (Param("bias", (136,), "float32"),))
    assert [str(v.name) for v in emit(extra).params] == ["A", "B", "C", "bias"]
    # an epilogue operation the emission does not spell is refused, not dropped
    fused = attrs.evolve(p, epilogue=attrs.evolve(p.epilogue, ops=(EpilogueOp("silu", "ex2.approx.f32", "float32"),)))
    with pytest.raises(ValueError, match=r"epilogue operations \['silu'\] are planned but not emitted"):
        emit(fused)


def test_grid_decodes_every_tile_once():
    # the rasterized order: group_m block rows sweep N together, the last group short when grid_m is
    # not a multiple of group_m; a K split and a batch index take the outer digits of the index
    g = plan(1000, 700, 64, "f16", "nt", "f32", replace(SMALL, group_m=3)).grid
    assert (g.grid_m, g.grid_n, g.group_m, g.tiles) == (8, 6, 3, 48)
    order = [g.decode(t) for t in range(g.tiles)]
    assert sorted((x.m, x.n) for x in order) == [(m, n) for m in range(8) for n in range(6)]
    assert [(x.m, x.n) for x in order[:7]] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
    assert {(x.k_split, x.batch) for x in order} == {(0, 0)}
    split = attrs.evolve(g, k_splits=2, batches=3, tiles=6 * g.tiles)
    seen = sorted((x.batch, x.k_split, x.m, x.n) for x in map(split.decode, range(split.tiles)))
    assert seen == [(b, k, m, n) for b in range(3) for k in range(2) for m in range(8) for n in range(6)]


def test_grid_decode_is_the_emitted_one():
    # the emission passes TIR's truncdiv / truncmod / min to the same decode
    from tvm_tirx.sym import Analyzer
    from tvm_tirx.ir import IntImm

    from tvm_cdna4.kernels.sm80.gemm_emit import tile_origin

    p = plan(1000, 700, 64, "f16", "nt", "f32", replace(SMALL, group_m=3))
    simplify = Analyzer().simplify
    for t in range(p.grid.tiles):
        m0, n0 = tile_origin(p, IntImm("int32", t))
        x = p.grid.decode(t)
        assert (int(simplify(m0)), int(simplify(n0))) == (x.m * 128, x.n * 128)


def test_swizzle_on_ints_and_tir_expressions():
    from tvm_tirx.sym import Analyzer
    from tvm_tirx.ir import IntImm

    simplify = Analyzer().simplify
    for row in (32, 64, 128, 256):
        swz = Swizzle.for_row(row)
        assert swz.shift == swizzle_shift(row) and swz.words() == Swizzle(2, 3, swz.shift)
        for x in range(0, 64 * row, 7):
            assert swz(x) == int(simplify(swz(IntImm("int32", x))))
            assert swizzle_word(x // 2, row) == swz.words()(x // 2) == swz(2 * (x // 2)) // 2


def test_build_key_is_the_plan():
    from tvm_cdna4.kernels.sm80.gemm import build_key

    p = plan(200, 136, 72, "f16", "nt", "f32", SMALL)
    assert build_key(p) == build_key(plan(200, 136, 72, "float16", "NT", "float32", SMALL))
    assert build_key(p) != build_key(p, arch="sm_90") and build_key(p) != build_key(p, compiler="nvcc")
    keys = {json.dumps(build_key(q), sort_keys=True) for q in (
        p,
        attrs.evolve(p, epilogue=attrs.evolve(p.epilogue, masked=False)),  # one field of one record
        attrs.evolve(p, grid=attrs.evolve(p.grid, group_m=1)),
        attrs.evolve(p, kloop=attrs.evolve(p.kloop, mma_order=None)),
        attrs.evolve(p, params=p.params + (Param("bias", (136,), "float32"),)),
        attrs.evolve(p, config=replace(p.config, sync_after_mma=False)),
    )}
    assert len(keys) == 6


def test_plan_is_frozen_and_rejects_bad_input(default_plans):
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        default_plans["nt"].kloop.form = "rolled"
    with pytest.raises(ValueError, match="layout"):
        plan(64, 64, 64, "f16", "xy")
    with pytest.raises(ValueError, match="positive"):
        plan(0, 64, 64)


# ---- plans for every M: the cost model, split-K, tuning (issue 24) ---------------------------------

from tvm_cdna4.kernels.sm80 import gemm as _cg  # noqa: E402
from tvm_cdna4.kernels.sm80.gemm_plan import (  # noqa: E402
    Device,
    candidates,
    choose_config,
    default_config,
    estimate,
    plan_summary,
)


def test_big_m_keeps_the_default_tiling():
    # above SMALL_M rows the model never revisits default_config (the golden kernels past 256 rows)
    for M, N, K, dt in ((4096, 4096, 4096, "f16"), (257, 256, 16384, "f16"), (1000, 999, 1001, "f16"),
                        (257, 130, 520, "bf16"), (2048, 2048, 2048, "bf16"), (1024, 1024, 1024, "f16")):
        assert choose_config(M, N, K, dt) == default_config(dt, M, N)
        assert candidates(M, N, K, dt) == [default_config(dt, M, N)]


def test_the_129_to_256_bucket_is_planned_as_a_small_problem():
    # the dynamic-M bucket 129..256 is planned at 256 rows: the small tilings are weighed there, and at
    # N = 4096 the 128 x 128 default (2 x 32 = 64 CTAs on 132 SMs) is not the choice
    assert len(candidates(256, 4096, 4096, "bf16")) > 1
    cfg = choose_config(256, 4096, 4096, "bf16")
    ctas = -(-256 // cfg.block_m) * -(-4096 // cfg.block_n) * cfg.split_k
    assert ctas > 64 and cfg != default_config("bf16", 256, 4096)


def test_decode_shapes_get_small_tiles_and_fill_the_gpu():
    # 16 x 4096 x 14336: the default 128x128 tile launches 32 CTAs on 132 SMs, 7/8 of its rows padding
    cfg = choose_config(16, 4096, 14336, "bf16", "nt", "bf16")
    assert cfg.block_m == 16 and cfg.warps_m == 1
    est = estimate(16, 4096, 14336, cfg)
    base = estimate(16, 4096, 14336, default_config("bf16", 16, 4096))
    assert est.ctas >= 132 and est.tile_efficiency > 0.98 and base.tile_efficiency == 0.125
    # the H200 measured this plan family at 53 % of the roofline (46.3 us, benchmarks/journal/2026-12.md): the
    # model, fitted at M = 64 / 128, predicts 40-80 % here (it said 86 % before the fit)
    assert est.time_s < 0.5 * base.time_s and 0.4 < est.roofline_fraction < 0.8


def test_split_k_follows_the_sm_count():
    # the same shape on a GPU of fewer SMs splits K less (fewer CTAs fill it); from 132 SMs on HBM
    # bounds it, and more SMs (same HBM) split no further
    splits = [choose_config(16, 4096, 14336, "bf16", "nt", "bf16", sms).split_k for sms in (16, 33, 132, 528)]
    assert splits[0] < splits[1] < splits[2] == splits[3]


def test_cost_model_arithmetic():
    dev = Device()
    cfg = GemmConfig(block_m=16, block_n=64, block_k=64, warps_m=1, warps_n=4, stages=4, split_k=2)
    est = estimate(1, 100, 1000, cfg, 2, dev)
    assert est.ctas == 2 * 2 and est.waves == 1
    assert est.tile_efficiency == pytest.approx(2 * 1 * 100 * 1000 / (2 * 16 * 128 * 16 * 64))
    assert est.bytes == 2 * (1000 + 100 * 1000) + 2 * 100 + 4 * 100 * 3
    assert est.roofline_s == pytest.approx((2 * (1000 + 100 * 1000) + 200) / 4.8e12)
    assert 0 < est.roofline_fraction < 1


def test_split_k_plan():
    cfg = GemmConfig(block_m=16, block_n=64, block_k=64, warps_m=1, warps_n=4, stages=3, split_k=3)
    p = plan(7, 70, 200, "f16", "nt", "bf16", cfg)
    assert (p.grid.k_splits, p.grid.tiles, p.grid.ctas, p.kloop.k_tiles) == (3, 6, 6, 2)
    assert p.a.copy.masked and p.b.copy.masked  # 3 slices x 2 k-tiles x 64 > 200
    assert [op.kind for op in p.epilogue.ops] == ["reduce", "convert"]
    assert p.epilogue.reduce.instr == "red.global.add.f32"
    assert [(q.name, q.shape, q.dtype) for q in p.params[3:]] == [("W", (1, 7, 70), "float32"), ("S", (2,), "uint32")]
    q = plan(7, 70, 200, "f16", "nt", "bf16", replace(cfg, reduction="ordered"))
    assert q.epilogue.reduce.instr == "st.global.f32" and q.params[3].shape == (3, 7, 70)
    assert p.grid.decode(5) == q.grid.decode(5) and p.grid.decode(5).k_split == 2
    with pytest.raises(ValueError, match="split_k and persistent"):
        replace(cfg, ctas=4).check()
    with pytest.raises(ValueError, match="reduction"):
        replace(cfg, reduction="tree").check()


def test_emit_config_json_names_the_plan():
    import json

    # the tile GEMM's choice (kernels.sm80.gemm_plan.choose_config; without a config, cuda_gemm's planner may take
    # the decode kernel instead: tests/kernels/sm80/test_cuda_decode.py)
    cfg = choose_config(16, 4096, 14336, "bf16", "nt", "bf16")
    d = json.loads(_cg.config_json(16, 4096, 14336, "bf16", "nt", "bf16", cfg))
    assert d["kind"] == "tile" and d["block_m"] == cfg.block_m and d["split_k"] == cfg.split_k > 1
    assert d["launched_ctas"] == cfg.split_k * 4096 // cfg.block_n and d["ctas"] == 0
    assert plan_summary(plan(16, 4096, 14336, "bf16", "nt", "bf16"))["roofline_fraction"] == d["roofline_fraction"]


def test_m_bucket():
    assert [_cg.m_bucket(m) for m in (1, 2, 3, 16, 17, 100, 128, 129)] == [1, 2, 4, 16, 32, 128, 128, 256]


def test_tuning_stores_the_fastest_and_builds_read_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_CDNA4_CACHE_DIR", str(tmp_path))
    M, N, K = 16, 4096, 4096
    assert _cg.tuned_config(M, N, K, "bf16", "nt", "bf16") is None
    timed = []

    def timer(cfg):  # a fake GPU: the model's third choice is the fastest
        timed.append(cfg)
        return 1e-6 if len(timed) == 3 else 5e-6

    best = _cg.tune_config(M, N, K, "bf16", "nt", "bf16", timer=timer, top=6)
    assert len(timed) == 6 and len(set(timed)) == 6 and best == timed[2]
    # the model's first choice (over both kernels: kernels.sm80.decode_plan.ranked_configs) is timed first
    assert timed[0] == _cg.ranked_configs(M, N, K, "bf16", "nt", "bf16")[0]
    # the same key (M bucket 16, N, K, dtypes, layout, arch) reads it back; another bucket or N does not
    assert _cg.tuned_config(9, N, K, "bf16", "nt", "bf16") == best
    assert _cg.tuned_config(17, N, K, "bf16", "nt", "bf16") is None
    assert _cg.tuned_config(M, 2048, K, "bf16", "nt", "bf16") is None
    assert _cg.tuned_config(M, N, K, "bf16", "nt", "bf16", arch="sm_90") is None
    # a build without a config uses it (build_key of the tuned plan), no timing again
    built = []
    monkeypatch.setattr(_cg, "_compile", lambda p, arch, compiler, emit=None: built.append(p) or {"source": b"x", "library": b"y"})
    exe = _cg.build(M, N, K, "bf16", "nt", "bf16")
    assert exe.config == best and built[0].config == best and len(timed) == 6
