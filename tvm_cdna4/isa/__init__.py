"""The CDNA4 (gfx950) instruction catalog: 36 dense and 2 scaled MFMA builtins and 6 ds_read_tr loads.

``CATALOG`` maps catalog names (the builtin without ``__builtin_amdgcn_``) to attrs records;
``lanes`` holds the lane maps and ``reference`` the numpy semantics. Everything else in
``tvm_cdna4`` reads these. ``counts()`` says how many opcodes of each kind there are: prose that gives a
count takes it from there (docs/catalog.md is generated with it; tests/test_docs.py checks the rest).
"""

from __future__ import annotations

from . import formats, lanes, reference
from .ds_read_tr_table import DS_READ_TR_OPS
from .mfma_table import MFMA_OPS, SCALE_FORMAT_CODES, scaled_intrinsic
from .records import WAVE_SIZE, DsReadTrOp, MfmaOp, Modifier
from .sources import SOURCES

CATALOG: dict[str, MfmaOp | DsReadTrOp] = {op.name: op for op in (*MFMA_OPS, *DS_READ_TR_OPS)}

_ALIASES: dict[str, str] = {}
for _op in CATALOG.values():
    _ALIASES[_op.builtin] = _op.name
    _ALIASES.setdefault(_op.mnemonic, _op.name)
# The three tr16 variants share one mnemonic: ambiguous, so it is no alias.
_MNEMONIC_COUNT: dict[str, int] = {}
for _op in CATALOG.values():
    _MNEMONIC_COUNT[_op.mnemonic] = _MNEMONIC_COUNT.get(_op.mnemonic, 0) + 1
for _m, _count in _MNEMONIC_COUNT.items():
    if _count > 1:
        del _ALIASES[_m]


KINDS = ("mfma", "mfma_scale", "ds_read_tr")
"""The opcode kinds (``op.kind``): dense MFMA, scaled (MX) MFMA, LDS transpose load."""


def counts() -> dict[str, int]:
    """Opcodes per kind (``KINDS``), and ``"all"``: e.g. ``{"mfma": 36, "mfma_scale": 2, "ds_read_tr": 6, "all": 44}``."""
    by_kind = dict.fromkeys(KINDS, 0)
    for op in CATALOG.values():
        by_kind[op.kind] += 1
    return {**by_kind, "all": len(CATALOG)}


def lookup(name: str) -> MfmaOp | DsReadTrOp:
    """Find an opcode by catalog name, ``__builtin_amdgcn_*`` name or unambiguous gfx950 mnemonic."""
    if name in CATALOG:
        return CATALOG[name]
    if name in _ALIASES:
        return CATALOG[_ALIASES[name]]
    if _MNEMONIC_COUNT.get(name, 0) > 1:
        options = sorted(op.name for op in CATALOG.values() if op.mnemonic == name)
        raise KeyError(f"mnemonic {name!r} is ambiguous; name one of {options}")
    import difflib

    if f"mfma_{name}" in CATALOG:  # the pre-0.2 short MFMA names dropped the builtin's ``mfma_``
        close = [f"mfma_{name}"]
    else:
        close = difflib.get_close_matches(name, [*CATALOG, *_ALIASES], n=3)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise KeyError(f"unknown CDNA4 opcode {name!r}{hint} (catalog names are the builtin without "
                   f"'__builtin_amdgcn_')")


__all__ = [
    "CATALOG",
    "DS_READ_TR_OPS",
    "MFMA_OPS",
    "SCALE_FORMAT_CODES",
    "SOURCES",
    "WAVE_SIZE",
    "KINDS",
    "DsReadTrOp",
    "MfmaOp",
    "Modifier",
    "counts",
    "formats",
    "lanes",
    "lookup",
    "reference",
    "scaled_intrinsic",
]
