"""The sm90 kernel options from the CLI: ``gemm --cluster-m / --residual-read / --tile-walk / --epilogue / --raster /
--epilogue-tile`` (``Sm90Config``) and ``attention --epilogue / --persistent`` (``Sm90AttentionConfig``): each the
cost model's config with that field replaced (``--emit config``), validated in the CUDA emulator, refused in one
line naming the flag on a target without the field or for a value the config's ``check`` refuses."""

import json

import attrs
import pytest

from tvm_cdna4.kernels.sm90 import attention_plan, gemm_plan

BF16 = ("--dtype", "bf16", "--out-dtype", "bf16")



def config(cli, *args, command="gemm"):
    r = cli(command, "--target", "sm90", *args, "--emit", "config")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["config"]


def refused(cli, *args):
    """The one stderr line of a usage error (exit status 2) of ``python -m tvm_cdna4 ARGS``."""
    r = cli(*args)
    assert r.returncode == 2 and not r.stdout, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


BIG = ("-M", "4096", "-N", "4096", "-K", "4096", *BF16)


@pytest.mark.parametrize("flags, field, value", [
    (("--cluster-m", "2"), "cluster_m", 2),
    (("--epilogue", "registers"), "epilogue", "registers"),
    (("--epilogue-tile", "64"), "epilogue_tile", 64),
    (("--residual", "--residual-read", "sliced"), "residual_read", "sliced"),
    (("--residual", "--residual-read", "prefetch"), "residual_read", "prefetch"),
    (("--raster", "n"), "raster", "n"),
])
def test_each_gemm_flag_replaces_its_field_of_the_cost_models_config(flags, field, value, cli):
    chosen = config(cli, *BIG, *[f for f in flags if f == "--residual"])
    assert chosen[field] != value
    got = config(cli, *BIG, *flags)
    assert got[field] == value
    moved = {"cluster_m": ("shift_last",)}.get(field, ())  # a cluster drops the planned shift (gemm_shift.allows)
    same = {k for k in chosen if k not in (field, "stages", *moved)}
    assert {k: got[k] for k in same} == {k: chosen[k] for k in same}  # only the field (and the ring's depth)
    assert not any(got[k] for k in moved)


def test_the_ring_is_replanned_for_the_staging_an_epilogue_flag_asks_for(cli):
    chosen = config(cli, *BIG)
    assert (chosen["block_n"], chosen["epilogue"], chosen["stages"]) == (256, "tma", 3)
    assert config(cli, *BIG, "--epilogue-tile", "64")["stages"] == 4  # docs/sm90_gemm.md: four stages, not three
    assert config(cli, *BIG, "--epilogue-tile", "64", "--stages", "2")["stages"] == 2  # --stages says it


def test_epilogue_with_the_tile_options(cli):
    got = config(cli, *BIG, "--block", "128x128x64", "--epilogue", "registers")
    assert (got["block_m"], got["block_n"], got["epilogue"]) == (128, 128, "registers")


def test_tile_walk_replaces_the_grouped_choice_of_the_bucket(cli):
    args = ("--groups", "100,0,40", "-N", "256", "-K", "128", *BF16)
    chosen = config(cli, *args)
    got = config(cli, *args, "--tile-walk", "gaps")
    assert (chosen["tile_walk"], got["tile_walk"]) == ("prefix", "gaps")
    assert {k: v for k, v in got.items() if k != "tile_walk"} == {k: v for k, v in chosen.items() if k != "tile_walk"}


def test_cluster_m_validates_in_the_cuda_emulator(cli):
    r = cli("gemm", "--target", "sm90", "-M", "33", "-N", "64", "-K", "64", "--dtype", "bf16", "--out-dtype", "f32",
            "--cluster-m", "2", "--validate")
    assert r.returncode == 0 and "CUDA emulator" in r.stdout and r.stdout.endswith("PASS\n"), r.stdout + r.stderr


def test_cluster_m_with_swap_ab_validates_in_the_cuda_emulator(cli):
    """The swapped kernel in clusters of two token tiles (the weights multicast): M = 100 in one 104-wide token tile,
    the pair's second wholly past M."""
    r = cli("gemm", "--target", "sm90", "-M", "100", "-N", "128", "-K", "128", "--dtype", "bf16", "--out-dtype", "f32",
            "--cluster-m", "2", "--swap-ab", "--validate")
    assert r.returncode == 0 and "CUDA emulator" in r.stdout and r.stdout.endswith("PASS\n"), r.stdout + r.stderr
    got = config(cli, "-M", "100", "-N", "128", "-K", "128", *BF16, "--cluster-m", "2", "--swap-ab")
    assert (got["swap_ab"], got["cluster_m"]) == (True, 2)


def test_residual_read_sliced_validates_in_the_cuda_emulator(cli):
    r = cli("gemm", "--target", "sm90", "-M", "40", "-N", "64", "-K", "64", *BF16, "--residual", "--epilogue", "tma",
            "--residual-read", "sliced", "--validate")
    assert r.returncode == 0 and "CUDA emulator" in r.stdout and r.stdout.endswith("PASS\n"), r.stdout + r.stderr


