"""``benchmarks/paged_decode.py``'s CPU parts: its arguments, its shape list and contexts, the bytes it divides by,
the rotation, the bars, and its correctness check and dense gather run on CPU torch tensors (the GPU run is the
lead's: the command in ``docs/paged_attention.md``)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from paths import TESTS

sys.path.insert(0, str(TESTS))

from benchmark_modules import benchmark_module  # noqa: E402

from tvm_cdna4.kernels.attention import paged  # noqa: E402

bench = benchmark_module("paged_decode")


def test_the_default_arguments_and_a_refused_set():
    args = bench.parse([])
    assert args.batches == [1, 8, 32, 64] and args.means == [2048, 8192, 32768]
    assert args.gqa == [(32, 8), (64, 8)] and args.sets == ["bf16", "fp8", "q4", "page64"] and args.peers
    args = bench.parse(["--batches", "8", "--gqa", "64/8", "--sets", "fp8", "--no-peers"])
    assert (args.batches, args.gqa, args.sets, args.peers) == ([8], [(64, 8)], ["fp8"], False)
    assert args.partitions == [] and bench.parse(["--partitions", "256,1024"]).partitions == [256, 1024]
    with pytest.raises(SystemExit):
        bench.parse(["--sets", "bf8"])


def test_forced_configs_take_ints_bools_and_none():
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig

    args = bench.parse(["--configs", "stages=2,fp8_cvt=false:min_ctas=0,min_ctas=none:merge=kernel,fp8_cvt=True"])
    problem = paged.PagedDecodeProblem(8, 32, 8, 128, 1, 16, 128, 1024, kv_dtype="fp8")
    forced = bench.forced_configs(problem, args)
    assert forced == {"stages=2": {"stages": 2}, "fp8_cvt=false:min_ctas=0": {"fp8_cvt": False, "min_ctas": 0},
                      "min_ctas=none:merge=kernel": {"min_ctas": None, "merge": "kernel"},
                      "fp8_cvt=True": {"fp8_cvt": True}}
    assert PagedDecodeConfig(**forced["fp8_cvt=false:min_ctas=0"]).fp8_cvt is False


def test_the_shape_list():
    rows = bench.row_specs()
    # bf16, fp8, q4: 2 GQAs x 4 batches x 3 means; page64: GQA 32/8 only
    assert len(rows) == 3 * 24 + 12
    page64 = [r for r in rows if r["set"] == "page64"]
    assert {(r["heads"], r["kv_heads"], r["page_size"], r["queries"]) for r in page64} == {(32, 8, 64, 1)}
    q4 = [r for r in rows if r["set"] == "q4"]
    assert {r["queries"] for r in q4} == {4} and {r["kv_dtype"] for r in rows if r["set"] == "fp8"} == {"fp8"}


def test_contexts_uneven_within_bounds_and_shared_by_the_sets():
    for batch, mean in ((64, 2048), (64, 32768), (8, 8192)):
        contexts = bench.draw_contexts(batch, mean)
        assert len(contexts) == batch and len(set(contexts)) > batch // 2
        assert min(contexts) >= max(512, mean // 4) and max(contexts) <= min(32768, mean * 4)
        assert contexts == bench.draw_contexts(batch, mean)
    assert bench.draw_contexts(8, 8192, seed=1) != bench.draw_contexts(8, 8192)


def test_the_problem_and_its_bytes():
    spec = dict(set="fp8", batch=2, mean=2048, heads=64, kv_heads=8, page_size=16, queries=1, kv_dtype="fp8")
    problem = bench.problem_of(spec, [1000, 33])
    assert (problem.max_pages, problem.num_pages) == (63, 63 + 3) and problem.group == 8
    # whole pages of K and V, one byte each, then Q and O in bf16 and LSE in f32
    kv = 2 * (63 + 3) * 16 * 8 * 128
    assert problem.kv_bytes([1000, 33]) == kv
    assert problem.bytes_moved([1000, 33]) == kv + 2 * 64 * (2 * 2 * 128 + 4)
    bf16 = bench.problem_of({**spec, "kv_dtype": "bf16"}, [1000, 33])
    assert bf16.kv_bytes([1000, 33]) == 2 * kv


def test_the_rotation_and_the_calls():
    l2 = 50 * 2**20
    assert bench.copies_for(8 * 2**20, l2) == 19 and bench.copies_for(4 * 2**30, l2) == 1
    assert bench.copies_for(1000, l2) == bench.MAX_COPIES
    assert bench.calls_for(8 * 2**20, 19, 10) == 19 and bench.calls_for(2**30, 1, 10) == 3
    assert bench.calls_for(10 * 2**30, 1, 10) == 2


def _row(set_, batch, mean, us, pct=90.0):
    return dict(set=set_, batch=batch, mean=mean, heads=32, kv_heads=8, us=us, pct_rate=pct)


def test_the_bars_judge_the_region_only():
    rows = [_row("bf16", 8, 8192, 100.0, 88), _row("bf16", 1, 2048, 10.0, 20), _row("fp8", 8, 8192, 55.0),
            _row("fp8", 1, 2048, 9.0), _row("q4", 8, 8192, 140.0), _row("q4", 1, 2048, 30.0)]
    rate, fp8, q4 = bench.bars(rows)
    assert (rate["worst"], rate["worst_all"], rate["ok"]) == (88, 20, True)
    assert fp8["values"] == [pytest.approx(100 / 55)] and fp8["ok"] and fp8["worst_all"] == pytest.approx(10 / 9)
    assert q4["worst"] == pytest.approx(1.4) and q4["ok"] is False and q4["worst_all"] == pytest.approx(3.0)
    lines = bench.bar_lines([rate, fp8, q4])
    assert "PASS" in lines[0] and "FAIL" in lines[2]
    assert bench.bars([_row("bf16", 1, 512, 5.0)])[1]["ok"] is None


@pytest.mark.parametrize("kv_dtype, queries", [("bf16", 1), ("fp8", 4)])
def test_the_sample_check_passes_the_reference_and_catches_an_error(kv_dtype, queries):
    torch = pytest.importorskip("torch")
    spec = dict(set="x", batch=3, mean=64, heads=8, kv_heads=2, page_size=16, queries=queries, kv_dtype=kv_dtype)
    contexts = [70, 37, 100]
    problem = bench.problem_of(spec, contexts)
    inputs = bench._inputs(torch, problem, contexts, 1, seed=3, device="cpu")
    arrays = {"Q": bench._numpy(inputs["q"], "bf16"), "BLOCK_TABLE": inputs["table"].numpy(),
              "CONTEXT_LENS": np.array(contexts, np.int32)}
    for name, t in zip(("K_CACHE", "V_CACHE"), inputs["caches"][0]):
        arrays[name] = bench._numpy(t, kv_dtype)
    if problem.scaled:
        arrays["K_SCALE"], arrays["V_SCALE"] = (s.numpy() for s in inputs["scales"][0])
    o, lse = paged.reference(problem, arrays)
    o, lse = torch.from_numpy(o).to(torch.bfloat16), torch.from_numpy(lse).float()
    o_ratio, lse_ratio = bench.check_sample(torch, problem, contexts, inputs, o, lse)
    assert o_ratio <= 1 and lse_ratio <= 1
    o[1, 0, 5, 5] += 0.25  # the shortest sequence (37 keys), head 5 of kv head 1: outside the sample
    assert bench.check_sample(torch, problem, contexts, inputs, o, lse)[0] <= 1
    o[1, 0, 1, 5] += 0.25  # head 1: kv head 0 (heads 0..3)
    assert bench.check_sample(torch, problem, contexts, inputs, o, lse)[0] > 1


def test_the_dense_gather_holds_each_sequences_keys():
    torch = pytest.importorskip("torch")
    spec = dict(set="bf16", batch=2, mean=64, heads=4, kv_heads=2, page_size=16, queries=1, kv_dtype="bf16")
    contexts = [50, 20]
    problem = bench.problem_of(spec, contexts)
    inputs = bench._inputs(torch, problem, contexts, 1, seed=0, device="cpu")
    k, v = bench._dense(torch, problem, contexts, inputs, inputs["caches"][0])
    assert k.shape == (2, 2, 50, 128)
    cache = inputs["caches"][0][0]
    table = inputs["table"]
    for b, L in enumerate(contexts):
        for j in (0, 17, L - 1):
            assert torch.equal(k[b, :, j], cache[table[b, j // 16], j % 16])


def test_the_table_row():
    row = dict(_row("bf16", 8, 8192, 123.4, 87.6), page_size=16, queries=1, kv_dtype="bf16", context_mean=9412.6,
               context_min=2100, context_max=30000, split_kv=5, bytes=308_740_096, ok=True,
               flashinfer=dict(error="flashinfer: not installed"), flashinfer_tc=dict(us=99.5, ok=True),
               sdpa=dict(flash=dict(us=200.0, pct_rate=70.2, ok=True), cudnn=dict(us=150.0, pct_rate=80.4, ok=False),
                         efficient=dict(error="No available kernel")))
    header, rule, line = bench.table([row])
    assert header.count("|") == rule.count("|") == line.count("|") == 19
    assert "| FlashInfer µs | FlashInfer TC µs |" in header
    assert line == ("| bf16 | 8 | 32/8 | 16 | 1 | bf16 | 9413 (2100..30000) | 5 | 123.4 | 308.7 | 88 | — | 99.5 "
                    "| 200.0 | 150.0 ✗ | — | 80 | yes |")


def test_each_sdpa_backend_is_found_by_its_torch_name():
    pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend

    assert bench.sdpa_backend(SDPBackend, "flash") is SDPBackend.FLASH_ATTENTION
    assert bench.sdpa_backend(SDPBackend, "cudnn") is SDPBackend.CUDNN_ATTENTION
    assert bench.sdpa_backend(SDPBackend, "efficient") is SDPBackend.EFFICIENT_ATTENTION

    class Old:  # a torch whose enum spells flash FLASH and has no cuDNN backend
        FLASH = "flash-old"
    assert bench.sdpa_backend(Old, "flash") == "flash-old" and bench.sdpa_backend(Old, "cudnn") is None


def test_a_peers_failure_is_said_and_never_drops_our_row():
    def broken(*_args):
        raise AttributeError("type object 'SDPBackend' has no attribute 'FLASH'")

    assert bench.peer_safely(broken, 1, 2) == dict(error="AttributeError: type object 'SDPBackend' has no "
                                                         "attribute 'FLASH'")
    assert bench.peer_safely(lambda a: dict(us=a), 3.0) == dict(us=3.0)
    sdpa = bench.peer_safely(broken, keys=bench.BACKENDS)
    assert set(sdpa) == set(bench.BACKENDS) and all("AttributeError" in v["error"] for v in sdpa.values())


def test_the_peer_line_compares_with_the_best_sdpa_backend_in_the_region():
    rows = [dict(_row("bf16", 8, 8192, 100.0), sdpa=dict(flash=dict(us=150.0), cudnn=dict(us=120.0),
                                                           efficient=dict(error="x")), flashinfer=dict(error="no")),
            dict(_row("bf16", 1, 2048, 10.0), sdpa=dict(flash=dict(us=5.0)))]
    line = bench.peer_lines(rows)
    assert "1.20x" in line[0] and "1 shapes" in line[0] and "PASS" in line[0]
    assert "FlashInfer" in line[1] and "published" in line[1]


def test_the_flashinfer_peer_line_takes_its_faster_kernel_and_says_why_none_ran():
    rows = [dict(_row("bf16", 8, 8192, 100.0), flashinfer=dict(us=120.0), flashinfer_tc=dict(us=90.0)),
            dict(_row("fp8", 32, 2048, 50.0), flashinfer=dict(us=75.0), flashinfer_tc=dict(error="refused")),
            dict(_row("bf16", 1, 2048, 10.0), flashinfer=dict(us=1.0))]  # outside the region
    line = bench.peer_lines(rows)[1]
    assert "FlashInfer time / ours" in line and "worst 0.90x over 2 shapes" in line and "FAIL" in line
    none = bench.peer_lines([dict(_row("bf16", 8, 8192, 100.0), flashinfer=dict(error="flashinfer 0.6.6: a"),
                                  flashinfer_tc=dict(error="flashinfer 0.6.6: b"))])[1]
    assert "no time in the region (flashinfer 0.6.6: a; flashinfer 0.6.6: b)" in none


def test_flashinfers_page_arguments_address_our_pages():
    torch = pytest.importorskip("torch")
    spec = dict(set="bf16", batch=3, mean=64, heads=8, kv_heads=2, page_size=16, queries=1, kv_dtype="bf16")
    contexts = [50, 32, 1]  # a partial last page, a full one (last_page_len 16, not 0), a single key
    problem = bench.problem_of(spec, contexts)
    inputs = bench._inputs(torch, problem, contexts, 1, seed=0, device="cpu")
    indptr, indices, last = bench.flashinfer_pages(torch, problem, contexts, inputs["table"])
    assert indptr.tolist() == [0, 4, 6, 7] and last.tolist() == [2, 16, 1] and indptr.dtype == torch.int32
    k, table = inputs["caches"][0][0], inputs["table"]
    for b, L in enumerate(contexts):  # key j: row j % 16 of page indices[indptr[b] + j // 16], as ours
        for j in sorted({0, 15, 16, L - 1} & set(range(L))):
            page = indices[indptr[b] + j // 16]
            assert page == table[b, j // 16] and torch.equal(k[page, j % 16], k[table[b, j // 16], j % 16])
        assert (indptr[b + 1] - indptr[b] - 1) * 16 + last[b] == L


def test_a_carried_flashinfer_goes_first_on_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    monkeypatch.setenv("FLASHINFER_CARRIED", str(tmp_path))
    args = bench.parse([])
    assert args.flashinfer == str(tmp_path) and args.flashinfer_tc
    assert not bench.parse(["--no-flashinfer-tc"]).flashinfer_tc
    with pytest.raises(SystemExit, match="no flashinfer/ there"):
        bench.use_flashinfer(str(tmp_path))
    (tmp_path / "flashinfer").mkdir()
    bench.use_flashinfer(str(tmp_path))
    import os

    assert sys.path[0] == str(tmp_path) and os.environ["FLASHINFER_WORKSPACE_BASE"].endswith("flashinfer")


def test_merge_forces_each_place_at_the_models_partition():
    from tvm_cdna4.kernels.sm80.paged_target import plan

    args = bench.parse(["--merge", "last-cta,kernel", "--partitions", "256", "--sets", "bf16", "--batches", "8"])
    problem = paged.PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 4096)
    forced = bench.forced_configs(problem, args)
    assert forced == {256: {"partition": 256, "balance": False},
                      "merge last-cta": {"partition": plan(problem).partition, "merge": "last-cta"},
                      "merge kernel": {"partition": plan(problem).partition, "merge": "kernel"}}
    assert bench.forced_configs(problem, bench.parse(["--merge", "kernel", "--target", "sm90"])) == {
        "merge kernel": {"partition": plan(problem).partition, "merge": "kernel"}}


def test_configs_force_named_fields_and_leave_the_rest_to_the_model():
    args = bench.parse(["--configs", "warps=8:stages=4,warps=2,merge=last-cta"])
    problem = paged.PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 4096)
    assert bench.forced_configs(problem, args) == {"warps=8:stages=4": {"warps": 8, "stages": 4},
                                                   "warps=2": {"warps": 2}, "merge=last-cta": {"merge": "last-cta"}}


def test_pdl_is_a_config_and_plans_programmatic_dependent_launches():
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode

    args = bench.parse(["--configs", "pdl=true:merge=kernel,pdl=true:merge=last-cta"])
    problem = paged.PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 4096)
    forced = bench.forced_configs(problem, args)
    assert forced == {"pdl=true:merge=kernel": {"pdl": True, "merge": "kernel"},
                      "pdl=true:merge=last-cta": {"pdl": True, "merge": "last-cta"}}
    plans = [plan_paged_decode(problem, PagedDecodeConfig(**fields), arch="sm_90") for fields in forced.values()]
    assert [(p.pdl, p.merge) for p in plans] == [(True, "kernel"), (True, "last-cta")]


def test_a_forced_config_is_timed_only_where_its_output_is_the_checked_rows():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(5)
    o = torch.randn(8, 1, 32, 128, generator=gen).to(torch.bfloat16)
    lse = torch.randn(8, 1, 32, generator=gen) * 4
    lse[3] = -torch.inf  # an empty sequence's rows
    assert bench.same_output(torch, (o, lse), (o.clone(), lse.clone())) is None
    near = (o.float() * (1 + 1e-3)).to(torch.bfloat16)  # another partition's summation order: well inside tolerance
    assert bench.same_output(torch, (o, lse), (near, lse + 1e-4)) is None
    wrong = o.clone()
    wrong[7] = 0  # one sequence unmerged
    assert bench.same_output(torch, (o, lse), (wrong, lse)).startswith("MISMATCH: O rel. error")
    lost = lse.clone()
    lost[3] = 0.0  # an empty row given a finite LSE
    assert bench.same_output(torch, (o, lse), (o, lost)).endswith("LSE off")
    assert bench.same_output(torch, (o, lse), (o, lse + 1.0)).endswith("LSE off")


def test_the_rule_cell_is_the_plan_weigh_balance_takes():
    """``--rule``: the forced cell "rule" holds the fields of the plan ``paged_decode_rule.WEIGH_BALANCE`` takes (the
    flag left as it was): the balanced partition partition-major at batch 8 / 9.4k, neither at the 1.8k draw."""
    from tvm_cdna4.kernels.sm80 import paged_decode_rule as rule

    args = bench.parse(["--rule", "--target", "sm80"])
    cells = {}
    for mean in (2048, 8192):
        spec = dict(batch=8, heads=32, kv_heads=8, mean=mean, set="bf16", kv_dtype="bf16", page_size=16, queries=1)
        cells[mean] = bench.forced_configs(bench.problem_of(spec, bench.draw_contexts(8, mean, 0)), args)
    assert cells[8192] == {"rule": {"balance": True, "split_major": True}}
    assert cells[2048] == {"rule": {"balance": False, "split_major": False}} and rule.WEIGH_BALANCE is True
    assert "rule" not in bench.forced_configs(bench.problem_of(spec, [100] * 8), bench.parse([]))
