"""Regenerate the generated docs (``python -m tvm_cdna4.docs_gen``): docs/catalog.md from
docs/catalog.md.in, the CLI's table and the catalog's counts (``@COUNT_<KIND>@``), and the lane-map figures of docs/figures/ that are out of
date (``figures.stale``; drawing needs matplotlib). tests/test_docs.py keeps both current."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
FIGURES = DOCS / "figures"


def render() -> str:
    from .cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["opcodes"])
    text = (DOCS / "catalog.md.in").read_text().replace("@OPCODES@", buf.getvalue().rstrip())
    return counted(text.replace("@SEED_FIGURES@", seed_figures()))


def counted(text: str) -> str:
    """``text`` with ``@COUNT_<KIND>@`` (``ALL``, ``MFMA``, ``MFMA_SCALE``, ``DS_READ_TR``) replaced by the
    catalog's count of that kind (``isa.counts()``)."""
    from .isa import counts

    for kind, n in counts().items():
        text = text.replace(f"@COUNT_{kind.upper()}@", str(n))
    return text


def seed_figures() -> str:
    """Markdown for the seed figures: the five accumulator tables, then the tr16 K split."""
    from . import figures
    from .isa import CATALOG

    blocks = []
    for name, opcode in figures.SEED_ACC_FIGURES.items():
        layout = CATALOG[opcode].acc_layout
        blocks.append(f"**{layout}** (drawn for `{opcode}`)\n\n![accumulator {layout}](figures/{name}.svg)")
    for name, opcode in figures.SEED_TR_FIGURES.items():
        op = CATALOG[opcode]
        calls = "; ".join(f"call {i + 1}: K {', '.join(f'{lo}-{hi}' for lo, hi in ranges)}"
                          for i, ranges in enumerate(op.k_split))
        blocks.append(f"The seed's K split of `{op.mnemonic}`: a pair of calls fills the B operand of "
                      f"`{op.k_split_mfma}` ({calls}; cell: `lane:element` of the call's result; the provider "
                      f"map is in [{opcode}.svg](figures/{opcode}.svg)):\n\n![K split](figures/{name}.svg)")
    return "\n\n".join(blocks)


def update_figures() -> list[str]:
    """Redraw the stale figures of docs/figures, delete those of no figure; return their names."""
    from . import figures

    expected = set(figures.all_figures())
    stale = figures.stale(FIGURES)
    for name in stale:
        path = FIGURES / f"{name}.svg"
        if name in expected:
            figures.render(name, path)
        else:
            path.unlink()
    return stale


if __name__ == "__main__":
    (DOCS / "catalog.md").write_text(render())
    for name in update_figures():
        print(f"docs/figures/{name}.svg")
