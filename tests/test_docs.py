"""The docs are current: the generated catalog page, every count of opcodes written in prose (it is the
catalog's), and the benchmark pages' paths (benchmarks/RESULTS.md today's figures, journal/ the diary,
runs/ the raw outputs)."""

import re

import paths
import pytest

from tvm_cdna4 import docs_gen
from tvm_cdna4.isa import CATALOG, KINDS, counts

ROOT = paths.ROOT


@pytest.mark.skipif(not (docs_gen.DOCS / "catalog.md.in").exists(), reason="not a source checkout")
def test_catalog_doc_is_current():
    assert (docs_gen.DOCS / "catalog.md").read_text() == docs_gen.render(), "run: python -m tvm_cdna4.docs_gen"


def test_counts_are_the_catalogs():
    n = counts()
    assert set(n) == {*KINDS, "all"} and n["all"] == len(CATALOG) == sum(n[k] for k in KINDS)
    assert all(n[op.kind] for op in CATALOG.values())
    assert n == {"mfma": 36, "mfma_scale": 2, "ds_read_tr": 6, "all": 44}  # AMD's HIP documentation of CDNA4


def test_cli_kinds_are_the_catalogs():
    from tvm_cdna4.cli import build_parser

    opcodes = build_parser()._subparsers._group_actions[0].choices["opcodes"]
    (kind,) = [a for a in opcodes._actions if a.dest == "kind"]
    assert tuple(kind.choices) == KINDS  # a literal there: `python -m tvm_cdna4 --help` imports no numpy


# A count of the catalog's opcodes in prose, by what it counts. Loop and instruction-mix counts ("16 MFMAs
# per tile", "8 scaled MFMAs", "16 `ds_read_b64_tr_b16`") are plural or name an instruction, and do not match.
COUNT_PHRASES = [
    (re.compile(r"\b(\d+) (?:CDNA4 )?opcodes\b"), ("all",)),
    (re.compile(r"\ball (\d+)(?= ?\)| (?:CDNA4 )?opcodes| and the seed figures)"), ("all",)),
    (re.compile(r"\b(\d+) (?:CDNA4 )?dense\b(?! MFMAs)"), ("mfma",)),
    (re.compile(r"\b(\d+) (?:CDNA4 )?scaled\b(?! MFMAs)"), ("mfma_scale",)),
    (re.compile(r"\b(\d+) (?:CDNA4 )?MFMA builtins\b"), ("mfma", "mfma_scale")),
    (re.compile(r"\b(\d+) (?:CDNA4 )?`{0,2}ds_read_tr`{0,2}(?=[\s,.;:)]|$)"), ("ds_read_tr",)),
]


def _prose_files():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted((ROOT / "tvm_cdna4").rglob("*.py"))
    yield from sorted((ROOT / "benchmarks").glob("*.py"))


def _count_claims(text: str):
    """(what, number, where) for every catalog count in ``text``, lines joined (a phrase may wrap)."""
    flat = re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)
    for pattern, kinds in COUNT_PHRASES:
        for m in pattern.finditer(flat):
            yield kinds, int(m.group(1)), flat[max(0, m.start() - 40):m.end() + 20]


def test_prose_counts_are_the_catalogs():
    """'38 dense MFMA' in a docstring once disagreed with the catalog (36 dense + 2 scaled); every count
    of opcodes in the docs, the README, docstrings, help texts and the benchmark scripts is checked here
    (docs/catalog.md is generated from ``isa.counts()``)."""
    n, wrong, seen = counts(), [], 0
    for path in _prose_files():
        if not path.exists():
            continue
        for kinds, number, where in _count_claims(path.read_text()):
            seen += 1
            if number != sum(n[k] for k in kinds):
                wrong.append(f"{path.relative_to(ROOT)}: {number} ({' + '.join(kinds)} = "
                             f"{sum(n[k] for k in kinds)}): ...{where}...")
    assert not wrong, "\n".join(wrong)
    assert seen >= 8  # README, docs/catalog.md, docs/sources.md, docs/tutorial.md, the isa docstrings


def test_prose_counts_catch_a_wrong_count():
    claims = list(_count_claims("the catalog: 38 dense MFMA builtins\nand 6 `ds_read_tr`; all 44 opcodes"))
    assert {(k, v) for k, v, _ in claims} == {(("all",), 44), (("mfma",), 38), (("ds_read_tr",), 6)}
    assert list(_count_claims("a loop of 16 MFMAs, 8 scaled MFMAs and 16 `ds_read_b64_tr_b16`")) == []


def test_benchmark_results_page_is_short_and_indexes_the_journal():
    results = (paths.BENCHMARKS / "RESULTS.md").read_text()
    assert len(results.splitlines()) <= 400
    assert "journal/" in results and "runs/" in results
    assert sorted(paths.JOURNAL.glob("*.md")), "the dated diary lives in benchmarks/journal/"


# a path under benchmarks/ as prose and code name it (not a shell glob, a brace list or a placeholder)
BENCHMARK_PATH = re.compile(r"benchmarks/[\w./-]*\w")


def test_paths_under_benchmarks_exist():
    """Files that moved (RESULTS.md's diary to journal/, raw runs to runs/) are named where they are."""
    missing = []
    for path in (*_prose_files(), *sorted((ROOT / "tests").rglob("*.py")), *sorted(paths.BENCHMARKS.glob("*.sh")),
                 paths.BENCHMARKS / "RESULTS.md"):
        if not path.exists():
            continue
        for m in BENCHMARK_PATH.finditer(path.read_text()):
            name = m.group(0)
            if re.search(r"[{*$<]|YYYY", path.read_text()[m.start():m.end() + 1]) or "YYYY" in name:
                continue
            if not (ROOT / name).exists():
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, "\n".join(missing)


def test_the_readmes_family_example_runs():
    """README's "What is here" example (the GEMM family's verbs) runs as written."""
    import re

    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "from tvm_cdna4.kernels import gemm" in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["plan"].to_json().startswith("{") and namespace["kernel"].asm


def test_the_paged_attention_docs_cpu_example_runs():
    """docs/paged_attention.md's ```python example (a small fp8 problem, 2 queries, validated in the CUDA
    emulator) runs as written."""
    import re

    text = (ROOT / "docs" / "paged_attention.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    namespace = {}
    exec(compile(block, "docs/paged_attention.md", "exec"), namespace)
    assert namespace["result"].ok and namespace["result"].where.startswith("the CUDA emulator")
    assert namespace["plan"].split_kv >= 1 and namespace["plan"].ctas == 2 * 2 * namespace["plan"].split_kv
