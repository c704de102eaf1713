"""The sub-tiled TMA epilogue (``Sm90Config.epilogue_tile``): C staged in chunks of columns through two
buffers per consumer warpgroup, so 128x256 fits a fourth ring stage; the plan's rules, the cost model's
``deepest`` / ``staging_bytes`` and the chunked kernel (the emulator validation: tests/kernels/sm90/
test_sm90_emulated.py)."""

from __future__ import annotations

import json

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]


def test_chunks_halve_the_staging_and_give_128x256_a_fourth_stage():
    whole = Sm90Config(128, 256, 3, 2, epilogue="tma")
    chunked = Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64)
    assert whole.staging_bytes() == 2 * 64 * 256 * 2 == 65536  # two warpgroups' 64 rows x 256 columns
    assert chunked.staging_bytes() == 2 * 2 * 64 * 64 * 2 == 32768  # two buffers of 64 x 64 each
    assert Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=128).staging_bytes() == 65536
    k_tiles = 64
    assert gemm_cost.deepest(128, 256, 2, H100.smem_per_unit, k_tiles, "tma") == 3
    assert gemm_cost.deepest(128, 256, 2, H100.smem_per_unit, k_tiles, "tma", 64) == 4
    chunked.check(H100.smem_per_unit)  # 4 x 48 KB + 32 KB fits 227 KB
    with pytest.raises(ContractError, match="config stages"):
        Sm90Config(128, 256, 4, 2, epilogue="tma").check(H100.smem_per_unit)


def test_the_plan_records_the_chunk_and_the_shared_memory():
    problem = GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16")
    p = gemm.plan(problem, "sm90", Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64))
    assert p.smem_bytes == 4 * (128 + 256) * 64 * 2 + 32768
    assert json.loads(p.to_json())["config"]["epilogue_tile"] == 64
    assert p.to_record() != gemm.plan(problem, "sm90", Sm90Config(128, 256, 3, 2, epilogue="tma")).to_record()


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=32), ("tma", 32)),    # not whole 64-column blocks
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=192), ("tma", 192)),  # does not divide block_n
    (Sm90Config(128, 256, 3, 2, epilogue="tma", epilogue_tile=256), ("tma", 256)),  # the whole tile is 0
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=-64), ("tma", -64)),
    (Sm90Config(128, 256, 4, 2, epilogue_tile=64), ("registers", 64)),              # stores from registers
])
def test_a_bad_epilogue_tile_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError, match="config epilogue_tile: the TMA epilogue's staged columns") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "epilogue_tile" and e.value.check == "parameters" and e.value.found == found


def _epilogue_steps(p):
    """The chunked epilogue's synchronization in program order (the device function's TIR, the chunk loop
    unrolled): each chunk's fence, wait_group.read N, named barrier, TMA store (its staging offset) and commit."""
    import re

    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    text = device_function(gemm_emit.emit(p), "sm90").script()
    text = text[text.index("origin = T.alloc_tensor"):]
    steps = re.findall(r'T\.int32\((\d)\), "async", "bulk", "wait_group", "read"|"bulk", "(commit_group)"|'
                       r'T\.ptx\.(bar)\(|T\.ptx\.(fence)\("proxy"|'
                       r'address_of\(SMH\[\(T\.cuda\.thread_idx\("x"\) >> 7\) \* 8192 \+ (\d+)\]\)', text)
    return [w and f"wait {w}" or c or b or f or f"store from {int(s)}" for w, c, b, f, s in steps]


def test_each_chunk_is_a_bulk_group_behind_one_barrier_and_a_wait_for_the_other_buffer():
    # the emulator runs a TMA store's read at its issue but holds its box in flight until the storing thread's
    # wait_group.read retires it (emulator.ptx_tma.BulkStores), and the order is pinned here too: each chunk's
    # words, the fence, wait_group.read CHUNK_WAIT = 0 (the previous chunk's store has read the other buffer, which
    # the next chunk writes after this barrier), ONE named barrier, the store and its commit; no barrier before
    # a tile's first chunk (two chunks: buffer 0's last store retired at the previous tile's last barrier)
    from tvm_cdna4.kernels.sm90.gemm_epilogue import CHUNK_WAIT

    p = gemm.plan(GemmProblem(130, 200, 64, "bf16", "nt", "bf16"), "sm90",
                  Sm90Config(128, 128, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64))
    staging = p.staging - 8192  # warpgroup wg = (tid >> 7) - 1: its buffers at staging + (2 wg + b) * 64 * 64
    chunk = ["fence", f"wait {CHUNK_WAIT}", "bar"]
    assert CHUNK_WAIT == 0 and _epilogue_steps(p) == [*chunk, f"store from {staging}", "commit_group",
                                                      *chunk, f"store from {staging + 64 * 64}", "commit_group"]


def test_an_odd_chunk_count_waits_and_syncs_before_the_first_chunk():
    # three chunks: the previous tile's last chunk used buffer 0 too, so the tile's first chunk waits for every
    # store (0 pending) and syncs before it writes
    p = gemm.plan(GemmProblem(130, 400, 64, "bf16", "nt", "bf16"), "sm90",
                  Sm90Config(128, 192, 2, 2, ctas=1, epilogue="tma", epilogue_tile=64))
    staging = p.staging - 8192
    chunk = ["fence", "wait 0", "bar"]
    assert _epilogue_steps(p) == ["wait 0", "bar", *chunk, f"store from {staging}", "commit_group",
                                  *chunk, f"store from {staging + 64 * 64}", "commit_group",
                                  *chunk, f"store from {staging}", "commit_group"]


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M, N, K, fusion, block_n", [
    (333, 1000, 520, Fusion(), 256),
    (77, 200, 264, Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True), 256),
    (333, 1000, 520, Fusion(residual=True), 192),  # three chunks a tile: the wait and barrier before the first
])
def test_the_chunked_epilogue_validates_on_a_hopper_gpu(M, N, K, fusion, block_n):
    from tvm_cdna4.runtime.cuda import run_gemm

    cfg = Sm90Config(128, block_n, 4, 2, epilogue="tma", epilogue_tile=64)
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
