"""Deprecated: moved to :mod:`tvm_cdna4.cli.gemm_grouped` (CHANGELOG.md, 0.2.0)."""

from ._deprecated import alias

alias(__name__, "tvm_cdna4.cli.gemm_grouped")
