"""The ``tvm_tirx.tirx.compile`` route: the same rules as ``tvm_cdna4.build``, a Python error for a
target other than gfx950 (never an LLVM abort), the same code, and build hooks scoped to gfx950."""

import subprocess
import sys

import pytest
import tvm_ffi
import tvm_tirx
import tvm_tirx.support.rocm as rocm_support

import analysis_kernels as K
import child_python
import rocm_kernels
import tvm_cdna4
from tvm_cdna4.errors import ContractError
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.probes import mfma_probe

GFX950 = {"kind": "rocm", "mcpu": "gfx950"}
F16 = CATALOG["mfma_f32_16x16x32_f16"]
WRITE_THIS = r'compile with target=\{"kind": "rocm", "mcpu": "gfx950"\}'


def test_rocm_without_mcpu_is_a_python_error_not_an_abort():
    code = ("import tvm_tirx\nfrom tvm_cdna4.isa import CATALOG\nfrom tvm_cdna4.probes import mfma_probe\n"
            "tvm_tirx.tirx.compile(mfma_probe(CATALOG['mfma_f32_16x16x32_f16']), target='rocm')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=child_python.env())
    assert proc.returncode == 1, proc.stderr[-3000:]  # SIGABRT would be -6
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tvm_cdna4.ContractError: mfma_f32_16x16x32_f16: a gfx950 (CDNA4) instruction compiles only "
                           "for mcpu gfx950; expected kind 'rocm', mcpu 'gfx950', found kind 'rocm', mcpu 'gfx900'. "
                           'Suggestion: compile with target={"kind": "rocm", "mcpu": "gfx950"}')


@pytest.mark.parametrize("pipeline", ["default", "tirx"])
@pytest.mark.parametrize("make, name", [(lambda: mfma_probe(F16), "mfma_f32_16x16x32_f16"),
                                        (rocm_kernels.raw_mfma, "llvm.amdgcn.mfma.f32.16x16x32.f16")], ids=["pattern", "raw intrinsic"])
def test_gfx942_is_refused(make, name, pipeline):
    with pytest.raises(ContractError, match=rf"{name}: a gfx950 \(CDNA4\) instruction compiles only for mcpu "
                       rf"gfx950; expected kind 'rocm', mcpu 'gfx950', found kind 'rocm', mcpu 'gfx942'.*{WRITE_THIS}"):
        tvm_tirx.tirx.compile(make(), target={"kind": "rocm", "mcpu": "gfx942"}, pipeline=pipeline)


@pytest.mark.parametrize("pipeline", ["default", "tirx"])
def test_the_route_refuses_the_let_bound_bypass(pipeline):
    # default pipeline: checked as written; any pipeline: checked again on the lowered device function
    with pytest.raises(ContractError, match=r"a wave-collective instruction runs under `if (half|tx < 32):`, which is lane-varying"):
        tvm_tirx.tirx.compile(K.let_bound_condition(), target=GFX950, pipeline=pipeline)


RULES = {
    "workgroup above 256 threads": (lambda: mfma_probe(F16, threads=512), "workgroup size", r"workgroup of 512 threads"),
    "workgroup not whole waves": (lambda: mfma_probe(F16, threads=96), "whole waves", r"workgroup of 96 threads is not a whole number of 64-lane waves"),
    "fewer waves than the wave axis": (lambda: K.workgroup_waves(128, 4), "wave count", r"operand Df\[0:4, 0, 0, 0:16, 0:16\]: scope=.workgroup. launches 128 threads \(2 waves\)"),
    "more waves than the wave axis": (lambda: K.workgroup_waves(256, 2), "wave count", r"operand Df\[0:2, 0, 0, 0:16, 0:16\]: scope=.workgroup. launches 256 threads \(4 waves\)"),
    "LDS view": (rocm_kernels.lds_view_read, "LDS view", r"a view of shared memory \(LDS\)"),
    "lane-varying buffer": (K.buffer_condition, "wave-uniform control", r"runs under `if flag\[0\] == 0:`"),
}


@pytest.mark.parametrize("case", list(RULES))
def test_the_route_runs_the_whole_kernel_rules(case):
    make, rule, message = RULES[case]
    with pytest.raises(ContractError, match=message) as info:
        tvm_tirx.tirx.compile(make(), target=GFX950)
    assert info.value.check == rule


@pytest.mark.parametrize("make", [lambda: mfma_probe(F16), rocm_kernels.tr_operand_then_mfma, lambda: K.wave_id_branch(128)],
                         ids=["mfma", "ds_read_tr operand form", "wave_id branch"])
