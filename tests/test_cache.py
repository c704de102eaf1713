"""The on-disk build cache (tvm_cdna4.cache) and its use by the CUDA and gfx950 GEMM builds."""

import logging
import subprocess
import sys
import textwrap
from dataclasses import replace
from types import SimpleNamespace

import pytest

from tvm_cdna4 import cache
from tvm_cdna4.cli import main as cli_main
import importlib

cuda_gemm = importlib.import_module("tvm_cdna4.kernels.sm80.gemm")  # the module (the package re-exports a function of that name)
from tvm_cdna4.kernels.sm80.gemm import GemmConfig, build


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own cache directory (the suite never touches ~/.cache)."""
    path = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(path))
    return path


@pytest.fixture
def fake_compile(monkeypatch):
    """Replace the TIRx build of the CUDA GEMM by a counter returning blobs named after its args."""
    calls = []

    short = {tir: name for name, tir in cuda_gemm.OUT_DTYPES.items()}

    def compile_(p, arch, compiler, emit=None):  # cuda_gemm._compile(plan, arch, compiler, emit)
        calls.append((p, arch, compiler))
        dtype, out_dtype = short[p.dtype], short[p.epilogue.out_dtype]
        return {"source": f"// {p.M}x{p.N}x{p.K} {dtype} {p.layout} {out_dtype} {arch} {compiler}".encode(),
                "library": bytes(range(256)) * 4}

    monkeypatch.setattr(cuda_gemm, "_compile", compile_)
    return calls


def _refuse(*args, **kwargs):
    raise AssertionError("built although the cache holds the entry")


# K = 256: 4 k-tiles of 64, so the config's 4 stages and the variant's 3 both run (plan caps stages at the k-tiles)
BASE = dict(M=64, N=96, K=256, dtype="f16", layout="nt", out_dtype="f32", config=GemmConfig(), arch="sm_80",
            compiler=None)
VARIANTS = [
    ("M", 65), ("N", 97), ("K", 257), ("dtype", "bf16"), ("layout", "tn"), ("out_dtype", "f16"),
    ("config", replace(GemmConfig(), stages=3)), ("config", replace(GemmConfig(), ctas=132)),
    ("config", replace(GemmConfig(), unroll_stages=False)), ("arch", "sm_90"), ("compiler", "nvcc"),
]


def test_every_argument_changes_the_key(fake_compile, cache_dir):
    build(**BASE)
    build(**BASE)
    assert len(fake_compile) == 1
    for field, value in VARIANTS:
        before = len(fake_compile)
        build(**{**BASE, field: value})
        assert len(fake_compile) == before + 1, f"{field}={value!r} did not change the cache key"
    assert len(list(cache_dir.glob("cuda-gemm-*.bin"))) == 1 + len(VARIANTS)


def test_versions_are_in_the_key(monkeypatch):
    key = cache.entry_key("cuda-gemm", {"M": 1})
    monkeypatch.setattr(cache, "versions", lambda: {"tvm_cdna4": "9.9", "apache-tvm-tirx": "0.1.0a4"})
    assert cache.entry_key("cuda-gemm", {"M": 1}) != key


def test_warm_cuda_build_equals_cold_without_building(monkeypatch, cache_dir, tmp_path):
    cfg = replace(cuda_gemm.default_config("f16", 64, 64), unroll_stages=False)
    cold = build(64, 64, 64, "f16", "nt", "f32", cfg)
    assert "mma.sync.aligned.m16n8k16" in cold.source
    monkeypatch.setattr(cuda_gemm, "_compile", _refuse)
    warm = build(64, 64, 64, "f16", "nt", "f32", cfg)
    assert warm == cold
    path = warm.export_library(tmp_path / "k.so")
    assert open(path, "rb").read() == cold.library
    with pytest.raises(AssertionError, match="built although"):
        build(64, 64, 64, "f16", "nt", "f32", cfg, cache=False)


def test_cache_false_neither_reads_nor_writes(fake_compile, cache_dir):
    build(**BASE, cache=False)
    assert not cache_dir.exists()
    build(**BASE)
    build(**BASE, cache=False)
    assert len(fake_compile) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip_payload", "garble_header", "wrong_header", "empty", "trailing"])
def test_corrupt_entry_is_rebuilt(fake_compile, cache_dir, damage, caplog):
    good = build(**BASE)
    (path,) = cache_dir.glob("cuda-gemm-*.bin")
    data = path.read_bytes()
    damaged = {
        "truncate": data[:-10],
        "flip_payload": data[:-1] + bytes([data[-1] ^ 1]),
        "garble_header": data[: len(cache.MAGIC)] + b"#" + data[len(cache.MAGIC) + 1 :],
        "wrong_header": data.replace(b'"size"', b'"sise"', 1),
        "empty": b"",
        "trailing": data + b"x",
    }[damage]
    path.write_bytes(damaged)
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        again = build(**BASE)
    assert again == good
    assert len(fake_compile) == 2
    assert "corrupt entry" in caplog.text
    assert cache.decode(path.read_bytes())["source"] == good.source.encode()  # rewritten whole


def test_decode_refuses_a_checksum_mismatch():
    data = cache.encode({"a": b"hello", "b": b"world"})
    assert cache.decode(data) == {"a": b"hello", "b": b"world"}
    with pytest.raises(ValueError, match="'b' is truncated or does not match its checksum"):
        cache.decode(data.replace(b"world", b"worle"))


def test_env_var_moves_the_cache(fake_compile, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    monkeypatch.setenv(cache.ENV_DIR, str(other))
    assert cache.cache_dir() == other
    build(**BASE)
    assert len(list(other.glob("cuda-gemm-*.bin"))) == 1
    monkeypatch.delenv(cache.ENV_DIR)
    assert cache.cache_dir() == cache.Path.home() / ".cache" / "tvm_cdna4"


def test_hits_and_misses_are_logged(fake_compile, caplog):
    with caplog.at_level(logging.DEBUG, logger="tvm_cdna4"):
        build(**BASE)
        build(**BASE)
    assert [r.getMessage().split()[3] for r in caplog.records] == ["miss", "hit"]


WRITER = textwrap.dedent("""
    import sys
    from tvm_cdna4 import cache
    tag = sys.argv[1].encode()
    for i in range(40):
        cache.cached("race", {"k": 1}, lambda: {"a": tag * 2_000_000, "b": tag * 1000})
        cache.store(cache.entry_path("race", {"k": 1}), {"a": tag * 2_000_000, "b": tag * 1000})
