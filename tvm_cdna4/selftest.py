"""``python -m tvm_cdna4 selftest``: compile one probe kernel per opcode for gfx950 through the
patterns and check that the expected instruction appears in the assembly.

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


def main(names: list[str] | None = None) -> int:
    """Check ``names`` (default: every opcode of the catalog); exit status 0 all OK, 1 some FAIL, 2 an unknown name."""
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
