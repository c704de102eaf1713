"""The docs are current: the generated catalog page, every count of opcodes written in prose (it is the
catalog's), and the benchmark pages' paths (benchmarks/RESULTS.md today's figures, journal/ the diary,
runs/ the raw outputs)."""

import functools
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


def _run_block_with_output(doc, marker, tmp_path):
    """The ```python block of ``doc`` holding ``marker``, run as a module file (TVMScript parses source),
    and the ```text block after it: (what it printed, the text the doc shows, the module's names)."""
    import contextlib
    import importlib.util
    import io

    text = (ROOT / doc).read_text()
    found = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
    (index,) = [i for i, (lang, body) in enumerate(found) if lang == "python" and marker in body]
    path = tmp_path / f"doc_example_{index}.py"
    path.write_text(found[index][1])
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        spec.loader.exec_module(module)
    assert found[index + 1][0] == "text", f"{doc}: the example's output block follows it"
    return printed.getvalue(), found[index + 1][1], vars(module)


def test_the_patterns_docs_first_wgmma_kernel_runs_and_builds(tmp_path):
    """docs/patterns.md's first wgmma kernel (SS form, launched through a LaunchConfig) runs in the CUDA
    emulator with the output the doc shows, and builds for sm_90a as the text after it says."""
    import tvm_tirx

    printed, shown, names = _run_block_with_output("docs/patterns.md", "def wgmma_ss", tmp_path)
    assert printed == shown
    source = tvm_tirx.tirx.compile(names["wgmma_ss"], target={"kind": "cuda", "arch": "sm_90a"})
    assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16" in source.mod.imports[0].inspect_source("cuda")


def test_the_grouped_gemm_docs_example_runs(tmp_path):
    """docs/grouped_gemm.md's family example (a GroupedGemm's bucket and plan; device offsets of an empty
    group, a per-group bias and SiLU, emulated on gfx950 and sm90) prints what the doc shows."""
    printed, shown, _ = _run_block_with_output("docs/grouped_gemm.md", "gemm.GemmProblem(None", tmp_path)
    assert printed == shown


CONSTANT_DOCS = ("docs/sm90_gemm.md", "docs/grouped_gemm.md", "docs/sm90_attention.md")
"""The docs that name the sm90 kernels' module constants: a constant is named, its value written once (the module)."""
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


@functools.cache
def _module_constants() -> dict:
    """Every module-level ``NAME = literal`` of the package (``ast``, no import): name -> [(module, value)]."""
    import ast

    found = {}
    for path in sorted((ROOT / "tvm_cdna4").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and [type(t) for t in node.targets] == [ast.Name] \
                    and re.fullmatch(r"[A-Z][A-Z0-9_]+", node.targets[0].id):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                found.setdefault(node.targets[0].id, []).append((path.stem, value))
    return found


def _spellings(value) -> list[str]:
    """Patterns of how prose writes ``value``: an int as digits or a word, a bool as itself or on / off, a tuple by
    its first two entries (``96, 192``, ``64 or 128``; of tuples: the first's, ``128x256`` or ``128``)."""
    if isinstance(value, bool):
        return [str(value), "on" if value else "off"]
    if isinstance(value, int):
        return [str(value)] + NUMBER_WORDS[value:value + 1] * (0 <= value)
    if isinstance(value, float):
        return [re.escape(repr(value)), re.escape(f"{value:g}")]
    if isinstance(value, str):
        return [re.escape(value)] if value else []
    if isinstance(value, tuple) and len(value) > 1 and all(isinstance(x, (int, float, str)) for x in value):
        return [rf"['\"]?{re.escape(str(value[0]))}['\"]?(?:,| or| and)\s*['\"]?{re.escape(str(value[1]))}"]
    if isinstance(value, tuple) and value and isinstance(value[0], tuple) and len(value[0]) > 1:
        return [f"{value[0][0]}x{value[0][1]}", str(value[0][0])]
    return []


def _restated(text: str, constants: dict) -> list[str]:
    """Where ``text`` writes a constant's value right after its name (``MAX_WAVES` (4)``, ``SPLITS` = (1, 2``)."""
    out = []
    for m in re.finditer(r"(?<![\w])([A-Z][A-Z0-9_]+)(?![\w])`?", text):
        after = text[m.end():m.end() + 60]
        for module, value in constants.get(m.group(1), ()):
            if any(re.match(r"\s*(?:\(|=|:|;|,|is\b|of\b)?\s*[(\[]?['\"`]?" + s + r"(?![\w.])", after)
                   for s in _spellings(value)):
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"line {line}: {m.group(0)}{after[:24]!r} ({module}.{m.group(1)} = {value!r})")
    return out


@pytest.mark.parametrize("doc", CONSTANT_DOCS)
def test_the_docs_name_a_constant_without_writing_its_value(doc):
    """One source of truth: a doc names ``gemm_cost.MAX_WAVES``, it does not add ``(4)`` (the value lives in the
    module; ``--emit config`` shows what a plan took). Measurements, with their run named, are not constants."""
    assert not _restated((ROOT / doc).read_text(), _module_constants()), "\n".join(
        _restated((ROOT / doc).read_text(), _module_constants()))


def test_the_constant_check_sees_a_value_beside_its_name():
    constants = {"MAX_WAVES": [("gemm_cost", 4)], "SPLITS": [("gemm_cost", (1, 2, 3))],
                 "WEIGH_HYBRID": [("gemm_cost", False)], "CANDIDATES": [("gemm_cost", ((128, 256, 2), (64, 64, 1)))]}
    text = ("`w = 1 .. MAX_WAVES` (4), `SPLITS` (1, 2, 3) and `gemm_cost.WEIGH_HYBRID = False`; four waves at most\n"
            "(`MAX_WAVES`: four), `CANDIDATES` (128x256, ...), `SPLITS` 1 or 2, `CANDIDATES`: 128 rows\n"
            "`MAX_WAVES` waves, `SPLITS` of K, 4 `MAX_WAVES`, `CANDIDATES` (1288x256), `SPLITS` (1, 3)")
    assert [r.split(":")[0] for r in _restated(text, constants)] == ["line 1"] * 3 + ["line 2"] * 4
    assert _restated(text.split("\n")[2], constants) == []  # the names alone pass
