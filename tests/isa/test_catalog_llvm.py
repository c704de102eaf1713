"""Every catalog intrinsic compiles with Debian's llc-22 for gfx950 and prints the catalog mnemonic."""

import re
import subprocess

import pytest

from tvm_cdna4.isa import CATALOG, DS_READ_TR_OPS, MFMA_OPS
from tvm_cdna4.rocm.build import llvm_tool

LLC = llvm_tool("llc")
pytestmark = pytest.mark.llvm("llc")


def _kernel(i, op):
    if op.kind == "ds_read_tr":
        t = op.result_vector
        return (f"declare {t} @{op.llvm_intrinsic}(ptr addrspace(3))\n"
                f"define amdgpu_kernel void @k{i}(ptr addrspace(1) %p, ptr addrspace(3) %l) {{\n"
                f"  %d = call {t} @{op.llvm_intrinsic}(ptr addrspace(3) %l)\n"
                f"  store {t} %d, ptr addrspace(1) %p\n  ret void\n}}\n")
    a, c = op.a_vector, op.acc_vector
    imm = "i32 immarg, i32 immarg, i32 immarg" if op.kind == "mfma" else "i32 immarg, i32 immarg, i32 immarg, i32, i32 immarg, i32"
    args = "i32 0, i32 0, i32 0" if op.kind == "mfma" else "i32 0, i32 0, i32 0, i32 %s, i32 0, i32 %s"
    return (f"declare {c} @{op.llvm_intrinsic}({a}, {a}, {c}, {imm})\n"
            f"define amdgpu_kernel void @k{i}(ptr addrspace(1) %p, {a} %a, {a} %b, i32 %s) {{\n"
            f"  %c = load {c}, ptr addrspace(1) %p\n"
            f"  %d = call {c} @{op.llvm_intrinsic}({a} %a, {a} %b, {c} %c, {args})\n"
            f"  store {c} %d, ptr addrspace(1) %p\n  ret void\n}}\n")


def test_llc22_compiles_every_intrinsic_to_the_catalog_mnemonic(tmp_path):
    ops = [*MFMA_OPS, *DS_READ_TR_OPS]
    src = tmp_path / "all.ll"
    src.write_text("".join(_kernel(i, op) for i, op in enumerate(ops)))
    asm = subprocess.run([LLC, "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", str(src), "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    found = {}
    # one kernel per op, in order: read the mnemonic of each kernel's body
    for m in re.finditer(r"^k(\d+):(.*?)^\s+s_endpgm", asm, flags=re.M | re.S):
        mn = re.findall(r"^\s+((?:v_mfma|ds_read)\w*)", m.group(2), flags=re.M)
        found[int(m.group(1))] = mn
    assert len(found) == len(ops) == len(CATALOG)
    for i, op in enumerate(ops):
        assert found[i] == [op.mnemonic], op.name
