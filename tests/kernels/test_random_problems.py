"""Random problems through the families' public API, every family and target (tests/problem_fuzz.py):
the schedule-level slice of the randomized checks, derandomized (fixed seeds).

Valid problems must validate within the error bound (gfx950 in the CPU wavefront emulator, sm80 in
the CUDA emulator; sm90, GEMM only, too); invalid ones must be refused with a ValueError (ContractError is one) naming the
change. ``TVM_CDNA4_FUZZ=N`` draws N problems per family x target instead (70 % valid; seed
``TVM_CDNA4_FUZZ_SEED``, default 0); ``python benchmarks/random_problems.py`` runs a sample and
prints the counts by outcome.
"""

import collections
import os

import pytest

import problem_fuzz as rp
from tvm_cdna4.kernels import attention, gemm
from tvm_cdna4.kernels.gemm import GemmProblem

FUZZ = int(os.environ.get("TVM_CDNA4_FUZZ") or 0)
SEED = int(os.environ.get("TVM_CDNA4_FUZZ_SEED") or 0)
VALID = {("gemm", "gfx950"): 3, ("gemm", "sm80"): 2, ("gemm", "sm90"): 2, ("attention", "gfx950"): 2,
         ("attention", "sm80"): 2}
"""Valid problems per family x target in CI (about 1 s of CPU each)."""
INVALID = 30  # refusals are cheap: no kernel runs


def _cases(valid: bool) -> list:
    cases = []
    for (family, target), n in VALID.items():
        if FUZZ:
            n = round(0.7 * FUZZ) if valid else FUZZ - round(0.7 * FUZZ)
        else:
            n = n if valid else INVALID
        cases += rp.sample(family, target, n, SEED, invalid_rate=0.0 if valid else 1.0)
    return cases


def _id(case) -> str:
    return case.describe().split(" seed=")[0]


@pytest.mark.parametrize("case", _cases(valid=True), ids=_id)
def test_a_random_valid_problem_validates_within_the_bound(case):
    result = rp.check(case)
    assert result.outcome == "pass", f"{result.outcome}: {case.describe()}\n{result.detail}"


@pytest.mark.parametrize("case", _cases(valid=False), ids=_id)
def test_a_random_invalid_problem_is_refused_with_a_value_error_naming_it(case):
    result = rp.check(case)
    assert result.outcome == "refused", f"{result.outcome}: {case.describe()}\n{result.detail}"


def test_an_sm80_plan_of_one_k_tile_validates():
    # formerly a known bug of the draw (a shared stage read that nobody wrote; fixed by KStep.fragments)
    case = rp.Case("gemm", "sm80", dict(M=40, N=64, K=96, dtype="bf16", layout="tn", out_dtype="bf16"))
    assert rp.known_bug(case) is None
    assert gemm.plan(case.problem(), "sm80").kloop.k_tiles == 1
    assert gemm.validate(case.problem(), "sm80").ok


# ------------------------------------------------------------------- the draw covers what it says


def _drawn(family, target, n=300):
    return rp.sample(family, target, n, seed=1, invalid_rate=0.3, avoid_known=False)


def test_every_family_and_target_of_the_draw_is_in_the_ci_slice():
    assert set(VALID) == set(rp.KINDS) == {(f, t) for f in rp.FAMILIES for t in rp.targets(f)}
    assert rp.targets("gemm") == ("gfx950", "sm80", "sm90") and rp.targets("attention") == ("gfx950", "sm80")


def test_the_gemm_draw_covers_every_dtype_layout_output_and_kind():
    for target, dtypes in (("gfx950", {*rp.GFX950_OUTS, *rp.MX}), ("sm80", set(rp.SM80_DTYPES))):
        valid = [c for c in _drawn("gemm", target) if c.invalid is None]
        problems = [c.problem() for c in valid]
        assert {p.dtype for p in problems} == dtypes
        assert {p.layout for p in problems} == set(gemm.LAYOUTS)
        assert {p.out for p in problems} == ({"f32", "f16", "bf16", "i32", "f64"} if target == "gfx950"
                                              else {"f32", "f16", "bf16"})
        assert {p.fusion.activation for p in problems} == {None, "relu", "silu", "gelu"}
        assert all(any(getattr(p.fusion, k) for p in problems) for k in ("bias", "residual", "row_scale", "col_scale"))
        assert any(p.dynamic for p in problems) and any(p.grouped for p in problems)
        assert any(p.M is not None and p.M % 2 and p.N % 2 and p.K % 2 for p in problems)  # odd M, N, K together
        assert any(0 in c.run.get("group_rows", ()) for c in valid)  # empty groups
        assert any(p.K >= 512 and (p.M or 0) <= 24 for p in problems)  # long K, few rows: K splits
        assert any(c.run.get("reduction") == "ordered" for c in valid) == (target == "gfx950")
        assert any(p.batch for p in problems) == (target == "gfx950")
        assert all(p.K % 32 == 0 and not p.dynamic and not p.grouped for p in problems if p.mx)


