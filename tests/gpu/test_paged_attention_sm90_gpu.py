"""The sm90 row of paged decode attention (``kernels.sm90.paged_decode_*``: TMA into mbarrier rings) on an sm_90
GPU (H100, H200) against ``kernels.attention.paged.reference``: odd contexts, 4 queries, fp8 KV, page sizes 16
and 64, lying device data; ``tvm_cdna4.torch.paged_attention`` takes it there (``cuda_target``), CUDA-graph
capture included. Skipped without an sm_90 GPU."""

from functools import partial

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda  # the project plugin (tvm_cdna4.testing): skipped without an NVIDIA GPU

from tvm_cdna4.kernels import attention  # noqa: E402
from tvm_cdna4.kernels.attention import paged  # noqa: E402
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem  # noqa: E402
from paged_gpu import assert_graph_replays_the_same, assert_within_bound, cuda_tensors  # noqa: E402


@pytest.fixture(autouse=True)
def _sm90():
    if torch.cuda.is_available() and torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("the sm90 kernel runs on sm_90 GPUs (H100, H200)")


@pytest.mark.parametrize("page_size", [16, 64])
@pytest.mark.parametrize("kv_dtype, queries, head_dim", [("bf16", 1, 128), ("bf16", 4, 128), ("fp8", 4, 128),
                                                         ("fp8", 1, 64), ("f16", 2, 64)])
def test_exact_against_the_reference(page_size, kv_dtype, queries, head_dim):
    from tvm_cdna4.torch import run_paged_attention

    q_dtype = "f16" if kv_dtype == "f16" else "bf16"
    contexts = [1, 77, 300, 5000]
    pages = sum(-(-L // page_size) for L in contexts)
    problem = PagedDecodeProblem(4, 32, 8, head_dim, queries, page_size, -(-5000 // page_size), pages + 3,
                                 kv_dtype=kv_dtype, q_dtype=q_dtype)
    result = attention.validate_paged(problem, "sm90", seed=1, contexts=contexts,
                                      run=partial(run_paged_attention, target="sm90"))
    assert result.ok and result.where == "the NVIDIA GPU", result


@pytest.mark.parametrize("row", ["sm80", "sm90"])
def test_the_op_takes_paged_rows_row_and_keeps_the_clamps_under_graph_capture(row, monkeypatch):
    import tvm_cdna4.torch as ours
    from tvm_cdna4 import torch_paged
    from tvm_cdna4.torch import paged_attention
    from tvm_cdna4.torch_paged import _KERNELS

    if ours.CUDA_TARGET != "auto":
        pytest.skip("TVM_CDNA4_CUDA_TARGET=sm80 keeps the sm80 row")
    assert torch_paged.PAGED_ROW["sm90"] == "sm80"  # the measured default (its docstring)
    monkeypatch.setitem(torch_paged.PAGED_ROW, "sm90", row)
    problem = PagedDecodeProblem(3, 16, 4, 64, 2, 16, 8, 30)
    arrays = paged.random_inputs(problem, seed=2, contexts=[40, 100, 128])
    arrays["CONTEXT_LENS"][:] = [-4, 10_000, 100]
    arrays["BLOCK_TABLE"][2, 1] = 1 << 30  # far past the cache: the TMA coordinate past its end, zeros
    arrays["BLOCK_TABLE"][1, 0] = -7
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    o, lse = paged_attention(q, k, v, table, lens, return_lse=True)
    assert any(key[0] == problem and key[2] == row for key in _KERNELS)
    assert_within_bound(problem, arrays, o, lse)
    assert_graph_replays_the_same(torch, lambda: paged_attention(q, k, v, table, lens, return_lse=True), o, lse)


def test_nan_cache_rows_past_the_contexts_stay_out():
    # a never-written cache (NaN) around each sequence's rows: TMA loads a page's rows past L, the kernel zeroes V's
    from tvm_cdna4.torch import run_paged_attention

    problem = PagedDecodeProblem(2, 8, 2, 128, 1, 64, 4, 10)
    arrays = paged.random_inputs(problem, seed=3, contexts=[70, 200])
    seen = np.zeros(problem.num_pages * problem.page_size, bool)
    for b, L in enumerate(arrays["CONTEXT_LENS"]):
        for j in range(L):
            seen[arrays["BLOCK_TABLE"][b, j // 64] * 64 + j % 64] = True
    for name in ("K_CACHE", "V_CACHE"):
        arrays[name].reshape(-1, problem.kv_heads, problem.head_dim)[~seen] = np.nan
    o, lse = run_paged_attention(problem, arrays, target="sm90")
    assert np.isfinite(o).all() and max(paged.compare(problem, arrays, o, lse)) <= 1


@pytest.mark.parametrize("merge", ["kernel", "last-cta"])
@pytest.mark.parametrize("partition, hint", [(64, None), (4096, None), (256, 1000)])
def test_forced_partitions_and_a_short_hint_match_the_reference(partition, hint, merge):
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.kernels.sm90.paged_target import build, plan
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    contexts = [1, 77, 300, 5000]
    problem = PagedDecodeProblem(4, 32, 8, 128, 2, 16, 313, 400)
    config = PagedDecodeConfig(partition=partition, merge=merge)
    options = {} if hint is None else {"context": hint}
    main, merge_kernel = build(problem, config, **options)
    p = plan(problem, config, **options)
    arrays = paged.random_inputs(problem, seed=5, contexts=contexts)
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    kernels = (load_build(main, "paged_"), merge_kernel and load_build(merge_kernel, "paged_merge_"), p,
               workspace(p, q.device))
    for _ in range(2):  # the second call through the same tickets (the last CTAs zeroed them)
        o, lse = _run(q, k, v, table, lens, None, None, kernels)
        o_ratio, lse_ratio = paged.compare(problem, arrays, o.float().cpu().numpy(), lse.cpu().numpy())
        assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)
