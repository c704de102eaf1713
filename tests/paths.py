"""The repository's folders, for tests in any subfolder of tests/ (which mirror the package)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
BENCHMARKS = ROOT / "benchmarks"
RUNS = BENCHMARKS / "runs"  # raw outputs of benchmark runs (JSON, logs), named <script>_<what>_<date>
JOURNAL = BENCHMARKS / "journal"  # the dated diary; benchmarks/RESULTS.md holds today's figures
