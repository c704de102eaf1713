"""The sm80 paged decode kernel's wide tiles (``paged_decode_plan``: ``PagedDecodeConfig.tile_keys``,
``choose_tile_keys``): 32 keys a tile (two 16-key halves, one softmax step, the score factor in a register),
exact in the CUDA emulator on odd contexts, 4 queries and lying device data, over two 16-key pages or one page;
the choice (fp8 wide, 16-bit KV not), its refusals, and the 16-key kernels' code unchanged (golden digests)."""

import hashlib
import json

import pytest
from paged_checks import assert_lying_data_stay_inside

from paths import DATA
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.sm80 import paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode

GOLDEN = json.loads((DATA / "paged_golden.json").read_text())


SLOW = pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1


@pytest.mark.parametrize("page_size, kv_dtype, cvt", [(16, "fp8", True), pytest.param(32, "fp8", False, marks=SLOW),
                                                      pytest.param(16, "bf16", None, marks=SLOW)])
def test_wide_tiles_are_exact_on_odd_contexts_4_queries_and_lying_data(page_size, kv_dtype, cvt):
    # 16-key pages: a tile's halves on two pages (page 99 lies in sequence 2's second half of its first tile)
    problem = PagedDecodeProblem(3, 4, 2, 64, 4, page_size, 96 // page_size, 192 // page_size, kv_dtype=kv_dtype)
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, fp8_cvt=cvt, tile_keys=32),
                          arch="sm_90a")
    assert (p.tile_keys, p.halves, p.tile_pages, p.partition) == (32, 2, 32 // page_size, 64)
    arrays = paged.random_inputs(problem, seed=5, contexts=[1, 77, 45])
    arrays["CONTEXT_LENS"][:] = [1, 77, 1000]  # 1000: past the capacity (96)
    arrays["BLOCK_TABLE"][2, 16 // page_size] = 99  # outside the cache
    assert_lying_data_stay_inside(p, problem, arrays)  # the emulator raises on any out-of-bounds access


def test_fp8_takes_wide_tiles_and_the_plan_follows():
    fp8 = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096, kv_dtype="fp8")
    p = plan_paged_decode(fp8, context=32768, sms=132, arch="sm_90a")
    assert (p.tile_keys, p.part_tiles, p.partition) == (32, 32, 1024)  # WIDE_FP8: the instruction counts
    # 8 KiB a stage, as bf16; WIDE_FP8_STAGES (2: 68 KB, 3 CTAs per SM) ran fastest on the H100, 3 stages as 16 keys
    assert p.tile_words == 32 * 128 // 4 and p.config.stages == 2 and p.smem_bytes == 4 * (4 * 2 * 2 * 1024 + 1024)
    assert plan_paged_decode(fp8, PagedDecodeConfig(stages=3)).smem_bytes == 4 * (4 * 3 * 2 * 1024 + 1024)  # 2 CTAs
    assert plan_paged_decode(fp8, PagedDecodeConfig(tile_keys=16)).config.stages == 3 == plan_paged_decode(
        PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096)).config.stages  # STAGES elsewhere
    assert PagedDecodeConfig().stages is None  # the plan chooses (choose_stages)
    assert p.state_registers == 128 // 4 + 128 // 2 + 28  # 16 scores, 8 P words
    assert plan_paged_decode(fp8, PagedDecodeConfig(tile_keys=16), arch="sm_90a").tile_keys == 16
    bf16 = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096)
    assert plan_paged_decode(bf16).tile_keys == 16 and plan_paged_decode(bf16).state_registers == 112
    assert plan_paged_decode(fp8, PagedDecodeConfig(splits=3, warps=2), context=1000).partition == 384  # 32 x 2 x 6
    with pytest.raises(ContractError, match="tile_keys") as err:
        PagedDecodeConfig(tile_keys=24)
    assert err.value.operand == "tile_keys" and err.value.found == "24"
    with pytest.raises(ContractError, match="tile_keys") as err:
        PagedDecodeConfig(tile_keys=32.0)  # equal to 32, but no int: refused here, not a TIR type error at plan time
    assert err.value.operand == "tile_keys" and err.value.found == "32.0"
    with pytest.raises(ContractError, match="whole tiles") as err:
        plan_paged_decode(fp8, PagedDecodeConfig(partition=48, tile_keys=32))
    assert err.value.expected == "a multiple of tile_keys=32"


def test_the_sm90_kernel_keeps_16_key_tiles():
    from tvm_cdna4.kernels.sm90.paged_decode_plan import plan_paged_decode_sm90

    fp8 = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 64, 512, kv_dtype="fp8")
    assert plan_paged_decode_sm90(fp8).tile_keys == 16  # its producer's TMA boxes are 16 rows
    with pytest.raises(ContractError, match="tile_keys") as err:
        plan_paged_decode_sm90(fp8, PagedDecodeConfig(tile_keys=32))
    assert err.value.found == 32


@pytest.mark.parametrize("case", [pytest.param(c, marks=SLOW) if c["target"] == "sm90" else c for c in GOLDEN["cases"]],
                         ids=[c["name"] for c in GOLDEN["cases"]])
def test_the_16_key_kernels_code_is_unchanged(case):
    from tvm_cdna4.kernels.sm90 import paged_target as sm90_target

    target = paged_target if case["target"] == "sm80" else sm90_target
    main, _ = target.build(PagedDecodeProblem(**case["problem"]), PagedDecodeConfig(**case["config"]),
                           arch=case["arch"], context=case["context"], sms=132, cache=False)
    assert hashlib.sha256(main.source.encode()).hexdigest() == case["sha256"]
