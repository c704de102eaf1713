"""The scripts under ``benchmarks/`` (not a package) imported as modules by the tests."""

import importlib
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` as a module (``benchmarks`` first on ``sys.path`` while importing). A script that puts
    its folder on ``sys.path`` itself (``sys.path.insert(0, ...)``: ``attention_sm90.py``) keeps it,
    moved last: its lazy imports of sibling scripts still resolve, and a test helper of the same name as a script
    (``tests/contract_fuzz.py``, ``benchmarks/contract_fuzz.py``) stays the one a test imports."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
        if any(os.path.normpath(p) == BENCHMARKS for p in sys.path):
            sys.path[:] = [p for p in sys.path if os.path.normpath(p) != BENCHMARKS] + [BENCHMARKS]
