"""The attention façade (``kernels.attention``): the target table, plan -> emit by the plan's
target, the cached gfx950 build, validation in the emulator, and the clear refusals."""

import pytest

from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.gfx950.attention_plan import AttentionConfig, AttentionPlan, AttentionProblem

SMALL = AttentionProblem(1, 2, 1, 40, 40, 64, causal=True)


def test_the_table_names_each_targets_plan_emit_and_build():
    assert set(attention.TARGETS) == {"gfx950", "sm80", "sm90"}
    p = attention.plan(SMALL, "gfx950", AttentionConfig(64, 32))
    assert isinstance(p, AttentionPlan) and attention.target_of(p) == "gfx950"
    assert attention.emit(p).attrs["global_symbol"] == "attention"
    with pytest.raises(ValueError, match=r"attention target: expected one of \('gfx950', 'sm80', 'sm90'\), found 'sm70'"):
        attention.plan(SMALL, "sm70")
    with pytest.raises(ValueError, match="attention emit: expected a plan of"):
        attention.emit(AttentionConfig())


@pytest.mark.slow  # tests/kernels/sm80/test_attention_sm80.py validates the sm80 plans in the emulator
def test_sm80_is_the_real_planner_and_validates_small_shapes_in_the_cuda_emulator():
    from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionPlan

    p = attention.plan(SMALL, "sm80")
    assert isinstance(p, Sm80AttentionPlan) and attention.target_of(p) == "sm80"
    assert attention.emit(p).attrs["global_symbol"] == "main"
    with pytest.raises(ValueError, match=r"sm80 attention dtype: expected one of \('bf16', 'f16'\), found 'fp8'"):
        attention.plan(AttentionProblem(1, 2, 1, 40, 40, 64, dtype="fp8"), "sm80")
    result = attention.validate(SMALL, "sm80", seed=1)  # no GPU runner: the CUDA emulator
    assert result.ok and result.where.startswith("the CUDA emulator") and 0 < result.o_ratio <= 1
    big = AttentionProblem(1, 2, 1, 4096, 4096, 64)
    with pytest.raises(ValueError, match="needs an NVIDIA GPU"):
        attention.validate(big, "sm80")


def test_the_gfx950_build_goes_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_CDNA4_CACHE_DIR", str(tmp_path))
    config = AttentionConfig(64, 32)
    first = attention.build(SMALL, "gfx950", config)
    again = attention.build(SMALL, "gfx950", config)
    assert again.asm == first.asm and again.executable is None and first.code_object == again.code_object
    p = attention.plan(SMALL, "gfx950", config)  # K and V tiles of 32 rows, 2 + 3 stages (direct-to-LDS, deferred P V)
    assert (p.k_stages, p.v_stages, p.stage_rows) == (2, 3, 36)  # the last 1 KiB load reaches row 35
    assert "v_mfma_f32_32x32x16_bf16" in first.asm and first.kernel().lds_bytes == 5 * 36 * (64 + 8) * 2
    assert any(path.is_file() for path in tmp_path.rglob("*"))  # the entry is written there


def test_validate_runs_the_emulator_against_the_bound():
    result = attention.validate(SMALL, "gfx950", AttentionConfig(64, 32), seed=3)
    assert result.ok and result.where == "the CPU wavefront emulator"
    assert 0 < result.o_ratio <= 1 and 0 < result.lse_ratio <= 1
    with pytest.raises(ValueError, match="a GPU runner is sm80's; gfx950 validates in the CPU wavefront emulator"):
        attention.validate(SMALL, "gfx950", run=lambda problem, arrays: None)  # not silently ignored


@pytest.mark.parametrize("target", ["gfx950", "sm80"])
def test_both_targets_take_batches_more_queries_than_keys_and_a_given_scale(target):
    """Cases the per-target suites leave out: batch 2 (the (batch, head) decode), causal with Sq > Skv
    (rows 33 on see every key), GQA 2:1 and an explicit scale (0.3, not 1/8: a kernel that ignored it
    would be far off the bound)."""
    problem = AttentionProblem(2, 2, 1, 70, 33, 64, causal=True, scale=0.3)
    config = AttentionConfig(64, 32) if target == "gfx950" else None
    result = attention.validate(problem, target, config)
    assert result.ok and 0 < result.o_ratio <= 1 and 0 < result.lse_ratio <= 1, result
