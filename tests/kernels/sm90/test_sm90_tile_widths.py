"""Wave-friendly tile widths of the sm90 GEMM (docs/sm90_gemm.md "Tile widths"): ``block_n`` a multiple of 32
(160, 224: fewer tile-times on 132 SMs for N = 3584, 4608, 5120) with the TMA epilogue, whose last staging block
is ``TAIL_COLUMNS`` wide (64-byte swizzle, C's tail tensor map); the plan's rules, the host part's maps, the
emulator's validation of the tail at clipped edges, and the cost model's weighing of the widths."""

from __future__ import annotations

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_emit
from tvm_cdna4.kernels.sm90.gemm_plan import TAIL_COLUMNS, Sm90Config

H100 = DEVICES["H100"]


def test_the_tma_epilogue_stages_a_32_column_tail_block():
    cfg = Sm90Config(128, 224, 3, 2, epilogue="tma")
    cfg.check(H100.smem_per_unit)  # 3 x 44 KB ring + 56 KB staging
    assert TAIL_COLUMNS == 32 and cfg.tail_columns == 32 and Sm90Config(128, 160, 5, 2, epilogue="tma").tail_columns == 32
    assert Sm90Config(128, 256, 3, 2, epilogue="tma").tail_columns == 0 == Sm90Config(128, 224, 3, 2).tail_columns
    assert cfg.staging_bytes() == 2 * 64 * 224 * 2  # three 64-column blocks and the tail: the whole tile, as before
    for block_n in (176, 200, 72):  # a last block of 48 or 8 columns: no swizzle row of that width
        with pytest.raises(ContractError, match="config epilogue: .*64-column blocks, the last may be 32") as e:
            Sm90Config(128, block_n, 2, 2, epilogue="tma").check(H100.smem_per_unit)
        assert e.value.found == block_n
    with pytest.raises(ContractError, match="config epilogue_tile"):  # chunks are whole blocks dividing the tile
        Sm90Config(128, 224, 3, 2, epilogue="tma", epilogue_tile=64).check(H100.smem_per_unit)


def test_n_3584_in_224_column_tiles_and_the_tail_maps_the_host_part_encodes():
    problem = GemmProblem(3000, 3584, 3584, "bf16", "nt", "bf16", Fusion(residual=True))
    p = gemm.plan(problem, "sm90", Sm90Config(128, 224, 3, 2, epilogue="tma", residual_read="tma"))
    assert (p.tiles_m, p.tiles_n, p.tiles) == (24, 16, 384)  # 2.91 waves on 132 SMs (128x256: 336 tiles, 2.55)
    assert p.smem_bytes == 3 * (128 + 224) * 64 * 2 + 2 * 64 * 224 * 2
    assert gemm_emit.tail_maps(p) == ("C", "residual")
    src = gemm_emit.signature_source(p)
    # C's and the residual's tail maps: boxes of 64 rows x 32 columns over the same tensors, 64-byte swizzle (2)
    for name in ("C", "residual"):
        assert (f"tensormap_encode_tiled(map{name}Tail, {name}.ptr_to([0, 0]), 3584, 3000, 7168, 32, 64, 1, 1, "
                f"descriptor_dtype='bfloat16', rank=2, swizzle=2") in src
    assert src.rstrip().endswith("(mapA, mapB, mapC, mapresidual, mapCTail, mapresidualTail,))")
    whole = gemm.plan(problem, "sm90", Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="tma"))
    assert gemm_emit.tail_maps(whole) == () and "Tail" not in gemm_emit.signature_source(whole)


@pytest.mark.parametrize("problem, config", [
    # N = 208 in one 224-column tile: the tail block (columns 192..223) clipped at C's edge, ragged M
    (GemmProblem(77, 208, 64, "bf16", "nt", "bf16"), Sm90Config(128, 224, 2, 2, epilogue="tma")),
    # 96-column tiles (a whole block and the tail) over N = 120 (the second tile's whole block clipped, its tail
    # past C), three row tiles, the fused epilogue with the residual loaded by TMA into the staging buffer (its
    # tail block through the residual's tail map)
    (GemmProblem(333, 120, 64, "bf16", "nt", "bf16", Fusion(bias=True, activation="silu", residual=True, col_scale=True)),
     Sm90Config(128, 96, 2, 2, epilogue="tma", residual_read="tma", activation_form="tanh")),
])
def test_the_emulator_validates_the_tail_block(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.ratio <= 1.0
