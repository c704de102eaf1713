"""The package's structure, from its source: the module import graph and the long functions.

    python tools/structure.py imports              # every module, its layer, what it imports; cycles, upward imports
    python tools/structure.py functions --over 80  # every function of tvm_cdna4/ longer than 80 lines

Both read the source (``ast``), import nothing of the package, and exit 1 when they find a cycle,
an upward import or a function over the limit. ``tests/test_structure.py`` asserts the same.

Layers, lowest first (docs/architecture.md): a module may import its own layer and the layers below.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tvm_cdna4"

# (layer, module prefixes): a module is in the layer of its longest matching prefix
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("tvm_cdna4.errors", "tvm_cdna4.tirx_private", "tvm_cdna4.cache", "tvm_cdna4._deprecated")),
    ("isa", ("tvm_cdna4.isa",)),
    ("patterns", ("tvm_cdna4.patterns",)),
    ("rocm", ("tvm_cdna4.rocm", "tvm_cdna4.cuda")),  # the two builds, side by side
    ("emulator", ("tvm_cdna4.emulator",)),
    ("kernels", ("tvm_cdna4.kernels", "tvm_cdna4.probes", "tvm_cdna4.probes_wgmma")),
    ("runtime", ("tvm_cdna4.runtime", "tvm_cdna4.report", "tvm_cdna4.figures", "tvm_cdna4.testing",
                 "tvm_cdna4.selftest", "tvm_cdna4.torch", "tvm_cdna4.torch_paged", "tvm_cdna4._torch_checks")),
    ("cli", ("tvm_cdna4", "tvm_cdna4.__main__", "tvm_cdna4.cli", "tvm_cdna4.docs_gen")),  # ``tvm_cdna4``: the facade
    # the deprecated aliases of moved modules (``tvm_cdna4._deprecated``): above everything they point to
    ("deprecated", ("tvm_cdna4.schedules", "tvm_cdna4.cli_gemm", "tvm_cdna4.cli_gfx950", "tvm_cdna4.cli_dynamic",
                    "tvm_cdna4.cli_grouped", "tvm_cdna4.cli_attention", "tvm_cdna4.cli_draw")),
)
LAYER_ORDER = {name: rank for rank, (name, _) in enumerate(LAYERS)}
# ``from tvm_cdna4 import __version__``: the facade defines it before it imports anything, and every
# submodule's import runs the facade first, so reading it depends on nothing above
FACADE_CONSTANTS = {"__version__"}
# imports the layer order allows for now, each with its reason and when it goes
TRANSITIONAL: dict[tuple[str, str], str] = {}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """``{dotted module name: path}`` of every module of the package."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer_of(module: str) -> str:
    best = max((p for _, prefixes in LAYERS for p in prefixes if module == p or module.startswith(p + ".")), key=len)
    return next(name for name, prefixes in LAYERS if best in prefixes)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(root: Path = ROOT, transitional=TRANSITIONAL) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``, function-level imports included, the
    ``TRANSITIONAL`` ones and the facade's constants left out. ``from X import name`` counts as
    importing ``X.name`` when that is a module, else ``X``."""
    mods = modules(root)
    graph: dict[str, set[str]] = {}
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                if base == PACKAGE and {a.name for a in node.names} <= FACADE_CONSTANTS:
                    continue
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:  # ``import tvm_cdna4.isa.lanes`` of a module, or a name
                    target = target.rpartition(".")[0]
                if target.startswith(PACKAGE) and target != module and (module, target) not in transitional:
                    found.add(target)
        graph[module] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` pairs where the imported module sits in a higher layer."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if LAYER_ORDER[layer_of(b)] > LAYER_ORDER[layer_of(a)])


def functions(root: Path = ROOT) -> list[tuple[int, str]]:
    """``(lines, "path:line qualified.name")`` of every function of the package (nested ones too),
    counted from the ``def`` line (decorators not counted) to the last line, docstring included;
    longest first."""
    out = []
    for module, path in modules(root).items():
        tree = ast.parse(path.read_text(), str(path))

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{prefix}{child.name}"
                    out.append((child.end_lineno - child.lineno + 1,
                                f"{path.relative_to(root)}:{child.lineno} {module}.{name}"))
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(tree, "")
    return sorted(out, key=lambda item: (-item[0], item[1]))


def long_functions(over: int, root: Path = ROOT) -> dict[str, int]:
    """``{"module.qualified.name": lines}`` of the functions longer than ``over`` lines."""
    return {where.split(" ", 1)[1]: n for n, where in functions(root) if n > over}


def _print_imports() -> int:
    graph = imports()
    for module in sorted(graph, key=lambda m: (LAYER_ORDER[layer_of(m)], m)):
        targets = ", ".join(sorted(graph[module])) or "-"
        print(f"{layer_of(module):10} {module}: {targets}")
    found_cycles, found_upward = cycles(graph), upward(graph)
    print(f"\nlayers (lowest first): {' -> '.join(name for name, _ in LAYERS)}")
    for (a, b), why in sorted(TRANSITIONAL.items()):
        print(f"transitional, not counted: {a} imports {b}: {why}")
    print(f"cycles: {len(found_cycles)}")
    for component in found_cycles:
        print("  " + " <-> ".join(component))
    print(f"upward imports: {len(found_upward)}")
    for a, b in found_upward:
        print(f"  {a} ({layer_of(a)}) imports {b} ({layer_of(b)})")
    return 1 if found_cycles or found_upward else 0


def _print_functions(over: int) -> int:
    found = [(n, where) for n, where in functions() if n > over]
    for n, where in found:
        print(f"{n:5} {where}")
    print(f"{len(found)} function(s) over {over} lines")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("imports", help="module graph, layer per module, cycles, upward imports")
    p = sub.add_parser("functions", help="functions of tvm_cdna4/ over N lines (def to last line)")
    p.add_argument("--over", type=int, default=80, metavar="N")
    args = parser.parse_args(argv)
    return _print_imports() if args.command == "imports" else _print_functions(args.over)


if __name__ == "__main__":
    sys.exit(main())
