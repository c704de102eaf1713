"""A tile option's own refusal (``gemm --stages / --block / --warps / --group-m / --ctas / --swap-ab``, the targets'
``config_from_options``; ``attention --block-q / --block-kv`` and the other config fields, ``cli.attention.config_of``)
is one usage line that starts with the option as typed, then the rule (``kernels.common.refused_options``): the
option of the refused operand where the rule names one (sm90's ``ContractError``), else every tile option given."""

import pytest

from tvm_cdna4.kernels.common import option, refused_options
from tvm_cdna4.kernels.sm90.gemm_target import _named, _tile_options

SM90 = ("gemm", "--target", "sm90", "--dtype", "bf16", "--out-dtype", "bf16", "-M", "512", "-N", "512", "-K", "512")
SM80 = ("gemm", "--target", "sm80", "-M", "512", "-N", "512", "-K", "512")
GFX950 = ("gemm", "--target", "gfx950", "-M", "64", "-N", "64", "-K", "128")
ATTENTION = ("attention", "--seq", "64", "--heads", "2", "--head-dim", "128", "--target")


@pytest.mark.parametrize("argv, first", [
    ((*SM90, "--stages", "40"), "error: --stages 40: operand stages: sm90 GEMM config stages: "),
    ((*SM90, "--warps", "3x1"), "error: --warps 3x1: operand consumers: "),
    ((*SM90, "--block", "96x64x64", "--warps", "2x1"), "error: --block 96x64x64: operand block_m: "),
    ((*SM90, "--block", "256x256x64", "--warps", "1x1"), "error: --block 256x256x64: operand block_m x block_n: "),
    ((*SM90, "--swap-ab", "--block", "128x512x64"), "error: --block 128x512x64: operand block_n: "),
    ((*SM90, "--stages", "40", "--raster", "n"), "error: --stages 40: operand stages: "),  # not the field's
    ((*SM80, "--stages", "1"), "error: --stages 1: stages must be at least 2"),
    ((*SM80, "--warps", "8x8"), "error: --warps 8x8: A tile 128x32 does not split over 2048 threads"),  # the plan's
    ((*SM80, "--block", "256x256x64", "--stages", "4"), "error: --block 256x256x64, --stages 4: 262144 B of shared"),
    ((*GFX950, "--block", "80x128x64"), "error: --block 80x128x64: block 80x128x64 does not tile 2 x 2 waves"),
    ((*GFX950, "--block", "16x16x32", "--mfma", "32x32"), "error: --block 16x16x32, --mfma 32x32: block 16x16x32 "),
    ((*GFX950, "--dtype", "mxfp8", "--block", "128x128x64"), "error: --block 128x128x64: MX GEMM: block 128x128x64 "),
    ((*ATTENTION, "sm90", "--block-kv", "7"), "error: --block-kv 7: operand block_kv: sm90 attention config "),
    ((*ATTENTION, "sm80", "--block-kv", "7"), "error: --block-kv 7: attention block_kv: whole 16-key MMA steps"),
    ((*ATTENTION, "gfx950", "--block-q", "48"), "error: --block-q 48: attention block_q: 32 query rows per wave"),
    ((*ATTENTION, "sm90", "--block-q", "64"),
     "error: --block-q 64: the sm90 config has no block_q (its query rows follow --consumers); its fields: "),
])
def test_a_tile_options_refusal_is_one_line_starting_with_the_option_as_typed(argv, first, cli):
    r = cli(*argv, "--emit", "config")
    assert (r.returncode, r.stdout, len(r.stderr.splitlines())) == (2, "", 1), r.stderr
    assert r.stderr.startswith(first), r.stderr


def test_the_options_a_refusal_names():
    tiles = _tile_options(block="128x256x64", warps=None, stages=None, group_m=None, ctas=0, swap_ab=True)
    assert tiles == {"block_m": "--block 128x256x64", "block_n": "--block 128x256x64", "ctas": "--ctas 0",
                     "swap_ab": "--swap-ab"}  # ctas 0 is given (one CTA per tile), swap_ab a switch
    assert _named("block_m x block_n", tiles) == ["--block 128x256x64"] * 2
    assert _named("group_m/ctas", tiles) == ["--ctas 0"] and _named("stages", tiles) == [] and _named(None, tiles) == []
    assert (option("epilogue_tile", 64), option("persistent", False), option("swap_ab", True)) == (
        "--epilogue-tile 64", "--no-persistent", "--swap-ab")
    err = refused_options(["--block 64x64x32", "--block 64x64x32", "--stages 9"], ValueError("rule\nsecond line"))
    assert str(err) == "--block 64x64x32, --stages 9: rule"  # one line, each option once
