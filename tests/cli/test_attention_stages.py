"""``attention --stages N``: the ring depth of the attention's config (sm90 ``Sm90AttentionConfig.stages``, sm80
``Sm80AttentionConfig.stages``) replacing the cost model's, as ``--block-kv`` / ``--epilogue`` / ``--persistent``
replace theirs (``cli.attention.config_of``); refused in one line naming the flag where it cannot run: a value the
planner refuses, a target whose config has no ring depth (gfx950), paged decode."""

import json

import pytest

SMALL = ("--seq", "130", "--heads", "2", "--kv-heads", "1", "--head-dim", "64")
D128 = ("--seq", "4096", "--heads", "2", "--head-dim", "128")  # the cost model's 128-key tiles, 3 stages


def config(cli, target, *args):
    r = cli("attention", "--target", target, *args, "--emit", "config")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["config"]


def refused(cli, *args):
    """The one stderr line of a usage error (exit status 2)."""
    r = cli("attention", *args)
    assert (r.returncode, r.stdout, len(r.stderr.splitlines())) == (2, "", 1), r.stderr
    return r.stderr.rstrip("\n")


@pytest.mark.parametrize("target, chosen, given", [("sm90", 3, 2), ("sm80", 3, 4)])
def test_stages_replaces_the_cost_models_ring_depth_and_nothing_else(target, chosen, given, cli):
    default = config(cli, target, *SMALL)
    got = config(cli, target, *SMALL, "--stages", str(given))
    assert (default["stages"], got["stages"]) == (chosen, given)
    assert {k: v for k, v in got.items() if k != "stages"} == {k: v for k, v in default.items() if k != "stages"}


def test_stages_stays_as_given_beside_an_epilogue(cli):
    # --epilogue alone re-plans the ring to fit O's buffer (3 -> 2 at D 128); with --stages the flag says it
    assert config(cli, "sm90", *D128)["stages"] == 3
    assert config(cli, "sm90", *D128, "--epilogue", "tma_buffer")["stages"] == 2
    got = config(cli, "sm90", *D128, "--epilogue", "tma_buffer", "--stages", "1")
    assert (got["stages"], got["epilogue"]) == (1, "tma_buffer")


def test_a_two_stage_sm90_attention_validates_in_the_cuda_emulator(cli):
    # 64-key tiles: 130 keys are 3 tiles, so the 2-stage ring wraps (stage 0 reused, phase flipped)
    r = cli("attention", "--target", "sm90", *SMALL, "--causal", "--block-kv", "64", "--stages", "2", "--validate")
    assert r.returncode == 0 and "CUDA emulator" in r.stdout and r.stdout.rstrip().endswith("PASS"), r.stdout + r.stderr


@pytest.mark.parametrize("args, first", [
    (("--target", "sm90", *SMALL, "--stages", "0"),
     "error: --stages 0: operand stages: sm90 attention config stages: at least one (K, V) stage; expected >= 1, "
     "found 0"),
    (("--target", "sm90", *D128, "--epilogue", "tma_buffer", "--stages", "3"),
     "error: --stages 3: operand stages: sm90 attention config stages: Q, the (K, V) stages and O's buffer "
     "(epilogue='tma_buffer') within the SM's shared memory; expected <= 232448 bytes: stages <= 2 of 128 keys "
     "with epilogue='tma_buffer', found 263168 bytes (3 stages)"),
    (("--target", "sm80", *SMALL, "--stages", "1"),
     "error: --stages 1: attention stages: expected 2 to 4 K / V buffers, found 1"),
    (("--target", "sm80", *SMALL, "--stages", "2"),  # the cost model's overlap: another field's rule, the flag named
     "error: --stages 2: attention overlap: tile j + 1's K is read while tile j's V is, and tile j + 2 loads: "
     "expected stages >= 3, found 2"),
    (("--target", "gfx950", *SMALL, "--stages", "2"), "error: --stages 2: the gfx950 config has no stages; its "
     "fields: "),
    (("--target", "sm80", "--kv-cache", "paged", "--context", "3,70", "--seq", "1", "--heads", "2", "--stages", "2"),
     "error: --stages 2: the dense attention's ring depth; paged decode's (sm80 PagedDecodeConfig.stages) is its "
     "planner's"),
])
def test_a_stages_that_cannot_run_is_one_line_naming_the_flag(args, first, cli):
    line = refused(cli, *args, "--emit", "config")
    assert line.startswith(first), line


def test_help_lists_stages(cli):
    r = cli("attention", "--help")
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "--stages STAGES" in text, text
    assert "Sm90AttentionConfig.stages" in text and "Sm80AttentionConfig.stages" in text, text
