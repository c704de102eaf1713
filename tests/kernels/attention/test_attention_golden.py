"""The attention kernels' generated code is byte-identical to 0.1.0's (288896a, before the move to
``kernels/``, issue 34): gfx950's assembly and sm80's CUDA C for four problems (head dims 64 and 128,
causal and not, GQA, bf16 / f16 / fp8); sm90's CUDA C for five configs of one CTA an item (a case's
``config``: the ``Sm90AttentionConfig`` fields other than the defaults). A change to any is deliberate: update
tests/data/attention_golden.json and say why in its ``about`` and in CHANGELOG.md."""

import hashlib
import json

import pytest

from paths import DATA
from tvm_cdna4.kernels.attention import AttentionProblem, build
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig

CASES = json.loads((DATA / "attention_golden.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_attention_code_is_byte_identical(case):
    config = Sm90AttentionConfig(**case["config"]) if "config" in case else None
    result = build(AttentionProblem(**case["problem"]), case["target"], config)
    text = result.asm if case["target"] == "gfx950" else result.source
    assert hashlib.sha256(text.encode()).hexdigest() == case["sha256"]
