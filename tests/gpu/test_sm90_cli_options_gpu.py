"""The sm90 config fields from the CLI on a Hopper GPU (docs/sm90_gemm.md "From the CLI", docs/sm90_attention.md):
``gemm --cluster-m 2`` / ``--residual-read sliced`` / ``--epilogue-tile 64`` and ``attention --epilogue tma_buffer
--persistent`` / ``--stages N`` validated on the card (``--validate`` through the GPU runner, the config the flags give) and timed
(``--bench``). Skipped without such a GPU."""

import pytest

from tvm_cdna4.cli import main

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

BF16 = ["--dtype", "bf16", "--out-dtype", "bf16"]


@pytest.mark.parametrize("flags", [
    ["-M", "333", "-N", "1000", "-K", "520", *BF16, "--cluster-m", "2"],
    ["-M", "333", "-N", "1000", "-K", "520", *BF16, "--residual", "--epilogue", "tma", "--residual-read", "sliced"],
    # the tile given: the planner's width here (104 since the wave widths) takes no 64-column staging
    ["-M", "1000", "-N", "776", "-K", "4104", *BF16, "--block", "128x128x64", "--epilogue", "tma", "--epilogue-tile", "64"],
    ["--groups", "100,0,300,77", "-N", "1000", "-K", "520", *BF16, "--tile-walk", "gaps"],
])
def test_gemm_fields_validate_and_bench_on_the_gpu(flags, capsys):
    assert main(["gemm", "--target", "sm90", *flags, "--validate", "--bench"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "TFLOP/s" in out and "CUDA emulator" not in out, out


@pytest.mark.parametrize("flags", [
    ["--epilogue", "tma_buffer", "--persistent"],
    ["--stages", "2"],  # the cost model's 3 at D 128 (attention_cost.choose): a ring it does not pick
    ["--block-kv", "64", "--stages", "4", "--causal"],
])
def test_attention_fields_validate_and_bench_on_the_gpu(flags, capsys):
    args = ["attention", "--target", "sm90", "--seq", "777", "--heads", "4", "--kv-heads", "2", "--head-dim", "128",
            *flags]
    assert main([*args, "--validate", "--bench"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "TFLOP/s" in out and "CUDA emulator" not in out, out
