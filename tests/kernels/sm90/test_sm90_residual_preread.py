"""The residual read ahead of the epilogue (``Sm90Config.residual_read="preread"``, ``gemm_residual.preread``):
``tma``'s load into the staging buffer, each thread's words read into registers between the tile's last wgmma
issue and its retirement; the plan's rules, the emitted order of the reads, and the kernel in the CUDA emulator
(which checks every shared-memory access and each mbarrier's phase and transaction count)."""

from __future__ import annotations

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_residual as R
from tvm_cdna4.kernels.sm90.gemm_plan import RESIDUAL_CHOICE, STAGED_RESIDUAL, Sm90Config

H100 = DEVICES["H100"]
PREREAD = dict(epilogue="tma", residual_read="preread")
ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    # one CTA walks two row tiles (its residual barrier's phases 0 and 1), an 80-column tile: one 64-column block and
    # a 16-column tail (32-byte swizzle, the residual's tail map), M = 130 leaves the second tile two rows
    (130, 80, 320, "bf16", ALL, Sm90Config(128, 80, 2, 2, ctas=1, activation_form="tanh", **PREREAD)),
    (70, 64, 72, "f16", Fusion(residual=True), Sm90Config(64, 64, 2, 1, ctas=1, **PREREAD)),  # one consumer, one k-tile + 8
])
def test_the_emulator_validates_the_preread_residual(M, N, K, out, fusion, cfg):
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0


def test_every_word_is_read_before_the_wgmma_retire_and_the_epilogue_reads_none():
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    p = gemm.plan(GemmProblem(130, 80, 320, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                  Sm90Config(128, 80, 2, 2, ctas=1, **PREREAD))
    assert R.held_words(p) == 80 // 8 * 2 and gemm_emit.barriers(p) == 2 * 2 + 2
    text = device_function(gemm_emit.emit(p), "sm90").script()
    retire = text.index('T.ptx.wgmma(T.int32(0), "wait_group", "sync", "aligned", "")')
    last_issue = text.rindex('T.ptx.wgmma(T.int32(1), "wait_group", "sync", "aligned", "")')
    wait = 'T.cuda.mbarrier_wait(T.address_of(MB[(T.cuda.thread_idx("x") >> 7) + 3]), i_1)'
    assert text.count(wait) == 1 and last_issue < text.index(wait) < retire  # the residual barrier, once a tile
    reads = [text.index(f"held[{k}] = SMW[") for k in range(R.held_words(p))]
    assert text.index(wait) < min(reads) and max(reads) < retire
    epilogue = text[retire:]
    assert "word[0] = held[19]" in epilogue and "= SMW" not in epilogue  # no shared-memory read left
    assert epilogue.count("SMW_1[") == epilogue.count("] = word[0]") == R.held_words(p)  # C's writes only
    # the same load as 'tma' (halfway: k-tile 5 // 2 of the 64-column block and the tail)
    assert "if kt_1 == 2:" in text and text.count("address_of(mapresidual)") == text.count("address_of(mapresidualTail)") == 1


def test_the_128x256_tile_holds_64_words_a_thread_and_keeps_tma_s_shared_memory():
    tma = gemm.plan(GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                    Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="tma"), sms=132)
    pre = gemm.plan(GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                    Sm90Config(128, 256, 3, 2, **PREREAD), sms=132)
    assert R.held_words(pre) == 64 and pre.smem_bytes == tma.smem_bytes == 3 * 48 * 1024 + 64 * 1024
    assert R.held_index(pre, 0, 31, 1) == 63 and R.residual_at(pre) == R.residual_at(tma) == 32
    assert "preread" in STAGED_RESIDUAL and RESIDUAL_CHOICE != "preread"  # timed: no faster than tma


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(128, 256, 4, 2, residual_read="preread"), "residual_read='preread', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, residual_read="preread"), "residual_read='preread', epilogue='tma', epilogue_tile=64, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 128, 4, 2, schedule="pingpong", **PREREAD), "residual_read='preread', epilogue='tma', epilogue_tile=0, schedule='pingpong', split_k=1"),
    (Sm90Config(128, 256, 3, 2, split_k=2, **PREREAD), "residual_read='preread', epilogue='tma', epilogue_tile=0, schedule='cooperative', split_k=2"),
])
def test_a_preread_the_kernel_cannot_do_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError, match="config residual_read: how a fused residual is read") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "residual_read" and e.value.check == "parameters" and e.value.found == found


def test_the_epilogue_benchmark_times_the_preread_and_reports_the_peer_over_torch_mm(tmp_path):
    # benchmarks/sm90_gemm.py --epilogue: the preread beside the other reads (plain's 64-column staging too), and the
    # peer rows (cuBLAS's residual, cuBLASLt's bias + gelu) over torch.mm, outside the bar's count and ours' "plain"
    import json
    import sys

    from paths import TESTS
    sys.path.insert(0, str(TESTS))
    from benchmark_modules import benchmark_module

    bench = benchmark_module("sm90_gemm")
    keys = [job[0][1] for job in bench.epilogue_jobs()]
    assert {"residual (preread)", "all five (preread)", "plain (tma/64, s4)"} <= set(keys)
    assert [c[0] for c in bench.peer_cases()] == [bench.PEER_BASE, "torch.addmm (residual, out=C)",
                                                  "Tensor.addmm_ (residual, in place)", "torch._addmm_activation (bias, gelu)"]
    cfg = {"block_m": 128, "block_n": 256, "stages": 3, "epilogue": "tma", "residual_read": "preread", "activation_form": "ex2"}
    rows = [{"case": "plain", "steps": "none", "config": cfg, "ok": True, "us": 180.0},
            {"case": "residual (preread)", "steps": "acc + residual", "config": cfg, "ok": True, "us": 189.0},
            {"case": bench.PEER_BASE, "steps": "none", "config": {"peer": "cuBLAS"}, "ok": True, "us": 176.0, "peer": True},
            {"case": "Tensor.addmm_ (residual, in place)", "steps": "acc + residual", "config": {"peer": "cuBLAS"},
             "ok": True, "us": 193.6, "peer": True}]
    assert bench.epilogue_report(rows, str(tmp_path), "H100") == 1  # ours over the bar; the peers are not judged
    table = (tmp_path / "sm90_epilogue.md").read_text()
    assert "| residual (preread) | acc + residual | 128x256 s3 tma res preread, act ex2 | y | 189.0 | +5.0% | OVER |" in table
    assert "| Tensor.addmm_ (residual, in place) | acc + residual | cuBLAS (peer) | y | 193.6 | +10.0% over torch.mm | peer |" in table
    assert [round(r["overhead"], 3) for r in json.loads((tmp_path / "sm90_epilogue.json").read_text())["rows"]] == [0.0, 0.05, 0.0, 0.1]
