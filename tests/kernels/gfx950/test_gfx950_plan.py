"""The gfx950 plans as data (no build): the MX plan and its validation, the grid record and its
decode, the epilogue stage, the kernel parameters, the dtype tables read from ``isa.formats``, and
the build-cache key derived from the plan record (``gfx950_gemm.build``)."""

import re
import subprocess
import sys

import attrs
import pytest

from tvm_cdna4.isa import formats
from tvm_cdna4.kernels.gfx950.gemm import (DTYPES, Epilogue, Gfx950GemmConfig, Grid, MxGemmConfig, Param, cache_key,
                                             default_mx_config, plan, plan_gfx950_gemm, plan_mx_gemm)
from tvm_cdna4.kernels.gfx950.gemm_plan import convert_epilogue, lds_bytes


def test_mx_plan_of_the_default_mxfp6_tn_kernel():
    """Both operands M/N-contiguous through the tile form of ds_read_tr6: 8-register slots (the
    halves on even registers), A's fragments split (copied one by one), 12-byte units."""
    p = plan_mx_gemm(4096, 4096, 4096, "mxfp6", "tn")
    assert (p.mfma, p.block, p.repeats, p.k_steps, p.words, p.format_code) == (
        "mfma_scale_f32_16x16x128_f8f6f4", (128, 128, 128), (4, 4, 1), 32, 6, 2)
    assert (p.slots, p.byte_tiles, p.split_a, p.fragment_elems) == ((8, 8), (False, False), True, (32, 32))
    assert p.a.tr == p.b.tr == "ds_read_tr6_b96_v3i32" and p.a.unit_words == 3
    assert (p.scale_row_bytes, p.scale_rows, p.scale_words, p.word_scales) == (128, 1, (1, 1), True)
    assert p.loads_per_tile == p.a.units + p.b.units + 2 and p.grid == Grid((32, 32))
    assert [(q.name, q.shape, q.dtype) for q in p.params] == [
        ("A", (4096, 768), "uint32"), ("B", (4096, 768), "uint32"), ("SA", (4096, 128), "uint8"),
        ("SB", (4096, 128), "uint8"), ("C", (4096, 4096), "float32")]
    assert p.epilogue == Epilogue("float32", "f32", "float32", ())  # MX: f32 only, stored as accumulated


def test_mx_plan_of_mxfp8_nn_byte_tiles_and_the_lds_budget():
    p = plan_mx_gemm(100, 72, 96, "mxfp8", "nn")  # A K-contiguous (words), B N-contiguous (tr8 byte tiles)
    assert (p.slots, p.byte_tiles, p.split_a) == ((8, 8), (False, True), False)
    assert (p.grid.tiles, p.grid.groups, p.k_steps, p.scale_row_bytes, p.word_scales) == ((1, 1), 1, 1, 3, False)
    cfg = default_mx_config("mxfp8", "nn")
    assert lds_bytes("mxfp8", "nn", cfg) == 2 * (sum(
        (4 if x.lds_dtype == "uint32" else 1) * _prod(x.lds_shape) for x in (p.a, p.b)) + 4 * p.lds_scale_words)


def _prod(shape):
    out = 1
    for n in shape:
        out *= n
    return out


@pytest.mark.parametrize("args, rule", [
    (dict(K=40), "multiple of 32"),
    (dict(layout="nx"), "layout 'nx'"),
    (dict(dtype="mxfp7"), "dtype 'mxfp7'"),
    (dict(config=MxGemmConfig(block_k=64)), "block_k 128 or 256"),
    (dict(config=MxGemmConfig(block_m=48)), "must tile 2 x 2 waves"),
    (dict(config=MxGemmConfig(load_ahead=3)), "load_ahead 1 or 2"),
    (dict(config=MxGemmConfig(block_m=64)), "block must be 128x128"),
    (dict(config=MxGemmConfig(block_n=256)), "block must be 128x128"),
])
def test_mx_planner_refuses_what_it_cannot_run(args, rule):
    kwargs = {**dict(M=16, N=16, K=64), **args}
    with pytest.raises(ValueError, match=rule):
        plan_mx_gemm(**kwargs)


def test_plan_routes_mx_dtypes_and_refuses_their_other_outputs():
    assert type(plan(64, 64, 64, "mxfp4", "nt")).__name__ == "MxGemmPlan"
    assert type(plan(64, 64, 64, "f16", "nt")).__name__ == "Gfx950GemmPlan"
    with pytest.raises(ValueError, match="f32 output without a batch axis"):
        plan(64, 64, 64, "mxfp4", "nt", out_dtype="f16")
    with pytest.raises(ValueError, match="f32 output without a batch axis"):
        plan(64, 64, 64, "mxfp4", "nt", batch=2)


