"""``python -m tvm_cdna4 selftest``: compile one probe kernel per opcode for gfx950 through the
patterns and check that the expected instruction appears in the assembly."""

from __future__ import annotations

import re

from .isa import CATALOG


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


def main(names: list[str] | None = None) -> int:
    names = names or list(CATALOG)
    failed = 0
    width = max(len(n) for n in names)
    for name in names:
        if name not in CATALOG:
            print(f"{name.ljust(width)}  -  FAIL unknown opcode")
            failed += 1
            continue
        ok, found, detail = check(name)
        failed += not ok
        print(f"{name.ljust(width)}  {found.ljust(34)}  {'OK' if ok else 'FAIL'}{'  ' + detail if detail else ''}", flush=True)
    print(f"{len(names) - failed} OK, {failed} FAIL")
    return 1 if failed else 0
