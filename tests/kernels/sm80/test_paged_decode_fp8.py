"""The sm80 paged decode kernel's fp8 choices (``paged_decode_plan``: ``choose_cvt``, ``choose_min_ctas``): fp8
pairs widened by ``cvt.rn.f16x2.e4m3x2`` where the arch has it, else by moving their bits, both exact in the CUDA
emulator on odd contexts, 4 queries and lying device data; the register cap for the CTAs the shared memory holds."""

import pytest
from paged_checks import assert_lying_data_stay_inside

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.sm80 import paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, choose_min_ctas, plan_paged_decode


def decode(kv_dtype="fp8", queries=1, head_dim=128):
    return PagedDecodeProblem(8, 32, 8, head_dim, queries, 16, 128, 1024, kv_dtype=kv_dtype)


def test_fp8_widens_by_cvt_where_the_arch_has_it():
    assert plan_paged_decode(decode(), arch="sm_90a").fp8_cvt
    assert plan_paged_decode(decode(), arch="sm_89").fp8_cvt
    assert not plan_paged_decode(decode(), arch="sm_80").fp8_cvt  # A100: the bits move
    assert not plan_paged_decode(decode(), PagedDecodeConfig(fp8_cvt=False), arch="sm_90a").fp8_cvt
    assert not plan_paged_decode(decode("bf16"), arch="sm_90a").fp8_cvt  # nothing to widen
    with pytest.raises(ContractError, match="fp8_cvt") as err:
        plan_paged_decode(decode(), PagedDecodeConfig(fp8_cvt=True), arch="sm_80")
    assert err.value.found == "sm_80"
    with pytest.raises(ContractError, match="fp8_cvt"):
        PagedDecodeConfig(fp8_cvt=1)


@pytest.mark.parametrize("cvt", [False, True])
def test_both_widenings_are_exact_on_odd_contexts_4_queries_and_lying_data(cvt):
    problem = PagedDecodeProblem(3, 4, 2, 64, 4, 16, 6, 12, kv_dtype="fp8")  # 8 rows a kv head, bf16 Q
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, fp8_cvt=cvt), arch="sm_90a")
    assert p.fp8_cvt is cvt
    arrays = paged.random_inputs(problem, seed=5, contexts=[1, 77, 45])
    arrays["CONTEXT_LENS"][:] = [1, 77, 1000]  # 1000: past the capacity (96)
    arrays["BLOCK_TABLE"][2, 1] = 99  # outside the 12 pages
    assert_lying_data_stay_inside(p, problem, arrays)  # the emulator raises on any out-of-bounds access


def test_the_register_cap_takes_the_ctas_the_shared_memory_holds():
    h100 = DEVICES["H100"]
    fp8 = plan_paged_decode(decode(), PagedDecodeConfig(tile_keys=16), arch="sm_90a")  # 53 KB of shared memory: 4 CTAs, at 128 registers
    assert fp8.smem_bytes == 53248 and choose_min_ctas(fp8, h100) == 4
    assert fp8.min_ctas == 0  # WEIGH_REGISTER_CAP: the cap timed slower on the H100; forced, it is what the model says
    assert plan_paged_decode(decode(), PagedDecodeConfig(min_ctas=4), arch="sm_90a").min_ctas == 4
    assert choose_min_ctas(plan_paged_decode(decode(head_dim=64), PagedDecodeConfig(tile_keys=16)), h100) == 6  # 64 state + 16: 80 registers
    assert choose_min_ctas(plan_paged_decode(decode("bf16")), h100) == 0  # 100 KB: 2 CTAs, a cap of 256 binds nothing
    assert choose_min_ctas(plan_paged_decode(decode(queries=8)), h100) == 0  # 32 rows: 224 state registers
    assert plan_paged_decode(decode(), PagedDecodeConfig(min_ctas=0)).min_ctas == 0
    assert plan_paged_decode(decode("bf16"), PagedDecodeConfig(min_ctas=3)).min_ctas == 3
    for bad in (-1, 65, True, 2.0):
        with pytest.raises(ContractError, match="min_ctas"):
            PagedDecodeConfig(min_ctas=bad)


def test_the_cap_and_the_widening_reach_the_kernel():
    p = plan_paged_decode(PagedDecodeProblem(1, 2, 1, 64, 1, 16, 2, 2, kv_dtype="fp8"), PagedDecodeConfig(min_ctas=4),
                          arch="sm_90a")
    assert p.min_ctas == 4 and p.fp8_cvt
    script = paged_target.emit(p)[0].script()
    assert f"\"min_blocks_per_sm\": {p.min_ctas}" in script and "e4m3x2" in script
    bits = paged_target.emit(plan_paged_decode(p.problem, PagedDecodeConfig(fp8_cvt=False, min_ctas=0)))[0].script()
    assert "min_blocks_per_sm" not in bits and "e4m3x2" not in bits