@pytest.mark.parametrize("grid", [Grid((3, 5), 2), Grid((3, 5)), Grid((4, 1), 3), Grid((2, 3), 2, k_splits=2)])
def test_grid_decode_visits_every_tile_once(grid):
    """Decoded once per kernel from blockIdx.x: every (batch, K split, row, column) exactly once,
    the column fastest."""
    seen = [grid.decode(bid) for bid in range(grid.groups)]
    keys = {(i.batch, i.k_split, i.row, i.col) for i in seen}
    assert len(keys) == grid.groups == grid.tiles[0] * grid.tiles[1] * (grid.batch or 1) * grid.k_splits
    assert all(0 <= i.row < grid.tiles[0] and 0 <= i.col < grid.tiles[1] for i in seen)
    assert all(0 <= i.k_split < grid.k_splits and 0 <= i.batch < (grid.batch or 1) for i in seen)
    assert [i.col for i in seen[: grid.tiles[1]]] == list(range(grid.tiles[1]))


def test_dense_grid_always_decodes_the_batch_axis_and_a_k_split():
    from tvm_cdna4.kernels.gfx950.emit import tile_origin

    p = plan_gfx950_gemm(200, 136, 520, "i8", "tn", batch=3)
    assert p.grid == Grid((2, 2), 3) and p.groups == 12
    assert plan_gfx950_gemm(200, 136, 520, "i8", "tn").grid == Grid((2, 2), 1)
    assert attrs.astuple(tile_origin(p.grid, p.block, 7)) == (1, 128, 128, 0, None, None)  # batch 1, tile (1, 1), rows to M, no group
    # K split fastest after the tile: workgroup 5 of 2 x 2 tiles x 2 splits is split 1 of tile (0, 1)
    assert attrs.astuple(tile_origin(Grid((2, 2), 1, k_splits=2), p.block, 5, k_steps=3)) == (0, 0, 128, 3, None, None)


@pytest.mark.parametrize("dtype, out, ops", [("f16", "f32", ()), ("f16", "f16", ("cast",)), ("f32", "bf16", ("bf16_rne",)),
                                             ("i8", "i32", ()), ("fp8", "f16", ("cast",))])
def test_the_epilogue_is_a_plan_stage(dtype, out, ops):
    p = plan_gfx950_gemm(40, 70, 96, dtype, "nt", out)
    assert p.epilogue == convert_epilogue(DTYPES[dtype].acc, out) and p.epilogue.ops == ops
    assert p.params[-1] == Param("C", (40, 70), p.epilogue.out)


def test_epilogue_refuses_unknown_operations():
    with pytest.raises(ValueError, match="unknown operations"):
        Epilogue("float32", "f32", "float32", ("silu",))


@pytest.mark.parametrize("layout, a, b", [("nn", (40, 96), (96, 70)), ("nt", (40, 96), (70, 96)),
                                          ("tn", (96, 40), (96, 70)), ("tt", (96, 40), (70, 96))])
def test_dense_kernel_parameters_come_from_the_plan(layout, a, b):
    p = plan_gfx950_gemm(40, 70, 96, "bf16", layout, "bf16", batch=2)
    assert [(q.name, q.shape, q.dtype) for q in p.params] == [
        ("A", (2, *a), "int16"), ("B", (2, *b), "int16"), ("C", (2, 40, 70), "int16")]


def test_the_emitted_signature_is_the_plans_parameter_list():
    """An epilogue input (a bias, say) in the plan is a parameter of the emitted kernel."""
    from tvm_cdna4.kernels.gfx950.gemm import emit

    p = plan_gfx950_gemm(64, 64, 16, "f32", "nn", config=Gfx950GemmConfig(64, 64, 16, interleave=False))
    biased = attrs.evolve(p, epilogue=attrs.evolve(p.epilogue, params=(Param("bias", (64,), "float32"),)))
    head = emit(biased).script().split("def gemm(", 1)[1].split("\n", 1)[0]
    assert re.findall(r"(\w+): T\.Tensor\(", head) == ["A", "B", "C", "bias"]
    assert "bias: T.Tensor((64,), T.float32)" in head


def test_dtype_tables_come_from_isa_formats():
    for name, spec in DTYPES.items():
        a, b = spec.formats
        assert spec.elem_bytes == formats.fmt(a).bits // 8
        want = (formats.fmt(a).dtype, formats.fmt(b).dtype) if spec.scaled else formats.fmt(a).dtype
        assert spec.numpy == want, name


