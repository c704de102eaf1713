"""The paged decode as programmatic dependent launches (``PagedDecodeConfig.pdl``, ``kernels.sm80.paged_decode_pdl``)
on an NVIDIA GPU of sm_90 or newer against ``kernels.attention.paged.reference``: calls back to back through one
workspace (each call's main a dependent of the previous call's merge, which reads the partials main overwrites),
eagerly and captured in a CUDA graph; and the op (``tvm_cdna4.torch.paged_attention``) with ``PDL`` on. Skipped
without such a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda  # the project plugin (tvm_cdna4.testing): skipped without an NVIDIA GPU

from tvm_cdna4.kernels.attention import paged  # noqa: E402
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem  # noqa: E402
from paged_gpu import assert_graph_replays_the_same, assert_within_bound, cuda_tensors  # noqa: E402

CALLS = 4  # back to back, no synchronization between them


@pytest.fixture(autouse=True)
def _sm90():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("griddepcontrol needs sm_90")


def _kernels(target, problem, config):
    import tvm_cdna4.torch as ours
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import workspace

    arch = ours.cuda_target(torch.device("cuda", 0))[0]
    main, merge = paged_verb(target, "build")(problem, config, arch=arch)
    p = paged_verb(target, "plan")(problem, config)
    assert p.pdl and (merge is None) == (p.merge == "last-cta")
    return load_build(main, "paged_"), merge and load_build(merge, "paged_merge_"), p, workspace(p, "cuda")


def _tensors(problem, arrays):
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    scales = (None, None)
    if problem.scaled:  # the e4m3 bytes as they are, the kernel's uint8 operands
        k, v = (torch.from_numpy(np.ascontiguousarray(arrays[n]).view(np.uint8)).cuda() for n in ("K_CACHE", "V_CACHE"))
        scales = tuple(torch.from_numpy(arrays[n]).cuda() for n in ("K_SCALE", "V_SCALE"))
    return (q, k, v, table, lens, *scales)


@pytest.mark.parametrize("merge", ["kernel", "last-cta"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_pdl_calls_back_to_back_match_the_reference_eager_and_in_a_graph(target, kv_dtype, merge):
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.torch_paged import _run

    contexts = [1, 77, 300, 5000]  # odd; 4 queries; 10 partitions of 512 for the longest
    problem = PagedDecodeProblem(4, 32, 8, 128, 4, 16, 313, 400, kv_dtype=kv_dtype)
    kernels = _kernels(target, problem, PagedDecodeConfig(pdl=True, merge=merge, partition=512))
    arrays = [paged.random_inputs(problem, seed=11 + i, contexts=contexts) for i in range(2)]
    inputs = [_tensors(problem, a) for a in arrays]
    outs = [_run(*inputs[i % 2], kernels) for i in range(CALLS)]  # alternating inputs: a stale partial shows
    for i, (o, lse) in enumerate(outs):
        assert_within_bound(problem, arrays[i % 2], o, lse)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = [_run(*inputs[i % 2], kernels) for i in range(CALLS)]
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        for i, (o, lse) in enumerate(captured):
            assert torch.equal(o, outs[i][0]) and torch.equal(lse, outs[i][1]), i


def test_the_op_with_pdl_on_matches_the_reference_and_replays_in_a_graph(monkeypatch):
    from tvm_cdna4 import torch_paged
    from tvm_cdna4.kernels.sm80 import paged_decode_pdl
    from tvm_cdna4.torch import paged_attention

    monkeypatch.setattr(paged_decode_pdl, "PDL", True)
    monkeypatch.setattr(torch_paged, "_KERNELS", {})
    problem = PagedDecodeProblem(3, 24, 8, 128, 1, 16, 200, 420)  # a shape no other test runs (prepared launches)
    arrays = paged.random_inputs(problem, seed=12, contexts=[33, 1200, 3001])
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    o, lse = paged_attention(q, k, v, table, lens, return_lse=True)
    assert_within_bound(problem, arrays, o, lse)
    assert all(entry[2].pdl for entry in torch_paged._KERNELS.values()) and torch_paged._KERNELS
    o2, lse2 = paged_attention(q, k, v, table, lens, return_lse=True)  # the prepared launch
    torch.cuda.synchronize()
    assert torch.equal(o2, o) and torch.equal(lse2, lse)
    assert_graph_replays_the_same(torch, lambda: paged_attention(q, k, v, table, lens, return_lse=True), o, lse)


def test_toggling_pdl_between_calls_of_one_shape_takes_the_new_kernels(monkeypatch):
    """The op's kernel cache and prepared launches key ``PDL`` (``paged_decode_rule.plan_flags``): one shape called
    with it off, on, off again runs the plan of each value (off: no programmatic launch), the same O each time."""
    from tvm_cdna4 import torch_paged
    from tvm_cdna4.kernels.sm80 import paged_decode_pdl
    from tvm_cdna4.torch import paged_attention

    monkeypatch.setattr(torch_paged, "_KERNELS", {})
    problem = PagedDecodeProblem(2, 16, 8, 128, 1, 16, 100, 210)
    arrays = paged.random_inputs(problem, seed=13, contexts=[700, 1500])
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    outs = []
    for pdl in (False, True, False):
        monkeypatch.setattr(paged_decode_pdl, "PDL", pdl)
        outs.append(paged_attention(q, k, v, table, lens, return_lse=True))
        outs.append(paged_attention(q, k, v, table, lens, return_lse=True))  # the prepared launch of this value
        assert_within_bound(problem, arrays, *outs[-1])
    assert sorted(entry[2].pdl for entry in torch_paged._KERNELS.values()) == [False, True]
    torch.cuda.synchronize()
    assert all(torch.equal(o, outs[0][0]) for o, _ in outs)
