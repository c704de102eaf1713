"""T.rocm.buffer_load_lds (gfx950 direct-to-LDS loads): the compiled instructions, the hardware's LDS
placement and out-of-range lanes in the emulator, completion at s_waitcnt vmcnt, the inverse map of
patterns.dma, and the contract errors."""

import re

import numpy as np
import pytest
import tvm_tirx

from tvm_cdna4 import ContractError, build
from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4 import register
from tvm_cdna4.patterns.dma import Chunk, LdsTile, lane_sources
from tvm_cdna4.patterns.wave import BUFFER_OOB, waitcnt_vmcnt_imm
from tvm_cdna4.report import instruction_kind

import dma_kernels as K

register()


def _instructions(asm: str) -> list[str]:
    return [ln.strip() for ln in asm.split("s_endpgm")[0].splitlines() if re.match(r"^\s+[a-z]", ln)]


def test_each_size_compiles_to_one_load_lds_through_m0_with_no_staging_and_no_added_wait():
    lines = _instructions(build(K.dma_sizes()).asm)
    loads = [ln for ln in lines if instruction_kind(ln) == "global_lds"]
    assert [ln.split()[0] for ln in loads] == ["buffer_load_dwordx4", "buffer_load_dwordx3", "buffer_load_dword"]
    assert all(ln.endswith(" offen lds") for ln in loads)
    m0 = [ln for ln in lines if re.match(r"s_mov(_b32|k_i32) m0, ", ln)]
    assert [ln.split(", ")[1] for ln in m0] == ["0", "0x400", "0x700"]  # the three LDS block bases
    assert not any(ln.startswith("ds_write") for ln in lines)  # no VGPR staging
    # the async intrinsic: LLVM adds no vmcnt wait; the only one is the kernel's own s_waitcnt vmcnt(0)
    assert [ln for ln in lines if "vmcnt" in ln] == ["s_waitcnt vmcnt(0)"]
    assert lines.index("s_waitcnt vmcnt(0)") < next(i for i, ln in enumerate(lines) if ln.startswith("ds_read"))


def test_lane_bytes_land_at_base_plus_lane_times_size_and_masked_lanes_write_zeros():
    x = np.arange(512, dtype=np.int32) + 1
    d = np.full((64, 8), -1, np.int32)
    emulate(K.dma_sizes(valid=40), x, d)
    lanes = np.arange(64)[:, None] < 40
    want = np.concatenate([np.where(lanes, x[:256].reshape(64, 4), 0).ravel(),          # 16 bytes per lane
                           np.where(lanes, x[256:448].reshape(64, 3), 0).ravel(),       # 12 (soffset 1024)
                           np.where(lanes[:, 0], x[448:], 0)])                          # 4 (soffset 1792)
    np.testing.assert_array_equal(d.ravel(), want)


def test_each_wave_writes_its_own_block_and_other_waves_read_it_after_wait_and_barrier():
    x = np.arange(512, dtype=np.int32)
    d = np.zeros((128, 4), np.int32)
    emulate(K.dma_copy(waves=2, read_other_wave=True), x, d)
    np.testing.assert_array_equal(d, np.roll(x.reshape(128, 4), -64, axis=0))


