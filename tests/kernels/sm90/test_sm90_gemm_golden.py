"""The emitted TIRx script of the sm90 GEMM stays byte-identical (digests: tests/data/sm90_gemm_golden.json): the
unclustered kernel (the default tile; a 168-wide tile with the TMA epilogue's tail maps and a TMA-read residual), a
cluster whose shares of B are halves (128 = 64 + 64) and one of uneven shares (168 = 88 + 80, a second B map), the
swapped kernel at 64x104 alone and in clusters of two token tiles (the weights multicast).
A change that moves a digest changes the generated code: update it deliberately, saying why in the JSON's "about"."""

import hashlib
import json

import pytest
from paths import DATA

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

CASES = json.loads((DATA / "sm90_gemm_golden.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_emitted_script_is_byte_identical(case):
    problem = GemmProblem(*case["problem"], Fusion(**case.get("fusion", {})))
    p = gemm.plan(problem, "sm90", Sm90Config(**case["config"]), sms=132)
    assert hashlib.sha256(gemm_target.emit(p).script().encode()).hexdigest() == case["sha256"]