""")


def test_concurrent_writers_leave_a_valid_entry(cache_dir):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, tag]) for tag in ("x", "y")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    blobs = cache.load(cache.entry_path("race", {"k": 1}))
    assert blobs is not None
    assert blobs["a"] in (b"x" * 2_000_000, b"y" * 2_000_000) and blobs["b"] == blobs["a"][:1000]
    assert [p.name for p in cache_dir.iterdir()] == [cache.entry_path("race", {"k": 1}).name]  # no temp files


def test_cli_no_cache(fake_compile, cache_dir, capsys):
    argv = ["gemm", "--target", "sm80", "-M", "64", "-N", "96", "-K", "128", "--emit", "cuda"]
    assert cli_main(argv + ["--no-cache"]) == 0
    assert not cache_dir.exists()
    assert cli_main(argv) == 0
    assert cli_main(argv) == 0
    assert len(fake_compile) == 2
    assert cli_main(argv + ["--no-cache"]) == 0
    assert len(fake_compile) == 3
    assert capsys.readouterr().out.count("// 64x96x128 f16 nt f32 sm_80 None") == 4


def test_gfx950_build_is_cached(monkeypatch, cache_dir):
    from tvm_cdna4.cli import gemm_gfx950 as gfx950_cli
    from tvm_cdna4.rocm import build as rocm_build

    args = SimpleNamespace(M=64, N=64, K=64, dtype="f16", layout="nn", out_dtype="f32")
    cold = gfx950_cli.build_cached(args)
    assert "v_mfma" in cold.asm and cold.code_object is None or cold.code_object[:4] == b"\x7fELF"
    monkeypatch.setattr(rocm_build, "build", _refuse)  # the build the cache runs on a miss
    warm = gfx950_cli.build_cached(args)
    assert (warm.llvm_ir, warm.asm, warm.kernels, warm.code_object) == \
        (cold.llvm_ir, cold.asm, cold.kernels, cold.code_object)
    assert warm.executable is None
    with pytest.raises(AssertionError, match="built although"):
        gfx950_cli.build_cached(replace_ns(args, K=128))
    from tvm_cdna4.kernels.gfx950 import gemm as gfx950_gemm  # the key's digest: gfx950_gemm.build, which the CLI calls

    monkeypatch.setattr(gfx950_gemm, "schedule_digest", lambda: "an edited schedule")
    with pytest.raises(AssertionError, match="built although"):  # an edit under the same version rebuilds
        gfx950_cli.build_cached(args)


def test_source_digest_covers_the_files_it_names():
    from tvm_cdna4.cli import gemm_gfx950 as gfx950_cli
    from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm

    plan, emit = cache.source_digest("kernels/sm80/gemm_plan.py"), cache.source_digest("kernels/sm80/gemm_emit.py")
    assert len({plan, emit, cuda_gemm.schedule_digest(), gfx950_cli.schedule_digest()}) == 4
    assert cache.source_digest("kernels/sm80/gemm_plan.py") == plan  # stable (memoized per process)
    assert cache.source_digest("no/such/*.py") == cache.hashlib.sha256().hexdigest()


def replace_ns(ns, **changes):
    return SimpleNamespace(**{**vars(ns), **changes})


@pytest.mark.parametrize("name", ["apache-tvm-tirx", "tvm-cdna4", "apache_tvm_ffi", "numpy"])
def test_dist_version_agrees_with_importlib_metadata(name):
    """The cache key's versions come from the ``.dist-info`` names (no importlib.metadata import)."""
    import importlib.metadata

    assert cache.dist_version(name) == importlib.metadata.version(name)


