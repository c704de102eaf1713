"""Errors are product: ContractError's sentence comes first, malformed operands are contract errors
(never an internal error), workgroup scope takes one-register operands, bool modifiers are refused,
the CLI shows the rule first, and TIRx's ROCm codegen warnings go to logging."""

from paths import TESTS
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import child_python
import error_kernels
import tvm_cdna4
from tvm_cdna4 import ContractError, errors
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, MFMA_OPS, formats, reference
from tvm_cdna4.patterns.layouts import mfma_fragment
from tvm_cdna4.probes import STORAGE, mfma_probe, tr_probe

F16 = CATALOG["mfma_f32_16x16x32_f16"]


def first_line(make) -> str:
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(make())
    return str(info.value).splitlines()[0]


def test_contract_error_reads_as_one_sentence_then_the_residue():
    err = ContractError("owner map violated: atom element (3, 5) must live in lane 19", opcode="mfma_f32_16x16x32_f16",
                        operand="A", found="lane 3", suggestion="use layouts.mfma_fragment",
                        proof="cannot prove atom_lane % 4 == 0")
    assert isinstance(err, ValueError)  # ``except ValueError`` catches it too
    assert str(err).splitlines() == [
        "mfma_f32_16x16x32_f16: operand A: owner map violated: atom element (3, 5) must live in lane 19; "
        "found lane 3. Suggestion: use layouts.mfma_fragment",
        "  analyzer: cannot prove atom_lane % 4 == 0",
    ]
    assert str(ContractError("r", opcode="op", expected="E", found="F")) == "op: r; expected E, found F"


def test_build_raises_the_contract_error_not_the_tirx_wrapper(monkeypatch):
    def bad():  # A laid out for the 32x32x16 MFMA
        return mfma_probe(F16, layouts={"A": mfma_fragment(CATALOG["mfma_f32_32x32x16_f16"], "A", (1, 1))[0]})

    monkeypatch.delenv(errors.TRACEBACK_ENV, raising=False)
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(bad())
    lines = str(info.value).splitlines()
    assert lines[0] == ("mfma_f32_16x16x32_f16: operand A: owner map violated: atom element (1, 0) must live in "
                        "lane 1; found lane 2. Suggestion: build the layout with tvm_cdna4.patterns.layouts "
                        "(mfma_fragment / tr_fragment)")
    assert lines[1].startswith("  analyzer: cannot prove ") and lines[2].startswith('  at: T.rocm.tile.apply("mfma_')
    assert info.value.__cause__ is None and info.value.__suppress_context__
    monkeypatch.setenv(errors.TRACEBACK_ENV, "1")  # the full story: TIRx's wrapper is the cause
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(bad())
    assert str(info.value.__cause__).startswith("Tensor instruction lowering failed: op=tirx.rocm.tile.apply")


MALFORMED = {
    "scalar A": "mfma_f32_16x16x32_f16: operand A: must be a tensor region (a register fragment or LDS tile); "
                "found the float32 scalar T.float32(1.0)",
    "scalar D": "mfma_f32_16x16x32_f16: operand D: must be a tensor region (a register fragment or LDS tile); "
                "found the float32 scalar T.float32(0.0)",
    "five operands": "mfma_f32_16x16x32_f16: expects operands D, A, B, C; found 5",
    "no operands": "mfma_f32_16x16x32_f16: expects operands D, A, B, C; found 0",
    "global D": "mfma_f32_16x16x32_f16: operand D: must be a register fragment; expected storage scope 'local', "
                "found a global tensor",
    "repeat mismatch": "mfma_f32_16x16x32_f16: operand B: repeat axes must agree with the other operands; "
                       "expected (1, 2), found (1, 1)",
    "no layout": "mfma_f32_16x16x32_f16: operand A: a register fragment needs an explicit layout (which lane and "
                 "register hold each element); found a tensor declared without layout=. Suggestion: declare it with "
                 "layout=tvm_cdna4.patterns.layouts.mfma_fragment(...) or tr_fragment(...), or a T.TileLayout",
    "tr scalar src": "ds_read_tr16_b64_v4f16: operand src: must be a tensor region (a register fragment or LDS tile); "
                     "found the float16 scalar T.float16(0.0)",
    "tr global src": "ds_read_tr16_b64_v4f16: operand src: must be an LDS tile; expected storage scope 'shared' or "
                     "'shared.dyn', found a global tensor",
    "tr one operand": "ds_read_tr16_b64_v4f16: expects operands dst, src; found 1",
}


