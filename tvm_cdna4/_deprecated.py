"""Deprecated import paths: an old module name that now lives elsewhere (CHANGELOG.md says when and where).

A stub at the old path calls ``alias(__name__, "new.module")``: the first import warns once with a
``DeprecationWarning`` naming the new path, and the old name then *is* the new module
(``sys.modules``), so its functions, classes and monkeypatching are shared. Removed in ``REMOVED_IN``."""

from __future__ import annotations

import importlib
import sys
import warnings

REMOVED_IN = "0.3.0"


def alias(old: str, new: str) -> None:
    """Make module ``old`` an alias of ``new``, with a ``DeprecationWarning`` naming ``new``."""
    warnings.warn(f"{old} is deprecated: import {new} instead ({old} is removed in tvm_cdna4 {REMOVED_IN})",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
