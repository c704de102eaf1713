"""Lane-map figures: ``python -m tvm_cdna4 draw NAME [-o FILE.svg|png]``.

An MFMA figure has three panels, the A (M x K), B (K x N) and accumulator (M x N) tiles, each
block of a multi-block opcode beside the others; every cell is coloured by the lane that holds it
and reads ``lane:element`` (the accumulator: ``lane:register element``). A ``ds_read_tr`` figure
shows its provider map (at each result element and lane: the lane whose address supplies it,
coloured by that lane, ``:`` the element of that lane's chunk) and its K split (the B tile of the
MFMA a pair of calls fills, coloured by call, each cell ``lane:element`` of that call's result).

Everything drawn comes from the catalog's lane maps through the tables of ``isa.export``; no lane
formula is written here. ``panels()`` (no matplotlib needed) is the data a figure shows and
``digest()`` its sha256, written into every file's metadata: ``stale()`` compares the files of a
directory with the catalog, so a changed lane map makes the committed figures fail their test.
Rendering needs matplotlib (``pip install 'tvm-cdna4[docs]'``) and is byte-for-byte deterministic
(fixed ``svg.hashsalt``, no dates, text as SVG text).
"""

from __future__ import annotations

import colorsys
import hashlib
import json
import re
from pathlib import Path

import attrs
import numpy as np

from .isa import CATALOG, WAVE_SIZE, DsReadTrOp, MfmaOp, export, lanes

FORMAT_VERSION = 1  # part of every digest: bump it when a change of drawing should regenerate the files
EMPTY = -1  # a cell no lane holds (a broken lane map; drawn blank)
# The seed's five accumulator layout tables, each as drawn by one opcode that uses it.
SEED_ACC_FIGURES = {
    "acc_32x32": "mfma_f32_32x32x16_f16",
    "acc_16x16": "mfma_f32_16x16x32_f16",
    "acc_4x4": "mfma_f32_4x4x4f16",
    "acc_16x16_f64": "mfma_f64_16x16x4f64",
    "acc_4x4_f64": "mfma_f64_4x4x4f64",
}
SEED_TR_FIGURES = {"k_split_tr16": "ds_read_tr16_b64_v4f16"}
_DIGEST_RE = re.compile(r"lane-data sha256 ([0-9a-f]{64})")


@attrs.frozen(eq=False)
class Panel:
    """One tile of a figure: ``blocks`` grids of ``rows x cols`` cells.

    ``colour[b, r, c]`` is the lane (``colour_by="lane"``) or the call (``"call"``) a cell is
    coloured by, EMPTY for none; ``top`` and ``bottom`` are the two numbers written in the cell
    as ``top:bottom``; ``block_labels`` name the blocks (none for a single block) and ``first_col``
    numbers each block's first column (none: every block counts from 0).
    """

    title: str
    row_axis: str
    col_axis: str
    block_labels: tuple[str, ...]
    colour: np.ndarray
    top: np.ndarray
    bottom: np.ndarray
    colour_by: str = "lane"
    first_col: tuple[int, ...] = ()

    def data(self) -> list:
        """Plain data for the digest: everything the panel shows."""
        return [self.title, self.row_axis, self.col_axis, list(self.block_labels), self.colour_by, list(self.first_col),
                self.colour.tolist(), self.top.tolist(), self.bottom.tolist()]


def _scatter(shape, table, at, value_columns):
    """Grids of ``shape`` filled from table rows: cell ``row[at]`` gets ``row[value_columns]``."""
    rows = np.asarray(table)
    grids = [np.full(shape, EMPTY, dtype=np.int64) for _ in value_columns]
    index = tuple(rows[:, i] for i in at)
    for grid, column in zip(grids, value_columns):
        grid[index] = rows[:, column]
    return grids


