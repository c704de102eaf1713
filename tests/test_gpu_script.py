"""benchmarks/gpu_stop45.sh, the GPU steps' script: it parses, its unknown-step line lists every step, and its header
comment names each one (what a session reads to pick a step)."""

import re
import shutil
import subprocess

import pytest
from paths import BENCHMARKS

SCRIPT = BENCHMARKS / "gpu_stop45.sh"


def _steps(text: str) -> list[str]:
    """The case labels of the step loop (``  name)`` or ``  a|b)`` at two spaces' indent)."""
    return [n for labels in re.findall(r"^  ([a-z0-9][a-z0-9-]*(?:\|[a-z0-9-]+)*)\)", text, re.M)
            for n in labels.split("|")]


def test_the_script_parses():
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    done = subprocess.run([bash, "-n", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_one_unknown_step_line_lists_every_step_and_the_header_names_each():
    text = SCRIPT.read_text()
    steps = _steps(text)
    assert len(steps) == len(set(steps)) and {"epiearly", "reach", "power", "paged"} <= set(steps)
    unknown = [ln for ln in text.splitlines() if ln.strip().startswith("*)")]
    assert len(unknown) == 1
    listed = re.search(r"unknown step \$step \((.*)\)\"", unknown[0]).group(1).split(", ")
    assert len(listed) == len(set(listed)) and set(listed) == set(steps)
    header = text.split("\nif [ -f")[0]
    assert [s for s in steps if not re.search(rf"^#\s+{re.escape(s)}\s", header, re.M)] == []
