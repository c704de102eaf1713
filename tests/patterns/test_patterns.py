"""T.rocm.tile.apply: all 44 opcodes compile for gfx950, scripts round-trip, helpers and build."""

import re
import subprocess
import sys

import pytest
import tvm_ffi
from tvm_tirx.script import tirx as T

import child_python
import rocm_kernels
import tvm_cdna4
from tvm_cdna4 import selftest
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.probes import mfma_probe, tr_probe
from tvm_cdna4.rocm.build import llvm_tool


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_opcode_compiles_to_its_gfx950_instruction(name):
    ok, found, detail = selftest.check(name)
    assert ok, f"{name}: found {found}; {detail}"


def test_selftest_cli_prints_one_line_per_opcode(capsys):
    # in-process (tvm_cdna4.cli.main, what `python -m tvm_cdna4` runs; test_cli.py runs the entry point)
    from tvm_cdna4.cli import main

    assert main(["selftest", "mfma_f32_4x4x4f16", "ds_read_tr8_b64_v2i32"]) == 0
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.startswith(("mfma_", "ds_"))]
    assert lines[0].split()[1:] == ["v_mfma_f32_4x4x4_16b_f16", "OK"]
    assert lines[1].split()[1:] == ["ds_read_b64_tr_b8", "OK"]
    assert main(["selftest", "v_mfma_f32_4x4x4_16b_f16"]) == 0  # a mnemonic names the opcode, as in draw
    assert capsys.readouterr().out.startswith("mfma_f32_4x4x4f16 ")


@pytest.mark.parametrize("spelling", ["mfma_f32_32x32x1f32", "__builtin_amdgcn_mfma_f32_32x32x1f32", "v_mfma_f32_32x32x1_2b_f32"])
def test_amdgcn_namespace_spellings(spelling):
    assert T.amdgcn[spelling] == "mfma_f32_32x32x1f32"
    assert T.amdgcn.ds_read_tr8_b64_v2i32 == "ds_read_tr8_b64_v2i32"


@pytest.mark.parametrize("make", [lambda: mfma_probe(CATALOG["mfma_f32_4x4x4f16"], cbsz=2, abid=1, blgp=3),
                                  lambda: tr_probe(CATALOG["ds_read_tr6_b96_v3i32"]),
                                  lambda: mfma_probe(CATALOG["mfma_scale_f32_32x32x64_f8f6f4"], cbsz=2, blgp=4, op_sel_a=1),
                                  rocm_kernels.workgroup_mfma])
def test_printed_script_reparses_to_the_same_ir(make):
    from tvm_tirx.script.parser import parse

    func = make()
    text = func.script()
    assert "T.rocm.tile.apply(" in text
    assert re.search(r'T\.rocm\.tile\.apply\("(mfma_(scale_)?[fi](32|64)_|ds_read_tr)', text)  # the canonical name
    again = parse(text, extra_vars={"T": T})
    assert tvm_ffi.structural_equal(func, again)
    assert again.script() == text


def test_workgroup_scope_checks_the_wave_axis():
    assert "v_mfma_f32_16x16x32_f16" in tvm_cdna4.build(rocm_kernels.workgroup_mfma()).asm
    with pytest.raises(tvm_cdna4.ContractError,
                       match=r"^mfma_f32_16x16x32_f16: operand A: element \(0, 0\) of wave 1 is not owned by that wave; found wave_id 0"):
        tvm_cdna4.build(rocm_kernels.workgroup_mfma(wave_axis_in_registers=True))


def test_bf16_mfma_reaches_llvm_as_bfloat_vectors():
    ir = tvm_cdna4.build(mfma_probe(CATALOG["mfma_f32_32x32x16_bf16"], blgp=5)).llvm_ir
    assert re.search(r"call <16 x float> @llvm\.amdgcn\.mfma\.f32\.32x32x16\.bf16\(<8 x bfloat> [^,]+, <8 x bfloat> [^,]+, <16 x float> [^,]+, i32 0, i32 0, i32 5\)", ir)


def test_scaled_mfma_passes_formats_op_sel_and_scales():
    ir = tvm_cdna4.build(mfma_probe(CATALOG["mfma_scale_f32_16x16x128_f8f6f4"], cbsz=4, blgp=2, op_sel_a=3, op_sel_b=1)).llvm_ir
    assert re.search(r"@llvm\.amdgcn\.mfma\.scale\.f32\.16x16x128\.f8f6f4\.v4i32\.v6i32\(<4 x i32> [^,]+, <6 x i32> [^,]+, "
                     r"<4 x float> [^,]+, i32 4, i32 2, i32 3, i32 [^,]+, i32 1, i32 [^)]+\)", ir)


