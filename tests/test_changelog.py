"""CHANGELOG.md keeps the Keep a Changelog form and names every deprecated import path with its new one."""

import ast
import re

import paths
import pytest

from tvm_cdna4 import _deprecated

CHANGELOG = paths.ROOT / "CHANGELOG.md"
PACKAGE = paths.ROOT / "tvm_cdna4"
TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")  # Keep a Changelog 1.1.0
VERSION = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?$")


def _text() -> str:
    return CHANGELOG.read_text()


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading line, body) of every ``## `` section, in file order."""
    parts = re.split(r"(?m)^(?=## )", text)[1:]
    return [(part.split("\n", 1)[0], part.split("\n", 1)[1] if "\n" in part else "") for part in parts]


def _aliases() -> dict[str, str]:
    """Every deprecated module stub of the package: old module -> the module it aliases."""
    stubs = sorted((PACKAGE / "schedules").glob("*.py")) + sorted(PACKAGE.glob("cli_*.py"))
    found = {}
    for path in stubs:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "alias":
                old = "tvm_cdna4." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
                found[old] = node.args[1].value
    return found


def test_changelog_has_the_keep_a_changelog_form():
    text = _text()
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/en/1.1.0/" in text
    sections = _sections(text)
    assert sections and sections[0][0] == "## [Unreleased]", "the [Unreleased] section comes first"
    dates = []
    for heading, body in sections:
        m = VERSION.match(heading)
        assert m, f"a version heading is '## [X.Y.Z] - YYYY-MM-DD' or '## [Unreleased]': {heading!r}"
        if m["version"] != "Unreleased":
            assert SEMVER.match(m["version"]) and m["date"], heading
            dates.append(m["date"])
        types = re.findall(r"(?m)^### (.+)$", body)
        assert types and all(t in TYPES for t in types), f"{heading}: change types {types} (of {TYPES})"
        assert [TYPES.index(t) for t in types] == sorted(TYPES.index(t) for t in types), heading
        assert len(set(types)) == len(types), f"{heading}: a change type twice"
    assert dates == sorted(dates, reverse=True), "versions newest first"


@pytest.mark.parametrize("old, new", sorted(_aliases().items()))
def test_every_deprecated_module_is_named_with_its_new_path(old, new):
    unreleased = _sections(_text())[0][1]
    rows = [line for line in unreleased.splitlines() if f"`{old}`" in line]
    assert any(f"`{new}`" in row for row in rows), f"CHANGELOG [Unreleased] must say `{old}` -> `{new}`"


def test_the_aliases_are_found_and_their_removal_is_dated():
    aliases = _aliases()
    assert len(aliases) >= 30 and "tvm_cdna4.schedules.cuda_gemm" in aliases and "tvm_cdna4.cli_gemm" in aliases
    unreleased = _sections(_text())[0][1]
    assert f"removed in {_deprecated.REMOVED_IN}" in unreleased
    schedules_init = (PACKAGE / "schedules" / "__init__.py").read_text()
    names = ast.literal_eval(re.search(r"_WHERE = (\{.*?\})\n", schedules_init, re.S).group(1))
    assert all(f"`{name}`" in unreleased for name in names), "the deprecated lazy names of tvm_cdna4.schedules"


def test_the_lane_record_order_change_is_a_breaking_change_with_its_migration():
    text = _text()
    entry = " ".join(next(item for item in text.split("\n- ") if "`isa.lanes` returns named records" in item).split())
    assert "**Breaking" in entry and "BElem(block, col, k)" in entry and "(block, k, col)" in entry
    assert "by name" in entry and "b_lane(op, block, col, k)" in entry
