"""sm90 attention on ``[B, S, H, D]`` storage (``AttentionProblem.layout = "bshd"``: a model's q / k / v before
their ``.transpose(1, 2)``): 4-D tensor maps ``(D, heads, S, batch)`` for Q, K, V (and O's TMA stores), O stored
as Q, in the CUDA emulator against the float64 reference; the problem's shapes and reference view; gfx950's
refusal naming ``layout`` (sm80's kernel reads bshd too: tests/kernels/sm80/test_sm80_attention_bshd.py); the
default's code unchanged (tests/kernels/attention/test_attention_golden.py)."""

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention.problem import AttentionProblem, dequantize, random_inputs
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig as C
from tvm_cdna4.kernels.sm90.attention_target import emit, plan
from sm90_attention_checks import check_emulated


def bshd(*args, **fields):
    return AttentionProblem(*args, layout="bshd", **fields)


CASES = {
    # two batches (the batch coordinate of the 4-D map), MHA, odd lengths: the masked tail and rows past Sq
    "MHA, 2 batches x 2 heads, 70 queries over 90 keys": (bshd(2, 2, 2, 70, 90, 64), C(64, 2)),
    # GQA 2:1 (query head h reads kv head h // 2 of the same row of storage), causal, ping-pong
    "causal, GQA 2:1, 2 batches x 4 heads, 40 queries over 70 keys, ping-pong": (
        bshd(2, 4, 2, 40, 70, 64, causal=True), C(64, 2, overlap=True, pingpong=True)),
    # O through TMA stores (4-D, rows past Sq clipped), D 128 (two 64-column boxes a row), one CTA walking 4 items
    "TMA epilogue, D 128, causal, GQA 2:1, 3 queries over 5 keys, persistent": (
        bshd(2, 2, 1, 3, 5, 128, causal=True), C(64, 2, persistent=True, ctas=1, epilogue="tma")),
    # fp8 (the transposers read V's tile as they do bhsd's)
    "fp8, 2 batches, 70 queries over 40 keys": (bshd(2, 2, 2, 70, 40, 128, dtype="fp8"), C(128, 2)),
    # O through its own buffer and TMA stores, 2 batches
    "O's own buffer, GQA 2:1, 2 batches, 70 queries over 40 keys": (
        bshd(2, 2, 1, 70, 40, 64), C(64, 2, epilogue="tma_buffer")),
}


# the epilogue variants and fp8 run with TVM_CDNA4_SLOW=1 (suite time): the map's batch coordinate, GQA and causal
# ping-pong run always, and the bit-equality test below covers the register epilogue's stores
SLOW = ("TMA epilogue, D 128, causal, GQA 2:1, 3 queries over 5 keys, persistent", "fp8, 2 batches, 70 queries over 40 keys",
        "O's own buffer, GQA 2:1, 2 batches, 70 queries over 40 keys")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_bshd_attention_in_the_emulator_is_within_the_bound(name):
    problem, config = CASES[name]
    check_emulated(problem, config)


def test_bshd_o_is_the_bhsd_kernels_o_transposed():
    """The same values stored both ways: the two kernels' O agree exactly (same tiles, same order), bshd's in q's
    [B, S, H, D] storage, and LSE is [B, H, Sq] in both."""
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays

    a = bshd(2, 2, 1, 33, 40, 64, causal=True)
    b = AttentionProblem(2, 2, 1, 33, 40, 64, causal=True)
    stored = random_inputs(a, 3)
    inputs = {"bshd": stored, "bhsd": {n: np.ascontiguousarray(x.swapaxes(1, 2)) for n, x in stored.items()}}
    outs = {}
    for problem in (a, b):
        p = plan(problem, C(64, 2))
        out = {**inputs[problem.layout], **output_arrays(problem)}
        emulate(emit(p), *(out[param.name] for param in p.params), target="sm90")
        outs[problem.layout] = out
    assert outs["bshd"]["O"].shape == (2, 33, 2, 64) and outs["bshd"]["LSE"].shape == (2, 2, 33)
    assert np.array_equal(outs["bshd"]["O"].swapaxes(1, 2), outs["bhsd"]["O"])
    assert np.array_equal(outs["bshd"]["LSE"], outs["bhsd"]["LSE"])


def test_the_problem_stores_bshd_and_the_reference_reads_it_heads_major():
    p = bshd(2, 4, 2, 5, 7, 64)
    assert p.shapes() == {"Q": (2, 5, 4, 64), "K": (2, 7, 2, 64), "V": (2, 7, 2, 64), "O": (2, 5, 4, 64),
                          "LSE": (2, 4, 5)}
    arrays = random_inputs(p)
    q, k, v = dequantize(p, arrays)
    assert q.shape == (2, 4, 5, 64) and k.shape == (2, 2, 7, 64)
    assert np.array_equal(q[1, 3, 4], np.asarray(arrays["Q"][1, 4, 3], np.float64))
    with pytest.raises(ValueError, match="attention layout: expected one of"):
        AttentionProblem(1, 1, 1, 1, 1, 64, layout="sbhd")


def test_the_maps_are_4d_with_ascending_strides():
    p = plan(bshd(2, 4, 2, 70, 90, 64), C(64, 2))
    text = emit(p).script()
    assert "rank=4" in text and "rank=3" not in text
    # Q: (D, H, Sq, B) in bf16, strides D x 2, H x D x 2, Sq x H x D x 2 bytes; box 64 x 1 x 128 x 1
    assert "64, 4, 70, 2, 128, 512, 35840, 64, 1, 128, 1, 1, 1, 1, 1" in text


def test_gfx950_refuses_bshd_naming_layout():
    # (sm80 reads bshd since stop 56: tests/kernels/sm80/test_sm80_attention_bshd.py)
    with pytest.raises(ContractError, match="gfx950 attention layout") as e:
        attention.plan(bshd(1, 2, 1, 16, 16, 64), "gfx950")
    assert e.value.operand == "layout" and "'bshd'" in str(e.value)


def test_the_cli_validates_bshd_and_gfx950_refuses_it(capsys):
    from tvm_cdna4.cli import main

    size = ["--batch", "2", "--heads", "2", "--kv-heads", "1", "--seq", "40", "--seq-kv", "70", "--head-dim", "64"]
    assert main(["attention", "--target", "sm90", "--layout", "bshd", *size, "--causal", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "causal bshd on the CUDA emulator" in out and out.rstrip().endswith("PASS")
    assert main(["attention", "--target", "gfx950", "--layout", "bshd", *size, "--emit", "config"]) == 2
    assert "error: operand layout: gfx950 attention layout" in capsys.readouterr().err
    assert main(["attention", "--kv-cache", "paged", "--layout", "bshd", "--target", "sm80", "--seq", "1",
                 "--context", "100", "--validate"]) == 2
    assert "error: --layout: dense attention's options" in capsys.readouterr().err
