"""Lane-map figures: what they show is the catalog's maps, docs/figures is current, drawing is
deterministic, and ``python -m tvm_cdna4 draw`` (in-process)."""

import sys

import numpy as np
import pytest

from tvm_cdna4 import docs_gen, figures
from tvm_cdna4.cli import main
from tvm_cdna4.isa import CATALOG, DS_READ_TR_OPS, MFMA_OPS, lanes


def _cells(panel):
    """(block, row, col, colour, top, bottom) of every cell."""
    b, r, c = np.indices(panel.colour.shape)
    return b.ravel(), r.ravel(), c.ravel(), panel.colour.ravel(), panel.top.ravel(), panel.bottom.ravel()


@pytest.mark.parametrize("op", MFMA_OPS, ids=lambda op: op.name)
def test_mfma_panels_are_the_inverse_lane_maps(op):
    # every cell is filled, and by the lane and element the inverse maps name for its coordinates
    b_lane = lambda op, block, k, col: lanes.b_lane(op, block, col, k)  # noqa: E731 - the B panel is B[k, col]
    for panel, inverse in zip(figures.mfma_panels(op), (lanes.a_lane, b_lane, lanes.acc_lane)):
        block, row, col, colour, lane, elem = _cells(panel)
        assert (colour == lane).all() and (lane != figures.EMPTY).all(), panel.title
        want_lane, want_elem = inverse(op, block, row, col)
        np.testing.assert_array_equal(lane, want_lane, err_msg=panel.title)
        np.testing.assert_array_equal(elem, want_elem, err_msg=panel.title)


def test_a_single_cell_of_each_panel():
    op = CATALOG["mfma_f32_16x16x32_f16"]
    a, b, acc = figures.mfma_panels(op)
    assert (a.top[0, 5, 10], a.bottom[0, 5, 10]) == (21, 2)  # k 10: second group of 16 lanes, element 2
    assert (b.top[0, 10, 5], b.bottom[0, 10, 5]) == (21, 2)
    assert (acc.top[0, 6, 3], acc.bottom[0, 6, 3]) == (19, 2)  # rows 4-7 in lanes 16-31
    four = figures.mfma_panels(CATALOG["mfma_f32_4x4x4f16"])[0]
    assert four.colour.shape == (16, 4, 4) and four.block_labels[15] == "block 15" and four.top[15, 3, 2] == 63


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_tr_panels_are_the_provider_map_and_k_split(op):
    provider, split = figures.tr_panels(op)
    group, elem, col, colour, src, chunk = _cells(provider)
    lane = 16 * group + col
    back_lane, back_elem = lanes.tr_consumer(op, src, chunk)
    np.testing.assert_array_equal(back_lane, lane)
    np.testing.assert_array_equal(back_elem, elem)
    assert provider.first_col == (0, 16, 32, 48)
    # the K split: call c covers the K ranges of the seed table op.k_split
    _, k, _, call, _, _ = _cells(split)
    for c, ranges in enumerate(op.k_split):
        assert set(k[call == c].tolist()) == {x for lo, hi in ranges for x in range(lo, hi + 1)}


@pytest.mark.skipif(not docs_gen.FIGURES.exists(), reason="not a source checkout")
def test_committed_figures_are_current():
    assert figures.stale(docs_gen.FIGURES) == [], "run: python -m tvm_cdna4.docs_gen"
    assert len(list(docs_gen.FIGURES.glob("mfma*.svg"))) + len(list(docs_gen.FIGURES.glob("ds_read_tr*.svg"))) == 44


@pytest.mark.skipif(not docs_gen.FIGURES.exists(), reason="not a source checkout")
def test_a_changed_lane_map_makes_its_figures_stale(monkeypatch):
    owner = lanes.a_owner

    def rows_reversed(op, lane, elem):
        block, row, k = owner(op, lane, elem)
        return block, op.m - 1 - row, k

    monkeypatch.setattr(lanes, "a_owner", rows_reversed)
    assert set(figures.stale(docs_gen.FIGURES)) == {op.name for op in MFMA_OPS}  # not the acc/tr ones
    monkeypatch.undo()
    owner_16, inverse_16 = lanes.ACC_LAYOUTS["16x16"]
    rotated = (lambda lane, reg, blocks: owner_16(lane, (reg + 1) % 4 + reg // 4 * 4, blocks), inverse_16)
    monkeypatch.setitem(lanes.ACC_LAYOUTS, "16x16", rotated)
    uses_16x16 = {op.name for op in MFMA_OPS if op.acc_layout == "16x16"}
    assert set(figures.stale(docs_gen.FIGURES)) == {"acc_16x16"} | uses_16x16


def _svg(tmp_path, name, file):
    return figures.render(name, tmp_path / file).read_bytes()


def test_render_is_deterministic_and_names_its_data(tmp_path):
    pytest.importorskip("matplotlib")
    first, again = _svg(tmp_path, "acc_4x4_f64", "a.svg"), _svg(tmp_path, "acc_4x4_f64", "b.svg")
    assert first == again
    text = first.decode()
    assert f"lane-data sha256 {figures.digest('acc_4x4_f64')}" in text and "<dc:date>" not in text
    assert ">63:0</text>" in text and "block 3" in text  # lane 63, register 0 is in the last block


def test_draw_command(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "tr.png"
    assert main(["draw", "ds_read_b64_tr_b8", "-o", str(out)]) == 0  # a mnemonic is a name too
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and capsys.readouterr().out.strip() == str(out)
    assert main(["draw", "mfma_f32_16x16x32f16"]) == 2
    assert "unknown CDNA4 opcode 'mfma_f32_16x16x32f16'; did you mean" in capsys.readouterr().err
    assert main(["draw", "mfma_f32_16x16x32_f16", "-o", str(tmp_path / "x.pdf")]) == 2
    assert "error: a figure is written as .svg or .png, not 'x.pdf'" in capsys.readouterr().err


def test_draw_without_matplotlib_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["draw", "mfma_f32_16x16x32_f16"]) == 2
    assert capsys.readouterr().err == "error: drawing lane maps needs matplotlib: pip install 'tvm-cdna4[docs]'\n"