def test_residual_read_chunks_keeps_the_four_stages_and_validates_in_the_cuda_emulator(cli):
    got = config(cli, *BIG, "--residual", "--epilogue-tile", "64", "--residual-read", "chunks")
    assert (got["residual_read"], got["epilogue_tile"], got["stages"], got["block_n"]) == ("chunks", 64, 4, 256)
    r = cli("gemm", "--target", "sm90", "-M", "130", "-N", "200", "-K", "64", *BF16, "--residual", "--block",
            "128x128x64", "--epilogue", "tma", "--epilogue-tile", "64", "--residual-read", "chunks", "--validate")
    assert r.returncode == 0 and "CUDA emulator" in r.stdout and r.stdout.endswith("PASS\n"), r.stdout + r.stderr


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
@pytest.mark.parametrize("flag, value", [("--cluster-m", "2"), ("--residual-read", "tma"), ("--tile-walk", "prefix"),
                                         ("--epilogue", "tma"), ("--epilogue-tile", "64")])
def test_a_target_without_the_field_refuses_its_flag(target, flag, value, cli):
    line = refused(cli, "gemm", "--target", target, "-M", "64", "-N", "64", "-K", "64", flag, value, "--emit", "config")
    assert line.startswith(f"error: {flag} is an sm90 option"), line
    assert target in line


@pytest.mark.parametrize("flags, first", [
    (("--cluster-m", "3"), "--cluster-m 3: "),
    (("--cluster-m", "2", "--swap-ab", "--split-k", "2"), "--cluster-m 2: "),  # a cluster runs no K split
    (("--residual-read", "bogus"), "--residual-read bogus: "),
    (("--residual", "--residual-read", "sliced", "--epilogue", "registers"), "--residual-read sliced: "),
    (("--residual", "--residual-read", "chunks"), "--residual-read chunks: "),  # the whole tile staged: no chunk buffers
    (("--tile-walk", "prefix"), "--tile-walk prefix: "),  # a dense GEMM walks its gaps
    (("--tile-walk", "zigzag"), "--tile-walk zigzag: "),
    (("--epilogue", "smem"), "--epilogue smem: "),
    (("--epilogue-tile", "48"), "--epilogue-tile 48: "),
    (("--raster", "k"), "--raster k: "),
])
def test_a_value_the_config_refuses_is_one_line_naming_the_flag(flags, first, cli):
    line = refused(cli, "gemm", "--target", "sm90", *BIG, *flags, "--emit", "config")
    assert line.startswith(f"error: {first}"), line


def test_the_bucketed_modes_refuse_or_check_the_flags(cli):
    line = refused(cli, "gemm", "--target", "sm90", "--dynamic-m", "-M", "77", "-N", "256", "-K", "128",
                   "--cluster-m", "2", "--emit", "config")
    assert "--dynamic-m plans every M bucket" in line and "--cluster-m" in line
    line = refused(cli, "gemm", "--target", "sm90", "--groups", "100,0,40", "-N", "256", "-K", "128", *BF16,
                   "--cluster-m", "2", "--emit", "config")
    assert line.startswith("error: --cluster-m 2: ") and "grouped" in line, line
    line = refused(cli, "gemm", "--target", "sm90", "--groups", "3,0,4", "-N", "256", "-K", "128", *BF16,
                   "--tile-walk", "gaps", "--emit", "config")
    assert line.startswith("error: --tile-walk gaps: ") and "decode" in line, line


def test_the_cli_flags_are_the_fields_the_sm90_target_takes_by_name():
    from tvm_cdna4.cli.gemm import CONFIG_FIELDS
    from tvm_cdna4.kernels.sm90.gemm_target import FIELD_OPTIONS

    assert CONFIG_FIELDS is FIELD_OPTIONS  # one copy, kernels.sm90.gemm_fields (a leaf module)
    assert set(FIELD_OPTIONS) <= set(attrs.fields_dict(gemm_plan.Sm90Config))


def _subparser(command: str):
    from tvm_cdna4.cli import build_parser

    return next(a for a in build_parser()._actions if a.dest == "command").choices[command]


def _option_help(command: str, flag: str) -> str:
    """The help text of ``flag`` of ``python -m tvm_cdna4 COMMAND`` alone (not the whole page)."""
    return " ".join(next(a for a in _subparser(command)._actions if flag in a.option_strings).help.split())


def _names(text: str, value) -> bool:
    """Whether ``text`` names ``value`` as a word of its own (``n``, not the letter of another word)."""
    import re

    return re.search(rf"(?<![\w-]){re.escape(str(value))}(?![\w-])", text) is not None


