"""python -m tvm_cdna4 opcodes (table and JSON), gemm --target gfx950, attention, and bad input on every command.

One test runs the real entry point (``python -m tvm_cdna4`` in a fresh interpreter); the others
call ``tvm_cdna4.cli.main`` in-process, which is what ``__main__`` runs: same parser, same exit
status, same stdout and stderr, without paying an interpreter and a TIRx import per call.
"""

import json
import re
import subprocess
import sys

import pytest

from tvm_cdna4.isa import CATALOG, lanes



def test_opcodes_table_lists_every_opcode():
    # the entry point itself, in a fresh interpreter
    out = subprocess.run([sys.executable, "-m", "tvm_cdna4", "opcodes"], check=True, capture_output=True,
                         text=True).stdout
    for name, op in CATALOG.items():
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert op.mnemonic in line


def test_opcodes_json_schema_and_lane_tables(cli):
    data = json.loads(cli("opcodes", "--json").stdout)
    assert len(data) == 44 and {d["kind"] for d in data} == {"mfma", "mfma_scale", "ds_read_tr"}
    by = {d["name"]: d for d in data}
    assert all(d["name"] == d["builtin"].removeprefix("__builtin_amdgcn_") for d in data)
    mfma = by["mfma_f32_32x32x4bf16_1k"]
    for key in ("name", "builtin", "llvm_intrinsic", "m", "n", "k", "blocks", "a_dtype", "b_dtype", "acc_dtype", "ops", "cycles"):
        assert key in mfma
    assert mfma["llvm_intrinsic"] == "llvm.amdgcn.mfma.f32.32x32x4bf16.1k" and mfma["blocks"] == 2
    assert len(mfma["lanes"]["a"]) == 64 * 4 and len(mfma["lanes"]["acc"]) == 64 * 32
    op = CATALOG["mfma_f32_32x32x4bf16_1k"]
    for lane, reg, blk, row, col in mfma["lanes"]["acc"]:
        assert tuple(int(x) for x in lanes.acc_owner(op, lane, reg)) == (blk, row, col)
    tr = by["ds_read_tr8_b64_v2i32"]
    assert tr["k_split"] == [[[0, 7], [16, 23], [32, 39], [48, 55]], [[8, 15], [24, 31], [40, 47], [56, 63]]]
    assert tr["element_bits"] == 8 and tr["load_bits"] == 64 and tr["lds_alignment"] == 8
    assert [1, 0, 0, 1] in tr["lanes"]["provider"]  # lane 1 element 0 comes from lane 0, byte 1
    scaled = by["mfma_scale_f32_16x16x128_f8f6f4"]
    assert scaled["kind"] == "mfma_scale" and len(scaled["lanes"]["a"]) == 64 * 32


def test_opcodes_kind_filter(cli):
    data = json.loads(cli("opcodes", "--json", "--no-lanes", "--kind", "ds_read_tr").stdout)
    assert len(data) == 6 and all("lanes" not in d for d in data)


@pytest.fixture
def gemm(cli):
    return lambda *args: cli("gemm", "--target", "gfx950", *args)


