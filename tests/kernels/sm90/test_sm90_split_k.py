"""Split-K on sm90 (``Sm90Config.split_k``): the plan's work units and workspace, the refusals, and plans
validated in the CUDA emulator (both consumer counts, both reductions, the fused and TMA epilogues, dynamic
M), the workspace and tickets left zero for the next launch."""

from __future__ import annotations

import numpy as np
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_target
from tvm_cdna4.kernels.sm90.gemm_emit import emit
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

H100 = devices.DEVICES["H100"]
EMULATOR = "the CUDA emulator (no GPU runner)"


def _plan(M, N, K, cfg, out="f32", fusion=Fusion()):
    return plan(M, N, K, "bf16", "nt", out, cfg, H100.units, H100.smem_per_unit, fusion)


def test_the_units_are_tiles_times_slices_and_the_workspace_is_sm80s():
    p = _plan(200, 3584, 18944, Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=4), "bf16")
    assert (p.tiles, p.units, p.ctas, p.k_tiles, p.slice_tiles) == (28, 112, 112, 296, 74)
    assert p.unit_of(30, divmod_q, divmod_r) == (1, 2)  # unit 30: K slice 1 of tile 2
    assert [(q.name, q.shape, q.dtype) for q in p.params[3:]] == [("W", (4, 200, 3584), "float32"),
                                                                 ("S", (28 * 2,), "uint32")]
    atomic = _plan(200, 3584, 18944, Sm90Config(64, 256, 3, 1, split_k=3, reduction="atomic"))
    assert [q.shape for q in atomic.params[3:]] == [(1, 200, 3584), (56,)]  # one slice; a ticket per tile
    assert _plan(200, 3584, 18944, Sm90Config()).params[-1].name == "C"  # no split: no workspace
    assert gemm_target.summary(p)["split_k"] == 4


def divmod_q(a, b):
    return a // b


def divmod_r(a, b):
    return a % b


@pytest.mark.parametrize("cfg, K, found", [
    (Sm90Config(split_k=3), 256, 3),  # 4 k-tiles: slices of 2, the third has none
    (Sm90Config(split_k=0), 1024, (0, "ordered")),
    (Sm90Config(split_k=2, reduction="tree"), 1024, (2, "tree")),
])
def test_a_split_that_breaks_a_rule_is_refused_naming_the_field(cfg, K, found):
    with pytest.raises(ContractError) as e:
        _plan(64, 64, K, cfg)
    assert e.value.operand in ("split_k", "split_k/reduction") and e.value.check == "parameters"
    assert e.value.found == found


@pytest.mark.parametrize("problem, config", [
    # two consumers, three slices (the last one past K: zero-filled boxes), ragged M, N, K, ordered (suite time: the
    # TMA-epilogue case below has the same slices)
    pytest.param(GemmProblem(67, 69, 264, "bf16", "nt", "f32"), Sm90Config(128, 64, 2, 2, split_k=3), marks=pytest.mark.slow),
    # one consumer, one persistent CTA walking both slices of two tiles, atomic, the fused epilogue, bf16 C
    (GemmProblem(33, 100, 320, "bf16", "nt", "bf16", Fusion(bias=True, activation="gelu", residual=True)),
     Sm90Config(64, 64, 2, 1, ctas=1, split_k=2, reduction="atomic")),
    # the TMA epilogue after the gather, f16, scales
    (GemmProblem(77, 64, 264, "f16", "nt", "f16", Fusion(row_scale=True, col_scale=True)),
     Sm90Config(128, 64, 2, 2, epilogue="tma", split_k=3)),
    # odd N: the partials and the gather one element at a time
    (GemmProblem(20, 41, 256, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 1, split_k=2)),
])
def test_the_emulator_validates_split_k_plans(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.parametrize("reduction", ["ordered", "atomic"])
def test_dynamic_m_sizes_the_workspace_at_the_bucket_and_every_launch_leaves_it_zero(reduction):
    cfg = Sm90Config(64, 64, 2, 1, split_k=2, reduction=reduction)
    p = plan(MBucket(17, 64), 40, 256, "bf16", "nt", "f32", cfg, H100.units, H100.smem_per_unit)
    assert [q.shape for q in p.params[3:]] == [(2 if reduction == "ordered" else 1, 64, 40), (1,)]
    data = random_inputs(GemmProblem(45, 40, 256, "bf16", "nt", "f32"), seed=3)
    c = data.output()
    args = data.arguments(p.params, c)
    emulate(emit(p), *args, target="sm90")
    assert data.ratio(c) <= 1.0
    w, s = args[-2:]
    assert not s.any() and (reduction == "ordered" or not w.any())  # the tickets and the atomic slice: zero
    assert reduction == "atomic" or np.abs(w[:, 45:]).max() == 0  # rows past the run-time M: never written


def test_a_workspace_past_32_bit_offsets_is_refused_naming_split_k():
    # the ordered W [split_k, M, N] of 8 x 16384 x 16384 = 2^31 elements; the cost model never splits so far
    from tvm_cdna4 import ContractError
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gemm import GemmProblem
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    problem = GemmProblem(16384, 16384, 65536, "bf16", "nt", "bf16")
    with pytest.raises(ContractError, match=r"split_k.*32-bit offsets.*2\^31"):
        gemm.plan(problem, "sm90", Sm90Config(128, 256, 3, 2, split_k=8))
    assert gemm.plan(problem, "sm90", Sm90Config(128, 256, 3, 2, split_k=4)).config.split_k == 4
