"""``python -m tvm_cdna4 attention --kv-cache paged``: the plan as JSON with split_kv, the clean one-line
refusals (no GPU for --bench, options of the other cache), in-process like tests/cli/test_cli.py."""

import json

import pytest

from tvm_cdna4.cli import main


def run(capsys, *argv):
    code = main(["attention", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_emit_config_has_the_split(capsys):
    code, out, _ = run(capsys, "--target", "sm80", "--kv-cache", "paged", "--context", "4096,8192", "--seq", "1",
                       "--heads", "32", "--kv-heads", "8", "--emit", "config")
    record = json.loads(out)
    # partitions of 256 keys (4 warps x 4 tiles: the fill of 8 CTAs per SM would take fewer) over 8192
    assert code == 0 and record["split_kv"] == 32 and record["partition"] == 256 and record["ctas"] == 2 * 8 * 32
    assert record["context"] == 8192


@pytest.mark.parametrize("argv, message", [
    (("--seq", "4", "--page-size", "32", "--emit", "config"), "error: --page-size is for --kv-cache paged"),
    (("--seq", "4", "--context", "3", "--emit", "config"), "error: --context is for --kv-cache paged"),
    (("--target", "sm80", "--kv-cache", "paged", "--context", "40,x", "--seq", "1", "--emit", "config"),
     "error: --context: expected comma-separated integers, found '40,x'"),
    (("--target", "gfx950", "--kv-cache", "paged", "--context", "40", "--seq", "1", "--emit", "cuda"),
     "error: --emit cuda is sm80's; paged decode on gfx950 takes --emit asm|tir|config"),
    (("--target", "sm80", "--kv-cache", "paged", "--context", "40", "--seq", "9", "--emit", "config"),
     "error: operand queries:"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_bench_without_a_gpu_refuses_cleanly(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU message")
    code, _, err = run(capsys, "--target", "sm80", "--kv-cache", "paged", "--context", "40", "--seq", "1", "--bench")
    assert code == 2 and err.startswith("error: --bench needs an NVIDIA GPU"), err


@pytest.mark.slow  # ~3 s of emulation; tests/kernels/sm90/test_sm90_paged_decode.py validates the kernels
def test_sm90_validates_in_the_emulator(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the CUDA emulator's validation (a GPU validates on itself)")
    code, out, _ = run(capsys, "--target", "sm90", "--kv-cache", "paged", "--context", "3,20", "--seq", "1",
                       "--heads", "2", "--kv-heads", "1", "--head-dim", "64", "--validate")
    assert code == 0 and out.startswith("validated sm90 paged decode B=2") and "CUDA emulator" in out, out
    assert out.strip().endswith("PASS")


def test_sm90_plans_the_producer_warp(capsys):
    code, out, _ = run(capsys, "--target", "sm90", "--kv-cache", "paged", "--context", "4096,8192", "--seq", "1",
                       "--heads", "32", "--kv-heads", "8", "--emit", "config")
    record = json.loads(out)
    assert code == 0 and record["target"] == "sm90" and record["block_threads"] == 32 * 5 and record["split_kv"] == 32


def test_sm90_plans_dense_attention_too(capsys):
    # the sm90 row serves both families (issue 38's dense attention beside paged decode)
    code, out, _ = run(capsys, "--target", "sm90", "--seq", "256", "--emit", "config")
    assert code == 0 and json.loads(out)["target"] == "sm90", out
