"""The generated CUDA C is byte-identical to the source before the build-time work (issue 17): the
shared pattern premises, the scoped k-steps and the plan -> emission split (cuda_plan / cuda_emit)
change how fast TIRx lowers and how the schedule reads, not what it emits, so the measured speed
cannot change either. Digests: tests/data/cuda_gemm_golden.json.

The four ``*n`` digests (B stored [K, N]: default_4096_nn_bf16, odd_1000x999x1001_tn_f16,
odd_257x130x520_nn_bf16_bf16out, variants_512_tn_f16) were updated deliberately on 2026-12-01:
those layouts now run the stage-unrolled k-loop, with B's ldmatrix offsets as view offsets
(``LdmatrixPlan.offset_in_view``), which fits 255 registers without spills under NVRTC. The
seven ``*t`` digests are unchanged since commit 7dfb323, except the two odd-N ones
(odd_1000x999x1001_tn_f16, odd_3x5x4099_nt_f16), updated deliberately the same day: odd N now
stores each element with a predicated ``st.global.f32`` / ``st.global.b16`` (a cvt first for 16-bit
C) instead of an if-guarded scalar store, which TIRx's simplifier took seconds to prove. The plan
stages of issue 22 (the epilogue, grid and parameter records, one ``Swizzle``, one
``LaneAddress.offset``, ``main``'s signature from the plan) left all twelve unchanged.
odd_64x4096x96_tt_f16_f16out was updated deliberately on 2026-12-02: its 3 k-tiles now run 3
stages, not 4 (``kernels.sm80.gemm_plan.fit_stages``: a fourth stage was never loaded, only read unwritten by
the last fragment prefetch); the shared memory and the stage indices change, nothing else."""

from paths import DATA
import hashlib
import json
from dataclasses import replace

import pytest

from tvm_cdna4.kernels.sm80.gemm import build, default_config

CASES = json.loads((DATA / "cuda_gemm_golden.json").read_text())["cases"]


# one pytest-xdist worker builds the 4096^3 defaults for this test, the no-spill and the big-tile test
@pytest.mark.xdist_group("cuda-4096")
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_source_is_byte_identical(case):
    cfg = replace(default_config(case["dtype"], case["M"], case["N"]), **case["config"])
    # through the session's build cache: a kernel another test builds too (the 4096^3 defaults, for
    # sm_90, with the NVRTC no-spill tests) is built once, by the code under test either way
    exe = build(case["M"], case["N"], case["K"], case["dtype"], case["layout"], case["out_dtype"], cfg,
                arch=case.get("arch", "sm_80"))
    assert hashlib.sha256(exe.source.encode()).hexdigest() == case["sha256"]
