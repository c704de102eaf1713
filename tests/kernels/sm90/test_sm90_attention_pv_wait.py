"""``Sm90AttentionConfig.exps_before_pv_wait`` (stop 52, attnlat2): the overlapped loop's P V wait held behind the
``n``-th exp of a tile by a shared store of it (``attention_emit.hold_pv_wait``): exact in the CUDA emulator (O and
LSE; causal, GQA, odd lengths, D 64 / 128), the store where the CUDA C puts it, the sink slot, the refusals; off, the
code is the default's (the golden digests, tests/kernels/attention/test_attention_golden.py)."""

import re

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention.problem import AttentionProblem
from tvm_cdna4.kernels.sm90.attention_emit import exp_register
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C
from sm90_attention_checks import check_emulated

CASES = {
    "causal, GQA 2:1, 70 queries over 200 keys, D 64, ping-pong, the 8th exp": (
        AttentionProblem(1, 2, 1, 70, 200, 64, causal=True), C(64, 2, True, True, True, exps_before_pv_wait=8)),
}
SLOW_CASES = {
    "odd lengths 130, D 128, f16, overlap, the last exp": (
        AttentionProblem(1, 1, 1, 130, 300, 128, dtype="f16"), C(64, 2, overlap=True, exps_before_pv_wait=32)),
    "D 128, causal, GQA 2:1, 250 tokens, ping-pong, 2 persistent CTAs, the first exp of row 1": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True),
        C(128, 2, True, True, True, persistent=True, ctas=2, exps_before_pv_wait=33)),
    "fp8 (P packed to e4m3, no F2FP), 200 queries over 130 keys, overlap": (
        AttentionProblem(1, 2, 2, 200, 130, 128, dtype="fp8"), C(128, 2, overlap=True, exps_before_pv_wait=8)),
}


@pytest.mark.parametrize("name", CASES)
def test_emulated_within_the_bound(name):
    check_emulated(*CASES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_CASES)
def test_more_emulated_shapes_within_the_bound(name):
    check_emulated(*SLOW_CASES[name])


def steady_loop(source: str) -> str:
    """The overlapped loop's body over tiles 1 .. n_kv - 1, from its ``for`` to its P V wait."""
    start = re.search(r"for \(int j_\d+ = 1;", source).start()
    return source[start:source.index("wait_group_sync_aligned_0();", start) + 30]


@pytest.mark.parametrize("n", [1, 8, 16, 17, 32])
def test_the_store_holds_the_nth_exp_before_the_wait(n):
    """The n-th exp softmax writes in the loop (``exp_register``) is stored, by thread 0 of the warpgroup, to its
    warpgroup's sink word after the mbarriers (one a consumer warpgroup: one word written by two warpgroups is a race
    to the emulator), between the last exp and the P V wait; without the option nothing is stored there and the
    mbarriers are the default's."""
    problem = AttentionProblem(1, 2, 1, 300, 300, 64, causal=True)
    plan = attention.plan(problem, "sm90", C(64, 2, True, True, True, exps_before_pv_wait=n))
    default = attention.plan(problem, "sm90", C(64, 2, True, True, True))
    assert (plan.barriers, plan.sink) == (default.barriers + 2, default.barriers)
    source = attention.build(problem, "sm90", plan.config).source
    loop = steady_loop(source)
    exps = [int(k) for k in re.findall(r"s_ptr\[(\d+)\] = exp2f", loop)]
    assert len(exps) == 32 and exps[n - 1] == exp_register(plan, n)
    store = re.search(r"float (\w+) = s_ptr\[(\d+)\];\s*\n\s*tvm_builtin_ptx_st_shared_b32_pred\("
                      r"tvm_builtin_cuda_cvta_generic_to_shared\(\(&\(MB_ptr\[\(wg_ptr\[0\] \+ (\d+)\)\]\)\)\), .*threadIdx.x\) % 128\) == 0",
                      loop)
    assert store and (int(store.group(2)), int(store.group(3))) == (exp_register(plan, n), plan.sink)
    last_exp = loop.rindex("= exp2f")
    assert last_exp < store.start() < loop.index("wait_group_sync_aligned_0();")
    assert source.count("st_shared_b32_pred(") == 2  # its definition and the one store
    plain = attention.build(problem, "sm90", default.config).source
    assert "st_shared" not in plain and f"MB_ptr[{default.barriers}];" in plain


@pytest.mark.parametrize("config", [
    C(64, 2, exps_before_pv_wait=8),  # no P V in flight over the softmax without overlap
    C(64, 2, True, exps_before_pv_wait=33),  # a thread holds 32 scores of a 64-key tile
    C(64, 2, True, exps_before_pv_wait=-1),
    C(64, 2, True, exps_before_pv_wait=True),
])
def test_refusals_name_the_field(config):
    with pytest.raises(ContractError) as err:
        attention.plan(AttentionProblem(1, 1, 1, 64, 64, 64), "sm90", config)
    assert err.value.operand == "exps_before_pv_wait"
