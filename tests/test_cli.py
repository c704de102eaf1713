"""python -m tvm_cdna4 opcodes: table and JSON."""

import json
import subprocess
import sys


from tvm_cdna4.isa import CATALOG, lanes


def _run(*args):
    return subprocess.run([sys.executable, "-m", "tvm_cdna4", *args], check=True, capture_output=True, text=True).stdout


def test_opcodes_table_lists_every_opcode():
    out = _run("opcodes")
    for name, op in CATALOG.items():
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert op.mnemonic in line


def test_opcodes_json_schema_and_lane_tables():
    data = json.loads(_run("opcodes", "--json"))
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


def test_opcodes_kind_filter():
    data = json.loads(_run("opcodes", "--json", "--no-lanes", "--kind", "ds_read_tr"))
    assert len(data) == 6 and all("lanes" not in d for d in data)


def _gemm(*args):
    return subprocess.run([sys.executable, "-m", "tvm_cdna4", "gemm", "--target", "gfx950", *args],
                          capture_output=True, text=True)


def test_gemm_gfx950_validate_prints_error_and_pass():
    proc = _gemm("--dtype", "f16", "--layout", "nn", "-M", "70", "-N", "33", "-K", "40", "--validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "PASS" and "relative error" in lines[0]


def test_gemm_gfx950_report_and_refusals():
    proc = _gemm("--dtype", "fp8_bf8", "--layout", "tn", "-M", "1024", "-N", "1024", "-K", "1024", "--report")
    assert proc.returncode == 0, proc.stderr
    assert "static report (an estimate" in proc.stdout and "main loop:" in proc.stdout
    bench = _gemm("--dtype", "f16", "--bench")
    assert bench.returncode == 2 and "needs a gfx950 GPU" in bench.stderr
    mx = _gemm("--dtype", "mxfp4", "--layout", "nn", "-M", "64", "-N", "64", "-K", "64")
    assert mx.returncode == 2 and "layout 'nn' is not supported" in mx.stderr
