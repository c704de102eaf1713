"""Tests are hermetic: seeds replay across processes, and nothing refers to files outside the repository."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import child_python

ROOT = Path(__file__).resolve().parents[1]


def _seed_in_subprocess(tmp_path, hashseed: str) -> str:
    test = tmp_path / "test_seeded.py"
    test.write_text(textwrap.dedent("""
        def test_draw(rng):
            draw = int(rng.integers(0, 2**62))
            assert draw < 0, f"draw={draw}"
    """))
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    env = child_python.env(PYTHONHASHSEED=hashseed)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return proc.stdout


def test_rng_seed_is_stable_across_processes_and_printed_on_failure(tmp_path):
    first, second = (_seed_in_subprocess(tmp_path, h) for h in ("1", "2"))
    seeds = [re.search(r"np\.random\.default_rng\((\d+)\)", out) for out in (first, second)]
    assert all(seeds), first
    assert seeds[0].group(1) == seeds[1].group(1)
    draws = [re.search(r"draw=(\d+)", out).group(1) for out in (first, second)]
    assert draws[0] == draws[1]  # the same data in both processes
    import zlib

    assert int(seeds[0].group(1)) == zlib.crc32(b"test_seeded.py::test_draw")


def _tracked_text_files():
    files = subprocess.run(["git", "ls-files", "tvm_cdna4", "tests", "docs", "benchmarks", "README.md", "CHANGELOG.md",
                            "pyproject.toml"],
                           capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    for name in files:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".in", ".toml", ".rst", ".txt") and path.is_file():
            yield name, path.read_text(errors="replace")


# a path into the sessions' shared folder, or any path that climbs out of the checkout
OUTSIDE = re.compile(r"(?<![\w/.-])(?:\.\./)*shared/(?:seeds|notes|hooks|device)\b|\.\./\.\./|parents\[[2-9]\]")


def test_nothing_refers_to_files_outside_the_repository():
    hits = [f"{name}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
            for name, text in _tracked_text_files() if name != "tests/test_hermetic.py"
            for m in OUTSIDE.finditer(text)]
    assert hits == []