def test_cache_key_is_the_plan_record():
    """Same plan, same key; any plan field changed, a new key (the key is attrs.asdict of the plan)."""
    p = plan_gfx950_gemm(200, 136, 520, "f16", "nn")
    assert cache_key(p) == cache_key(plan_gfx950_gemm(200, 136, 520, "f16", "nn"))
    changed = [attrs.evolve(p, k_steps=p.k_steps + 1), attrs.evolve(p, config=attrs.evolve(p.config, lds_pad=32)),
               attrs.evolve(p, epilogue=convert_epilogue("float32", "f16")), attrs.evolve(p, interleave=None),
               attrs.evolve(p, grid=Grid(p.grid.tiles, 1, k_splits=2))]
    keys = {str(cache_key(q)) for q in [p, *changed]}
    assert len(keys) == len(changed) + 1
    m = plan_mx_gemm(256, 256, 256, "mxfp4", "nt")
    assert cache_key(m)["plan"] == "MxGemmPlan" and cache_key(m) != cache_key(attrs.evolve(m, word_scales=False))


WARM = """
import sys
from tvm_cdna4 import cache
from tvm_cdna4.kernels.gfx950 import gemm as gfx950_gemm
asm = ".amdgpu_metadata\\namdhsa.kernels:\\n  - .name: gemm_kernel\\n.end_amdgpu_metadata\\n"
key = gfx950_gemm.cache_key(gfx950_gemm.plan(64, 64, 64, "mxfp8", "nt"))
cache.store(cache.entry_path("gfx950-gemm", key), {"llvm_ir": b"; ir", "asm": asm.encode()})
result = gfx950_gemm.build(64, 64, 64, "mxfp8", "nt")
print(result.llvm_ir, result.kernels[0].name, "tvm_tirx" in sys.modules)
"""


def test_warm_build_reads_the_cache_through_the_plan_without_tirx(tmp_path):
    env = {"TVM_CDNA4_CACHE_DIR": str(tmp_path), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, check=True, env=env, cwd=".")
    assert out.stdout.split() == [";", "ir", "gemm_kernel", "False"]


def test_the_planners_take_a_symbolic_m():
    """M may be a TIR variable (the dynamic-M GEMM to come): the planners keep it an expression in
    the grid's tile rows and the parameter shapes, and validate only the int extents."""
    from tvm_tirx import tirx

    M = tirx.Var("M", "int32")
    dense = plan_gfx950_gemm(M, 256, 512, "f16", "tn")
    assert not isinstance(dense.grid.tiles[0], int) and dense.grid.tiles[1] == 2 and dense.k_steps == 8
    assert dense.params[0].shape[1].same_as(M) and dense.params[2].shape[0].same_as(M)
    mx = plan_mx_gemm(M, 256, 512, "mxfp4", "nt")
    assert mx.params[0].shape[0].same_as(M) and mx.params[2].shape[0].same_as(M) and mx.params[2].shape[1] == 16
    assert mx.grid.batch is None
    with pytest.raises(ValueError, match="must be positive"):
        plan_gfx950_gemm(M, 0, 512, "f16", "tn")


@pytest.mark.parametrize("block", [(512, 512, 64), (256, 512, 64)])
def test_a_dense_config_whose_lds_stages_exceed_the_cu_is_refused(block):
    # the stages of a 512-wide tile need more LDS than a CU has (isa.hardware.GFX950_LDS_BYTES): a plan the build
    # could not run; the refusal names the bytes, the limit and the block
    from tvm_cdna4.isa.hardware import GFX950_LDS_BYTES

    bm, bn, bk = block
    with pytest.raises(ValueError, match=rf"LDS.*exceed.*{GFX950_LDS_BYTES}.*{bm}x{bn}x{bk}"):
        plan_gfx950_gemm(1024, 1024, 1024, "f16", "nt", config=Gfx950GemmConfig(block_m=bm, block_n=bn, block_k=bk))


def test_the_largest_dense_tile_that_fits_the_lds_plans():
    from tvm_cdna4.isa.hardware import GFX950_LDS_BYTES
    from tvm_cdna4.kernels.gfx950.gemm_plan import planned_lds_bytes

    p = plan_gfx950_gemm(1024, 1024, 1024, "f16", "nt", config=Gfx950GemmConfig(block_m=256, block_n=256, block_k=64))
    assert planned_lds_bytes(p) <= GFX950_LDS_BYTES
