"""``python -m tvm_cdna4 selftest``: compile one probe kernel per opcode for gfx950 through the
patterns and check that the expected instruction appears in the assembly. ``--target sm90``: one
probe per registered wgmma form (``probes_wgmma``), compiled by TIRx for sm_90a; the CUDA source
must hold the form's ``wgmma.mma_async`` line and, when ``nvcc`` is found, ``ptxas`` (through
``nvcc -gencode=arch=compute_90a,code=sm_90a``) must accept it.

Names are looked up as ``T.amdgcn[...]`` and ``draw`` look them up (``isa.lookup``: catalog name,
builtin or unambiguous mnemonic); an unknown one is a usage error with a did-you-mean (exit status 2).
"""

from __future__ import annotations

import re
import sys

from .isa import CATALOG, lookup


def check(name: str) -> tuple[bool, str, str]:
    """(ok, mnemonics found, detail) for one opcode."""
    from .probes import mfma_probe, tr_probe
    from .rocm.build import build

    op = CATALOG[name]
    try:
        result = build(tr_probe(op) if op.kind == "ds_read_tr" else mfma_probe(op))
    except Exception as err:  # report, keep going: one line per opcode
        return False, "-", f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    found = sorted(set(re.findall(r"^\s+(v_mfma\w*|ds_read\w*tr\w*)", result.asm, re.M)))
    ok = found == [op.mnemonic] and op.llvm_intrinsic.rsplit(".v", 1)[0] in result.llvm_ir
    detail = "" if ok else f"expected {op.mnemonic} and {op.llvm_intrinsic} in the LLVM IR"
    return ok, ",".join(found) or "-", detail


def main(names: list[str] | None = None, target: str = "gfx950") -> int:
    """Check ``names`` (default: every opcode of the catalog); exit status 0 all OK, 1 some FAIL, 2 an unknown name."""
    if target == "sm90":
        return main_sm90(names)
    try:
        names = [lookup(name).name for name in names] if names else list(CATALOG)
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    failed = 0
    width = max(len(n) for n in names)
    for name in names:
        ok, found, detail = check(name)
        failed += not ok
        print(f"{name.ljust(width)}  {found.ljust(34)}  {'OK' if ok else 'FAIL'}{'  ' + detail if detail else ''}", flush=True)
    print(f"{len(names) - failed} OK, {failed} FAIL")
    return 1 if failed else 0


def sm90_forms() -> dict:
    """``{"bf16_ss": (form, WgmmaShape), ...}``: the registered wgmma forms the sm90 selftest compiles."""
    from .isa.wgmma_table import registered_forms

    return {f"{shape.atype}_{form}": (form, shape) for form, shape in registered_forms()}


def nvcc() -> str | None:
    import os
    import shutil

    found = shutil.which("nvcc")
    return found or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def ptxas_check(source: str, compiler: str) -> str:
    """'' when ``nvcc`` (ptxas) accepts the CUDA source for sm_90a, else its first error line."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tvm_cdna4_sm90_") as tmp:
        path = os.path.join(tmp, "probe.cu")
        with open(path, "w") as f:
            f.write(source)
        run = subprocess.run([compiler, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-w", "-o",
                              os.path.join(tmp, "probe.cubin"), path], capture_output=True, text=True)
    if run.returncode == 0:
        return ""
    lines = [x for x in (run.stderr + run.stdout).splitlines() if "error" in x.lower()] or ["nvcc failed"]
    return lines[0][:160]


def check_sm90(name: str, compiler: str | None) -> tuple[bool, str, str]:
    """(ok, what was checked, detail) for one wgmma form."""
    from .cuda.build import compile_blobs
    from .probes_wgmma import probe

    form, shape = sm90_forms()[name]
    try:
        source = compile_blobs(probe(shape.atype, form), "sm_90a")["source"].decode()
    except Exception as err:
        return False, "-", f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    line = f"{shape.ptx} "
    if line not in source:
        return False, "-", f"no '{shape.ptx}' line in the CUDA source"
    if compiler is None:
        return True, "ptx", ""
    error = ptxas_check(source, compiler)
    return not error, "ptx,ptxas" if not error else "ptx", error


def main_sm90(names: list[str] | None = None) -> int:
    forms = sm90_forms()
    unknown = [n for n in names or () if n not in forms]
    if unknown:
        print(f"error: unknown wgmma form(s) {unknown}; choose from {sorted(forms)}", file=sys.stderr)
        return 2
    names = names or list(forms)
    compiler = nvcc()
    failed = 0
    for name in names:
        ok, found, detail = check_sm90(name, compiler)
        failed += not ok
        print(f"{name.ljust(9)}  {forms[name][1].ptx.ljust(56)}  {found.ljust(9)}  {'OK' if ok else 'FAIL'}"
              f"{'  ' + detail if detail else ''}", flush=True)
    print(f"{len(names) - failed} OK, {failed} FAIL" + ("" if compiler else " (no nvcc: ptxas not run)"))
    return 1 if failed else 0
