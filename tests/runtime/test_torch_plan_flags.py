"""``tvm_cdna4.torch``'s kernel caches key their planners' module switches (each family's ``PLAN_FLAGS``,
``kernels.flags``): a flag toggled between two calls of one shape forgets the prepared launches, plans and builds
for its new value, and set back finds the earlier kernel. On CPU tensors with the launches stubbed
(``benchmarks/dispatch.py``'s ``stubbed``: the kernels are planned, not built)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4.kernels import flags  # noqa: E402
from tvm_cdna4.kernels.sm80 import decode_plan  # noqa: E402
from tvm_cdna4.kernels.sm90 import attention_cost, gemm_cost, gemm_shift  # noqa: E402

dispatch = benchmark_module("dispatch")
BF = dict(dtype=torch.bfloat16)


@pytest.fixture
def checked(monkeypatch):
    """``(arch, target) -> checks``: the stubbed ops on a device of that target; ``checks`` counts the checked
    path's calls (every op's argument checks run there, never in a prepared launch)."""
    import contextlib

    checks = []
    for name in ("check_arguments", "check_grouped_arguments", "check_attention_arguments"):
        real = getattr(tt, name)
        monkeypatch.setattr(tt, name, lambda *a, _real=real, **k: (checks.append(1), _real(*a, **k))[1])

    def on(arch, target):
        stack.enter_context(dispatch.stubbed(arch, target))
        return checks
    with contextlib.ExitStack() as stack:
        yield on


OTHER = True  # a SHIFT_TMA value other than its default (gemm_shift.HALF since stop 56)


def _toggled(call, plan_of, module, name, value, monkeypatch, checks):
    """``plan_of`` the kernel cache's newest entry after a call, a prepared call (no checks), a call with
    ``module.name`` set to ``value`` (checked again: the prepared launches forgotten), then a call with it set back
    (the first kernel's key found): ``(before, after)``. (A dynamic kernel plans a bucket on its first use: under
    the flags of its key, which the op looked it up by.)"""
    call()
    before = list(tt.kernel_cache().values())[-1]
    planned = [plan_of(before)]
    n = len(checks)
    call()
    assert len(checks) == n and tt._CALLS  # the prepared launch, no checks
    monkeypatch.setattr(module, name, value)
    assert tt._CALLS == {}  # the set forgot every prepared launch
    call()
    assert len(checks) > n  # the checked path: planned under the new value
    after = list(tt.kernel_cache().values())[-1]
    assert after is not before and len(tt.kernel_cache()) == 2
    planned.append(plan_of(after))
    monkeypatch.undo()  # the flag set back (and the checks' counters gone)
    call()
    assert len(tt.kernel_cache()) == 2  # the first kernel's key found again: nothing planned anew
    return tuple(planned)


def test_toggling_shift_last_replans_the_sm90_gemm(checked, monkeypatch):
    checks = checked("sm_90", "sm90")
    a, b = torch.zeros(200, 4096, **BF), torch.zeros(4096, 4096, **BF)
    shifts = _toggled(lambda: tt.gemm(a, b), lambda k: k.dynamic.plan(200).config.shift_last, gemm_shift,
                      "SHIFT_LAST", False, monkeypatch, checks)
    assert shifts == (True, False)


def test_toggling_wide_decode_replans_the_sm80_gemm(checked, monkeypatch):
    checks = checked("sm_80", "sm80")
    a, b = torch.zeros(24, 512, **BF), torch.zeros(512, 512, **BF)
    kinds = _toggled(lambda: tt.gemm(a, b), lambda k: type(k.dynamic.plan(24)).__name__, decode_plan,
                     "WEIGH_WIDE_DECODE", True, monkeypatch, checks)
    assert kinds == ("GemmPlan", "DecodePlan")  # the tile GEMM at 24 rows; the decode kernel up to DECODE_MAX_M


def test_toggling_the_grouped_walk_replans_the_sm90_grouped_gemm(checked, monkeypatch):
    checks = checked("sm_90", "sm90")
    x, w = torch.zeros(512, 512, **BF), torch.zeros(4, 512, 512, **BF)  # 128 rows a group: the sm90 grouped kernel
    offsets = torch.tensor([0, 128, 256, 384, 512], dtype=torch.int32)
    walks = _toggled(lambda: tt.grouped_gemm(x, w, offsets), lambda k: k.dynamic.plan(128).config.tile_walk,
                     gemm_cost, "GROUPED_WALK", "windows", monkeypatch, checks)
    assert walks == ("prefix", "windows")


def test_toggling_weigh_consumers_replans_the_sm90_attention(checked, monkeypatch):
    checks = checked("sm_90", "sm90")
    q = torch.zeros(4, 16, 1024, 64, **BF)
    consumers = _toggled(lambda: tt.attention(q, q, q), lambda k: k.plan.config.consumers, attention_cost,
                         "WEIGH_CONSUMERS", False, monkeypatch, checks)
    assert consumers == (3, 2)


def test_a_flag_set_past_its_module_is_not_seen_but_one_set_through_it_is(monkeypatch):
    """The rule of ``kernels.flags``: the kept values go on ``module.FLAG = value`` only."""
    from tvm_cdna4.kernels.sm90.gemm_target import PLAN_FLAGS, plan_flags

    first = plan_flags()
    index = PLAN_FLAGS.index(("sm90.gemm_shift", "SHIFT_TMA"))
    assert first[index] != OTHER
    assert isinstance(gemm_shift, flags._Watched) and plan_flags() is first  # kept: one attribute test a read
    monkeypatch.setitem(vars(gemm_shift), "SHIFT_TMA", OTHER)
    assert plan_flags() is first  # past the module's __setattr__: not seen (the documented limit)
    monkeypatch.undo()
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", OTHER)
    assert plan_flags()[index] == OTHER and plan_flags()[:index] == first[:index]


def test_clearing_the_kernel_cache_reads_a_flag_written_past_its_module(monkeypatch):
    """The documented remedy for a flag written past its module (``kernels.flags``: clear the caches): after
    ``kernel_cache().clear()`` the families' ``plan_flags()`` hold the value the module has, so the next call plans
    (and keys its kernel) under it, not under the value kept before."""
    from tvm_cdna4.kernels.sm90.gemm_target import PLAN_FLAGS, plan_flags

    index = PLAN_FLAGS.index(("sm90.gemm_shift", "SHIFT_TMA"))
    first = plan_flags()
    assert first[index] != OTHER
    monkeypatch.setitem(vars(gemm_shift), "SHIFT_TMA", OTHER)  # past the module: not seen ...
    assert plan_flags() is first
    tt.kernel_cache().clear()  # ... until the caches are cleared
    seen = plan_flags()
    monkeypatch.undo()
    tt.kernel_cache().clear()  # the value of before read again for the tests after this one
    assert seen[index] == OTHER and plan_flags() == first


def test_a_flag_set_while_a_call_prepares_its_launch_is_not_lost(checked, monkeypatch):
    """Another thread's set of a flag between a call's planning and the store of its prepared launch (here: in the
    store) forgets that launch too: the next call of the shape takes the checked path and the new value's kernel."""
    checks = checked("sm_90", "sm90")
    a, b = torch.zeros(200, 4096, **BF), torch.zeros(4096, 4096, **BF)
    store = tt._store

    def racing(key, launch):
        monkeypatch.setattr(gemm_shift, "SHIFT_LAST", False)  # the other thread's set, before this call stores
        store(key, launch)

    monkeypatch.setattr(tt, "_store", racing)
    tt.gemm(a, b)
    monkeypatch.setattr(tt, "_store", store)
    n = len(checks)
    tt.gemm(a, b)
    assert len(checks) > n  # not the launch planned under the value of before
    assert list(tt.kernel_cache().values())[-1].dynamic.plan(200).config.shift_last is False