def mfma_panels(op: MfmaOp) -> list[Panel]:
    """A, B and accumulator owner maps (``isa.export.mfma_lanes``: rows lane, elem, block, i, j)."""
    tables = export.mfma_lanes(op)
    out = []
    for key, title, rows, cols, row_axis, col_axis in (
        ("a", f"A ({op.m} x {op.k}, {op.a_format}); cell: lane:element", op.m, op.k, "row m", "k"),
        ("b", f"B ({op.k} x {op.n}, {op.b_format}); cell: lane:element", op.k, op.n, "k", "column n"),
        ("acc", f"accumulator ({op.m} x {op.n}, {op.acc_format}); cell: lane:register element", op.m, op.n,
         "row m", "column n"),
    ):
        lane, elem = _scatter((op.blocks, rows, cols), tables[key], (2, 3, 4), (0, 1))
        out.append(Panel(title, row_axis, col_axis, _block_labels(op.blocks), lane, lane, elem))
    return out


def tr_panels(op: DsReadTrOp) -> list[Panel]:
    """Provider map (``isa.export.tr_lanes``) per 16-lane group, and the K split of the pair of calls
    over the B operand of ``op.k_split_mfma`` (call ``c`` result element ``i`` is B element ``c*n + i``)."""
    group = lanes.TR_GROUP
    rows = np.asarray(export.tr_lanes(op)["provider"])  # lane, elem, source lane, chunk element
    shaped = np.stack([rows[:, 0] // group, rows[:, 1], rows[:, 0] % group, rows[:, 2], rows[:, 3]], axis=1)
    src, chunk = _scatter((WAVE_SIZE // group, op.elements, group), shaped, (0, 1, 2), (3, 4))
    starts = tuple(range(0, WAVE_SIZE, group))
    provider = Panel(f"provider map ({op.elements} x {op.element_bits}-bit elements per lane); cell at (result "
                     f"element, result lane): lane whose address supplies it:element of that lane's chunk",
                     "result element", "result lane", tuple(f"lanes {g}-{g + group - 1}" for g in starts),
                     src, src, chunk, first_col=starts)
    mfma = CATALOG[op.k_split_mfma]
    b = np.asarray(export.mfma_lanes(mfma)["b"])  # lane, B element, block, k, col
    call, elem = lanes.tr_call_of(op, b[:, 1])
    split = np.stack([b[:, 2], b[:, 3], b[:, 4], call, b[:, 0], elem], axis=1)
    calls, lane, res = _scatter((mfma.blocks, mfma.k, mfma.n), split, (0, 1, 2), (3, 4, 5))
    k_split = Panel(f"K split: the B operand of {mfma.name} ({mfma.k} x {mfma.n}) from a pair of calls; "
                    f"colour: call 1 (blue), call 2 (orange); cell: lane:element of the call's result",
                    "k", "column n", _block_labels(mfma.blocks), calls, lane, res, colour_by="call")
    return [provider, k_split]


def _block_labels(blocks: int) -> tuple[str, ...]:
    return tuple(f"block {b}" for b in range(blocks)) if blocks > 1 else ()


def panels(op: MfmaOp | DsReadTrOp) -> list[Panel]:
    """What the figure of ``op`` shows."""
    return tr_panels(op) if isinstance(op, DsReadTrOp) else mfma_panels(op)


def figure_panels(name: str) -> tuple[str, list[Panel]]:
    """(title, panels) of a figure: a catalog opcode, or a seed figure (``SEED_ACC_FIGURES``,
    ``SEED_TR_FIGURES``: the accumulator panel / K split of the opcode drawn for it)."""
    if name in SEED_ACC_FIGURES:
        op = CATALOG[SEED_ACC_FIGURES[name]]
        return f"seed accumulator table {op.acc_layout} (drawn for {op.name})", [mfma_panels(op)[2]]
    if name in SEED_TR_FIGURES:
        op = CATALOG[SEED_TR_FIGURES[name]]
        split = ", ".join(",".join(f"{lo}-{hi}" for lo, hi in call) for call in op.k_split)
        return f"seed K split of {op.mnemonic} (call 1, call 2: K {split})", [tr_panels(op)[1]]
    from .isa import lookup

    op = lookup(name)
    return f"{op.name}  ({op.mnemonic}, {op.kind})", panels(op)


def all_figures() -> list[str]:
    """Every figure ``draw --all`` writes: one per opcode of the catalog, then the seed figures."""
    return [*CATALOG, *SEED_ACC_FIGURES, *SEED_TR_FIGURES]


def digest(name: str) -> str:
    """sha256 of what the figure ``name`` shows (its title and panels) and of ``FORMAT_VERSION``."""
    title, shown = figure_panels(name)
    text = json.dumps([FORMAT_VERSION, title, [p.data() for p in shown]], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def stale(directory: str | Path) -> list[str]:
    """Figures of ``directory`` (``NAME.svg``) that are missing, out of date or not in the catalog."""
    directory = Path(directory)
    expected = all_figures()
    out = []
    for name in expected:
        path = directory / f"{name}.svg"
        found = _DIGEST_RE.search(path.read_text()) if path.exists() else None
        if found is None or found.group(1) != digest(name):
            out.append(name)
    extra = sorted(p.stem for p in directory.glob("*.svg") if p.stem not in expected)
    return out + extra


# --------------------------------------------------------------------------------------------
# Rendering (matplotlib). Lengths in inches.

CELL = 0.34  # a cell's side
FONT = 6  # points, the cell text
TITLE, BLOCK_LABEL, BELOW, LEFT, HEAD = 0.3, 0.18, 0.6, 0.55, 0.5  # panel title, block names, ticks +
# axis label + gap under a panel, left margin, figure title
CALL_COLOURS = ((0.62, 0.79, 0.95), (0.98, 0.75, 0.52))


def lane_colour(lane: int) -> tuple[float, float, float]:
    """A colour per lane, 64 told apart: the hue steps through the 16 lanes of a group, the lightness
    through the 4 groups (lanes 0-15 darkest, written in white)."""
    lightness = (0.45, 0.6, 0.74, 0.87)[lane // 16 % 4]
    return colorsys.hls_to_rgb((lane % 16) / 16, lightness, 0.75)


def _gap(panel: Panel) -> int:
    """Empty columns between blocks."""
    return 1 if panel.block_labels else 0


def _block_x(panel: Panel, b: int) -> int:
    return b * (panel.colour.shape[2] + _gap(panel))


def _width(panel: Panel) -> int:
    blocks, _, cols = panel.colour.shape
    return blocks * cols + (blocks - 1) * _gap(panel)


def _rgba(panel: Panel) -> np.ndarray:
    """(rows, width, 4) image of a panel: the cell colours, the gaps between blocks transparent."""
    palette = CALL_COLOURS if panel.colour_by == "call" else [lane_colour(lane) for lane in range(WAVE_SIZE)]
    palette = np.array([(*rgb, 1.0) for rgb in palette])
    blocks, rows, cols = panel.colour.shape
    image = np.zeros((rows, _width(panel), 4))
    for b in range(blocks):
        grid, x0 = panel.colour[b], _block_x(panel, b)
        image[:, x0 : x0 + cols][grid != EMPTY] = palette[grid[grid != EMPTY]]
    return image


def _panel_height(panel: Panel) -> float:
    return TITLE + (BLOCK_LABEL if panel.block_labels else 0) + panel.colour.shape[1] * CELL + BELOW


def _require_matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("drawing lane maps needs matplotlib: pip install 'tvm-cdna4[docs]'") from None
    return matplotlib


def render(name: str, path: str | Path) -> Path:
    """Draw figure ``name`` (an opcode or a seed figure) to ``path`` (.svg or .png), deterministically."""
    matplotlib = _require_matplotlib()
    from matplotlib.figure import Figure

    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("svg", "png"):
        raise ValueError(f"a figure is written as .svg or .png, not {path.name!r}")
    title, shown = figure_panels(name)
    width = max(6.0, LEFT + max(_width(p) for p in shown) * CELL + 0.2)
    height = HEAD + sum(_panel_height(p) for p in shown)
    rc = {"svg.hashsalt": "tvm_cdna4", "svg.fonttype": "none", "font.family": "DejaVu Sans"}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(width, height))
        fig.text(0.1 / width, 1 - 0.1 / height, title, ha="left", va="top", fontsize=12, fontweight="bold")
        top = height - HEAD  # inches from the bottom
        for panel in shown:
            fig.text(LEFT / width, (top - 0.05) / height, panel.title, ha="left", va="top", fontsize=9)
            rows = panel.colour.shape[1]
            axes_top = top - TITLE - (BLOCK_LABEL if panel.block_labels else 0)
            box = (LEFT, axes_top - rows * CELL, _width(panel) * CELL, rows * CELL)
            _draw_panel(fig.add_axes((box[0] / width, box[1] / height, box[2] / width, box[3] / height)), panel)
            top -= _panel_height(panel)
        metadata = {"Title": name, "Description": f"lane-data sha256 {digest(name)}"}
        metadata.update({"Date": None, "Creator": "tvm_cdna4 draw"} if fmt == "svg" else {"Software": "tvm_cdna4 draw"})
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=fmt, metadata=metadata, dpi=120)
    if fmt == "svg":
        path.write_text(compact_svg(path.read_text()))
    return path


_SVG_TEXT = re.compile(r'<g id="text_\d+">\s*<text style="([^"]*)" x="([-\d.]+)" y="([-\d.]+)" '
                       r'transform="rotate\(-0 [-\d.]+ [-\d.]+\)">([^<]*)</text>\s*</g>')


def compact_svg(svg: str) -> str:
    """matplotlib's SVG spends ~160 bytes on each cell label (an id'd group, an inline style, a null
    rotation); name each distinct style once in a ``<style>`` block and drop the rest, so the opcodes'
    figures stay a few MB. The picture is unchanged."""
    classes: dict[str, str] = {}

    def label(match):
        style, x, y, text = match.groups()
        name = classes.setdefault(style, f"t{len(classes)}")
        return f'<text class="{name}" x="{float(x):.2f}" y="{float(y):.2f}">{text}</text>'

    body = _SVG_TEXT.sub(label, svg)
    css = "".join(f".{name}{{{style}}}" for style, name in classes.items())
    return body.replace("<defs>", f"<defs><style>{css}</style>", 1) if css else body


def _cell_borders(x0: int, rows: int, cols: int):
    """One polyline (segments split by NaN) along every cell border of a block starting at column x0."""
    xs, ys = [], []
    for x in range(cols + 1):
        xs += [x0 + x - 0.5, x0 + x - 0.5, np.nan]
        ys += [-0.5, rows - 0.5, np.nan]
    for y in range(rows + 1):
        xs += [x0 - 0.5, x0 + cols - 0.5, np.nan]
        ys += [y - 0.5, y - 0.5, np.nan]
    return xs, ys


def _draw_panel(ax, panel: Panel) -> None:
    """The cells of every block, their borders and text, block names above, indices along the axes."""
    blocks, rows, cols = panel.colour.shape
    ax.imshow(_rgba(panel), aspect="auto", interpolation="none", extent=(-0.5, _width(panel) - 0.5, rows - 0.5, -0.5))
    ax.set_ylabel(panel.row_axis, fontsize=7)
    ax.set_xlabel(panel.col_axis, fontsize=7)
    ax.set_xticks([_block_x(panel, b) + c for b in range(blocks) for c in range(cols)],
                  [str(start + c) for start in panel.first_col or (0,) * blocks for c in range(cols)], fontsize=5)
    ax.set_yticks(range(rows), [str(r) for r in range(rows)], fontsize=5)
    ax.tick_params(length=0, pad=2)
    for side in ax.spines.values():
        side.set_visible(False)
    for b in range(blocks):
        x0 = _block_x(panel, b)
        if panel.block_labels:
            ax.text(x0 + (cols - 1) / 2, -0.7, panel.block_labels[b], ha="center", va="bottom", fontsize=7)
        ax.plot(*_cell_borders(x0, rows, cols), color="white", linewidth=0.5)
        for r in range(rows):
            for c in range(cols):
                if panel.colour[b, r, c] != EMPTY:
                    dark = panel.colour_by == "lane" and panel.colour[b, r, c] < 16
                    ax.text(x0 + c, r, f"{panel.top[b, r, c]}:{panel.bottom[b, r, c]}", ha="center", va="center",
                            fontsize=FONT, color="white" if dark else "black")
