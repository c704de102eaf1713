"""The pure parts of benchmarks/llm_linear.py: the shape list, the roofline arithmetic, the table."""

from __future__ import annotations

from paths import BENCHMARKS
import os
import sys

import pytest

sys.path.append(str(BENCHMARKS))  # after tests/: a benchmark script never shadows a test helper

import llm_linear as ll  # noqa: E402


def test_shape_list():
    full = ll.shapes()
    assert len(full) == 8 * 6 and len(set(full)) == 48
    assert ("8b.down", 16, 4096, 14336) in full and ("70b.gate_up", 4096, 57344, 8192) in full
    assert {M for _, M, _, _ in full} == {1, 16, 64, 128, 1024, 4096}
    quick = ll.shapes(quick=True)
    assert 3 <= len(quick) <= 6 and set(quick) <= set(full)


def test_roofline_arithmetic():
    # M = 1, 4096 x 4096: memory bound, bytes = A + B + C once
    assert ll.problem_bytes(1, 4096, 4096) == 2 * (4096 + 4096 * 4096 + 4096)
    assert ll.roofline_s(1, 4096, 4096) == pytest.approx(ll.problem_bytes(1, 4096, 4096) / 4.8e12)
    # 4096^3: compute bound
    assert ll.roofline_s(4096, 4096, 4096) == pytest.approx(2 * 4096**3 / 660e12)
    assert ll.roofline_pct(4096, 4096, 4096, 2 * 2 * 4096**3 / 660e12) == pytest.approx(50.0)


def test_our_configs_lead_with_the_planner_choice():
    from tvm_cdna4.kernels.sm80.gemm import choose_config

    cfgs = ll.our_configs(16, 4096, 14336, 3)
    assert cfgs[0] == choose_config(16, 4096, 14336, "bf16", "nt", "bf16").as_dict() and len(cfgs) == 3
    assert len(ll.our_configs(4096, 4096, 4096, 3)) == 1  # big M: one candidate


def test_sweep_adds_both_copy_layouts_and_the_tile_grid():
    # --sweep: at M <= 16 the decode grid in both copy layouts and the small tiles; at M = 64 / 128 the
    # wider tiles split by pairs; every config plans for its shape
    from tvm_cdna4.kernels.sm80.gemm import config_from_dict, plan

    small = ll.our_configs(16, 4096, 14336, 1, sweep=True)
    decode = [c for c in small if c.get("kind") == "decode"]
    assert {c["line_copy"] for c in decode} == {False, True} and {c["unroll"] for c in decode} >= {2, 4}
    assert sum(c.get("kind") is None for c in small) >= len(ll.TILE_SWEEP[16])
    wide = ll.our_configs(128, 6144, 4096, 1, sweep=True)
    assert any(c.get("block_n") == 256 and c.get("split_k") == 5 and c.get("reduce_vector") == 2 for c in wide)
    for M, cfgs in ((16, small[:4]), (128, wide[-3:])):
        for c in cfgs:
            plan(M, 4096 if M == 16 else 6144, 14336 if M == 16 else 4096, "bf16", "nt", "bf16", config_from_dict(c))


def test_table_rows():
    r = dict(name="8b.o", M=1, N=4096, K=4096, ours=10e-6, tuned=8e-6, torch=12e-6, triton=16e-6, triton_splitk=None,
             ours_config=dict(block_m=16, block_n=64, split_k=3))
    head, rule, line = ll.table([r])
    assert head.count("|") == rule.count("|") == line.count("|") == 11
    pct = ll.roofline_pct(1, 4096, 4096, 10e-6)
    assert f"10.0 ({pct:.0f} %)" in line and "16x64 / 3" in line and "1.50x" in line and "2.00x" in line
