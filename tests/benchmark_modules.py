"""The scripts under ``benchmarks/`` (not a package) imported as modules by the tests."""

import importlib
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` as a module (``benchmarks`` is on ``sys.path`` only while importing)."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
