"""docs/tutorial.md runs: its ```python blocks, in order, as one module (TVMScript parses source,
so the module is a file), each followed by the output the tutorial shows; its pytest example
(```python test_NAME.py) runs through pytester against that module."""

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest

from tvm_cdna4 import testing

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.xdist_group("tutorial")  # under pytest-xdist: one worker runs the module fixture once

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w*)[ \t]*(\S*)\n(.*?)^```$", re.S | re.M)
MARK = "# --- tutorial block {} ---"


def blocks():
    """(language, file name or "", text) of every fenced block, in order."""
    return [m.groups() for m in BLOCK.finditer(TUTORIAL.read_text())]


def module_and_outputs():
    """The plain python blocks joined (each after a marker that prints its index) and, for each
    block, the text block that follows it (None when the next block is not output)."""
    parts, outputs = [], []
    found = blocks()
    for i, (lang, name, text) in enumerate(found):
        if lang == "python" and not name:
            parts.append(f"print({MARK.format(len(outputs))!r})\n{text}")
            after = found[i + 1] if i + 1 < len(found) else None
            outputs.append(after[2] if after and after[0] == "text" else None)
    return "\n".join(parts), outputs


def test_tutorial_has_the_promised_sections():
    found = blocks()
    assert sum(lang == "python" and not name for lang, name, _ in found) >= 8
    assert [name for lang, name, _ in found if name] == ["test_my_kernels.py"]


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """Runs the tutorial's module once, as ``my_kernels`` (the name its pytest example imports);
    returns what each block printed. Module-scoped, so everything it imports is in sys.modules
    before pytester snapshots them (an in-process pytest run drops modules first imported in it)."""
    source, outputs = module_and_outputs()
    path = tmp_path_factory.mktemp("tutorial") / "my_kernels.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("my_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_kernels"] = module
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout):
            spec.loader.exec_module(module)
        yield re.split(r"^# --- tutorial block \d+ ---\n", stdout.getvalue(), flags=re.M)[1:], outputs
    finally:
        del sys.modules["my_kernels"]


def test_tutorial_runs_and_prints_what_it_shows(tutorial):
    printed, outputs = tutorial
    assert len(printed) == len(outputs)
    for i, (got, want) in enumerate(zip(printed, outputs)):
        if want is not None:
            assert got.strip() == want.strip(), f"block {i} of docs/tutorial.md printed something else"


def test_tutorial_pytest_example(tutorial, pytester):
    """The example test file runs against the tutorial's module (already imported: no second run)."""
    (name, text), = [(name, text) for lang, name, text in blocks() if name]
    (pytester.path / name).write_text(text)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider", name)
    if testing.gfx950_missing() is None:
        result.assert_outcomes(passed=2)
        return
    result.assert_outcomes(passed=1, skipped=1)
    shown = blocks()[-1][2]  # the output block after the example
    for line in shown.strip().splitlines():
        line = line.replace("(hip-python not installed)", f"({testing.gfx950_missing()})")
        assert any(line in got for got in result.outlines), f"tutorial shows {line!r}; pytest printed:\n{result.stdout}"
