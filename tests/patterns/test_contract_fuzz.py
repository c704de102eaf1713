"""The randomized contract check (tests/contract_fuzz.py), a small deterministic subset for CI.

``python benchmarks/contract_fuzz.py --cases 5000`` runs the large version and lists every bug.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
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


# every opcode at wave scope; at workgroup scope (the same lowering over 4 waves) every fourth in the default run, all
# of them with TVM_CDNA4_SLOW=1 (suite time)
@pytest.mark.parametrize("name, scope", [(n, "wave") for n in CATALOG] + [
    (n, "workgroup") if i % 4 == 0 else pytest.param(n, "workgroup", marks=pytest.mark.slow)
    for i, n in enumerate(CATALOG)])
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


# --- storage cases (issue 23): bf16 / fp8 storage anywhere, mixed storage and view dtypes ---------

def _storage(name, chains, mutation=None):
    op = CATALOG[name]
    mods = {} if op.kind == "ds_read_tr" else {m.name: 0 for m in op.modifiers}
    return cf.Case(name, "wave", 1, (1,) if op.kind == "ds_read_tr" else (1, 1, 1), mods,
                   {k: v["view"] for k, v in chains.items()}, seed=3, mutation=mutation,
                   must_refuse=mutation is not None, storage=chains)


def _chain(glob, lds, regs, view):
    return {"glob": glob, "lds": lds, "regs": regs, "view": view}


def test_the_classifier_follows_issue_23():
    bf16, fp8 = CATALOG["mfma_f32_16x16x32_bf16"], CATALOG["mfma_scale_f32_16x16x128_f8f6f4"]
    assert set(cf.view_dtypes(bf16, "A")) == {"int16", "uint16", "bfloat16"}
    assert cf.storage_format(fp8) is None  # scaled: packed words, not element storage
    # an 8-bit transpose moves bits: its contract takes every 8-bit dtype, the chain's fp8 among them
    assert set(cf.view_dtypes(CATALOG["ds_read_tr8_b64_v2i32"], "src", "float8_e5m2")) >= {"uint8", "int8", "float8_e5m2"}
    assert cf.STORAGE_DTYPES["bf16"] == ("bfloat16", "int16", "uint16") and cf.STORAGE_DTYPES["f16"] == ("float16",)


@settings(max_examples=30, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cf.storage_cases(tuple(o for o in CATALOG if cf.storage_format(CATALOG[o]))))
def test_storage_cases_are_classified_by_their_view_dtype(case):
    # one float dtype per chain (every copy a bit move); refused exactly when a view dtype is outside view_dtypes
    for name, chain in case.storage.items():
        stored = [chain[k] for k in ("glob", "lds", "regs") if chain[k] is not None]
        assert len({d for d in stored if not d.startswith(("int", "uint"))}) <= 1
        assert set(stored) <= set(cf._chain_dtypes(case.op, name, next((d for d in stored if "float8" in d), None)))
    outside = [n for n, c in case.storage.items() if c["view"] not in cf.view_dtypes(case.op, n, _fp8(c))]
    assert case.must_refuse == bool(outside) and (case.mutation is None) == (not outside)


def _fp8(chain):
    return next((d for d in chain.values() if d and "float8" in d), None)


@pytest.mark.parametrize("name, chains", [
    ("mfma_f32_16x16x32_bf16", {"A": _chain("int16", "uint16", "int16", "int16"), "B": _chain("uint16", None, "int16", "uint16")}),
    ("mfma_f32_16x16x32_fp8_fp8", {"A": _chain("uint8", "uint8", "uint8", "uint8"), "B": _chain("uint8", None, "uint8", "uint8")}),
    ("ds_read_tr16_b64_v4bf16", {"src": _chain("int16", "uint16", "int16", "uint16")}),
], ids=["bf16 int16 storage through LDS", "fp8 uint8 storage", "ds_read_tr bf16 int16 storage"])
def test_the_integer_bit_storage_spelling_computes_the_reference(name, chains):
    result = cf.check(_storage(name, chains))
    assert result.outcome == "valid_ok", f"{result.outcome}: {result.case.describe()}\n{result.detail}"


def test_a_storage_view_of_another_format_is_refused():
    chains = {"A": _chain("int16", None, "int16", "float16"), "B": _chain("int16", None, "int16", "int16")}
    result = cf.check(_storage("mfma_f32_16x16x32_bf16", chains, mutation="storage view A=float16"))
    assert result.outcome == "mutant_refused" and "operand A" in result.detail


@settings(max_examples=10, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.generate])  # no shrinking: the first wrong case is the report
@given(case=cf.storage_cases(tuple(o for o in CATALOG if cf.storage_format(CATALOG[o]))))
def test_bf16_and_fp8_storage_anywhere_is_exact_or_refused(case):
    result = cf.check(case)
    assert result.outcome not in cf.BUGS, f"{result.outcome}: {case.describe()}\n{result.detail}"
