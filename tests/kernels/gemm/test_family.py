"""The GEMM family (issue 34): one problem record, one table of targets, the same verbs on every
target; ``plan`` without a config is what ``--emit config`` prints and what ``build`` builds."""

import dataclasses
import json

import pytest

from tvm_cdna4.cli import main
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.common import PlanRecord
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion

VERBS = ("plan", "choose", "emit", "build", "execute", "summary")


@pytest.mark.parametrize("target", sorted(gemm.TARGETS))
def test_every_target_row_has_every_verb(target):
    row = gemm.TARGETS[target]
    assert row.name == target and row.module == f"tvm_cdna4.kernels.{target}.gemm_target"
    assert all(callable(row.verb(v)) for v in VERBS)


@pytest.mark.parametrize("kwargs, words", [
    (dict(M=0, N=8, K=8), "M: expected a positive int"),
    (dict(M=8, N=True, K=8), "N: expected a positive int"),
    (dict(M=8, N=8, K=8, layout="NT"), "layout: expected one of"),
    (dict(M=8, N=8, K=8, dtype="f8"), "dtype: expected one of"),
    (dict(M=8, N=8, K=8, out_dtype="i8"), "out_dtype: expected one of"),
    (dict(M=8, N=8, K=8, groups=4), "expected M=None with groups=4"),
    (dict(M=None, N=8, K=8, batch=2), "batch: a batch axis is for a static M"),
    (dict(M=8, N=8, K=8, fusion="bias"), "fusion: expected a kernels.gemm.epilogue.Fusion"),
])
def test_a_bad_problem_is_refused_naming_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words):
        GemmProblem(**kwargs)


def test_an_unknown_target_and_a_foreign_plan_are_refused():
    with pytest.raises(ValueError, match=r"GEMM target: expected one of \('gfx950', 'sm80', 'sm90'\), found 'sm70'"):
        gemm.plan(GemmProblem(8, 8, 8), "sm70")
    with pytest.raises(ValueError, match="expected a plan of one of"):
        gemm.emit(object())
    with pytest.raises(TypeError, match="expected a kernels.gemm.GemmProblem"):
        gemm.plan((8, 8, 8), "sm80")