def test_the_sm90_gemm_draw_covers_its_scope_and_stays_inside_it():
    valid = [c for c in _drawn("gemm", "sm90") if c.invalid is None]
    problems = [c.problem() for c in valid]
    assert {p.dtype for p in problems} == {"f16", "bf16", "fp8"} and {p.out for p in problems} == {"f32", "f16", "bf16"}
    assert {p.layout for p in problems} == {"nt"} and all(p.K % rp.SM90_K_STEP[p.dtype] == 0 for p in problems)
    assert {p.dynamic for p in problems} == {False, True} and not any(p.grouped or p.batch for p in problems)
    assert {p.fusion.activation for p in problems} == {None, "relu", "silu", "gelu"}
    assert all(any(getattr(p.fusion, k) for p in problems) for k in ("bias", "residual", "row_scale", "col_scale"))
    assert any(p.K % 64 and p.N % 2 and p.M and p.M % 2 for p in problems)  # ragged against the tiles
    rows = [p.M or c.run["m"] for c, p in zip(valid, problems)]
    assert any(r <= 16 for r in rows) and any(r > 16 for r in rows)  # the decode kernel and the TMA + wgmma one
    assert any(p.K >= 512 and r > 16 for p, r in zip(problems, rows))  # long K on the sm90 kernel: ring laps
    assert all(r * p.N * p.K <= rp.SM80_MACS for p, r in zip(problems, rows))  # the CUDA emulator's reach


def test_the_attention_draw_covers_causal_gqa_odd_lengths_head_dims_and_fp8():
    for target in rp.targets("attention"):
        problems = [c.problem() for c in _drawn("attention", target) if c.invalid is None]
        assert {p.causal for p in problems} == {False, True} and {p.head_dim for p in problems} == {64, 128}
        assert {p.dtype for p in problems} == ({"bf16", "f16", "fp8"} if target == "gfx950" else {"bf16", "f16"})
        assert any(p.group > 1 for p in problems) and any(p.scale is not None for p in problems)
        assert any(p.seq_q % 2 and p.seq_kv % 2 and p.seq_q != p.seq_kv for p in problems)
        assert all(p.batch * p.heads * p.seq_q * p.seq_kv <= attention.SM80_EMULATED_PAIRS for p in problems)


def test_every_change_is_drawn_and_the_draw_is_reproducible():
    changes = collections.Counter(c.invalid for f in rp.FAMILIES for t in rp.targets(f) for c in _drawn(f, t, 600)
                                  if c.invalid)
    names = {*(r[0] for r in rp.GEMM_RECORD), *(r[1] for r in rp.RUN_ROWS), *(r[0] for r in rp.ATTENTION_RECORD),
             "sm80 dtype", "sm80 out i32 / f64", "sm80 batch", "sm80 fp8", "gfx950 out the dtype does not produce",
             "a fused epilogue on an i32 / f64 accumulator", "MX K off the 32-element blocks", "MX batch",
             "a fused epilogue with a batch axis", "MX out bf16", "dynamic / grouped MX",
             "dynamic / grouped with A stored [K, M]", "sm90 layout nn / tn / tt", "sm90 K % 8 != 0", "sm90 dtype",
             "sm90 out i32 / f64", "sm90 batch", "sm90 grouped fp8"}
    assert set(changes) == names
    assert [c.describe() for c in _drawn("gemm", "gfx950", 20)] == [c.describe() for c in _drawn("gemm", "gfx950", 20)]


def test_the_limits_are_the_packages():
    from tvm_cdna4.kernels.gfx950.gemm_config import DTYPES
    from tvm_cdna4.kernels.gemm.problem import DENSE_DTYPES, MX_FORMATS
    from tvm_cdna4.kernels.sm80 import gemm_target
    from tvm_cdna4.kernels.sm90 import gemm_plan as sm90_plan, gemm_target as sm90_target

    assert rp.SM80_MACS == gemm_target.EMULATED_MACS and rp.SM80_PAIRS == attention.SM80_EMULATED_PAIRS
    assert rp.SM80_MACS == sm90_target.EMULATED_MACS and rp.SM90_LAYOUTS == tuple(sm90_plan.LAYOUTS)
    assert set(rp.SM90_DTYPES) == set(sm90_plan.DTYPES) and set(rp.SM90_OUTS) == set(sm90_plan.OUT_DTYPES)
    assert {d: rp.SM90_K_STEP[d] * sm90_plan.ELEMENT_BYTES[d] for d in sm90_plan.DTYPES} == dict.fromkeys(
        sm90_plan.DTYPES, sm90_plan.STRIDE_ALIGN_BYTES)  # rows of K elements in 16-byte strides
    assert rp.GFX950_OUTS == {k: v.outs for k, v in DTYPES.items()} and set(rp.GFX950_OUTS) == set(DENSE_DTYPES)
    assert set(rp.MX) == set(MX_FORMATS)
    cases = rp.sample("gemm", "sm80", 8, seed=2, invalid_rate=0.0, redrawn=(redrawn := collections.Counter()))
    assert len(cases) == 8 and not redrawn  # no known bug open: nothing is drawn again


