"""The wgmma tile pattern's kernels on the sm90 emulator: a shared tile laid out by a TIRx layout
(``probes_wgmma.shared_layout``), its descriptor built and proven by the pattern
(``patterns.wgmma_shared``) and decoded by the emulator (``emulator.ptx_wgmma``) through the one
``isa.hopper_layout``, reads the elements the layout placed: D equals A @ B.T exactly (small
integers), for every swizzle and both majors, SS and RS; the register fences the pattern and the probe
emit (``patterns.wgmma_fence``) run as no instruction."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.probes_wgmma import probe

STORAGE = {"bf16": (ml_dtypes.bfloat16, np.uint16), "f16": (np.float16, np.uint16),
           "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8)}


@pytest.mark.parametrize("kw", [
    dict(atype="bf16", swizzle=0, k_repeats=2), dict(atype="bf16", swizzle=128, k_repeats=4),
    dict(atype="e4m3", swizzle=32, k_repeats=1), dict(atype="f16", swizzle=64, k_repeats=2, a_major="mn", b_major="mn"),
    dict(atype="f16", swizzle=32, k_repeats=2, a_major="mn", b_major="mn"),
    dict(atype="bf16", swizzle=0, k_repeats=2, a_major="mn", b_major="mn"),
    dict(atype="bf16", form="rs", swizzle=64, k_repeats=2, overrides={"params": {"scale_d": False, "wait": 0}}),
], ids=["k-none", "k-128B", "fp8-k-32B", "mn-64B", "mn-32B", "mn-none", "rs-k-64B-wait"])
def test_pattern_descriptor_read_by_the_emulator_is_the_layouts_tile(kw):
    n = 64 if kw.get("b_major") == "mn" else 16
    kk = (32 if kw["atype"] == "e4m3" else 16) * kw["k_repeats"]
    real, raw = STORAGE[kw["atype"]]
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-3, 4, shape).astype(real) for shape in ((64, kk), (n, kk)))
    d = np.full((64, n), np.nan, np.float32)
    emulate(probe(n=n, **kw), a.view(raw), b.view(raw), d, target="sm90")
    np.testing.assert_array_equal(d, a.astype(np.float64) @ b.astype(np.float64).T)