@pytest.mark.parametrize("tile, stride", [
    (LdsTile(rows=16, cols=4, pad=16, swizzle=4), 96),     # padded rows, XOR swizzle: some lanes load padding
    (LdsTile(rows=32, cols=8, pad=32, pad_every=8), 160),  # Triton's: one padding per 1024-byte load block
], ids=["row padding + swizzle", "block padding"])
def test_padded_swizzled_tile_through_the_inverse_map(tile, stride):
    g = np.arange(tile.rows * stride // 4, dtype=np.int32) + 7
    d = np.full(tile.dma_bytes // 4, -1, np.int32)
    emulate(K.dma_tile(tile, stride), g, d, uninitialized="allow")  # padding between loads is never written
    want = np.zeros(tile.dma_bytes, np.uint8)  # padding slots that lanes load: masked, zeros
    for r in range(tile.rows):
        for c in range(tile.cols):
            want[tile.offset(r, c):][:16] = g.view(np.uint8)[r * stride + c * 16:][:16]
    covered = np.zeros(tile.dma_bytes, bool)
    for i in lane_sources(tile):
        covered[i.lds_base:i.lds_base + 1024] = True
    assert covered.sum() == 2048 if tile.pad_every == 1 else covered.sum() == 4096
    np.testing.assert_array_equal(d.view(np.uint8)[covered], want[covered])


def test_lane_sources_cover_every_chunk_once_at_its_layout_offset():
    tile = LdsTile(rows=8, cols=8, size=12, pad=24, swizzle=8)
    plan = lane_sources(tile)
    assert len(plan) * 64 * 12 == tile.dma_bytes == 768 * 1 * 2
    placed = {c: i.lds_base + lane * 12 for i in plan for lane, c in enumerate(i.sources) if c is not None}
    assert set(placed) == {Chunk(r, c) for r in range(8) for c in range(8)} and len(placed) == 64
    assert all(tile.offset(c.row, c.col) == byte for c, byte in placed.items())
    assert plan[0].sources[:10] == (*(Chunk(0, c) for c in range(8)), None, None)  # row 0, then its padding
    assert plan[0].sources[10] == Chunk(1, 1)  # row 1 starts at position 0 with chunk 0 ^ 1
    assert tile.global_offset(120, row_stride=200) == 200 + 12 and tile.global_offset(96, row_stride=200) == BUFFER_OOB


def test_block_padding_starts_each_load_after_the_padding():
    tile = LdsTile(rows=32, cols=8, pad=32, pad_every=8)  # 8 rows of 128 bytes = one 1024-byte block, then 32
    plan = lane_sources(tile)
    assert [i.lds_base for i in plan] == [0, 1056, 2112, 3168] and tile.dma_bytes == 4192
    assert all(c is not None for i in plan for c in i.sources)  # no lane wasted on padding
    assert plan[1].sources[0] == Chunk(8, 0)
    row_padded = LdsTile(rows=128, cols=8, pad=16)  # a 128x64 f16 tile, 16 bytes after each row
    assert row_padded.loads == 18 and [i.lds_base for i in lane_sources(row_padded)] == [1024 * i for i in range(18)]


def test_a_read_before_the_wait_is_an_error():
    with pytest.raises(EmulationError, match=r"read of LDS 'S' byte 0 while an asynchronous copy into it is still in "
                       r"flight \(missing wait: s_waitcnt vmcnt") as err:
        emulate(K.dma_copy(wait=False), np.zeros(256, np.int32), np.zeros((64, 4), np.int32))
    assert (err.value.wave, err.value.lane) == (0, 0)


@pytest.mark.parametrize("vmcnt, first_byte, nbytes, error", [
    (2, 0, 1024, None),         # vmcnt(2): the oldest of three loads has completed
    (2, 1024, 768, 1024),       # ... not the second
    (1, 1024, 768, None),
    (1, 1792, 256, 1792),
])
def test_vmcnt_completes_all_but_the_n_newest_loads(vmcnt, first_byte, nbytes, error):
    run = lambda: emulate(K.dma_sizes(vmcnt=vmcnt, read_from=first_byte, read_bytes=nbytes),  # noqa: E731
                          np.zeros(512, np.int32), np.zeros((64, 8), np.int32))
    if error is None:
        run()
    else:
        with pytest.raises(EmulationError, match=rf"byte {error} while an asynchronous copy"):
            run()


def test_a_barrier_reached_before_the_wait_does_not_publish_the_load():
    with pytest.raises(EmulationError, match=r"race on LDS 'S' byte 1024: written by wave 1 and read by wave 0"):
        emulate(K.dma_copy(waves=2, read_other_wave=True, wait_after_barrier=True), np.zeros(512, np.int32),
                np.zeros((128, 4), np.int32))
    emulate(K.dma_copy(waves=2, wait_after_barrier=True), np.zeros(512, np.int32), np.zeros((128, 4), np.int32))


CONTRACTS = {
    "lane-varying destination": (K.dma_lane_destination, r"^buffer_load_dwordx4 \.\.\. lds: operand lds_dst: the LDS "
                                 r"destination `T\.address_of\(S\[tx \* 8\]\)` is lane-varying", "wave-uniform operand"),
    "misaligned destination": (K.dma_misaligned_destination, r"^buffer_load_dwordx4 \.\.\. lds: operand lds_dst: the LDS "
                               r"destination of a direct-to-LDS load must be 4-byte aligned.*found `T\.address_of\(S\[tx "
                               r"// 64 \* 16 \+ 1\]\)` at byte offset 2 \+ 32k", "LDS alignment"),
    "register destination": (lambda: K.dma_bad_call("local"), r"^buffer_load_dwordx4 \.\.\. lds: operand lds_dst: the "
                             r"destination of a direct-to-LDS load is an element of an LDS \(shared\) tensor.*found R\[0\] "
                             r"\(scope 'local'\)", "storage scope"),
    "8 bytes per lane": (lambda: K.dma_bad_call("size"), r"^T\.rocm\.buffer_load_lds: operand size: gfx950 loads 4, 12 or "
                         r"16 bytes per lane.*expected \[4, 12, 16\], found 8", "parameters"),
}


@pytest.mark.parametrize("name", CONTRACTS)
def test_contract_errors(name):
    make, first_line, check = CONTRACTS[name]
    with pytest.raises(ContractError) as err:
        build(make())
    assert re.match(first_line, str(err.value).splitlines()[0]), str(err.value)
    assert err.value.check == check


def test_other_targets_are_refused():
    with pytest.raises(ContractError, match=r"^tvm_cdna4_buffer_load_lds_b128: a gfx950 \(CDNA4\) helper compiles only "
                       r"for mcpu gfx950; expected kind 'rocm', mcpu 'gfx950', found kind 'rocm', mcpu 'gfx942'"):
        tvm_tirx.tirx.compile(K.dma_copy(), target={"kind": "rocm", "mcpu": "gfx942"})


def test_vmcnt_immediate_and_range():
    assert [waitcnt_vmcnt_imm(n) for n in (0, 5, 15, 16, 63)] == [0x0F70, 0x0F75, 0x0F7F, 0x4F70, 0xCF7F]
    with pytest.raises(ContractError, match=r"^s_waitcnt vmcnt\(64\): the vmcnt counter is 6 bits on gfx950; "
                       r"expected 0\.\.63, found 64"):
        waitcnt_vmcnt_imm(64)


def test_tile_layouts_the_loads_cannot_produce_are_refused():
    with pytest.raises(ContractError, match=r"^LdsTile: operand pad: padding is whole chunks.*expected a multiple "
                       r"of 16, found 8"):
        LdsTile(rows=4, cols=4, pad=8)
    with pytest.raises(ContractError, match=r"^LdsTile: operand swizzle: .*expected a power of two dividing cols=4, "
                       r"found 3"):
        LdsTile(rows=4, cols=4, swizzle=3)


def test_double_buffered_loop_overlaps_the_next_loads_with_the_reads():
    x = np.arange(4 * 512, dtype=np.int32)
    d = np.zeros((128, 4), np.int32)
    emulate(K.dma_pipeline(), x, d)
    np.testing.assert_array_equal(d, np.roll(x.reshape(4, 128, 4), -64, axis=1).sum(0))
    # compiled: only the kernel's own waits; no vmcnt(0) before the LDS reads of tile k while tile k + 1 loads
    lines = _instructions(build(K.dma_pipeline()).asm)
    assert [ln for ln in lines if "vmcnt" in ln] == ["s_waitcnt vmcnt(1)"] * 3 + ["s_waitcnt vmcnt(0)"]
    assert sum(instruction_kind(ln) == "global_lds" for ln in lines) == 4


@pytest.mark.parametrize("change, message", [
    (dict(vmcnt=2), r"read of LDS 'S' byte 1024 while an asynchronous copy into it is still in flight"),
    (dict(barrier_after_reads=False), r"race on LDS 'S' byte 0: read by wave 1 and then written by wave 0 with no barrier"),
])
def test_double_buffered_loop_without_its_wait_or_barrier_is_an_error(change, message):
    with pytest.raises(EmulationError, match=message):
        emulate(K.dma_pipeline(**change), np.zeros(4 * 512, np.int32), np.zeros((128, 4), np.int32))


def _waterfall_loops(lines: list[str]) -> list[list[str]]:
    """The ``readfirstlane`` waterfall loops of a kernel: from ``s_mov_b64 s[..], exec`` (exec saved)
    to the ``s_cbranch_execnz`` back to the loop head, each as its instructions."""
    loops, start = [], None
    for i, ln in enumerate(lines):
        if re.match(r"s_mov_b64 s\[\d+:\d+\], exec$", ln):
            start = i
        elif ln.startswith("s_cbranch_execnz") and start is not None:
            loops.append(lines[start:i + 1])
            start = None
    return loops


@pytest.mark.parametrize("by", ["tx", "wave_id", "voffset"])
def test_an_soffset_llvm_cannot_prove_uniform_becomes_a_waterfall_loop_around_each_load(by):
    """docs/patterns.md, "Wave-uniform scalar operands": ``tx // 64 * stride`` in soffset is wave-uniform,
    but LLVM's divergence analysis cannot prove it: each load gets a loop that reads lane 0's value
    (``v_readfirstlane_b32``), runs the load for the lanes that hold it (``s_and_saveexec_b64``) and
    repeats for the rest. ``T.rocm.wave_id()`` (an SGPR) or the offset in voffset gives plain loads."""
    lines = _instructions(build(K.dma_soffset(by)).asm)
    loads = [ln for ln in lines if instruction_kind(ln) == "global_lds"]
    assert len(loads) == 4
    loops = _waterfall_loops(lines)
    if by != "tx":
        assert loops == [] and not any(ln.startswith("s_cbranch_execnz") for ln in lines)
        return
    assert len(loops) == len(loads)  # one loop around every load
    for loop in loops:
        mnemonics = [ln.split()[0] for ln in loop]
        for first, then in [("v_readfirstlane_b32", "v_cmp_eq_u32_e32"), ("v_cmp_eq_u32_e32", "s_and_saveexec_b64"),
                            ("s_and_saveexec_b64", "buffer_load_dwordx4"), ("buffer_load_dwordx4", "s_xor_b64")]:
            assert mnemonics.index(first) < mnemonics.index(then), loop
        assert sum(ln.startswith("buffer_load") for ln in loop) == 1


@pytest.mark.parametrize("by", ["tx", "wave_id", "voffset"])
def test_the_three_spellings_of_the_offset_load_the_same_bytes(by):
    """(The emulator runs the TIR, not the waterfall loop: this is the kernels' meaning, the same.)"""
    x = np.arange(4096, dtype=np.int32)
    d = np.zeros((256, 16), np.int32)
    emulate(K.dma_soffset(by), x, d)
    np.testing.assert_array_equal(d.ravel(), x)
