"""The statement as written that lowered code came from, for messages about the lowered code.

TIRx's lowering keeps no source location (every lowered statement's ``loc`` is unknown), but it
keeps the variables a pattern binds: the lane variable ``wave_lane`` that every pattern binds first
(``common.WaveContext``) reaches codegen as the same object. ``note(lowered, call)`` maps the
variables bound in a ds_read_tr pattern's lowered statements to its ``T.rocm.tile.apply`` as written;
``origin(var)`` finds it. ``rocm.lds_sync`` quotes it for the LDS reads that follow such a binding
(those of that opcode from that LDS tensor), instead of the lowered intrinsic call. Per thread (one
compile lowers and builds on one thread), at most ``LIMIT`` variables (then the oldest half is
dropped: a message may then quote the lowered statement instead); ``forget()`` after a build.

``one_line(node)`` prints a statement or expression as TVMScript on one line, without the printer's
variable declarations, with ``T.rocm.lane_id()`` / ``T.rocm.wave_id()`` for their lowered forms.
"""

from __future__ import annotations

import functools
import re
import threading

import attrs

LIMIT = 4096
DECLARATION = re.compile(r"^\w+ = T\.(Var|dynamic)\(")
_state = threading.local()


@attrs.frozen
class Origin:
    """A ``T.rocm.tile.apply`` as written: its text, opcode and the names of its LDS operands."""

    text: str
    opcode: str
    lds: tuple[str, ...]


def _table() -> dict:
    table = getattr(_state, "table", None)
    if table is None:
        table = _state.table = {}
    return table


def statement(call) -> str:
    """``T.rocm.tile.apply(T.amdgcn["op"], operands..., scope="wave", params...)`` of the IR call."""
    opcode, operands, params = call.args
    parts = [f'T.amdgcn["{opcode.value}"]', *(one_line(x) for x in operands.fields)]
    scope = getattr(call.attrs, "scope", None) if call.attrs is not None else None
    if scope is not None:
        parts.append(f'scope="{scope.local_name.rsplit(".", 1)[-1]}"')
    for pair in params.fields if params is not None else ():
        name, value = pair.fields
        parts.append(f"{name.value}={value.value!r}".replace("'", '"') if hasattr(value, "value") else f"{name.value}={value}")
    return f"T.rocm.tile.apply({', '.join(parts)})"


def note(lowered, call, opcode: str) -> None:
    """Map the variables bound in ``lowered`` (a pattern's lowered statements) to ``call`` as written."""
    import tvm_ffi
    from tvm_tirx import ir

    lds = tuple(x.source.name for x in call.args[1].fields if isinstance(x, ir.TensorRegion)
                and isinstance(x.source, ir.Var) and str(getattr(x.source.ty, "scope", "")).startswith("shared"))
    found = Origin(statement(call), opcode, lds)
    table = _table()
    if len(table) >= LIMIT:
        for key in list(table)[: LIMIT // 2]:
            del table[key]
    tvm_ffi.structural_walk(lowered, [(ir.Bind, lambda b: table.__setitem__(b.var, found))])


def origin(var) -> Origin | None:
    return _table().get(var)


def forget() -> None:
    _table().clear()


@functools.cache
def _helper_texts() -> tuple[tuple[str, str], ...]:
    """(printed lowered form, as written) of ``T.rocm.lane_id()`` and ``T.rocm.wave_id()``."""
    from . import wave

    wave_id = _printed(wave.wave_id())  # ``workitem.id.x // 64``, which lowering prints ``>> 6``
    return ((wave_id, "T.rocm.wave_id()"), (wave_id.replace(" // 64,", " >> 6,"), "T.rocm.wave_id()"),
            (_printed(wave.lane_id()), "T.rocm.lane_id()"))


def _printed(node) -> str:
    lines = [ln for ln in str(node).splitlines() if not DECLARATION.match(ln)]
    return " ".join(" ".join(lines).split())


def one_line(node, limit: int | None = None) -> str:
    """``node`` as TVMScript on one line (see the module docstring), shortened to ``limit`` characters."""
    text = _printed(node)
    for lowered, written in _helper_texts():
        text = text.replace(lowered, written)
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