def test_warm_cli_path_imports_neither_numpy_nor_tirx(tmp_path):
    """A cache hit needs no catalog (numpy, ml_dtypes), no TIRx and no importlib.metadata: importing
    the package and building the CLI parser must not pull them in."""
    import subprocess
    import sys

    code = ("import sys, tvm_cdna4, tvm_cdna4.cli as c, tvm_cdna4.cache as k; c.build_parser(); k.versions(); "
            "print(sorted(m for m in ('numpy', 'ml_dtypes', 'tvm_tirx', 'importlib.metadata') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_file_as_the_cache_dir_builds_without_the_cache_and_warns_once(fake_compile, tmp_path, monkeypatch,
                                                                         caplog):
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_bytes(b"a file, not a directory")
    monkeypatch.setenv(cache.ENV_DIR, str(not_a_dir))
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        first, second = build(**BASE), build(**BASE)
        blobs = cache.cached("other-kind", {"k": 1}, lambda: {"a": b"1"})
    assert first == second and first.source.startswith("// 64x96x256 f16 nt f32 sm_80")
    assert len(fake_compile) == 2 and blobs == {"a": b"1"}
    assert not_a_dir.read_bytes() == b"a file, not a directory"
    (message,) = _warnings(caplog)
    assert message.startswith(f"tvm_cdna4 build cache: cannot use the directory {not_a_dir} (")
    assert message.endswith("); building without the cache")


def test_loading_under_a_file_as_the_cache_dir_is_a_miss(tmp_path, monkeypatch, caplog):
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_bytes(b"")
    monkeypatch.setenv(cache.ENV_DIR, str(not_a_dir))
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        assert cache.load(cache.entry_path("cuda-tune", {"k": 1})) is None
    assert _warnings(caplog) == [f"tvm_cdna4 build cache: cannot use the directory {not_a_dir} (not a directory); "
                                "building without the cache"]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_entry_that_is_not_a_file_is_a_miss(fake_compile, cache_dir, caplog, kind):
    import os
    import threading

    good = build(**BASE)
    (path,) = cache_dir.glob("cuda-gemm-*.bin")
    path.unlink()
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    done = {}
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        worker = threading.Thread(target=lambda: done.update(result=build(**BASE)), daemon=True)
        worker.start()
        worker.join(30)  # (reading a fifo would wait for a writer forever)
    assert done.get("result") == good
    assert len(fake_compile) == 2
    assert any(f"ignoring {path} (not a regular file)" in m for m in _warnings(caplog))


def test_an_entry_without_the_blobs_its_caller_reads_is_a_miss(fake_compile, cache_dir, caplog):
    good = build(**BASE)
    (path,) = cache_dir.glob("cuda-gemm-*.bin")
    cache.store(path, {"library": good.library})  # checksum-valid, without "source"
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        again = build(**BASE)
    assert again == good and len(fake_compile) == 2
    assert any(f"ignoring entry {path} without the blobs ['source']" in m for m in _warnings(caplog))
    assert cache.decode(path.read_bytes())["source"] == good.source.encode()  # rewritten whole


def test_cached_treats_missing_required_blobs_as_a_miss(cache_dir):
    cache.store(cache.entry_path("k", {"a": 1}), {"x": b"old"})
    assert cache.cached("k", {"a": 1}, _refuse) == {"x": b"old"}
    assert cache.cached("k", {"a": 1}, lambda: {"x": b"new", "y": b"y"}, required=("x", "y")) == \
        {"x": b"new", "y": b"y"}
    assert cache.cached("k", {"a": 1}, _refuse, required=("x", "y")) == {"x": b"new", "y": b"y"}


ASM = ".amdgpu_metadata\namdhsa.kernels:\n  - .name: k\n    .vgpr_count: 8\n.end_amdgpu_metadata\n"


def test_a_gfx950_entry_without_its_assembly_is_a_miss(monkeypatch, cache_dir, caplog):
    from tvm_cdna4.rocm import build as rocm_build

    built = []
    monkeypatch.setattr(rocm_build, "build", lambda func: built.append(func) or SimpleNamespace(
        llvm_ir="; ir", asm=ASM, code_object=None))
    cache.store(cache.entry_path("gfx950-test", {"k": 1}), {"llvm_ir": b"; ir"})  # no "asm"
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        result = rocm_build.cached_build("gfx950-test", {"k": 1}, lambda: "kernel")
    assert built == ["kernel"] and result.asm == ASM and result.kernel().vgprs == 8
    assert any("without the blobs ['asm']" in m for m in _warnings(caplog))


def test_a_tuning_entry_without_its_config_is_no_tuning(cache_dir, caplog):
    key = cuda_gemm.tune_key(64, 96, 256, "f16", "nt", "f32")
    cache.store(cache.entry_path("cuda-tune", key), {"tiling": b"{}"})
    with caplog.at_level(logging.WARNING, logger="tvm_cdna4"):
        assert cuda_gemm.tuned_config(64, 96, 256, "f16", "nt", "f32") is None
    assert any("without the blobs ['config']" in m for m in _warnings(caplog))
