"""The environment of a fresh interpreter that a test starts (a first import, the CLI, a nested pytest,
the NVRTC compile): the test process's own, with ``torch`` hidden.

tvm_ffi imports torch at its own import whenever torch is installed (CI installs the CPU wheel for
``tests/runtime/test_torch_entry.py``; the README's ``test`` extra has none): 1.5 s of a child's 2.5 s start on
the 2-core machine. None of these children use torch, and without it they run as in the README's
environment; ``test_any_first_import_registers_without_warnings[tvm_cdna4]`` keeps torch visible, the
first import as CI's environment has it. ``HIDE_TORCH`` holds a ``torch`` package whose import raises
ImportError (what tvm_ffi and ``tvm_cdna4.torch`` read as "not installed")."""

from __future__ import annotations

import os
from pathlib import Path

HIDE_TORCH = Path(__file__).parent / "data" / "without_torch"


def env(base: dict | None = None, hide_torch: bool = True, **extra: str) -> dict:
    """``base`` (default: ``os.environ``) and ``extra``, with ``HIDE_TORCH`` first on PYTHONPATH when
    ``hide_torch``."""
    env = dict(os.environ if base is None else base) | extra
    if hide_torch:
        env["PYTHONPATH"] = os.pathsep.join([str(HIDE_TORCH), *filter(None, [env.get("PYTHONPATH")])])
    return env