# ------------------------------------------------------------------------ the checker can fail


def _valid(target="gfx950", **fields):
    return rp.Case("gemm", target, {**dict(M=24, N=40, K=64, dtype="f16", layout="nt"), **fields}, seed=3)


def test_a_wrong_kernel_is_a_wrong_result(monkeypatch):
    from tvm_cdna4.kernels.gfx950 import gemm_target

    real = gemm_target.execute
    monkeypatch.setattr(gemm_target, "execute", lambda p, data, run=None: (lambda c, w: (c[::-1].copy(), w))(
        *real(p, data, run)))
    result = rp.check(_valid())
    assert result.outcome == "wrong" and "of the bound" in result.detail


def test_every_other_outcome_is_reachable(monkeypatch):
    assert rp.check(_valid(M=0)).outcome == "valid_refused"
    invalid = _valid(N=7)
    invalid.invalid, invalid.expect = "not really", "anything"
    monkeypatch.setattr(gemm, "validate", lambda *a, **k: gemm.Validation(0.5, "nowhere", 0.0))
    assert rp.check(invalid).outcome == "invalid_accepted"
    monkeypatch.setattr(gemm, "validate", lambda *a, **k: {}["oops"])
    assert rp.check(_valid()).outcome == "internal_error"
    monkeypatch.undo()
    refused = _valid(layout="NT")
    refused.invalid, refused.expect = "layout upper case", r"dtype: expected"
    assert rp.check(refused).outcome == "refused_otherwise"
    refused.expect = r"layout: expected one of"
    assert rp.check(refused).outcome == "refused"
    assert set(rp.BUGS) == {"wrong", "valid_refused", "invalid_accepted", "refused_otherwise", "internal_error"}


def test_a_case_is_the_problem_it_describes():
    case = rp.Case("gemm", "gfx950", dict(M=None, N=8, K=32, dtype="bf16", layout="nn",
                                          fusion={"bias": True, "activation": "silu"}, groups=2),
                   {"group_rows": (0, 5)}, seed=4)
    assert case.problem() == GemmProblem(None, 8, 32, "bf16", "nn", fusion=gemm.Fusion(bias=True, activation="silu"),
                                         groups=2)
    assert "group_rows=(0, 5)" in case.describe() and case.describe().endswith("| valid")


def test_the_benchmark_counts_each_outcome_per_family_and_target(capsys):
    from benchmark_modules import benchmark_module

    bench = benchmark_module("random_problems")
    rows = [{"family": "gemm", "target": "sm80", "outcome": o, "case": f"case {i}", "detail": "0.5 of the bound on x",
             "seconds": 1.0, "cpu": 0.5} for i, o in enumerate(["pass", "pass", "refused"])]
    rows.append({"redrawn": {"sm80 GEMM, one K tile per CTA": 4}, "family": "gemm", "target": "sm80"})
    assert bench.report(rows) == 0
    out = capsys.readouterr().out
    assert "| gemm | sm80 | 3 | 2 | 1 | 0 | 0 | 0 | 0 | 0 |" in out and "one K tile per CTA: 4 draws" in out
    rows.append({"family": "attention", "target": "gfx950", "outcome": "internal_error", "case": "case 9",
                 "detail": "KeyError: 'x'", "seconds": 1.0})
    assert bench.report(rows) == 1
    out = capsys.readouterr().out
    assert "| attention | gfx950 | 1 | 0 | 0 | 0 | 1 | 0 | 0 | 0 |" in out and "- internal_error attention gfx950: KeyError" in out


def test_an_sm90_pingpong_plan_of_two_tiles_per_cta_validates_in_the_emulator():
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    problem = GemmProblem(64, 128, 128, "f16", "nt")
    # 2 tiles on 1 CTA: consumer 1's tile waits (bar.sync) for consumer 0's mainloop (its later bar.arrive)
    v = gemm.validate(problem, "sm90", Sm90Config(64, 64, 3, 2, ctas=1, schedule="pingpong"))
    assert v.ok and v.ratio <= 1.0
