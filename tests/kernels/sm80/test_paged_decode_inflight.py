"""The fp8 wide tiles' ring chosen by its bytes in flight (``paged_decode_plan``: ``PagedDecodeConfig.inflight``,
``choose_inflight_ring``, ``inflight_bytes``; off by default, ``INFLIGHT``): the choice at D 128 / 64, exact in the
CUDA emulator on odd contexts, 1 and 4 queries, 16- and 64-key pages and lying device data, and its refusals."""

import attrs
import pytest
from paged_checks import assert_lying_data_stay_inside

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.devices import planned
from tvm_cdna4.kernels.sm80 import paged_decode_plan as pdp
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode


def test_the_ring_matches_bf16s_bytes_in_flight_and_is_off_by_default():
    dev = planned("sm80")
    fp8 = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 566, 4528, kv_dtype="fp8")
    base = plan_paged_decode(fp8, context=9045, sms=132, arch="sm_90a")
    deep = plan_paged_decode(fp8, PagedDecodeConfig(inflight=True), context=9045, sms=132, arch="sm_90a")
    bf16 = plan_paged_decode(PagedDecodeProblem(8, 32, 8, 128, 1, 16, 566, 4528), context=9045, sms=132)
    off = plan_paged_decode(fp8, PagedDecodeConfig(inflight=False), context=9045, sms=132, arch="sm_90a")
    assert not pdp.INFLIGHT and attrs.evolve(off, config=attrs.evolve(off.config, inflight=None)) == base
    # the default: 3 CTAs x 4 warps x 1 tile of 8 KiB; bf16: 2 x 4 x 2 tiles; the choice: 4 CTAs x 2 warps x 2 tiles
    assert (base.config.warps, base.config.stages, pdp.inflight_bytes(base, dev)) == (4, 2, 96 * 1024)
    assert (bf16.config.warps, bf16.config.stages, pdp.inflight_bytes(bf16, dev)) == (4, 3, 128 * 1024)
    assert (deep.config.warps, deep.config.stages, pdp.resident_ctas(deep, dev)) == (2, 3, 4)
    assert pdp.inflight_bytes(deep, dev) == 128 * 1024 and deep.smem_bytes == 4 * (1024 + 2 * 3 * 2 * 1024)
    assert (deep.partition, deep.split_kv) == (576, 16)  # 4 resident CTAs: more partitions (choose_partition's fill)
    d64 = plan_paged_decode(PagedDecodeProblem(8, 32, 8, 64, 1, 16, 566, 4528, kv_dtype="fp8"),
                            PagedDecodeConfig(inflight=True), context=9045, sms=132, arch="sm_90a")
    assert (d64.config.warps, d64.config.stages, pdp.inflight_bytes(d64, dev)) == (2, 5, 160 * 1024)


@pytest.mark.parametrize("page_size, queries", [pytest.param(16, 4, marks=pytest.mark.slow), pytest.param(64, 1, marks=pytest.mark.slow)])
def test_the_deep_ring_is_exact_on_odd_contexts_and_lying_data(page_size, queries):
    # 384 keys a CTA: 6 tiles a warp, the 5-stage ring wraps; contexts odd, one past a partition, one past the capacity
    problem = PagedDecodeProblem(3, 4, 2, 64, queries, page_size, 448 // page_size, 1344 // page_size, kv_dtype="fp8")
    p = plan_paged_decode(problem, PagedDecodeConfig(inflight=True, partition=384), sms=2, arch="sm_90a")
    assert (p.tile_keys, p.config.warps, p.config.stages, p.split_kv) == (32, 2, 5, 2)
    arrays = paged.random_inputs(problem, seed=7, contexts=[1, 77, 45])
    arrays["CONTEXT_LENS"][:] = [1, 421, 1000]  # 1000: past the capacity (448)
    arrays["BLOCK_TABLE"][2, 1] = 99  # outside the cache
    assert_lying_data_stay_inside(p, problem, arrays)  # the emulator raises on any out-of-bounds access


def test_the_ring_is_refused_where_it_does_not_apply():
    from tvm_cdna4.kernels.sm90.paged_decode_plan import plan_paged_decode_sm90

    fp8 = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 64, 512, kv_dtype="fp8")
    cases = [(PagedDecodeProblem(8, 32, 8, 128, 1, 16, 64, 512), PagedDecodeConfig(inflight=True), "kv_dtype bf16"),
             (fp8, PagedDecodeConfig(inflight=True, tile_keys=16), "tile_keys 16"),
             (fp8, PagedDecodeConfig(inflight=True, stages=4), "stages 4"),
             (fp8, PagedDecodeConfig(inflight=True, warps=2), "warps 2")]
    for problem, config, found in cases:
        with pytest.raises(ContractError, match="inflight") as err:
            plan_paged_decode(problem, config, arch="sm_90a")
        assert err.value.operand == "inflight" and found in err.value.found
    with pytest.raises(ContractError, match="inflight") as err:
        plan_paged_decode_sm90(fp8, PagedDecodeConfig(inflight=True))  # 16-key tiles (its TMA boxes)
    assert "tile_keys 16" in err.value.found
    with pytest.raises(ContractError, match="inflight") as err:
        PagedDecodeConfig(inflight=1)
    assert err.value.found == "1"