def test_modifiers_reach_the_instruction():
    asm = tvm_cdna4.build(mfma_probe(CATALOG["mfma_f32_16x16x4f16"], cbsz=2, abid=3, blgp=6)).asm
    assert re.search(r"v_mfma_f32_16x16x4_4b_f16 .* cbsz:2 abid:3 blgp:6", asm)


def test_ds_read_tr_operand_form_feeds_an_mfma():
    result = tvm_cdna4.build(rocm_kernels.tr_operand_then_mfma())
    assert result.asm.count("ds_read_b64_tr_b16") == 2  # the pair of calls of the seed's K split
    assert "v_mfma_f32_32x32x16_f16" in result.asm


@pytest.mark.parametrize("tr, mfma, rule", [
    ("ds_read_tr8_b64_v2i32", "mfma_f32_16x16x16f16", r"K coverage: mfma_f32_16x16x16f16 operand B holds 4 elements per lane, not a whole number"),
    ("ds_read_tr16_b64_v4f16", "mfma_f32_4x4x4f16", r"operand form supports single-block MFMAs"),
])
def test_ds_read_tr_operand_form_contracts(tr, mfma, rule):
    with pytest.raises(tvm_cdna4.ContractError) as info:
        tvm_cdna4.build(rocm_kernels.tr_operand_then_mfma(tr, mfma, "float16"))
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"{tr}: ") and re.search(rule, first), first


def test_workgroup_barrier_waits_for_lds_writes():
    asm = tvm_cdna4.build(tr_probe(CATALOG["ds_read_tr16_b64_v4f16"])).asm
    body = asm[asm.index("ds_write"):]
    assert re.search(r"s_waitcnt lgkmcnt\(0\)\s+s_barrier", body)


def test_lds_allocation_keeps_its_alignment():
    ir = tvm_cdna4.build(tr_probe(CATALOG["ds_read_tr6_b96_v3i32"])).llvm_ir
    assert re.search(r"addrspace\(3\) global .* align 16", ir)


def test_build_reports_resources():
    result = tvm_cdna4.build(mfma_probe(CATALOG["mfma_f32_32x32x4f16"]))
    info = result.kernel()
    assert info.vgprs >= 32 + 2 + 2 and info.scratch_bytes == 0 and info.lds_bytes == 0
    assert info.max_flat_workgroup_size == 256
    # no LDS: registers alone limit occupancy (512 unified VGPRs per lane, allocated in granules of 8)
    assert info.waves_per_simd() == min(8, 512 // (-(-info.vgprs // 8) * 8))


def test_occupancy_estimate_is_limited_by_registers_then_lds():
    import attrs

    info = tvm_cdna4.build(mfma_probe(CATALOG["mfma_f32_32x32x4f16"])).kernel()
    assert attrs.evolve(info, vgprs=100, lds_bytes=0).waves_per_simd() == 4  # 104 registers: 512 // 104
    assert attrs.evolve(info, vgprs=129, lds_bytes=0).waves_per_simd() == 3  # 136 registers
    assert attrs.evolve(info, vgprs=24, lds_bytes=64 * 1024).waves_per_simd() == 2  # 2 workgroups of 4 waves per CU
    assert attrs.evolve(info, vgprs=24, lds_bytes=64 * 1024).waves_per_simd(waves_per_workgroup=8) == 4


@pytest.mark.llvm("ld.lld")
def test_code_object_is_a_linked_amdgpu_elf():
    code = tvm_cdna4.build(mfma_probe(CATALOG["mfma_f32_16x16x32_f16"])).code_object
    assert code[:4] == b"\x7fELF" and code[18] == 224  # e_machine EM_AMDGPU
    readelf = llvm_tool("llvm-readelf")
    if readelf:
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
            f.write(code)
            f.flush()
            notes = subprocess.run([readelf, "--notes", f.name], capture_output=True, text=True).stdout
        assert re.search(r"amdhsa\.target:\s+amdgcn-amd-amdhsa-\S*gfx950", notes)


def test_cuda_seed_ldmatrix_example_still_compiles_for_sm80():
    import cuda_seed_example
    import tvm_tirx
    from tvm_tirx.target import Target

    exe = tvm_tirx.tirx.compile(cuda_seed_example.matrix_kernel(), target=Target({"kind": "cuda", "arch": "sm_80"}), pipeline="tirx")
    src = exe.mod.imports[0].inspect_source("cuda")
    assert "ldmatrix.sync.aligned.m8n8.x2.shared.b16" in src
    assert src.count("tvm_builtin_ptx_ldmatrix_sync_aligned_m8n8_x2_shared_b16(") >= 2  # helper + call site


def test_entry_point_registers_at_import_tvm_tirx():
    code = ("import tvm_tirx; from tvm_tirx.script import tirx as T; "
            "print(T.amdgcn['v_mfma_f32_16x16x32_f16'], T.rocm.tile.apply.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_python.env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "mfma_f32_16x16x32_f16"
