"""sm80 attention on ``[B, S, H, D]`` storage (``AttentionProblem.layout = "bshd"``, stop 56): the cp.async copies
of Q, K, V and O's stores index the stored tensors (``kernels.sm80.attention_emit.global_at``: row stride ``H D``,
head stride ``D``). In the CUDA emulator the bshd kernel's O is the bhsd kernel's, transposed, bit for bit, and LSE
equal; validated against the float64 reference; the CLI validates it (gfx950's refusal:
tests/kernels/sm90/test_sm90_attention_bshd.py); the bhsd kernels' code is unchanged
(tests/kernels/attention/test_attention_golden.py)."""

import numpy as np
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention.problem import AttentionProblem, output_arrays, random_inputs
from tvm_cdna4.kernels.sm80.attention_emit import emit_sm80_attention
from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionConfig as C
from tvm_cdna4.kernels.sm80.attention_plan import plan_sm80_attention

CASES = {
    # GQA 2:1 (query head h reads kv head h // 2 of the same storage row), causal, odd lengths: rows past Sq
    # (O's guarded stores), the masked tail tile, two batches
    "causal, GQA 2:1, 2 batches, 33 queries over 33 keys": (dict(batch=2, heads=2, kv_heads=1, seq_q=33, seq_kv=33,
                                                                  head_dim=64, causal=True), C(16, 2)),
    # non-causal, Sq != Skv (K / V rows of another extent than Q's), MHA, D 128
    "non-causal, 2 heads, 20 queries over 37 keys, D 128": (dict(batch=1, heads=2, kv_heads=2, seq_q=20, seq_kv=37,
                                                                   head_dim=128), C(16, 2)),
}


def _emulated(fields: dict, config, layout: str, stored: dict) -> dict:
    p = plan_sm80_attention(AttentionProblem(**fields, layout=layout), config)
    out = {**stored, **output_arrays(p.problem)}
    emulate(emit_sm80_attention(p), *(out[param.name] for param in p.params), target="sm80")
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_bshd_o_is_the_bhsd_kernels_o_transposed_bit_for_bit(name):
    fields, config = CASES[name]
    stored = random_inputs(AttentionProblem(**fields, layout="bshd"), 5)
    bshd = _emulated(fields, config, "bshd", stored)
    bhsd = _emulated(fields, config, "bhsd", {n: np.ascontiguousarray(x.swapaxes(1, 2)) for n, x in stored.items()})
    B, H, Sq, D = fields["batch"], fields["heads"], fields["seq_q"], fields["head_dim"]
    assert bshd["O"].shape == (B, Sq, H, D) and bshd["LSE"].shape == (B, H, Sq)
    assert not np.isnan(bshd["O"].astype(np.float32)).any()  # every row written where bshd's strides put it
    assert np.array_equal(bshd["O"].swapaxes(1, 2), bhsd["O"])
    assert np.array_equal(bshd["LSE"], bhsd["LSE"])


def test_bshd_is_within_the_bound_of_the_reference():
    fields, config = CASES["causal, GQA 2:1, 2 batches, 33 queries over 33 keys"]
    v = attention.validate(AttentionProblem(**fields, layout="bshd"), "sm80", config, seed=2)
    assert v.ok and v.where.startswith("the CUDA emulator") and v.o_ratio > 0 and v.lse_ratio > 0, v


def test_the_copies_and_stores_take_the_bshd_strides():
    """The kernel's parameters are the stored shapes; its Q / O index puts the row before the head."""
    p = plan_sm80_attention(AttentionProblem(1, 4, 2, 40, 56, 64, layout="bshd"), C(16, 2))
    assert [q.shape for q in p.params] == [(1, 40, 4, 64), (1, 56, 2, 64), (1, 56, 2, 64), (1, 40, 4, 64), (1, 4, 40)]
    bhsd = emit_sm80_attention(plan_sm80_attention(AttentionProblem(1, 4, 2, 40, 56, 64), C(16, 2))).script()
    assert emit_sm80_attention(p).script() != bhsd


def test_the_cli_validates_sm80_bshd(capsys):
    from tvm_cdna4.cli import main

    assert main(["attention", "--target", "sm80", "--layout", "bshd", "--batch", "2", "--heads", "2", "--kv-heads",
                 "1", "--seq", "24", "--seq-kv", "40", "--head-dim", "64", "--causal",
                 "--validate"]) == 0
    out = capsys.readouterr().out
    assert "causal bshd on the CUDA emulator" in out and out.rstrip().endswith("PASS")
