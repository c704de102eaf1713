"""Regenerate docs/catalog.md from docs/catalog.md.in and the CLI's table (``python -m tvm_cdna4.docs_gen``)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def render() -> str:
    from .cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["opcodes"])
    return (DOCS / "catalog.md.in").read_text().replace("@OPCODES@", buf.getvalue().rstrip())


if __name__ == "__main__":
    (DOCS / "catalog.md").write_text(render())
