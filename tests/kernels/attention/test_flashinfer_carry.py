"""``benchmarks/flashinfer_carry.py``'s parts that run without the network and nvcc: the stand-in for
FlashInfer's ``flashinfer-jit-cache`` package it writes (the carried modules unpacked on first use, hidden for a
JIT), its trimmed ``__init__``, and the modules it builds against the rows ``benchmarks/paged_decode.py`` runs
FlashInfer on. The carry itself (a download, nvcc builds) is the lead's: ``docs/paged_attention.md``."""

from __future__ import annotations

import ast
import importlib.util
import lzma
import sys

from paths import TESTS

sys.path.insert(0, str(TESTS))

from benchmark_modules import benchmark_module  # noqa: E402

carry = benchmark_module("flashinfer_carry")
bench = benchmark_module("paged_decode")


def _stand_in(tmp_path, modules: dict):
    package = tmp_path / "carried" / "flashinfer_jit_cache"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(carry.JIT_CACHE.format(version="0.6.6", nvcc="13.0"))
    for name, data in modules.items():
        with lzma.open(package / f"{name}.so.xz", "wb") as f:
            f.write(data)
    spec = importlib.util.spec_from_file_location("flashinfer_jit_cache_under_test", package / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_jit_cache_stand_in_unpacks_each_module_once_where_flashinfer_looks(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "ws"))
    monkeypatch.delenv("FLASHINFER_CARRIED_JIT", raising=False)
    cache = _stand_in(tmp_path, {"batch_decode_a": b"\x7fELF decode", "batch_prefill_b": b"\x7fELF prefill" * 100})
    # flashinfer.jit.env: the version starts with FlashInfer's; JitSpec.aot_path: <dir>/<name>/<name>.so
    assert cache.__version__.startswith("0.6.6")
    out = tmp_path / "ws" / "aot"
    assert cache.get_jit_cache_dir() == str(out)
    assert (out / "batch_decode_a" / "batch_decode_a.so").read_bytes() == b"\x7fELF decode"
    assert (out / "batch_prefill_b" / "batch_prefill_b.so").read_bytes() == b"\x7fELF prefill" * 100
    (out / "batch_decode_a" / "batch_decode_a.so").write_bytes(b"kept")
    cache.get_jit_cache_dir()  # unpacked once: an existing module is not rewritten
    assert (out / "batch_decode_a" / "batch_decode_a.so").read_bytes() == b"kept"
    assert not list(out.rglob("*.part"))
    monkeypatch.setenv("FLASHINFER_CARRIED_JIT", "1")
    hidden = cache.get_jit_cache_dir()
    assert hidden != str(out) and not (tmp_path / "ws" / "aot-none").exists()  # nothing there: FlashInfer JITs


def test_the_trimmed_init_imports_only_the_decode_wrapper():
    tree = ast.parse(carry.INIT.format(version="0.6.6"))
    imported = {(node.module, alias.name) for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == {("version", "__version__"), ("version", "__git_version__"),
                        ("decode", "BatchDecodeWithPagedKVCacheWrapper")}


def test_the_carried_modules_cover_the_benchmarks_flashinfer_rows():
    # the sets FlashInfer runs on (1 query), their KV as the benchmark stores it (torch's names), each kernel it times
    kv = {bench.SETS[name][0] for name in ("bf16", "fp8")}
    stored = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}  # benchmarks/paged_decode.py's _inputs
    kinds = {"decode" if not tc else "prefill" for tc in bench.FLASHINFER_MODES.values()}
    assert set(carry.MODULES) == {(kind, stored[k]) for kind in kinds for k in kv}
    assert carry.ARCH == "9.0a" and bench.HEAD_DIM == 128  # the modules are built for head dim 128 (CHILD)
