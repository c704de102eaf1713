"""The gfx950 assembly of the dense GEMM is byte-identical to the one recorded in
tests/data/gfx950_gemm_golden.json (see its ``about``): refactoring the schedule (plan -> emission,
named pipeline records) must not change the generated code, so neither can the performance."""

from paths import DATA
import hashlib
import json
from types import SimpleNamespace

import attrs
import pytest

import tvm_cdna4
from tvm_cdna4.cli.gemm_gfx950 import build_cached
from tvm_cdna4.kernels.gfx950.gemm import default_config, gfx950_gemm

CASES = json.loads((DATA / "gfx950_gemm_golden.json").read_text())["cases"]


def _param(case):
    # the 4096^3 defaults are test_gfx950_gemm.py's default_build kernels: same worker, one build; the
    # direct-to-LDS cases go with test_gfx950_gemm_dma.py's main-loop test, which reads f16_nt_dma
    big = case["M"] == 4096 and not case["config"]
    group = "gfx950-4096" if big else "gfx950-dma" if case["config"].get("lds_dma") else None
    return pytest.param(case, id=case["name"], marks=[pytest.mark.xdist_group(group)] if group else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_gfx950_assembly_is_byte_identical(case):
    cfg = attrs.evolve(default_config(case["dtype"]), **case["config"])
    if case["batch"]:
        asm = tvm_cdna4.build(gfx950_gemm(case["M"], case["N"], case["K"], case["dtype"], case["layout"], config=cfg,
                                          batch=case["batch"])).asm
    else:  # through the session's build cache (the CLI's cached build: the same assembly)
        args = SimpleNamespace(M=case["M"], N=case["N"], K=case["K"], dtype=case["dtype"], layout=case["layout"],
                               out_dtype=None)
        asm = build_cached(args, cfg).asm
    assert hashlib.sha256(asm.encode()).hexdigest() == case["sha256"]
