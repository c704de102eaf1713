"""Kernels made on one thread build, compile and emulate on another (issue 35, item 4).

TIRx interns ``PrimType`` objects per thread and its tile-op validator compares a call's type by
identity (``call->ty == PrimType::Void()``), so a ``T.rocm.tile.apply`` / ``T.cuda.tile.apply``
made on one thread failed TileDispatch on any other with ``... must return void``."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tvm_tirx
from tvm_tirx.ir import PrimType
from tvm_tirx.target import Target

import tvm_cdna4
from rocm_kernels import three_operand_mfma
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, reference
from tvm_cdna4.probes import mfma_probe
from tvm_cdna4.kernels.sm80.gemm import cuda_gemm

OP = CATALOG["mfma_f32_16x16x32_f16"]
GFX950 = {"kind": "rocm", "mcpu": "gfx950"}


def _on_worker(job, *args):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(job, *args).result()


def _asm(exe) -> str:
    return exe.mod.imports[0].inspect_source("asm")


def test_tirx_still_interns_prim_types_per_thread():
    """The cause (TIRx 0.1.0a4). When this fails, TIRx shares them: ``rocm.storage.this_thread_types``
    (the pipelines' first step) can go."""
    assert PrimType("void").same_as(PrimType("void"))
    assert not _on_worker(PrimType, "void").same_as(PrimType("void"))


def test_a_pattern_kernel_made_here_builds_on_a_worker_thread():
    kernel = mfma_probe(OP)
    result = _on_worker(tvm_cdna4.build, kernel)
    assert "v_mfma_f32_16x16x32_f16" in result.asm
    assert result.asm == tvm_cdna4.build(kernel).asm


def test_a_pattern_kernel_made_here_compiles_through_tirx_on_a_worker_thread():
    kernel = mfma_probe(OP)
    asm = _asm(_on_worker(tvm_tirx.tirx.compile, kernel, GFX950))
    assert "v_mfma_f32_16x16x32_f16" in asm
    assert asm == _asm(tvm_tirx.tirx.compile(kernel, target=GFX950))


def test_a_pattern_kernel_made_here_emulates_on_a_worker_thread(rng):
    kernel = mfma_probe(OP)
    a, b = (rng.normal(size=(64, 8)).astype(np.float16) for _ in range(2))
    c = rng.normal(size=(64, 4)).astype(np.float32)
    d = np.zeros_like(c)
    _on_worker(emulate, kernel, a, b, c, d)
    np.testing.assert_array_equal(d, reference.mfma(OP, a, b, c))


def test_the_sm80_gemm_made_here_compiles_through_tirx_on_a_worker_thread():
    kernel = cuda_gemm(64, 64, 64)
    target = Target({"kind": "cuda", "arch": "sm_80"})
    source = _on_worker(lambda: tvm_tirx.tirx.compile(kernel, target=target).mod.imports[0].inspect_source())
    assert "mma.sync.aligned.m16n8k16" in source
    assert source == tvm_tirx.tirx.compile(kernel, target=target).mod.imports[0].inspect_source()


def test_a_kernel_made_on_a_worker_thread_builds_here():
    kernel = _on_worker(mfma_probe, OP)
    assert "v_mfma_f32_16x16x32_f16" in tvm_cdna4.build(kernel).asm


def test_one_kernel_builds_on_several_threads_at_once():
    kernel = mfma_probe(OP)
    start = threading.Barrier(3)

    def job():
        start.wait()
        return tvm_cdna4.build(kernel).asm

    with ThreadPoolExecutor(3) as pool:
        results = [f.result() for f in [pool.submit(job) for _ in range(3)]]
    assert len(set(results)) == 1 and "v_mfma_f32_16x16x32_f16" in results[0]


def test_a_contract_error_of_a_kernel_made_here_reaches_a_worker_thread_as_itself():
    kernel = three_operand_mfma()
    for build in (tvm_cdna4.build, lambda k: tvm_tirx.tirx.compile(k, target=GFX950)):
        with pytest.raises(tvm_cdna4.ContractError) as err:
            _on_worker(build, kernel)
        assert str(err.value).startswith("mfma_f32_16x16x32_f16: expects operands D, A, B, C; found 3")