def test_the_route_produces_the_build_assembly(make):
    exe = tvm_tirx.tirx.compile(make(), target=GFX950)
    assert exe.mod.imports[0].inspect_source("asm") == tvm_cdna4.build(make()).asm


@pytest.fixture
def tirx_callbacks(monkeypatch):
    """TIRx's own ROCm callbacks, replaced by recording stand-ins (no ROCm install is needed)."""
    calls = []
    monkeypatch.setattr(rocm_support, "callback_rocm_bitcode_path", lambda rocdl_dir=None: calls.append("bitcode") or tvm_ffi.convert([]))
    monkeypatch.setattr(rocm_support, "callback_rocm_link", lambda obj: calls.append("link") or bytearray(b"tirx-linked"))
    return calls


def test_other_rocm_targets_get_tirx_callbacks(tirx_callbacks):
    bitcode = tvm_ffi.get_global_func("tvm_callback_rocm_bitcode_path")
    link = tvm_ffi.get_global_func("tvm_callback_rocm_link")
    assert list(bitcode()) == [] and bytes(link(bytearray(b"obj"))) == b"tirx-linked"
    tirx_callbacks.clear()
    exe = tvm_tirx.tirx.compile(K.plain_copy(), target={"kind": "rocm", "mcpu": "gfx90a"})
    assert tirx_callbacks == ["bitcode", "link"]
    assert "gfx90a" in exe.mod.imports[0].inspect_source("asm")


def test_gfx950_builds_get_this_package_callbacks(tirx_callbacks):
    exe = tvm_tirx.tirx.compile(K.plain_copy(), target=GFX950)
    assert tirx_callbacks == ["bitcode"]  # asked for ROCm's device libraries only; linked by ld.lld or kept as an object
    assert "gfx950" in exe.mod.imports[0].inspect_source("asm")


def owner_map_violation():  # A laid out for the 32x32x16 MFMA
    from tvm_cdna4.patterns.layouts import mfma_fragment

    return mfma_probe(F16, layouts={"A": mfma_fragment(CATALOG["mfma_f32_32x32x16_f16"], "A", (1, 1))[0]})


@pytest.mark.parametrize("pipeline", ["default", "tirx"])
def test_a_pattern_contract_error_reaches_the_route_as_itself(pipeline):
    # before: RuntimeError("Tensor instruction lowering failed: op=tirx.rocm.tile.apply ..."), the sentence on line 2
    with pytest.raises(ContractError) as info:
        tvm_tirx.tirx.compile(owner_map_violation(), target=GFX950, pipeline=pipeline)
    error = info.value
    lines = str(error).splitlines()
    assert lines[0] == ("mfma_f32_16x16x32_f16: operand A: owner map violated: atom element (1, 0) must live in lane 1; "
                        "found lane 2. Suggestion: build the layout with tvm_cdna4.patterns.layouts (mfma_fragment / "
                        "tr_fragment)")
    assert (error.opcode, error.operand, error.check) == ("mfma_f32_16x16x32_f16", "A", "owner map")
    assert lines[1].startswith("  analyzer: cannot prove") and lines[2].startswith('  at: T.rocm.tile.apply("mfma_')
    assert error.context.startswith("Error in pass: ") and "Tensor instruction lowering failed" not in str(error)
    assert error.original is not error and str(error).startswith(str(error.original) + "\n")


@pytest.mark.parametrize("pipeline, opcode", [("default", "mfma_f32_16x16x32_f16"),  # checked as written
                                              ("tirx", "llvm.amdgcn.mfma.f32.16x16x32.f16")])  # in target.build.rocm
def test_a_whole_kernel_rule_keeps_its_fields_on_the_route(pipeline, opcode):
    # the tirx pipeline's error crosses C++ (target.build.rocm): rebuilt from its text, fields kept
    with pytest.raises(ContractError) as info:
        tvm_tirx.tirx.compile(K.let_bound_condition(), target=GFX950, pipeline=pipeline)
    assert (info.value.check, info.value.opcode) == ("wave-uniform control", opcode)


def _dispatch_frames(op_name) -> str:
    import traceback

    from tvm_tirx.ir import Op

    try:
        Op.get(op_name).get_attr("FTileOpDispatch")(None, None)
    except Exception as error:  # noqa: BLE001  (what matters is who ran)
        return "".join(traceback.format_exception(error))
    raise AssertionError("a dispatch of no call succeeded")


def test_only_our_op_gets_the_unwrapping_dispatch():
    assert "tvm_cdna4/errors.py" in _dispatch_frames("tirx.rocm.tile.apply")
    cuda = _dispatch_frames("tirx.cuda.tile.apply")
    assert "tvm_tirx/tirx/tile/dispatch.py" in cuda and "tvm_cdna4" not in cuda
