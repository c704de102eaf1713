"""Fixtures and markers for these tests come from the package's pytest plugin,
``tvm_cdna4.testing`` (``rng``, ``run_gfx950``, ``run_cuda``; ``gfx950``, ``cuda``, ``llvm``); ``gemm_cli`` (the
``gemm`` subcommand in-process) is here.

Builds go to one throwaway cache per test session (``TVM_CDNA4_CACHE_DIR``, inherited by the CLI
subprocesses and by pytest-xdist's workers), never ``~/.cache/tvm_cdna4``: a kernel that several
tests build is built once, whichever worker builds it first. Tests of the cache itself use their
own directories; tests that must run TIRx pass ``cache=False``.
"""

import os
import shutil
import tempfile

import pytest

_SESSION_CACHE = None


SLOW_ENV = "TVM_CDNA4_SLOW"
"""Set (to anything) to run the tests marked ``slow`` too: heavy checks whose behaviour a faster test covers, or
of a feature the choice does not take yet; the default run (CI's) skips them to keep within five minutes."""


def pytest_configure(config):
    """The controller (or a run without xdist) makes the cache; workers inherit its environment."""
    config.addinivalue_line("markers", f"slow: skipped unless {SLOW_ENV} is set (the conftest's SLOW_ENV says which)")
    global _SESSION_CACHE
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _SESSION_CACHE = tempfile.mkdtemp(prefix="tvm_cdna4-test-cache-")
    os.environ["TVM_CDNA4_CACHE_DIR"] = _SESSION_CACHE


def pytest_unconfigure(config):
    if _SESSION_CACHE:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def gemm_cli(capsys):
    """``gemm_cli(*args)``: ``python -m tvm_cdna4 gemm ARGS`` run in-process (``tvm_cdna4.cli.main``, what
    ``__main__`` runs; tests/cli/test_cli.py runs the entry point itself): returncode, stdout, stderr."""
    from types import SimpleNamespace

    from tvm_cdna4.cli import main

    def run(*args):
        capsys.readouterr()
        code = main(["gemm", *args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` (pyproject.toml): pytest-xdist 3.8 names a test's group by setting
    ``item._nodeid`` to ``<id>@<group>``, which pytest 9 no longer reads (the id lives in
    ``item._id``), so its scheduler saw no groups and spread the tests of one xdist_group over both
    workers: kernels and module fixtures meant to be made once were made on each. The same suffix,
    where pytest 9 keeps the id (nothing to do where xdist's own suffix took effect). Tests marked ``slow``
    are skipped unless ``SLOW_ENV`` is set."""
    if not os.environ.get(SLOW_ENV):
        skip = pytest.mark.skip(reason=f"slow: set {SLOW_ENV}=1 to run it")
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(skip)
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers only
        return
    try:  # pytest 9's id record; older pytest reads xdist's own suffix and needs nothing here
        from _pytest.nodeid import NodeId
    except ImportError:
        return

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and not item.nodeid.endswith("@" + "_".join(names)):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
