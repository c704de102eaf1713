"""The sm90 GEMM issues its wgmma through the checked tile pattern (``T.sm90.tile.apply(T.wgmma[...])``):
the production kernel's operands are proven against the descriptor (a seeded layout bug is a
``ContractError``), and ``cuda.wgmma_check`` follows its accumulator (a dropped wait is refused)."""

from __future__ import annotations

import pytest
import tvm_ffi
from tvm_tirx.ir import Call, Evaluate

from tvm_cdna4.cuda.wgmma_check import check_accumulators
from tvm_cdna4.emulator import device_function
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm90 import gemm_emit
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

PATTERN = "tirx.cuda.sm90.tile.apply"


@pytest.fixture(scope="module")
def small_plan():
    return gemm.plan(GemmProblem(33, 41, 136, "bf16", "nt", "bf16"), "sm90", Sm90Config(64, 64, 2, 1))


def _calls(func, op):
    found = []
    tvm_ffi.structural_walk(func, [(Call, lambda c: found.append(c) if getattr(c.op, "name", "") == op else None)])
    return found


def test_the_kernel_issues_wgmma_through_the_pattern(small_plan):
    func = gemm_emit.emit(small_plan)
    calls = _calls(func, PATTERN)
    assert len(calls) == 1 and calls[0].args[0].value == gemm_emit.wgmma_instr(small_plan)
    assert not _calls(func, "tirx.ptx.wgmma_mma_async")  # no raw wgmma beside it
    check_accumulators(func)  # as emitted: every read of the accumulator follows its wait


def test_a_dropped_accumulator_wait_is_a_contract_error(small_plan):
    # the consumer's wait_group 0 after the mainloop: the epilogue would read the pending accumulator
    waits = []

    def drop(ev):
        if isinstance(ev.value, Call) and getattr(ev.value.op, "name", "") == "tirx.ptx.wgmma_wait_group":
            waits.append(ev)
            if len(waits) == 2:
                return Evaluate(0)
        return ev
    func = tvm_ffi.structural_map(gemm_emit.emit(small_plan), (Evaluate, drop), order="post")
    assert len(waits) == 2
    with pytest.raises(ContractError, match="before the wgmma.wait_group that retires it") as err:
        check_accumulators(func)
    assert err.value.check == "accumulator wait" and err.value.operand == "acc"


def test_a_ring_layout_off_the_descriptor_is_a_contract_error(small_plan, monkeypatch):
    # seeded bug: the ring declared unswizzled while TMA writes (and the descriptor must read) it 128-byte
    # swizzled: the pattern reads the swizzle off the declared layout, and no unswizzled canonical layout has
    # 128-byte K-major rows
    swizzled = gemm_emit.ring_layout

    def unswizzled(*args):
        return swizzled(*args).tile_layout
    monkeypatch.setattr(gemm_emit, "ring_layout", unswizzled)
    with pytest.raises(ContractError, match="not the K-major canonical layout of swizzle none") as err:
        device_function(gemm_emit.emit(small_plan), "sm90")
    assert err.value.check == "layout" and err.value.operand == "A"


def test_the_kernels_printed_script_parses_back_to_the_same_ir(small_plan):
    # the pattern prints as T.cuda.sm90.tile.apply(form, (D, A, B), ((name, value), ...), scope=...)
    from tvm_tirx.script import tirx as T
    from tvm_tirx.script.parser import parse

    func = gemm_emit.emit(small_plan)
    text = func.script()
    assert 'T.cuda.sm90.tile.apply("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", (' in text
    again = parse(text, extra_vars={"T": T})
    assert tvm_ffi.structural_equal(func, again)
    assert again.script() == text
