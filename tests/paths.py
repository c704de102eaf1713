"""The repository's folders, for tests in any subfolder of tests/ (which mirror the package)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
BENCHMARKS = ROOT / "benchmarks"
