"""The fused residual read from global memory a column pair a load (``gemm_residual.residual_pairs``: one 4-byte
``ld.global.b32`` where the element reads issued two 2-byte loads, each a warp's 8 rows' cache lines: 8 L1 wavefronts
a load whatever its width); the element reads where a pair is not 4 bytes of a 16-bit C at an even N; the kernels in
the CUDA emulator."""

from __future__ import annotations

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_emit
from tvm_cdna4.kernels.sm90.gemm_residual import residual_pairs
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


def _script(M, N, K, out, cfg, fusion=Fusion(residual=True)):
    from tvm_cdna4.emulator import device_function

    p = gemm.plan(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg)
    return p, device_function(gemm_emit.emit(p), "sm90").script()


@pytest.mark.parametrize("cfg", [Sm90Config(128, 80, 2, 2, ctas=1, epilogue="tma"),          # TMA stores
                                 Sm90Config(128, 80, 2, 2, ctas=1, residual_read="prefetch"),  # stores from registers
                                 Sm90Config(128, 80, 2, 2, ctas=1, schedule="pingpong")])
def test_a_16_bit_c_reads_its_residual_a_pair_a_load(cfg):
    p, text = _script(130, 80, 320, "bf16", cfg)
    pairs = 80 // 8 * 2 * (2 if cfg.pingpong else 1)  # a thread's pairs a tile (ping-pong: 128 rows, two 64-row blocks)
    assert residual_pairs(p) and text.count("T.ptx.ld(word[1], T.address_of(residual[") == pairs
    assert text.count("residual[") == pairs  # no element read left
    assert text.count('"global", "", "", "", "", "", "b32"') == pairs


@pytest.mark.parametrize("M, N, out, cfg", [
    (130, 80, "f32", Sm90Config(128, 80, 2, 2, ctas=1)),                      # an f32 C's pair is 8 bytes
    (130, 77, "bf16", Sm90Config(128, 80, 2, 2, ctas=1)),                     # odd N: one element a store
    (130, 80, "bf16", Sm90Config(128, 80, 2, 2, ctas=1, epilogue="tma", residual_read="tma")),  # staged
])
def test_the_element_reads_stay_where_a_pair_is_not_one_aligned_word(M, N, out, cfg):
    p, text = _script(M, N, 320, out, cfg)
    assert not residual_pairs(p) and "T.ptx.ld(word[1]" not in text


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    # ragged M (the second row tile two rows) and N = 78: the last pair of a row clamped to columns 76..77
    (130, 78, 320, "bf16", ALL, Sm90Config(128, 80, 2, 2, ctas=1, activation_form="tanh")),
    (130, 80, 320, "f16", Fusion(residual=True, col_scale=True), Sm90Config(128, 80, 2, 2, ctas=1, epilogue="tma",
                                                                           residual_read="prefetch")),
])
def test_the_emulator_validates_the_pair_reads(M, N, K, out, fusion, cfg):
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0
