"""The CLI tests' fixture: ``cli(*args)`` runs ``python -m tvm_cdna4 ARGS`` in-process."""

from types import SimpleNamespace

import pytest

from tvm_cdna4.cli import main


@pytest.fixture
def cli(capsys):
    """``cli(*args)``: run ``python -m tvm_cdna4 ARGS`` in-process; returncode, stdout, stderr."""

    def run(*args):
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run
