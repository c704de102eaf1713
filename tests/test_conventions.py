"""Package conventions: ``--version``, ``-v``/``-q`` logging, the ``tvm_cdna4`` logger's messages,
extras and ``py.typed``."""

import importlib.metadata
import importlib.resources
import logging
import tomllib
from pathlib import Path

import child_python
import pytest

from tvm_cdna4.cli import main
from tvm_cdna4.rocm import build

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_version_prints_the_installed_version(capsys):
    assert main(["--version"]) == 0  # main returns the exit status, --version's included
    assert capsys.readouterr().out == f"python -m tvm_cdna4 {importlib.metadata.version('tvm-cdna4')}\n"


def test_tool_path_is_logged_at_debug(tmp_path, monkeypatch, caplog):
    tool = tmp_path / "ld.lld"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setattr(build, "LLVM_BIN_DIRS", (str(tmp_path),))
    with caplog.at_level(logging.DEBUG, logger="tvm_cdna4"):
        assert build.llvm_tool("ld.lld") == str(tool)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("tvm_cdna4.rocm.build", "DEBUG", f"LLVM tool ld.lld: {tool}")]


@pytest.fixture
def no_linker(tmp_path, monkeypatch):
    """No ld.lld anywhere: gfx950 builds fall back to codegen only."""
    monkeypatch.setattr(build, "LLVM_BIN_DIRS", (str(tmp_path),))
    monkeypatch.setenv("PATH", str(tmp_path))


def test_verbosity_flags_set_what_the_cli_logs(no_linker, capsys):
    # one selftest build, codegen only, at each verbosity: -q WARNING, default INFO, -v DEBUG
    logger = logging.getLogger("tvm_cdna4")
    handlers, level = list(logger.handlers), logger.level
    codegen_only = "tvm_cdna4.rocm.build: INFO: ld.lld not found: codegen only"
    tool = "tvm_cdna4.rocm.build: DEBUG: LLVM tool ld.lld: not found"
    logged = {}
    for flag in ("-q", None, "-v"):
        assert main([*([flag] if flag else []), "selftest", "mfma_f64_4x4x4f64"]) == 0
        logged[flag] = capsys.readouterr().err
    assert codegen_only not in logged["-q"] and tool not in logged["-q"]
    assert codegen_only in logged[None] and tool not in logged[None]
    assert codegen_only in logged["-v"] and tool in logged["-v"]
    assert logger.handlers == handlers and logger.level == level  # main() leaves logging as it was


def test_quiet_and_verbose_exclude_each_other(capsys):
    assert main(["-q", "-v", "opcodes"]) == 2
    assert capsys.readouterr().err == ("python -m tvm_cdna4: error: argument -v/--verbose: not allowed with argument "
                                       "-q/--quiet\n")


def test_py_typed_ships_in_the_package():
    assert importlib.resources.files("tvm_cdna4").joinpath("py.typed").is_file()
    config = tomllib.loads(PYPROJECT.read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["tvm_cdna4"]


def test_extras_and_build_backend():
    config = tomllib.loads(PYPROJECT.read_text())
    extras = config["project"]["optional-dependencies"]
    assert extras["docs"] == ["matplotlib"] and "matplotlib" in extras["test"]
    assert set(extras["cuda"]) == {"torch", "nvidia-cuda-nvrtc"} and extras["rocm"] == ["hip-python"]
    assert "triton" in extras["bench"]
    assert config["build-system"]["requires"] == ["setuptools>=77"] and config["project"]["license"] == "Apache-2.0"


@pytest.mark.parametrize("first", ["tvm_cdna4.rocm.build", "tvm_cdna4.rocm.analysis", "tvm_cdna4", "tvm_cdna4.tirx_private",
                                   "tvm_cdna4.patterns.wgmma",  # stop 54: T.sm90 was missing after it
                                   *(pytest.param(m, marks=pytest.mark.slow)  # suite time: no past failure started there
                                     for m in ("tvm_cdna4.patterns", "tvm_cdna4.patterns.layouts", "tvm_cdna4.probes"))])
def test_any_first_import_registers_without_warnings(first):
    """Whichever module a program imports first, TIRx's backend autoload registers the package
    without a warning (a half-initialized ``rocm.build`` once made it fail with an ImportError; a
    half-initialized ``tirx_private``, the first to import TIRx, with "cannot import name")."""
    import subprocess
    import sys

    code = (f"import {first}, tvm_tirx, tvm_cdna4; "
            "print(sorted(tvm_cdna4.patterns._REGISTERED) == ['amdgcn', 'rocm', 'sm90', 'wgmma'], "
            "tvm_cdna4.rocm.build._installed)")
    env = child_python.env(hide_torch=first != "tvm_cdna4")  # one first import as CI's environment has it
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "True"], proc.stderr
    assert "Failed to autoload" not in proc.stderr, proc.stderr


def test_backend_entry_point_registers_the_patterns_and_the_build_hooks():
    """``[project.entry-points."tvm_tirx.backends"]`` names a callable that registers ``T.rocm`` and
    installs the ROCm build hooks (``rocm.build.register``), in a fresh interpreter."""
    import subprocess
    import sys

    config = tomllib.loads(PYPROJECT.read_text())
    module, _, attr = config["project"]["entry-points"]["tvm_tirx.backends"]["cdna4"].partition(":")
    assert (module, attr) == ("tvm_cdna4", "backend_entry_point")
    code = (f"import importlib; importlib.import_module({module!r}).{attr}(); import tvm_cdna4; "
            "print(sorted(tvm_cdna4.patterns._REGISTERED) == ['amdgcn', 'rocm', 'sm90', 'wgmma'], "
            "tvm_cdna4.rocm.build._installed)")
    env = child_python.env(TVM_TIRX_DEVICE_BACKEND_AUTOLOAD="0")  # only the entry point registers
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "True"], proc.stderr