MALFORMED_CHECK = {"global D": "storage scope", "tr global src": "storage scope", "repeat mismatch": "shape",
                   "no layout": "layout"}


@pytest.mark.parametrize("variant", error_kernels.MALFORMED)
def test_malformed_operands_name_their_rule_in_check(variant):
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(error_kernels.malformed_apply(variant))
    assert info.value.check == MALFORMED_CHECK.get(variant, "operands")


def test_every_check_the_package_raises_is_in_the_vocabulary_and_documented():
    """``check=`` literals of the package's source (``ContractError(..., check=...)`` and the pattern
    helpers' ``check=`` keywords) are names of ``errors.CHECKS``; docs/patterns.md lists each."""
    import ast

    used = set()
    for path in (TESTS.parent / "tvm_cdna4").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "check" and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                used.add(node.value.value)
    assert used - set(errors.CHECKS) == set()
    assert len(used) >= 20 and len(set(errors.CHECKS)) == len(errors.CHECKS)
    docs = (TESTS.parent / "docs" / "patterns.md").read_text()
    assert [name for name in errors.CHECKS if f"`{name}`" not in docs] == []


def test_every_pattern_contract_error_names_its_check():
    """Each ``ContractError(...)`` of the patterns and the catalog, and each failure of the pattern
    context (``error`` / ``fail`` / ``require``), passes ``check=``."""
    import ast

    package = TESTS.parent / "tvm_cdna4"
    missing = []
    for path in [*(package / "patterns").glob("*.py"), package / "isa" / "records.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            named = any(k.arg == "check" for k in node.keywords)
            inherited = name == "require" and isinstance(node.func.value, ast.Call)  # super().require: TIRx's
            if name in ("ContractError", "error", "fail", "require") and not named and not inherited:
                missing.append(f"{path.name}:{node.lineno}")
    assert missing == []


@pytest.mark.parametrize("variant", error_kernels.MALFORMED)
def test_malformed_operands_are_contract_errors(variant):
    # before: AttributeError ('FloatImm' object has no attribute 'region'), TypeError, garbled prefixes
    # ('operand Repeat shapes must agree', 'operand An explicit layout is required')
    assert first_line(lambda: error_kernels.malformed_apply(variant)) == MALFORMED[variant]


@pytest.mark.parametrize("scope", ["thread", "warp", "cta"])
def test_scope_error_names_the_opcode_and_only_the_wave_scopes(scope):
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(mfma_probe(F16, scope=scope))
    assert info.value.check == "scope"
    line = first_line(lambda: mfma_probe(F16, scope=scope))
    assert line == (f"mfma_f32_16x16x32_f16: scope='{scope}' is not allowed: the instruction is wave-collective (all "
                    f"64 lanes execute it together); expected scope='wave' or scope='workgroup', found scope='{scope}'")


@pytest.mark.parametrize("name, modifier", [("mfma_f64_16x16x4f64", "blgp"), ("mfma_f32_16x16x32_f16", "blgp"),
                                            ("mfma_f32_4x4x4f16", "cbsz")])
def test_bool_modifiers_are_refused(name, modifier):
    op = CATALOG[name]
    line = first_line(lambda: mfma_probe(op, **{modifier: True}))
    legal = op.modifier(modifier)
    assert line == (f"{name}: modifier {modifier}=True is illegal; expected an integer in [{legal.lo}, {legal.hi}] "
                    f"({legal.meaning}). Suggestion: write {modifier}=1, an integer")


def test_non_integer_modifiers_are_refused():
    assert first_line(lambda: mfma_probe(F16, blgp=1.5)) == (
        "mfma_f32_16x16x32_f16: parameter blgp must be a compile-time integer; found T.float32(1.5)")


def test_ds_read_tr_source_errors_name_the_opcode():
    line = first_line(lambda: tr_probe(CATALOG["ds_read_tr16_b64_v4f16"], row_pitch=18))
    assert line == ("ds_read_tr16_b64_v4f16: operand src: the chunk that lane 4 reads must start 8-byte aligned; "
                    "found byte offset 36 (atom element (0, 1, 0)). Suggestion: make the row pitch of the LDS layout "
                    "a multiple of 8 bytes")


# --- workgroup scope with operands of one register per lane (KeyError: 'm' before) -------------------

SINGLE_REGISTER = [op for op in MFMA_OPS if op.kind == "mfma" and 1 in (op.a_elems, op.acc_elems)]


def _values(rng, fmt, shape):
    return rng.normal(size=shape).astype(formats.fmt(fmt).dtype)


def _storage(x, fmt):
    return np.ascontiguousarray(x).view(np.dtype(STORAGE[fmt]))


@pytest.mark.parametrize("op", SINGLE_REGISTER, ids=lambda op: op.name)
def test_workgroup_scope_takes_single_register_operands(op, rng):
    waves = 4
    blgp = op.modifier("blgp").hi
    a = _values(rng, op.a_format, (64 * waves, op.a_elems))
    b = _values(rng, op.b_format, (64 * waves, op.b_elems))
    c = _values(rng, op.acc_format, (64 * waves, op.acc_elems))
    d = np.zeros_like(_storage(c, op.acc_format))
    kernel = mfma_probe(op, blgp=blgp, scope="workgroup", waves=waves)
    assert op.mnemonic in tvm_cdna4.build(kernel).asm
    emulate(kernel, _storage(a, op.a_format), _storage(b, op.b_format), _storage(c, op.acc_format), d)
    for w in range(waves):
        rows = slice(64 * w, 64 * w + 64)
        np.testing.assert_array_equal(d[rows].view(c.dtype), reference.mfma(op, a[rows], b[rows], c[rows], blgp=blgp))


def test_workgroup_scope_takes_one_register_scales(rng):
    op, waves = CATALOG["mfma_scale_f32_16x16x128_f8f6f4"], 4
    a, b = _values(rng, "fp8", (64 * waves, 32)), _values(rng, "fp8", (64 * waves, 32))
    c = rng.normal(size=(64 * waves, op.acc_elems)).astype(np.float32)
    sa, sb = (rng.integers(118, 136, 64 * waves).astype(np.uint32) for _ in range(2))
    d = np.zeros_like(c)
    emulate(mfma_probe(op, scope="workgroup", waves=waves), formats.to_words("fp8", a), formats.to_words("fp8", b),
            c, sa, sb, d)
    for w in range(waves):
        rows = slice(64 * w, 64 * w + 64)
        want = reference.mfma_scale(op, a[rows], b[rows], c[rows], cbsz=0, blgp=0, scale_a=sa[rows], scale_b=sb[rows])
        np.testing.assert_array_equal(d[rows], want)


# --- the command line ----------------------------------------------------------------------------

CLI_WITH_A_BAD_KERNEL = (
    f"import sys; sys.path.insert(0, {str(TESTS)!r}); import error_kernels; "
    "from tvm_cdna4.kernels.gfx950 import gemm; "  # the emission gemm.build runs (--no-cache: always)
    "gemm.emit = lambda plan: error_kernels.malformed_apply('repeat mismatch'); "
    "from tvm_cdna4.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _cli(*flags, env=None):
    return subprocess.run([sys.executable, "-c", CLI_WITH_A_BAD_KERNEL, *flags, "gemm", "--target", "gfx950",
                           "--emit", "asm", "--no-cache"], capture_output=True, text=True,
                          env=child_python.env({k: v for k, v in os.environ.items() if k != errors.TRACEBACK_ENV} | (env or {})))


def test_cli_prints_the_contract_error_first():
    proc = _cli()
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"error: {MALFORMED['repeat mismatch']}"
    assert "Traceback" not in proc.stderr and "Tensor instruction lowering failed" not in proc.stderr
    assert "Unable to detect ROCm version" not in proc.stderr


@pytest.mark.parametrize("how", [("-v",), ()])
def test_cli_full_traceback_on_request(how):
    proc = _cli(*how, env={} if how else {errors.TRACEBACK_ENV: "1"})
    assert proc.returncode == 2
    # -v also logs at DEBUG (TIRx's codegen warnings, ...): the error is the first line after the log
    logged = [line.startswith("tvm_cdna4") and ": DEBUG: " in line for line in proc.stderr.splitlines()]
    assert any(logged) == bool(how)
    assert proc.stderr.splitlines()[logged.index(False)] == f"error: {MALFORMED['repeat mismatch']}"
    assert "Traceback (most recent call last)" in proc.stderr
    assert "Tensor instruction lowering failed: op=tirx.rocm.tile.apply" in proc.stderr
    assert 'patterns/common.py", line' in proc.stderr  # where the rule was checked


# --- TIRx's ROCm codegen warnings ------------------------------------------------------------------

def test_codegen_warnings_go_to_logging_at_debug(capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="tvm_cdna4")
    tvm_cdna4.build(mfma_probe(F16))
    assert capfd.readouterr().err == ""
    logged = [r.getMessage() for r in caplog.records if r.name == "tvm_cdna4" and r.levelno == logging.DEBUG]
    assert any("Unable to detect ROCm version" in m for m in logged)
    assert any("Cannot get maximum number of threads for AMD codegen" in m for m in logged)


def test_other_stderr_output_passes_through(capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="tvm_cdna4")
    with errors.presented():
        os.write(2, b"[12:00:00] target_kind.cc:95: Warning: Unable to detect ROCm version, assuming >= 3.5\n")
        os.write(2, b"something else a user must see\n")
    assert capfd.readouterr().err == "something else a user must see\n"
    assert [r.getMessage() for r in caplog.records if r.name == "tvm_cdna4"] == [
        "TIRx: [12:00:00] target_kind.cc:95: Warning: Unable to detect ROCm version, assuming >= 3.5"]


TIRX_COMPILE = f"""
import logging, sys
sys.path.insert(0, {str(TESTS)!r})
logging.basicConfig(stream=sys.stdout, format="LOG %(name)s %(levelname)s %(message)s")
logging.getLogger("tvm_cdna4").setLevel(logging.DEBUG)
import tvm_cdna4, tvm_tirx, error_kernels
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.probes import mfma_probe
kernel = error_kernels.malformed_apply(sys.argv[1]) if len(sys.argv) > 1 else mfma_probe(CATALOG[{F16.name!r}])
try:
    exe = tvm_tirx.tirx.compile(kernel, target={{"kind": "rocm", "mcpu": "gfx950"}})
    print("MFMA", {F16.mnemonic!r} in exe.mod.imports[0].inspect_source("asm"))
except tvm_cdna4.ContractError as error:
    print("ERROR", str(error).splitlines()[0])
"""


@pytest.mark.parametrize("bad", [None, "repeat mismatch"])
def test_codegen_warnings_go_to_logging_on_the_tirx_route(bad):
    """``tvm_tirx.tirx.compile`` with a dict target (parsed twice by TIRx before any hook of ours) and
    its codegen: the warnings reach the DEBUG log, not stderr (a build, and a kernel refused)."""
    proc = subprocess.run([sys.executable, "-c", TIRX_COMPILE, *([bad] if bad else [])],
                          capture_output=True, text=True, env=child_python.env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout.splitlines()
    assert out[-1] == (f"ERROR {MALFORMED[bad]}" if bad else "MFMA True")
    logged = [line for line in out if line.startswith("LOG tvm_cdna4 DEBUG TIRx: ")]
    assert any("Unable to detect ROCm version" in line for line in logged)
    assert any("Cannot get maximum number of threads for AMD codegen" in line for line in logged) == (bad is None)


# --- one error type on every route; TIRx's foreseeable failures caught first -----------------------

def test_the_emulator_route_raises_the_pattern_error_itself():
    from tvm_cdna4.patterns.layouts import mfma_fragment

    bad = mfma_probe(F16, layouts={"A": mfma_fragment(CATALOG["mfma_f32_32x32x16_f16"], "A", (1, 1))[0]})
    arrays = [np.zeros((64, 8), np.float16)] * 2 + [np.zeros((64, 4), np.float32)] * 2
    with pytest.raises(ContractError) as info:
        emulate(bad, *arrays)
    assert str(info.value).splitlines()[0].startswith("mfma_f32_16x16x32_f16: operand A: owner map violated")
    assert info.value.context is None and info.value.original is info.value


def _cuda_kernel():
    sys.path.insert(0, str(TESTS))
    import cuda_seed_example

    return cuda_seed_example.matrix_kernel()


BACKEND = {
    # before: Check failed: (scope->backend() == target_->kind->name) is false
    "gfx950 kernel emulated for sm80": (lambda: emulate(mfma_probe(F16), target="sm80"), "rocm", "cuda", "tirx.rocm.tile.apply"),
    # before: Check failed: (target_->kind->name == "cuda") is false: CUDA LaunchConfig requires a CUDA target
    "CUDA kernel given to tvm_cdna4.build": (lambda: tvm_cdna4.build(_cuda_kernel()), "cuda", "rocm", "tirx.cuda."),
    "CUDA kernel emulated for gfx950": (lambda: emulate(_cuda_kernel()), "cuda", "rocm", "tirx.cuda."),
}


@pytest.mark.parametrize("case", list(BACKEND))
def test_a_kernel_for_another_backend_is_a_contract_error(case):
    run, written, target, evidence = BACKEND[case]
    with pytest.raises(ContractError, match=rf"^the kernel is written for the {written} backend \(it calls {evidence}.*\), "
                       rf"but the target is {target}; expected a {target} kernel, found a {written} kernel\. "
                       rf"Suggestion: compile it for ") as info:
        run()
    assert info.value.check == "backend"


# ---- the public plan API: a config's field types and its target (stop 54, "mistakes") ----------------------------


def _gemm_plan(target, config):
    from tvm_cdna4.kernels import gemm

    return gemm.plan(gemm.GemmProblem(256, 256, 256, "f16", "nt", "f32"), target, config)


def _configs():
    from tvm_cdna4.kernels.gfx950.gemm_config import Gfx950GemmConfig
    from tvm_cdna4.kernels.sm80.gemm_config import GemmConfig
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    return GemmConfig, Sm90Config, Gfx950GemmConfig


@pytest.mark.parametrize("target, make, operand, found", [
    # before: a TypeError from arithmetic ("unsupported operand type(s) for //: 'str' and 'int")
    ("sm80", lambda c: c[0](block_m="128"), "block_m", "'128'"),
    ("sm80", lambda c: c[0](block_m=128.0), "block_m", "128.0"),
    ("sm80", lambda c: c[0](precompute="no"), "precompute", "'no'"),  # before: planned, "no" read as True
    ("sm80", lambda c: c[0](warps_m=0), "warps_m", "0"),  # before: ZeroDivisionError
    ("sm80", lambda c: c[1](), "config", "a Sm90Config"),  # before: TypeError, check() missing 'smem_bytes'
    ("sm80", lambda c: {"block_m": 64}, "config", "a dict"),  # before: AttributeError
    ("sm90", lambda c: c[1](stages=2.0), "stages", "2.0"),  # before: planned
    ("sm90", lambda c: c[1](swap_ab="no"), "swap_ab", "'no'"),  # before: planned, swapped
    ("sm90", lambda c: c[0](), "config", "a GemmConfig"),  # before: TypeError, check() takes 1 argument
    ("gfx950", lambda c: c[2](lds_dma="no"), "lds_dma", "'no'"),  # before: planned with LDS DMA on
])
def test_a_gemm_config_of_the_wrong_type_is_named(target, make, operand, found):
    with pytest.raises(ContractError) as info:
        _gemm_plan(target, make(_configs()))
    assert (info.value.operand, str(info.value.found)) == (operand, found)
    assert str(info.value).splitlines()[0].startswith(f"operand {operand}: {target} GEMM config")


def test_an_attention_config_of_the_wrong_type_or_target_is_named():
    from tvm_cdna4.kernels import attention
    from tvm_cdna4.kernels.attention.problem import AttentionProblem
    from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionConfig

    with pytest.raises(ContractError, match="sm80 attention config block_kv") as info:
        Sm80AttentionConfig(block_kv="64")  # before: TypeError "not all arguments converted during string formatting"
    assert info.value.found == "'64'"
    with pytest.raises(ContractError, match="sm80 attention config q_regs"):
        Sm80AttentionConfig(q_regs="no")  # before: accepted, "no" read as True
    problem = AttentionProblem(1, 4, 4, 256, 256, 128, False, "bf16")
    with pytest.raises(ContractError, match="sm90 attention config: a config of this target") as info:
        attention.plan(problem, "sm90", Sm80AttentionConfig())  # before: AttributeError, no 'check'
    assert info.value.operand == "config"
    with pytest.raises(ValueError, match="attention causal: expected True or False, found 'yes'"):
        AttentionProblem(1, 4, 4, 256, 256, 128, "yes", "bf16")  # before: planned a causal kernel


def test_a_gemm_config_of_another_target_is_a_contract_error_on_every_target():
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.gfx950.gemm_plan import Gfx950GemmConfig
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    problem = GemmProblem(64, 64, 64, "f16", "nt", "f32")
    for target, config in (("gfx950", Sm90Config(64, 64, 2, 1)), ("sm90", Gfx950GemmConfig())):
        with pytest.raises(ContractError, match=f"{target} GEMM config: a config of this target") as info:
            gemm.plan(problem, target=target, config=config)  # gfx950 before: a TypeError of its own
        assert info.value.operand == "config"


# ---- stop 55 (review55): the paths stop 54's check_config did not reach ------------------------------------------


@pytest.mark.parametrize("config", ["Sm90Config", "Gfx950GemmConfig", "DecodeConfig"])
def test_an_sm80_grouped_gemm_names_a_config_it_cannot_plan(config):
    """Before: an AttributeError from the GroupedGemm's description (``config.block_k``, ``config.warps_m``)."""
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig

    make = {"DecodeConfig": DecodeConfig, **{c.__name__: c for c in _configs()}}[config]
    with pytest.raises(ContractError, match="sm80 GEMM config: a config of this target") as info:
        gemm.plan(gemm.GemmProblem(None, 256, 256, "f16", "nt", "f32", groups=4), "sm80", make(), m=64)
    assert (info.value.operand, info.value.found) == ("config", f"a {config}")


def test_an_sm80_reduction_beside_another_targets_config_names_the_config():
    """Before: dataclasses.replace's TypeError ("replace() should be called on dataclass instances")."""
    with pytest.raises(ContractError, match="sm80 GEMM config: a config of this target") as info:
        from tvm_cdna4.kernels import gemm

        gemm.plan(gemm.GemmProblem(256, 256, 256, "f16", "nt", "f32"), "sm80", _configs()[1](), reduction="ordered")
    assert info.value.operand == "config"


@pytest.mark.parametrize("dtype, config, expected", [
    ("f16", "MxGemmConfig", "a Gfx950GemmConfig"),  # before: AttributeError, no 'check'
    ("mxfp8", "Gfx950GemmConfig", "a MxGemmConfig"),  # before: planned, lds_dma / mfma / waves_m unread
])
def test_a_gfx950_gemm_config_of_the_other_kernel_is_named(dtype, config, expected):
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gfx950.gemm_config import Gfx950GemmConfig
    from tvm_cdna4.kernels.gfx950.mx_gemm_plan import MxGemmConfig

    made = {"MxGemmConfig": MxGemmConfig(), "Gfx950GemmConfig": Gfx950GemmConfig(block_k=128, lds_dma=True)}[config]
    with pytest.raises(ContractError, match="gfx950 GEMM config: a config of this target") as info:
        gemm.plan(gemm.GemmProblem(256, 256, 256, dtype, "nt"), "gfx950", made)
    assert info.value.operand == "config" and info.value.expected.startswith(expected)


def _paged_problem():
    from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem

    return PagedDecodeProblem(2, 8, 2, 128, 1, 16, 8, 20)


@pytest.mark.parametrize("field, value", [("prefetch", "no"), ("lds_pad", 16.0), ("splits", True)])
def test_a_gfx950_paged_config_field_of_the_wrong_type_is_named(field, value):
    """Before: ``prefetch="no"`` and ``lds_pad=16.0`` were planned ("no" read as True)."""
    from tvm_cdna4.kernels.gfx950.paged_decode_plan import PagedDecodeConfig

    with pytest.raises(ContractError, match=f"gfx950 paged decode config {field}: a field of type") as info:
        PagedDecodeConfig(**{field: value})
    assert (info.value.operand, info.value.found) == (field, repr(value))


@pytest.mark.parametrize("target, other", [("gfx950", "sm80"), ("sm80", "gfx950"), ("sm90", "gfx950"),
                                           ("sm80", "attention")])
def test_a_paged_config_of_another_target_is_named(target, other):
    """Before: an AttributeError (``block_kv``, ``tile_keys``, ``fp8_cvt``) from inside the planner."""
    from tvm_cdna4.kernels import attention
    from tvm_cdna4.kernels.gfx950.paged_decode_plan import PagedDecodeConfig as Gfx950Paged
    from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionConfig
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig as CudaPaged

    config = {"sm80": CudaPaged, "gfx950": Gfx950Paged, "attention": Sm80AttentionConfig}[other]()
    with pytest.raises(ContractError, match=f"{target} paged decode config: a config of this target") as info:
        attention.paged_verb(target, "plan")(_paged_problem(), config)
    assert (info.value.operand, info.value.found) == ("config", f"a {type(config).__name__}")


def test_check_config_reads_every_field_of_every_config_class():
    """A guard: ``check_config`` skips, silently, a field whose declared type is not a ``FIELD_TYPES`` name (a
    tuple, a float, or an annotation it cannot read: ``int | None`` in a module without ``from __future__ import
    annotations`` is not a string). Every config class of ``tvm_cdna4.kernels`` has each of its fields read."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil

    import attrs

    import tvm_cdna4.kernels as kernels
    from tvm_cdna4.kernels.common import _typed_fields

    classes = {obj for m in pkgutil.walk_packages(kernels.__path__, kernels.__name__ + ".")
               for name, obj in vars(importlib.import_module(m.name)).items()
               if inspect.isclass(obj) and name.endswith("Config") and obj.__module__ == m.name
               and (attrs.has(obj) or dataclasses.is_dataclass(obj))}
    assert len(classes) >= 10  # GEMM (sm80 tile and decode, sm90, gfx950 dense and MX), attention x3, paged x2
    unread = {f"{c.__module__}.{c.__name__}": [f.name for f in (attrs.fields(c) if attrs.has(c) else dataclasses.fields(c))
                                               if f.name not in {t[0] for t in _typed_fields(c)}] for c in classes}
    assert {name: fields for name, fields in unread.items() if fields} == {}
