"""The gfx950 assembly of the dense GEMM is byte-identical to the one recorded in
tests/data/gfx950_gemm_golden.json (see its ``about``): refactoring the schedule (plan -> emission,
named pipeline records) must not change the generated code, so neither can the performance."""

import hashlib
import json
from pathlib import Path

import attrs
import pytest

import tvm_cdna4
from tvm_cdna4.schedules.gfx950_gemm import default_config, gfx950_gemm

CASES = json.loads((Path(__file__).parent / "data" / "gfx950_gemm_golden.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_gfx950_assembly_is_byte_identical(case):
    cfg = attrs.evolve(default_config(case["dtype"]), **case["config"])
    func = gfx950_gemm(case["M"], case["N"], case["K"], case["dtype"], case["layout"], config=cfg, batch=case["batch"])
    assert hashlib.sha256(tvm_cdna4.build(func).asm.encode()).hexdigest() == case["sha256"]
