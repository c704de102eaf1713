"""The gfx950 assembly of every MX format x layout at 4096^3 (the default configs) is byte-identical
to the digests in tests/data/gfx950_mx_golden.json (see its ``about``): the plan -> one-emitter
refactor of the gfx950 GEMMs must not change the generated code. Re-record only with a change meant
to change the code: ``python tests/kernels/gfx950/test_gfx950_mx_golden.py --record``."""

from paths import DATA
import hashlib
import json
import sys

import pytest

DATA = DATA / "gfx950_mx_golden.json"
FORMATS = ("mxfp8", "mxbf8", "mxfp6", "mxbf6", "mxfp4")
LAYOUTS = ("nn", "nt", "tn", "tt")
SIZE = 4096


def assembly_digest(fmt: str, layout: str) -> str:
    """Of ``tvm_cdna4.build(gfx950_mx_gemm(SIZE, SIZE, SIZE, fmt, layout))`` through the session's
    build cache (``gfx950_gemm.build``, the same assembly): the kernels test_gfx950_gemm.py's
    ``default_build`` reads too are built once."""
    from tvm_cdna4.kernels.gfx950 import gemm as gfx950_gemm

    asm = gfx950_gemm.build(SIZE, SIZE, SIZE, fmt, layout).asm
    return hashlib.sha256(asm.encode()).hexdigest()


def _cases():
    return json.loads(DATA.read_text())["cases"] if DATA.exists() else {}


# test_gfx950_gemm.py's default_build reads these three kernels too (its ds_read_tr test): the same
# xdist group as those tests, so one worker builds each once
DEFAULT_BUILDS = {("mxfp8", "tt"), ("mxfp6", "nn"), ("mxfp4", "tn")}
# the default run pins each format once and each layout at least once (a diagonal of the table, and the three
# kernels built anyway); the other cases are marked slow (tests/conftest.py: TVM_CDNA4_SLOW=1 runs them)
DIAGONAL = {(fmt, LAYOUTS[i % len(LAYOUTS)]) for i, fmt in enumerate(FORMATS)}


def _marks(fmt: str, layout: str) -> list:
    marks = [pytest.mark.xdist_group("gfx950-4096")] if (fmt, layout) in DEFAULT_BUILDS else []
    return marks if (fmt, layout) in DIAGONAL | DEFAULT_BUILDS else [*marks, pytest.mark.slow]


CASES = [pytest.param(fmt, layout, id=f"{layout}-{fmt}", marks=_marks(fmt, layout))
         for layout in LAYOUTS for fmt in FORMATS]


@pytest.mark.parametrize("fmt, layout", CASES)
def test_mx_assembly_is_byte_identical(fmt, layout):
    assert assembly_digest(fmt, layout) == _cases()[f"{fmt}_{layout}"]


def test_every_format_and_layout_is_pinned():
    assert sorted(_cases()) == sorted(f"{f}_{lay}" for f in FORMATS for lay in LAYOUTS)
    # the default run's cases still meet every format and every layout
    fast = DIAGONAL | DEFAULT_BUILDS
    assert {f for f, _ in fast} == set(FORMATS) and {lay for _, lay in fast} == set(LAYOUTS)


if __name__ == "__main__" and "--record" in sys.argv:
    import subprocess

    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cases = {f"{f}_{lay}": assembly_digest(f, lay) for f in FORMATS for lay in LAYOUTS}
    DATA.write_text(json.dumps({"about": f"SHA-256 of the gfx950 assembly of tvm_cdna4.build(gfx950_mx_gemm({SIZE}, "
                                         f"{SIZE}, {SIZE}, fmt, layout)) with the default config, recorded at {rev} "
                                         "before the one-emitter refactor (issue 22).", "cases": cases}, indent=1) + "\n")
    print(f"recorded {len(cases)} digests at {rev}")
