"""The generated CUDA C is byte-identical to the source before the build-time work (issue 17): the
shared pattern premises and the scoped k-steps change how fast TIRx lowers, not what it emits, so
the measured speed cannot change either. Digests: tests/data/cuda_gemm_golden.json."""

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from tvm_cdna4.schedules.cuda_gemm import build, default_config

CASES = json.loads((Path(__file__).parent / "data" / "cuda_gemm_golden.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_source_is_byte_identical(case):
    cfg = replace(default_config(case["dtype"], case["M"], case["N"]), **case["config"])
    exe = build(case["M"], case["N"], case["K"], case["dtype"], case["layout"], case["out_dtype"], cfg,
                arch="sm_80", cache=False)
    assert hashlib.sha256(exe.source.encode()).hexdigest() == case["sha256"]
