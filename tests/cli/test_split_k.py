"""``gemm --split-k S``: the K slices of the sm90 (``Sm90Config.split_k``) and sm80 (``GemmConfig.split_k``) GEMM
config, 1 = no K split, replacing the cost model's choice (``--emit config`` shows it); how an sm90 config's work is
cut (``decomposition``) follows it. gfx950's config has no such field (its K split is the plan's)."""

import json

import pytest

SM90 = ("gemm", "--target", "sm90", "--dtype", "bf16", "--out-dtype", "bf16", "-M", "512", "-N", "1024", "-K", "8192")
SM80 = ("gemm", "--target", "sm80", "-M", "128", "-N", "1024", "-K", "8192")


def plan(cli, *argv):
    r = cli(*argv, "--emit", "config")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def refused(cli, *argv):
    r = cli(*argv)
    assert (r.returncode, r.stdout, len(r.stderr.splitlines())) == (2, "", 1), r.stderr
    return r.stderr


def test_sm90_split_k_replaces_the_cost_models_k_split(cli):
    chosen = plan(cli, *SM90)["config"]
    assert (chosen["split_k"], chosen["decomposition"], chosen["cluster_m"]) == (2, "split-k", 1)  # the model splits
    assert "expected split_k=1" in refused(cli, *SM90, "--cluster-m", "2", "--emit", "config")
    for flags, split, decomposition, cluster in ((("--split-k", "1"), 1, "data-parallel", 1),
                                                 (("--split-k", "1", "--cluster-m", "2"), 1, "data-parallel", 2),
                                                 (("--split-k", "3"), 3, "split-k", 1)):
        got = plan(cli, *SM90, *flags)
        assert (got["split_k"], got["config"]["split_k"], got["config"]["decomposition"], got["config"]["cluster_m"]) \
            == (split, split, decomposition, cluster), flags
        same = {k for k in chosen if k not in ("split_k", "decomposition", "cluster_m", "shift_last")}
        assert got["config"]["shift_last"] == (chosen["shift_last"] and cluster == 1), flags  # a cluster: unshifted
        assert {k: got["config"][k] for k in same} == {k: chosen[k] for k in same}, flags


def test_sm90_split_k_keeps_a_hybrid_decomposition_and_is_refused_naming_the_flag(cli):
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config
    from tvm_cdna4.kernels.sm90.gemm_target import _replaced

    hybrid = Sm90Config(split_k=2, decomposition="hybrid")
    assert (_replaced(hybrid, {"split_k": 3}).decomposition, _replaced(hybrid, {"split_k": 1}).decomposition) == (
        "hybrid", "data-parallel")
    # at 4096^3 the model reads a fused residual from global memory (RESIDUAL_CHOICE), which a K split keeps; a read
    # into the staging buffer (tma) or into registers in the mainloop (early) cannot be split
    big = ("gemm", "--target", "sm90", "--dtype", "bf16", "--out-dtype", "bf16", "-M", "4096", "-N", "4096", "-K", "4096")
    got = plan(cli, *big, "--residual", "--split-k", "2")["config"]
    assert (got["split_k"], got["decomposition"], got["residual_read"]) == (2, "split-k", "global")
    for read in ("tma", "early"):
        line = refused(cli, *big, "--residual", "--residual-read", read, "--split-k", "2", "--emit", "config")
        assert line.startswith(f"error: --residual-read {read}: operand residual_read: ") and "split_k=2" in line, line


def test_sm80_split_k_replaces_the_planners_k_split(cli):
    assert plan(cli, *SM80)["split_k"] == 4  # the planner's
    assert [plan(cli, *SM80, "--split-k", s)["split_k"] for s in ("1", "2")] == [1, 2]
    line = refused(cli, *SM80, "--split-k", "2", "--ctas", "4", "--emit", "config")
    assert line == "error: --ctas 4, --split-k 2: split_k and persistent CTAs (ctas > 0) do not combine\n", line


@pytest.mark.parametrize("argv, first", [
    (("gemm", "--target", "gfx950", "-M", "64", "-N", "64", "-K", "64", "--split-k", "2", "--emit", "config"),
     "error: --split-k is an sm80 / sm90 option (its GEMM config's split_k); --target gfx950 has no such field"),
    ((*SM80, "--split-k", "2", "--tune", "--validate"), "error: --tune chooses the tile by timing candidates: "
     "--split-k cannot be given"),
    (("gemm", "--target", "sm90", "--dynamic-m", "-M", "77", "-N", "256", "-K", "128", "--split-k", "1", "--emit",
      "config"), "error: --dynamic-m plans every M bucket with the cost model: --split-k cannot be given"),
])
def test_split_k_refusals(argv, first, cli):
    assert refused(cli, *argv).startswith(first)
