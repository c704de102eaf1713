"""Shared by the paged decode GPU tests (tests/gpu): a problem's random arrays as CUDA tensors, and the check of
an ``(O, LSE)`` against the problem's reference within its bound."""

import numpy as np

from tvm_cdna4.kernels.attention import paged


def cuda_tensors(arrays: dict, torch):
    """``(q, k_cache, v_cache, block_table, context_lens)`` of 16-bit ``arrays`` (``paged.random_inputs``) on the
    GPU: Q, K, V as bfloat16."""
    q = torch.from_numpy(arrays["Q"].astype(np.float32)).cuda().bfloat16()
    k, v = (torch.from_numpy(arrays[n].astype(np.float32)).cuda().bfloat16() for n in ("K_CACHE", "V_CACHE"))
    table, lens = (torch.from_numpy(arrays[n]).cuda() for n in ("BLOCK_TABLE", "CONTEXT_LENS"))
    return q, k, v, table, lens


def assert_within_bound(problem, arrays: dict, o, lse) -> None:
    o_ratio, lse_ratio = paged.compare(problem, arrays, o.float().cpu().numpy(), lse.cpu().numpy())
    assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)


def assert_graph_replays_the_same(torch, call, o, lse) -> None:
    """``call()`` -> ``(O, LSE)`` captured in a CUDA graph and replayed gives ``o`` and ``lse`` bit for bit."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o2, lse2 = call()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o2, o) and torch.equal(lse2, lse)
