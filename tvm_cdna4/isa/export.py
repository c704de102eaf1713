"""Plain-data views of the catalog: the JSON schema of ``python -m tvm_cdna4 opcodes --json``."""

from __future__ import annotations

import numpy as np

from . import lanes
from .records import WAVE_SIZE, DsReadTrOp, MfmaOp
from .sources import SOURCES


def _table(*columns) -> list[list[int]]:
    return np.stack([np.asarray(c).ravel() for c in columns], axis=1).astype(int).tolist()


def _grid(cols: int):
    return np.meshgrid(np.arange(WAVE_SIZE), np.arange(cols), indexing="ij")


def mfma_lanes(op: MfmaOp) -> dict[str, list[list[int]]]:
    la, ea = _grid(op.a_elems)
    lb, eb = _grid(op.b_elems)
    lc, rc = _grid(op.acc_elems)
    b = lanes.b_owner(op, lb, eb)
    return {
        "a": _table(la, ea, *lanes.a_owner(op, la, ea)),
        "b": _table(lb, eb, b.block, b.k, b.col),  # the math's B[k, col]
        "acc": _table(lc, rc, *lanes.acc_owner(op, lc, rc)),
    }


def tr_lanes(op: DsReadTrOp) -> dict[str, list[list[int]]]:
    lane, elem = _grid(op.elements)
    return {"provider": _table(lane, elem, *lanes.tr_provider(op, lane, elem))}


def to_dict(op: MfmaOp | DsReadTrOp, with_lanes: bool = True) -> dict:
    common = {
        "name": op.name,
        "builtin": op.builtin,
        "llvm_intrinsic": op.llvm_intrinsic,
        "mnemonic": op.mnemonic,
        "kind": op.kind,
    }
    if isinstance(op, DsReadTrOp):
        out = {
            **common,
            "element_bits": op.element_bits,
            "load_bits": op.load_bits,
            "elements": op.elements,
            "result_vector": op.result_vector,
            "result_format": op.result_format,
            "lds_alignment": op.lds_alignment,
            "k_split": [[list(r) for r in call] for call in op.k_split],
            "k_split_mfma": op.k_split_mfma,
            "feeds": list(op.feeds),
        }
        if with_lanes:
            out["lanes"] = tr_lanes(op)
    else:
        out = {
            **common,
            "m": op.m,
            "n": op.n,
            "k": op.k,
            "blocks": op.blocks,
            "a_dtype": op.a_format,
            "b_dtype": op.b_format,
            "acc_dtype": op.acc_format,
            "a_elems": op.a_elems,
            "b_elems": op.b_elems,
            "acc_elems": op.acc_elems,
            "acc_regs": op.acc_regs,
            "a_vector": op.a_vector,
            "b_vector": op.b_vector,
            "acc_vector": op.acc_vector,
            "modifiers": {m.name: {"range": [m.lo, m.hi], "meaning": m.meaning} for m in op.modifiers},
            "blgp_role": op.blgp_role,
            "ops": op.ops,
            "cycles": op.cycles,
        }
        if op.cycles_by_format:
            out["cycles_by_format"] = dict(op.cycles_by_format)
        if with_lanes:
            out["lanes"] = mfma_lanes(op)
    out["notes"] = list(op.notes)
    out["sources"] = {key: SOURCES[key] for key in op.sources}
    return out
