"""Deprecated: moved to :mod:`tvm_cdna4.cli.draw` (CHANGELOG.md, 0.2.0)."""

from ._deprecated import alias

alias(__name__, "tvm_cdna4.cli.draw")