@pytest.mark.parametrize("command, flag, values", [
    ("gemm", "--residual-read", gemm_plan.RESIDUAL_READS), ("gemm", "--tile-walk", gemm_plan.TILE_WALKS),
    ("gemm", "--epilogue", gemm_plan.EPILOGUES), ("gemm", "--cluster-m", gemm_plan.CLUSTER_MS),
    ("gemm", "--raster", gemm_plan.RASTERS), ("attention", "--epilogue", attention_plan.EPILOGUES),
])
def test_each_flags_own_help_names_every_value_of_its_field(command, flag, values):
    text = _option_help(command, flag)
    assert all(_names(text, v) for v in values), (flag, text)


def test_the_help_check_sees_a_value_missing_from_the_flags_own_help():
    # 'n' of the n raster is on every help page as a letter: only the flag's own help, as a word, counts
    assert not _names("which way: m (down the group's tile rows) (default: m)", "n")
    assert _names("m (down) or n (along)", "n") and not _names("tma_buffer", "tma")
    options = {s for a in _subparser("attention")._actions for s in a.option_strings}
    assert {"--persistent", "--no-persistent"} <= options


# ---------------------------------------------------------------------------------------------- attention

SMALL = ("--seq", "130", "--heads", "2", "--head-dim", "64")


def test_attention_epilogue_and_persistent_replace_their_fields(cli):
    summary = lambda *a: json.loads(cli("attention", "--target", "sm90", *SMALL, *a, "--emit", "config").stdout)  # noqa: E731
    chosen = summary()
    assert (chosen["config"]["persistent"], chosen["config"]["epilogue"]) == (False, "registers")
    got = summary("--epilogue", "tma_buffer", "--persistent")
    assert (got["config"]["epilogue"], got["config"]["persistent"], got["early_q_release"]) == ("tma_buffer", True, True)
    assert got["o_buffer"] is not None
    assert summary("--epilogue", "tma", "--persistent")["early_q_release"] is False  # Q's tile stages O
    assert summary("--persistent", "--no-persistent")["config"]["persistent"] is False
    same = {k for k in chosen["config"] if k not in ("epilogue", "persistent", "stages")}
    assert {k: got["config"][k] for k in same} == {k: chosen["config"][k] for k in same}


def test_attention_tma_buffer_replans_the_ring_where_o_needs_room(cli):
    args = ("--seq", "4096", "--heads", "2", "--head-dim", "128")
    chosen = config(cli, *args, command="attention")
    got = config(cli, *args, "--epilogue", "tma_buffer", command="attention")
    assert chosen["stages"] == 3 and got["stages"] == 2  # attention_plan.smem_for: no buffer beside 3 stages at D 128


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
@pytest.mark.parametrize("flags", [("--epilogue", "tma"), ("--persistent",), ("--no-persistent",)])
def test_attention_targets_without_the_field_refuse_the_flag(target, flags, cli):
    line = refused(cli, "attention", "--target", target, *SMALL, *flags, "--emit", "config")
    assert line.startswith(f"error: {' '.join(flags)}: the {target} config has no"), line  # the option as typed


def test_attention_bad_epilogue_is_one_line_naming_the_flag(cli):
    line = refused(cli, "attention", "--target", "sm90", *SMALL, "--epilogue", "smem", "--emit", "config")
    assert line.startswith("error: --epilogue smem: "), line
    line = refused(cli, "attention", "--target", "sm90", *SMALL, "--dtype", "fp8", "--head-dim", "128",
                   "--epilogue", "tma", "--emit", "config")
    assert line.startswith("error: --epilogue tma: ") and "fp8" in line, line


@pytest.mark.parametrize("flags", [("--epilogue", "tma"), ("--persistent",), ("--no-persistent",)])
def test_paged_decode_refuses_the_dense_sm90_config_flags(flags, cli):
    """The paged decode config has no epilogue or persistent field: the flag is refused, not ignored."""
    line = refused(cli, "attention", "--target", "sm90", "--kv-cache", "paged", "--context", "3,70", "--seq", "1",
                   "--heads", "2", "--kv-heads", "1", "--head-dim", "128", *flags, "--emit", "config")
    assert line.startswith("error: ") and flags[0] in line and "dense attention's" in line, line


def test_a_field_refused_by_another_operands_rule_is_one_line_naming_the_flag(cli):
    # the swapped kernel's rule (operand swap_ab) refuses the TMA epilogue: the flag that broke it is named
    line = refused(cli, "gemm", "--target", "sm90", *BIG, "--swap-ab", "--epilogue", "tma", "--emit", "config")
    assert line.startswith("error: --epilogue tma: ") and "swap_ab" in line and "registers" in line, line


def test_a_tile_options_own_refusal_does_not_blame_a_field(cli):
    r = cli("gemm", "--target", "sm90", *BIG, "--block", "128x128x64", "--stages", "40", "--raster", "n", "--emit",
            "config")
    assert r.returncode == 2 and r.stderr.startswith("error: --stages 40: operand stages: "), r.stderr
    assert "--raster" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
