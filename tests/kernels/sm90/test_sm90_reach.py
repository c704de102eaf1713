"""The models beside the RESULTS three in ``benchmarks/torch_gemm.py`` (``MODELS``, ``DEFAULT_MODELS``, ``--models all``)
and ``benchmarks/sm90_reach.py``: where the dynamic-M switches move the torch op's bucket plans (CPU, the H100's model)."""

from __future__ import annotations

import pytest
from benchmark_modules import benchmark_module

from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.sm90 import gemm_dynamic, gemm_plan


def test_the_default_models_are_the_three_and_all_names_every_model():
    tg = benchmark_module("torch_gemm")
    assert tg.DEFAULT_MODELS == ("qwen2.5-7b", "gemma-2-9b", "phi-3-medium")
    assert tg.model_names("all") == list(tg.MODELS) and len(tg.MODELS) == 6
    assert tg.model_names("qwen2.5-14b,llama-3.2-3b") == ["qwen2.5-14b", "llama-3.2-3b"]
    with pytest.raises(SystemExit, match=r"--models: 'all' or names of .*found llama-3-8b"):
        tg.model_names("qwen2.5-7b,llama-3-8b")


def test_the_new_models_projections_are_their_configs():
    tg = benchmark_module("torch_gemm")
    # Hugging Face config.json: Llama-3.2-3B 3072 hidden, 24 heads / 8 kv of 128, 8192 inter; Qwen2.5-14B 5120,
    # 40 / 8 of 128, 13824; Qwen2.5-1.5B 1536, 12 / 2 of 128, 8960
    assert tg.projections("llama-3.2-3b") == [("qkv", 5120, 3072), ("o", 3072, 3072), ("gate_up", 16384, 3072),
                                              ("down", 3072, 8192)]
    assert tg.projections("qwen2.5-14b") == [("qkv", 7168, 5120), ("o", 5120, 5120), ("gate_up", 27648, 5120),
                                             ("down", 5120, 13824)]
    assert tg.projections("qwen2.5-1.5b") == [("qkv", 2048, 1536), ("o", 1536, 1536), ("gate_up", 17920, 1536),
                                              ("down", 1536, 8960)]


def test_the_fine_cuts_reach_past_384_on_qwen_1_5b_down():
    # FINE_CUTS (on) cuts Qwen2.5-1.5B down (N 1536, K 8960) at 257..320, 641..704 and 769..832 on the H100's model
    reach, tg = benchmark_module("sm90_reach"), benchmark_module("torch_gemm")
    before = tg.switch_values()
    (row,) = reach.reach(["qwen2.5-1.5b"], ["fine_cuts"], devices.DEVICES["H100"])[3:]
    assert tg.switch_values() == before  # every flag as it was: SHIFT_TMA's HALF too, not "on" (stop 56)
    assert (row["proj"], row["off"], row["on"]) == ("down", 37, 40)  # 3 of them narrow swapped parts (WEIGH_SWAP_NARROW)
    assert [(lo, hi) for lo, hi, _, _ in row["ranges"]] == [(257, 320), (641, 704), (769, 832)]
    assert [(c.block_m, c.block_n, c.split_k) for c in (reach.choice(p) for _, _, _, p in row["ranges"])] == [
        (64, 128, 2), (64, 128, 1), (64, 160, 1)]
    assert gemm_dynamic.FINE_CUTS is True  # the package's setting restored


@pytest.mark.slow  # TRIM_LOADS timed and left off (stop 52)
def test_trim_loads_alone_changes_no_choice_only_the_flag():
    reach = benchmark_module("sm90_reach")
    rows = reach.reach(["qwen2.5-1.5b"], ["trim_loads"], devices.DEVICES["H100"])
    assert all(not r["ranges"] for r in rows)
    # every sm90 bucket takes the flag (the decode buckets 1..16 do not): buckets less one each
    assert [r["trim_only"] for r in rows] == [r["off"] - 1 for r in rows]
    assert gemm_plan.TRIM_LOADS is False


def test_changes_joins_a_range_of_the_same_two_plans():
    reach = benchmark_module("sm90_reach")

    class P:
        def __init__(self, config):
            self.config = config

    a, b, c = P("a"), P("b"), P("c")
    off = [(1, 100, a), (101, 200, a), (201, 300, a)]
    on = [(1, 50, a), (51, 100, b), (101, 150, b), (151, 200, c), (201, 300, a)]
    ranges, trim_only = reach.changes(off, on)
    assert [(lo, hi, x.config, y.config) for lo, hi, x, y in ranges] == [(51, 150, "a", "b"), (151, 200, "a", "c")]
    assert trim_only == 0


@pytest.mark.slow  # a benchmark script's table (suite time)
def test_the_script_writes_its_table(tmp_path):
    reach = benchmark_module("sm90_reach")
    out = tmp_path / "reach.md"
    assert reach.main(["--models", "llama-3.2-3b", "--switches", "fine_cuts", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| fine_cuts | llama-3.2-3b | o | 3072 | 3072 | 37 / 38 | 257-320: 64x144 shift -> 64x120 shift |" in text
    assert "| fine_cuts | 2 of 4 | 2 | 128 | 257 | 0 |" in text
    with pytest.raises(SystemExit, match="--switches: options of"):
        reach.main(["--switches", "fine_cut"])