CLI_CASES = [  # (problem, CLI flags): static problems without a tile option: the cost model's plan
    (GemmProblem(200, 4096, 4096, "bf16", "nt"), "--dtype bf16 --layout nt -M 200 -N 4096 -K 4096"),
    (GemmProblem(1, 4096, 4096, "f16", "nt"), "--dtype f16 --layout nt -M 1 -N 4096 -K 4096"),  # sm80: decode kernel
    (GemmProblem(3000, 1024, 512, "f16", "tn", "bf16", Fusion(bias=True, activation="gelu")),
     "--dtype f16 --layout tn --out-dtype bf16 -M 3000 -N 1024 -K 512 --bias --activation gelu"),
]


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
@pytest.mark.parametrize("problem, flags", CLI_CASES, ids=["m200", "m1", "fused"])
def test_plan_without_a_config_is_what_emit_config_prints(target, problem, flags, capsys):
    p = gemm.plan(problem, target)
    assert isinstance(p, PlanRecord)
    assert main(["gemm", "--target", target, *flags.split(), "--emit", "config"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(p.to_json())


def test_gfx950_build_without_a_config_builds_the_cost_models_plan(monkeypatch):
    """The library's build and the CLI agree (issue 34: ``build`` built the dtype's default tile)."""
    from tvm_cdna4.kernels.gfx950 import gemm as g

    built = []
    monkeypatch.setattr(g, "build_plan", lambda p, cache=True: built.append(p))
    g.build(200, 4096, 4096, "bf16", "nt")
    gemm.build(GemmProblem(200, 4096, 4096, "bf16", "nt"), "gfx950")
    chosen = gemm.plan(GemmProblem(200, 4096, 4096, "bf16", "nt"), "gfx950")
    assert built == [chosen, chosen] and chosen.config != g.default_config("bf16")


@pytest.mark.parametrize("problem, kwargs", [
    (GemmProblem(64, 64, 64, "f16"), {}),
    (GemmProblem(33, 40, 96, "bf16", "nn", "bf16", Fusion(bias=True, activation="silu")), {}),
    (GemmProblem(64, 64, 64, "mxfp4", "nt"), {}),
    (GemmProblem(None, 72, 128, "f16", "nt"), {"m": 37}),
    (GemmProblem(None, 72, 128, "bf16", "nt", groups=3), {"group_rows": (5, 0, 17)}),
], ids=["plain", "fused", "mx", "dynamic", "grouped"])
def test_gfx950_validates_in_the_emulator(problem, kwargs):
    v = gemm.validate(problem, "gfx950", seed=1, **kwargs)
    assert v.ok and v.where == "the CPU wavefront emulator", v


def test_sm80_validates_in_the_cuda_emulator_without_a_gpu():
    v = gemm.validate(GemmProblem(40, 64, 256, "bf16", "tn", "bf16", Fusion(residual=True, row_scale=True)), "sm80")
    assert v.ok and v.where.startswith("the CUDA emulator"), v


def test_a_wrong_kernel_fails_validation(monkeypatch):
    """The check can fail: a kernel that computes C^T-wrong rows is over the bound."""
    from tvm_cdna4.kernels.gfx950 import gemm_target

    real = gemm_target.execute

    def swapped(p, data, run=None):
        c, where = real(p, data, run)
        return c[::-1].copy(), where

    monkeypatch.setattr(gemm_target, "execute", swapped)
    assert not gemm.validate(GemmProblem(32, 32, 64, "f16"), "gfx950").ok


def test_validation_needs_the_run_time_rows_of_a_dynamic_or_grouped_problem():
    with pytest.raises(ValueError, match="expected the run-time m"):
        gemm.validate(GemmProblem(None, 64, 64), "gfx950")
    with pytest.raises(ValueError, match="expected group_rows, 2 row counts"):
        gemm.validate(GemmProblem(None, 64, 64, groups=2), "gfx950", group_rows=(1, 2, 3))


def test_tile_options_become_each_targets_config():
    """``config_from_options``: the CLI's tile flags become the target's config (none: the cost model's,
    None); an option another target has is refused by name; ``code`` is what ``--emit`` prints of a build."""
    from tvm_cdna4.kernels.gfx950.gemm_plan import Gfx950GemmConfig
    from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig

    problem = GemmProblem(256, 256, 1024, "bf16", "nt")
    assert gemm.config_from_options(problem, "sm80") is None and gemm.config_from_options(problem, "gfx950") is None
    sm80 = gemm.config_from_options(problem, "sm80", block="64x128x32", warps="2x2", stages=3, group_m=4)
    assert isinstance(sm80, GemmConfig)
    assert (sm80.block_m, sm80.block_n, sm80.block_k, sm80.warps_m, sm80.warps_n, sm80.stages, sm80.group_m) == (
        64, 128, 32, 2, 2, 3, 4)
    gfx = gemm.config_from_options(problem, "gfx950", block="64x64x32", mfma="32x32")
    assert isinstance(gfx, Gfx950GemmConfig) and (gfx.block_m, gfx.block_n, gfx.block_k, gfx.mfma) == (64, 64, 32, "32x32")
    assert gemm.plan(problem, "gfx950", gfx).config == gfx
    with pytest.raises(ValueError, match="^--ctas is an sm80 option"):
        gemm.config_from_options(problem, "gfx950", ctas=0)
    with pytest.raises(ValueError, match="^--mfma is a gfx950 option"):
        gemm.config_from_options(problem, "sm80", mfma="16x16")
    with pytest.raises(ValueError, match="^--target sm80 supports --dtype f16/bf16"):
        gemm.config_from_options(GemmProblem(64, 64, 64, "fp8"), "sm80")
    assert gemm.code("gfx950") == {"asm": "asm", "llvm": "llvm_ir"} and gemm.code("sm80") == {"cuda": "source"}
    assert gemm.TARGETS["sm80"].aliases == ("sm_80",)


def test_sm80_reduction_replaces_the_chosen_configs():
    problem = GemmProblem(7, 1024, 8192, "bf16", "nt", "bf16")
    chosen = gemm.plan(problem, "sm80")
    ordered = gemm.plan(problem, "sm80", reduction="ordered")
    assert chosen.config.reduction == "atomic" and ordered.config == dataclasses.replace(chosen.config,
                                                                                         reduction="ordered")
