"""The fused residual read with TMA (``Sm90Config.residual_read="tma"``): loaded into the whole-tile staging
buffer halfway through the mainloop, read in the epilogue where C's pair is then written; the plan's rules,
the cost model's choice, the emitted loads and the kernel in the CUDA emulator."""

from __future__ import annotations


import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]
TMA = dict(epilogue="tma", residual_read="tma")


@pytest.mark.parametrize("out, fusion, form", [
    ("bf16", Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True), "tanh"),
    ("f16", Fusion(residual=True), "ex2"),
])
def test_the_emulator_validates_the_residual_through_tma(out, fusion, form):
    # one CTA walks two ragged tiles (2 x 1 of 128x64), so each warpgroup's residual barrier runs phases 0 and 1
    # and its staging buffer holds a tile's residual, then its C, then the next tile's residual; the first case
    # with every choice the cost model makes for it (silu's tanh form too)
    problem = GemmProblem(130, 56, 72, "bf16", "nt", out, fusion)
    v = gemm.validate(problem, "sm90", Sm90Config(128, 64, 2, 2, ctas=1, activation_form=form, **TMA))
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0


def test_a_staged_residual_choice_is_taken_only_where_the_plan_allows(monkeypatch):
    # RESIDUAL_CHOICE "global" since stop 52 (timed faster than "tma"); set back to "tma", the cost model's configs
    # take it where the whole-tile staging allows and keep "global" where it does not
    from tvm_cdna4.kernels.sm90 import gemm_plan

    def read(out, fusion):
        return gemm.plan(GemmProblem(4096, 4096, 4096, "bf16", "nt", out, fusion), "sm90", sms=132).config
    assert read("bf16", Fusion(residual=True, activation="gelu")).residual_read == gemm_plan.RESIDUAL_CHOICE == "global"
    monkeypatch.setattr(gemm_plan, "RESIDUAL_CHOICE", "tma")
    fused = read("bf16", Fusion(residual=True, activation="gelu"))
    assert (fused.epilogue, fused.epilogue_tile, fused.residual_read) == ("tma", 0, "tma")
    assert read("bf16", Fusion(bias=True)).residual_read == "global"      # nothing to load
    assert read("f32", Fusion(residual=True)).residual_read == "global"   # stores from registers: no staging
    assert gemm.plan(GemmProblem(None, 4096, 4096, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                     m=4096, sms=132).config.residual_read == "tma"       # a dynamic M's bucket too


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(128, 256, 4, 2, residual_read="tma"), "residual_read='tma', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, residual_read="tma"), "residual_read='tma', epilogue='tma', epilogue_tile=64, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 128, 4, 2, schedule="pingpong", **TMA), "residual_read='tma', epilogue='tma', epilogue_tile=0, schedule='pingpong', split_k=1"),
    (Sm90Config(128, 256, 3, 2, split_k=2, **TMA), "residual_read='tma', epilogue='tma', epilogue_tile=0, schedule='cooperative', split_k=2"),
    (Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="smem"), "residual_read='smem', epilogue='tma', epilogue_tile=0, schedule='cooperative', split_k=1"),
])
def test_a_residual_read_the_kernel_cannot_do_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError, match="config residual_read: how a fused residual is read") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "residual_read" and e.value.check == "parameters" and e.value.found == found


@pytest.mark.parametrize("read", ["tma", "preread"])
def test_a_staged_residual_read_needs_a_fused_residual_and_a_dense_gemm(read):
    staged = dict(TMA, residual_read=read)
    with pytest.raises(ContractError, match=f"residual_read: '{read}' loads the fused residual") as e:
        gemm.plan(GemmProblem(256, 256, 64, "bf16", "nt", "bf16", Fusion(bias=True)), "sm90", Sm90Config(128, 64, 2, 2, **staged))
    assert e.value.operand == "residual_read"
    grouped = GemmProblem(None, 128, 64, "bf16", "nt", "bf16", Fusion(residual=True), groups=4)
    with pytest.raises(ContractError, match="grouped GEMM config residual_read") as e:
        gemm.plan(grouped, "sm90", Sm90Config(128, 64, 2, 2, **staged), m=64)
    assert e.value.operand == "residual_read" and e.value.found == f"'{read}'"


def test_each_warpgroup_loads_its_residual_rows_once_a_tile_halfway_through_its_mainloop():
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    p = gemm.plan(GemmProblem(130, 128, 320, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90",
                  Sm90Config(128, 128, 2, 2, ctas=1, **TMA))
    assert gemm_emit.residual_at(p) == 5 // 2 and gemm_emit.barriers(p) == 2 * 2 + 2
    assert "mapresidual" in gemm_emit.signature_source(p) and "residual_ptr" not in gemm_emit.signature_source(p)
    text = device_function(gemm_emit.emit(p), "sm90").script()
    # at k-tile 2 of 5, thread 0 of the warpgroup: its stores have read the buffer, then barrier 4 + wg armed with
    # the rows' bytes (64 x 128 x 2) and two 64-column boxes loaded into its staging buffer
    load = text[text.index("if kt_1 == 2:"):text.index("T.int32(0), \"wait_group\", \"sync\"")]
    assert '"wait_group", "read"' in load and "T.uint32(16384)" in load
    assert load.count("address_of(mapresidual)") == 128 // 64 and load.count("MB[(T.cuda.thread_idx(\"x\") >> 7) + 3]") == 3
    # the epilogue waits on the same barrier, phase i % 2, before it reads the buffer
    assert 'T.cuda.mbarrier_wait(T.address_of(MB[(T.cuda.thread_idx("x") >> 7) + 3]), i_1)' in text


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M, N, K, out, fusion", [
    (1000, 1000, 520, "bf16", Fusion(residual=True)),                   # 128x64 tiles, ragged M and N
    (777, 3000, 1000, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)),
    (3000, 1000, 1000, "f16", Fusion(activation="silu", residual=True)),  # 128x256: C's staging holds the residual
])
def test_the_cost_model_s_fused_choices_validate_on_a_hopper_gpu(M, N, K, out, fusion):
    # the plan's own choices (residual_read="tma", activation_form="tanh") against the family's bound, on the GPU
    from tvm_cdna4.runtime.cuda import run_gemm

    problem = GemmProblem(M, N, K, "bf16", "nt", out, fusion)
    cfg = gemm.plan(problem, "sm90").config
    assert cfg.residual_read == "tma" and cfg.activation_form == ("tanh" if fusion.activation else "ex2")
    v = gemm.validate(problem, "sm90", run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