def test_gemm_gfx950_validate_prints_error_and_pass(gemm):
    proc = gemm("--dtype", "f16", "--layout", "nn", "-M", "70", "-N", "33", "-K", "40", "--validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "PASS" and "relative error" in lines[0]


def test_gemm_gfx950_report_and_refusals(gemm):
    proc = gemm("--dtype", "fp8_bf8", "--layout", "tn", "-M", "1024", "-N", "1024", "-K", "1024", "--report")
    assert proc.returncode == 0, proc.stderr
    assert "static report (an estimate" in proc.stdout and "main loop:" in proc.stdout
    bound = next(line for line in proc.stdout.splitlines() if "MFMA-bound cycles per iteration" in line)
    assert bound.endswith("(the catalog's cycle counts of the loop's MFMAs, summed: the least one wave's iteration "
                          "can take)"), bound
    mca = [line for line in proc.stdout.splitlines() if line.startswith("  llvm-mca")]
    assert len(mca) == 1, proc.stdout
    assert "llvm-mca: not available" in mca[0] or re.search(
        r"cycles per iteration \(every instruction of the loop\), MFMA pipe busy [0-9.]+ \(the cycles its model charges "
        r"the MFMAs; llvm-mca-22: 4 each, whatever the shape\): MFMA-pipe share", mca[0]), mca[0]
    bench = gemm("--dtype", "f16", "--bench")
    assert bench.returncode == 2 and "needs a gfx950 GPU" in bench.stderr


def test_gemm_gfx950_without_an_action_is_a_usage_error(gemm):
    proc = gemm("--dtype", "f16", "-M", "64", "-N", "64", "-K", "64")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("error: gemm --target gfx950 needs an action: --validate (CPU emulator), --report (static "
                           "performance report), --emit asm/llvm/tir/config\n")


def test_selftest_unknown_name_is_a_usage_error_with_a_did_you_mean(cli):
    proc = cli("selftest", "ds_read_tr16_b64_v4f61")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("error: unknown CDNA4 opcode 'ds_read_tr16_b64_v4f61'; did you mean "
                                  "'ds_read_tr16_b64_v4f16'"), proc.stderr


def test_gemm_gfx950_mx_layout_tn_validates(gemm):
    """MX operands stored M/N-contiguous (layout tn) pack along M/N and reach the MFMA through ds_read_tr4."""
    proc = gemm("--dtype", "mxfp4", "--layout", "tn", "-M", "40", "-N", "33", "-K", "96", "--validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "PASS"


def test_gemm_gfx950_tile_options_build_the_kernel_they_name(gemm):
    config = gemm("--dtype", "fp8", "--block", "256x128x128", "--mfma", "32x32", "-M", "256", "-N", "256", "-K", "256",
                   "--emit", "config")
    assert config.returncode == 0, config.stderr
    assert json.loads(config.stdout) == {"block_m": 256, "block_n": 128, "block_k": 128, "mfma": "32x32", "lds_pad": 16,
                                         "interleave": True, "transpose_loads": True, "load_ahead": 2,
                                         "lds_dma": False, "waves_m": 2, "reduction": "atomic", "split_k": 1, "split_reduction": None,
                                         "epilogue": [], "fusion": {"bias": False, "activation": None, "residual": False,
                                                                    "row_scale": False, "col_scale": False, "steps": "none"},
                                         "workgroups": 2, "tiles": [1, 2],
                                         "planned_estimate": json.loads(config.stdout)["planned_estimate"]}
    dma = gemm("--dtype", "i8", "--lds-dma", "--stages", "3", "-M", "64", "-N", "64", "-K", "64", "--emit", "config")
    assert dma.returncode == 0, dma.stderr
    used = json.loads(dma.stdout)
    assert (used["block_k"], used["lds_dma"]) == (64, True)
    asm = gemm("--dtype", "f16", "--block", "64x64x32", "--mfma", "32x32", "--warps", "2x2", "--stages", "2",
                "-M", "256", "-N", "256", "-K", "256", "--emit", "asm")
    assert asm.returncode == 0, asm.stderr
    assert "v_mfma_f32_32x32x16_f16" in asm.stdout and "v_mfma_f32_16x16x32_f16" not in asm.stdout


@pytest.mark.parametrize("args, first_line", [
    (("--warps", "2x4"), "error: --warps 2x4: the gfx950 GEMMs run 2x2 waves (256 threads) per workgroup"),
    (("--stages", "3"), "error: --stages 3: the gfx950 GEMMs run a 2-stage K pipeline"),
    (("--lds-dma", "--stages", "2"),
     "error: --stages 2: the gfx950 GEMMs run a 3-stage K pipeline (direct-to-LDS loads)"),
    (("--dtype", "mxfp8", "--lds-dma"), "error: --lds-dma: the MX GEMM stages its loads in registers"),
    (("--group-m", "8"), "error: --group-m is an sm80 option"),
    (("--block", "80x128x64"), "error: --block 80x128x64: block 80x128x64 does not tile 2 x 2 waves of 16x16x32 MFMAs"),
    (("--dtype", "mxfp8", "--block", "128x128x64"), "error: --block 128x128x64: MX GEMM: block 128x128x64 must tile 2 x 2 waves of 16x16x128 MFMAs, block_k 128 or 256"),
    (("--dtype", "mxfp8", "--mfma", "32x32"), "error: --mfma 32x32: the MX GEMM runs the scaled 16x16x128 MFMA only"),
    (("--dtype", "i8", "--out-dtype", "f16"), "error: --out-dtype f16 is not an output of --dtype i8 on gfx950; expected i32"),
    (("--dtype", "mxfp4", "--out-dtype", "bf16"), "error: --out-dtype bf16 is not an output of --dtype mxfp4 on gfx950; expected f32"),
    (("--dtype", "f64", "--out-dtype", "f32"), "error: --out-dtype f32 is not an output of --dtype f64 on gfx950; expected f64"),
])
def test_gemm_gfx950_refuses_tile_options_it_cannot_apply(args, first_line, gemm):
    proc = gemm(*args, "-M", "64", "-N", "64", "-K", "128", "--emit", "config")
    assert proc.returncode == 2 and proc.stderr.splitlines()[0].startswith(first_line), proc.stderr


@pytest.mark.parametrize("args, operand, elements", [
    (("--dtype", "f16", "-N", "64", "-K", "36"), "A", 36),                  # nt: rows of K, 8 f16 a chunk
    (("--dtype", "f16", "--layout", "nn", "-N", "36", "-K", "64"), "B", 36),  # nn: B's rows are N
    (("--dtype", "fp8", "-N", "64", "-K", "72"), "A", 72),                  # 16 fp8 a chunk
])
def test_gemm_gfx950_lds_dma_needs_rows_of_whole_16_byte_chunks(args, operand, elements, gemm):
    """docs/patterns.md ("Direct-to-LDS loads") and the --lds-dma help state this rule and this error."""
    proc = gemm(*args, "-M", "64", "--lds-dma", "--emit", "config")
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f"error: lds_dma: {operand} rows of {elements} elements are not whole 16-byte chunks (direct-to-LDS loads "
        "move whole chunks); use the register staging (lds_dma=False)"), proc.stderr
    assert gemm(*args, "-M", "64", "--emit", "config").returncode == 0  # the register staging runs it


@pytest.fixture
def attention(cli):
    return lambda *args: cli("attention", *args)


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_attention_gfx950_validate_prints_the_error_over_the_bound_and_pass(attention):
    proc = attention("--dtype", "fp8", "--heads", "2", "--kv-heads", "1", "--seq", "257", "--head-dim", "64", "--causal",
                     "--block-q", "64", "--block-kv", "128", "--validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, last = proc.stdout.strip().splitlines()
    assert last == "PASS" and first.startswith("validated gfx950 fp8 attention B=1 H=2 Hkv=1 Sq=257 Skv=257 D=64 causal "
                                               "on the CPU wavefront emulator")
    o, lse = (float(x) for x in re.search(r"O ([0-9.]+), LSE ([0-9.]+)", first).groups())
    assert 0 < o <= 1 and 0 < lse <= 1  # the roundings show, within the bound


def test_attention_emit_config_is_the_plan_and_asm_is_the_kernel(attention):
    proc = attention("--dtype", "fp8", "--batch", "2", "--heads", "8", "--kv-heads", "2", "--seq", "130",
                     "--seq-kv", "257", "--head-dim", "128", "--block-kv", "128", "--emit", "config")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["target"] == "gfx950" and plan["problem"]["dtype"] == "fp8" and plan["problem"]["seq_kv"] == 257
    assert plan["config"] == {"block_q": 128, "block_kv": 128, "skip_masked": True, "lds_pad": 16, "defer_pv": True,
                              "lds_dma": True}
    assert (plan["mfma"], plan["tr"], plan["p_shift"], plan["p_convert"], plan["kv_tiles"], plan["kv_tail"]) == (
        "mfma_scale_f32_32x32x64_f8f6f4", "ds_read_tr8_b64_v2i32", 8, None, 3, 1)
    assert [p["name"] for p in plan["params"]] == ["Q", "K", "V", "O", "LSE", "SCALES"]
    assert plan["flops"] == 4 * 128 * 2 * 8 * 130 * 257
    asm = attention("--seq", "40", "--head-dim", "64", "--block-q", "64", "--block-kv", "32", "--emit", "asm")
    assert asm.returncode == 0, asm.stderr
    assert "v_mfma_f32_32x32x16_bf16" in asm.stdout and "ds_read_b64_tr_b16" in asm.stdout
    report = attention("--dtype", "fp8", "--seq", "1024", "--head-dim", "64", "--report")  # report.attention_report
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("static attention report (an estimate from the compiled code, not a measurement)")
    assert "fp8" in report.stdout
    tir = attention("--dtype", "fp8", "--seq", "40", "--head-dim", "64", "--emit", "tir")
    assert tir.returncode == 0 and "def attention(Q" in tir.stdout and "llvm.amdgcn.cvt.pk.fp8.f32" in tir.stdout, tir.stderr


def test_attention_sm80_validate_without_a_gpu_runs_the_cuda_emulator(attention):
    proc = attention("--target", "sm80", "--heads", "2", "--kv-heads", "1", "--seq", "40", "--head-dim", "64",
                     "--causal", "--validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, last = proc.stdout.strip().splitlines()
    assert last == "PASS" and "on the CUDA emulator" in first, first


def test_attention_sm80_plans_for_the_arch(attention):
    """The sm80 default depends on the arch (causal on sm_90: the mbarrier twin, 3 stages); ``--arch`` plans for
    one, the default is the present GPU's (none here: sm_80)."""
    configs = {}
    for arch in ((), ("--arch", "sm_80"), ("--arch", "sm_90a")):
        proc = attention("--target", "sm80", "--seq", "4096", "--heads", "32", "--batch", "4", "--causal", *arch,
                         "--emit", "config")
        assert proc.returncode == 0, proc.stderr
        configs[arch[1] if arch else None] = json.loads(proc.stdout)["config"]
    assert configs[None] == configs["sm_80"] and (configs["sm_80"]["sync"], configs["sm_80"]["stages"]) == ("cta", 2)
    assert (configs["sm_90a"]["sync"], configs["sm_90a"]["stages"]) == ("mbarrier", 3)


def test_attention_gpu_runs_refuse_what_they_would_ignore():
    """On a GPU, --validate / --bench run the config's kernel for the GPU's arch: a tile option applies there as in
    the emulator; another arch is refused, not ignored."""
    import argparse

    from tvm_cdna4.cli.attention import _gpu_refusal

    def args(**kw):
        return argparse.Namespace(**{**dict(validate=True, bench=False, block_q=None, block_kv=None, arch=None), **kw})

    assert _gpu_refusal(args(), "sm_90") is None and _gpu_refusal(args(block_kv=32), None) is None
    assert _gpu_refusal(args(block_kv=32), "sm_90") is None  # the GPU runs that config (run_attention's config=)
    assert _gpu_refusal(args(arch="sm_80"), "sm_90") == "--arch sm_80 with --validate / --bench: the GPU here is sm_90"
    assert _gpu_refusal(args(validate=False, block_kv=32), "sm_90") is None  # --emit only: it applies


@pytest.mark.parametrize("args, message", [
    ((), "error: attention needs an action: --validate, --emit asm|tir|cuda|config, --report (gfx950), --bench"),
    (("--arch", "sm_90", "--emit", "config"), "error: --arch is for --target sm80"),
    (("--target", "sm80", "--arch", "gfx950", "--emit", "config"),
     "python -m tvm_cdna4 attention: error: argument --arch: expected a CUDA arch sm_80 or newer"),
    (("--emit", "cuda"), "error: --emit cuda is for --target sm80 / sm90; gfx950 emits asm, tir or config"),
    (("--target", "sm80", "--emit", "asm"), "error: --emit asm is for --target gfx950"),
    (("--target", "sm80", "--report"), "error: --report is the gfx950 static report"),
    (("--bench",), "error: --bench needs a gfx950 GPU"),
    (("--target", "sm80", "--dtype", "fp8", "--validate"),
     "error: sm80 attention dtype: expected one of ('bf16', 'f16'), found 'fp8'"),
    (("--kv-heads", "3", "--heads", "4", "--emit", "config"), "error: attention kv_heads: GQA shares each kv head"),
    (("--head-dim", "96", "--emit", "config"), "error: attention head_dim: expected one of (64, 128), found 96"),
    (("--block-q", "48", "--emit", "config"), "error: --block-q 48: attention block_q: 32 query rows per wave"),
    (("--dtype", "fp8", "--block-kv", "32", "--emit", "config"),
     "error: --block-kv 32: attention block_kv: a fp8 P V step takes 64 keys; expected a multiple of 64, found 32"),
    # an explicit 0 is refused by name, not replaced by the default (--kv-heads 0 once ran as --heads)
    (("--kv-heads", "0", "--emit", "config"),
     "python -m tvm_cdna4 attention: error: argument --kv-heads: expected a positive integer, found '0'"),
    (("--seq-kv", "0", "--emit", "config"),
     "python -m tvm_cdna4 attention: error: argument --seq-kv: expected a positive integer, found '0'"),
    (("--block-q", "0", "--emit", "config"),
     "python -m tvm_cdna4 attention: error: argument --block-q: expected a positive integer, found '0'"),
    (("--block-kv", "0", "--emit", "config"),
     "python -m tvm_cdna4 attention: error: argument --block-kv: expected a positive integer, found '0'"),
    (("--batch", "32", "--heads", "64", "--seq", "8192", "--emit", "config"),
     "error: attention: 2147483648 elements in one tensor; the kernel indexes with 32-bit integers"),
])
def test_attention_usage_errors_are_one_line(args, message, attention):
    proc = attention("--seq", "64", *args)
    assert (proc.returncode, proc.stdout) == (2, "") and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(message), proc.stderr


def test_gemm_sm80_block_replans_the_stages(cli):
    # the planner's 4 stages were for its own 16x64x128 tile; --block 128x256x128 holds 2 in 227 KiB
    # (4 were 384 KiB, refused), 128x128x64 at K = 128 has 2 k-tiles; --stages still says it outright
    def config(*args):
        proc = cli("gemm", "--target", "sm80", "-M", "64", "-N", "64", *args, "--emit", "config")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)["stages"]

    assert config("-K", "1024", "--block", "128x256x128") == 2
    assert config("-K", "128", "--block", "128x128x64") == 2
    assert config("-K", "1024", "--block", "128x128x64") == 4
    assert config("-K", "1024", "--block", "128x128x64", "--stages", "3") == 3


# ---- bad input: every one a single usage line naming the argument, exit 2 (issue 35 item 5) ----------------

GEMM = "python -m tvm_cdna4 gemm: error: argument"
ATTENTION = "python -m tvm_cdna4 attention: error: argument"
SM80 = ("gemm", "--target", "sm80", "-M", "64", "-N", "64", "-K", "64")
GFX950 = ("gemm", "--target", "gfx950", "-M", "64", "-N", "64", "-K", "64")
ATTEND = ("attention", "--seq", "64")
BAD_ARGV = [
    # sizes: zero, negative, not a number (sm80 -M 0 / -K -1 were a ZeroDivisionError)
    ((*SM80, "-M", "0", "--emit", "config"), f"{GEMM} -M: expected a positive integer, found '0'"),
    ((*SM80, "-K", "-1", "--emit", "config"), f"{GEMM} -K: expected a positive integer, found '-1'"),
    ((*GFX950, "-N", "0", "--emit", "config"), f"{GEMM} -N: expected a positive integer, found '0'"),
    ((*SM80, "-N", "4k", "--emit", "config"), f"{GEMM} -N: expected a positive integer, found '4k'"),
    # tiles (--block 0x0x0, 128x128x0, --warps 0x2 were a ZeroDivisionError)
    ((*SM80, "--block", "0x0x0", "--emit", "config"),
     f"{GEMM} --block: expected MxNxK, 3 positive integers such as 128x128x64; found '0x0x0'"),
    ((*SM80, "--block", "128x128x0", "--emit", "config"),
     f"{GEMM} --block: expected MxNxK, 3 positive integers such as 128x128x64; found '128x128x0'"),
    ((*GFX950, "--block", "128x128", "--emit", "config"),
     f"{GEMM} --block: expected MxNxK, 3 positive integers such as 128x128x64; found '128x128'"),
    ((*SM80, "--warps", "0x2", "--emit", "config"),
     f"{GEMM} --warps: expected WMxWN, 2 positive integers such as 2x2; found '0x2'"),
    ((*SM80, "--stages", "0", "--emit", "config"), f"{GEMM} --stages: expected a positive integer, found '0'"),
    ((*SM80, "--group-m", "0", "--emit", "config"), f"{GEMM} --group-m: expected a positive integer, found '0'"),
    ((*SM80, "--ctas", "-1", "--emit", "config"), f"{GEMM} --ctas: expected a non-negative integer, found '-1'"),
    ((*SM80, "--seed", "-1", "--validate"), f"{GEMM} --seed: expected a non-negative integer, found '-1'"),
    ((*GFX950, "--seed", "-1", "--validate"), f"{GEMM} --seed: expected a non-negative integer, found '-1'"),
    # --groups lists (--groups "" ran a plain 4096x64x64 GEMM, 3,,4 ran two groups)
    (("gemm", "--target", "sm80", "--groups", "", "-N", "64", "-K", "64", "--emit", "config"),
     f"{GEMM} --groups: expected comma-separated row counts, each >= 0, such as 300,0,1,77; found ''"),
    (("gemm", "--target", "sm80", "--groups", "3,,4", "-N", "64", "-K", "64", "--emit", "config"),
     f"{GEMM} --groups: expected comma-separated row counts, each >= 0, such as 300,0,1,77; found '3,,4'"),
    (("gemm", "--target", "gfx950", "--groups", "3,4,", "-N", "64", "-K", "64", "--emit", "config"),
     f"{GEMM} --groups: expected comma-separated row counts, each >= 0, such as 300,0,1,77; found '3,4,'"),
    (("gemm", "--target", "gfx950", "--groups", "3,-1", "-N", "64", "-K", "64", "--emit", "config"),
     f"{GEMM} --groups: expected comma-separated row counts, each >= 0, such as 300,0,1,77; found '3,-1'"),
    # choices: one line, not the 14-line usage block
    ((*SM80, "--dtype", "x", "--emit", "config"), f"{GEMM} --dtype: invalid choice: 'x' (choose from 'f16', 'bf16'"),
    ((*SM80, "--activation", "x", "--emit", "config"),
     f"{GEMM} --activation: invalid choice: 'x' (choose from 'relu', 'silu', 'gelu')"),
    (("gemm", "--target", "sm100", "--emit", "config"), f"{GEMM} --target: invalid choice: 'sm100'"),
    # the target is never implied
    (("gemm", "-M", "64", "--emit", "config"),
     f"{GEMM} --target: required; expected one of gfx950, sm80, sm_80"),
    ((*SM80, "--emit"), f"{GEMM} --emit: expected one argument"),
    ((*SM80, "--emit", "config", "--frobnicate"), "python -m tvm_cdna4 gemm: error: unrecognized arguments: --frobnicate"),
    # options a target or a mode would ignore, options that need another
    ((*GFX950, "--tune", "--emit", "config"), "error: --tune is an sm80 option"),
    ((*SM80, "--json", "--emit", "config"), "error: --json needs --report"),
    ((*GFX950, "--json", "--validate"), "error: --json needs --report"),
    (("gemm", "--target", "gfx950", "--groups", "3,4", "-N", "64", "-K", "64", "--report", "--json"),
     "error: --json: the grouped GEMM's --report is text only"),
    ((*SM80, "--seed", "0", "--emit", "config"), "error: --seed seeds --validate's inputs; found --seed 0 without "
     "--validate"),
    (("gemm", "--target", "sm80", "--groups", "3,4", "-M", "64", "-N", "64", "-K", "64", "--emit", "config"),
     "error: -M is not read with --groups (A's rows are the groups' rows summed, T = 7); drop -M"),
    ((*SM80, "--tune", "--block", "64x64x32", "--validate"), "error: --tune chooses the tile by timing candidates: "
     "--block cannot be given with it"),
    ((*SM80, "--tune", "--ctas", "0", "--stages", "3", "--validate"), "error: --tune chooses the tile by timing "
     "candidates: --stages, --ctas cannot be given with it"),
    # attention
    ((*ATTEND, "--batch", "0", "--emit", "config"), f"{ATTENTION} --batch: expected a positive integer, found '0'"),
    ((*ATTEND, "--heads", "-2", "--emit", "config"), f"{ATTENTION} --heads: expected a positive integer, found '-2'"),
    ((*ATTEND, "--kv-heads", "0", "--emit", "config"), f"{ATTENTION} --kv-heads: expected a positive integer, found '0'"),
    (("attention", "--seq", "0", "--emit", "config"), f"{ATTENTION} --seq: expected a positive integer, found '0'"),
    ((*ATTEND, "--seq-kv", "-1", "--emit", "config"), f"{ATTENTION} --seq-kv: expected a positive integer, found '-1'"),
    ((*ATTEND, "--head-dim", "0", "--emit", "config"), f"{ATTENTION} --head-dim: expected a positive integer, found '0'"),
    ((*ATTEND, "--block-q", "0", "--emit", "config"), f"{ATTENTION} --block-q: expected a positive integer, found '0'"),
    ((*ATTEND, "--block-kv", "-32", "--emit", "config"),
     f"{ATTENTION} --block-kv: expected a positive integer, found '-32'"),
    ((*ATTEND, "--scale", "0", "--emit", "config"), f"{ATTENTION} --scale: expected a positive finite number, found '0'"),
    ((*ATTEND, "--scale", "nan", "--emit", "config"),
     f"{ATTENTION} --scale: expected a positive finite number, found 'nan'"),
    ((*ATTEND, "--seed", "-1", "--validate"), f"{ATTENTION} --seed: expected a non-negative integer, found '-1'"),
    ((*ATTEND, "--target", "sm80", "--arch", "sm_75", "--emit", "config"),
     f"{ATTENTION} --arch: expected a CUDA arch sm_80 or newer, such as sm_80 or sm_90a; found 'sm_75'"),
    ((*ATTEND, "--target", "sm80", "--arch", "gfx950", "--emit", "config"),
     f"{ATTENTION} --arch: expected a CUDA arch sm_80 or newer, such as sm_80 or sm_90a; found 'gfx950'"),
    ((*ATTEND, "--dtype", "f32", "--emit", "config"), f"{ATTENTION} --dtype: invalid choice: 'f32'"),
    (("attention", "--emit", "config"), f"{ATTENTION} --seq: required"),
    ((*ATTEND, "--seed", "3", "--emit", "config"), "error: --seed seeds --validate's inputs"),
    # the other commands
    (("opcodes", "--kind", "mfmaa"), "python -m tvm_cdna4 opcodes: error: argument --kind: invalid choice: 'mfmaa'"),
    (("opcodes", "--no-lanes"), "error: --no-lanes needs --json"),
    ((), "python -m tvm_cdna4: error: argument command: required; expected one of opcodes, gemm, selftest, draw, "
         "attention"),
    (("frobnicate",), "python -m tvm_cdna4: error: argument command: invalid choice: 'frobnicate'"),
    (("-q", "-v", "opcodes"), "python -m tvm_cdna4: error: argument -v/--verbose: not allowed with argument -q/--quiet"),
    (("draw", "--all", "mfma_f32_16x16x32_f16"), "error: draw takes one opcode NAME or --all"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGV, ids=[" ".join(argv) or "(none)" for argv, _ in BAD_ARGV])
def test_bad_input_is_one_usage_line_naming_the_argument(argv, message, cli):
    proc = cli(*argv)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(message), proc.stderr


def test_help_states_every_default():
    """Issue 34 item 3: every option that takes a value says what it is without it (``(default: X)``,
    or words naming the default); flags are off unless given (each subcommand's help says so)."""
    import argparse

    from tvm_cdna4.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in {"": parser, **commands}.items():
        flags = [a for a in sub._actions if a.nargs == 0 and a.default is False]  # store_true
        if name and flags:
            assert "flags (options without a value) are off unless given" in " ".join(sub.format_help().lower().split())
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:  # positionals, flags, --help, --version
                continue
            helped = formatter._expand_help(action) if action.help else ""
            assert ("required" if action.required else "default") in helped, (name, action.option_strings, helped)
    gemm = commands["gemm"].format_help()
    assert "(default: 4096)" in gemm and "(default: nt)" in gemm and "(default: f16)" in gemm
    assert "required, no default" in " ".join(gemm.split())


@pytest.mark.parametrize("old", ["tvm_cdna4.cli_gfx950", "tvm_cdna4.cli_dynamic", "tvm_cdna4.cli_grouped"])
def test_the_old_gemm_command_modules_are_aliases_of_cli_gemm(old, monkeypatch):
    """cli/gemm_gfx950.py, gemm_dynamic.py and gemm_grouped.py folded into cli/gemm.py: the deprecated aliases
    name it (CHANGELOG.md)."""
    import importlib

    import tvm_cdna4.cli.gemm as new

    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import tvm_cdna4.cli.gemm instead"):
        assert importlib.import_module(old) is new
