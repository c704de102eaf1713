"""``tests.benchmark_modules.benchmark_module``: a benchmark script imported by a test never shadows a test helper of
the same name, even one that puts ``benchmarks/`` first on ``sys.path`` itself (``attention_sm90.py``; stop 52's
``sm90_widen.py`` did, imported at collection: ``tests/patterns/test_contract_fuzz.py`` then imported
``benchmarks/contract_fuzz.py`` for ``tests/contract_fuzz.py`` and the suite's collection failed)."""

import importlib.machinery
import os
import sys

from tests.benchmark_modules import BENCHMARKS, benchmark_module

TESTS = os.path.dirname(os.path.abspath(__file__))


def test_a_script_that_puts_its_folder_first_leaves_the_test_helpers_first():
    bench = benchmark_module("attention_sm90")  # its module body: sys.path.insert(0, benchmarks/)
    assert bench.__file__.startswith(BENCHMARKS)
    spec = importlib.machinery.PathFinder.find_spec("contract_fuzz", sys.path)  # the search, not sys.modules
    assert os.path.dirname(spec.origin) == TESTS, spec.origin
    assert os.path.normpath(sys.path[-1]) == BENCHMARKS  # still found last: its own lazy imports of siblings
    assert importlib.machinery.PathFinder.find_spec("sm90_power", sys.path).origin.startswith(BENCHMARKS)
