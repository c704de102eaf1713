"""The randomized contract check (tests/contract_fuzz.py), a small deterministic subset for CI.

``python benchmarks/contract_fuzz.py --cases 5000`` runs the large version and lists every bug.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contract_fuzz as cf
from tvm_cdna4.isa import CATALOG


def _valid(name, scope, waves=2):
    op = CATALOG[name]
    repeats = (1,) if op.kind == "ds_read_tr" else (1, 1, 1)
    mods = {m.name: 0 for m in getattr(op, "modifiers", ())}
    names = ("src",) if op.kind == "ds_read_tr" else (("scale",) if op.kind == "mfma_scale" else ("A", "B", "C", "D"))
    dtypes = {k: cf.accepted_dtypes(op, k)[0] for k in names}
    return cf.Case(name, scope, waves, repeats, mods, dtypes, seed=7)


@pytest.mark.parametrize("scope", ["wave", "workgroup"])
@pytest.mark.parametrize("name", list(CATALOG))
def test_every_opcode_and_scope_computes_the_reference(name, scope):
    result = cf.check(_valid(name, scope))
    assert result.outcome == "valid_ok", f"{result.outcome}: {result.case.describe()}\n{result.detail}"


@settings(max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cf.cases())
def test_random_programs_and_mutants_are_correct_or_refused(case):
    result = cf.check(case)
    assert result.outcome not in cf.BUGS, f"{result.outcome}: {case.describe()}\n{result.detail}"


def test_the_checker_sees_a_wrong_result(monkeypatch):
    # a reference that transposes every D atom: the (correct) emulated kernel must now disagree
    case = _valid("mfma_f32_16x16x32_f16", "wave", waves=1)
    monkeypatch.setattr(cf, "_atom", lambda op, lanes: np.swapaxes(cf.reference.gather_acc(op, lanes)[0], 0, 1))
    result = cf.check(case)
    assert result.outcome == "valid_wrong" and "D elements wrong" in result.detail


def test_a_swap_of_repeat_strides_is_harmless_and_an_owner_map_swap_is_refused():
    case = _valid("mfma_f32_16x16x32_f16", "wave", waves=1)
    case.repeats = (2, 1, 2)
    iters = cf._iters(cf._layout_of(case, "A"))
    assert iters[0][0] == iters[1][0] == 2  # the M and K repeat iterators
    swapped = [iters[1][:1] + iters[0][1:], iters[0][:1] + iters[1][1:], *iters[2:]]
    case.overrides, case.mutation = {"layouts": {"A": cf._from_iters(swapped)}}, "layout A: swap M/K repeat strides"
    assert cf.check(case).outcome == "mutant_harmless"
    lane_reg = [*iters[:2], iters[2][:1] + iters[4][1:], iters[3], iters[4][:1] + iters[2][1:]]
    case.overrides, case.mutation = {"layouts": {"A": cf._from_iters(lane_reg)}}, "layout A: lane digit <-> register digit"
    result = cf.check(case)
    assert result.outcome == "mutant_refused" and "owner map violated" in result.detail


@given(value=st.sampled_from([True, 8, -1, 3.0]))
@settings(max_examples=4, derandomize=True, database=None, deadline=None)
def test_bad_modifier_values_are_refused(value):
    case = _valid("mfma_f32_16x16x4f16", "wave", waves=1)
    case.overrides, case.mutation, case.must_refuse = {"params": {"cbsz": 0, "abid": 0, "blgp": value}}, "blgp", True
    assert cf.check(case).outcome == "mutant_refused"
