"""``tvm_cdna4.torch.paged_attention`` on an NVIDIA GPU against ``kernels.attention.paged.reference`` (odd
contexts, 4 queries, fp8 KV, page sizes 16 and 64, lying device data); CUDA-graph capture. Skipped without a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda  # the project plugin (tvm_cdna4.testing): skipped without an NVIDIA GPU

from tvm_cdna4.kernels import attention  # noqa: E402
from tvm_cdna4.kernels.attention import paged  # noqa: E402
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem  # noqa: E402
from paged_gpu import assert_graph_replays_the_same, assert_within_bound, cuda_tensors  # noqa: E402


@pytest.mark.parametrize("page_size", [16, 64])
@pytest.mark.parametrize("kv_dtype, queries", [("bf16", 1), ("bf16", 4), ("fp8", 4), ("f16", 2)])
def test_exact_against_the_reference(page_size, kv_dtype, queries):
    from functools import partial

    from tvm_cdna4.torch import run_paged_attention

    q_dtype = "f16" if kv_dtype == "f16" else "bf16"
    contexts = [1, 77, 300, 5000]
    pages = sum(-(-L // page_size) for L in contexts)
    problem = PagedDecodeProblem(4, 32, 8, 128, queries, page_size, -(-5000 // page_size), pages + 3,
                                 kv_dtype=kv_dtype, q_dtype=q_dtype)
    run = partial(run_paged_attention, target="sm80")  # the sm80 row on any GPU (sm_90's default is sm90's)
    result = attention.validate_paged(problem, "sm80", seed=1, contexts=contexts, run=run)
    assert result.ok and result.where == "the NVIDIA GPU", result


def test_lying_data_and_graph_capture():
    from tvm_cdna4.torch import paged_attention

    problem = PagedDecodeProblem(3, 16, 4, 64, 2, 16, 8, 30)
    arrays = paged.random_inputs(problem, seed=2, contexts=[40, 100, 128])
    arrays["CONTEXT_LENS"][:] = [-4, 10_000, 100]
    arrays["BLOCK_TABLE"][2, 1] = 1 << 30
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    o, lse = paged_attention(q, k, v, table, lens, return_lse=True)
    assert_within_bound(problem, arrays, o, lse)
    assert_graph_replays_the_same(torch, lambda: paged_attention(q, k, v, table, lens, return_lse=True), o, lse)


def test_a_misaligned_q_is_refused_not_launched():
    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.torch import paged_attention

    q = torch.randn(1 * 1 * 8 * 64 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(1, 1, 8, 64)
    k = torch.randn(4, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    table = torch.arange(4, device="cuda", dtype=torch.int32).view(1, 4)
    lens = torch.tensor([50], device="cuda", dtype=torch.int32)
    with pytest.raises(ContractError, match="16-byte aligned") as info:
        paged_attention(q, k, k.clone(), table, lens)
    assert info.value.operand == "q"
    o = paged_attention(q.clone(), k, k.clone(), table, lens)  # the device is still usable
    torch.cuda.synchronize()
    assert torch.isfinite(o.float()).all()


@pytest.mark.parametrize("merge", ["kernel", "last-cta"])
@pytest.mark.parametrize("partition, hint", [(64, None), (4096, None), (256, 1000)])
def test_forced_partitions_and_a_short_hint_match_the_reference(partition, hint, merge):
    """Fixed partitions of 64 keys (many per sequence, most CTAs of the short sequences empty), of 4096 (one per
    sequence but the longest), and a grid sized for 1000 keys whose last CTA takes the rest of the 5000-key one."""
    import tvm_cdna4.torch as ours
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.kernels.sm80.paged_target import build, plan
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    contexts = [1, 77, 300, 5000]
    problem = PagedDecodeProblem(4, 32, 8, 128, 2, 16, 313, 400)
    config = PagedDecodeConfig(partition=partition, merge=merge)
    arch = ours.cuda_target(torch.device("cuda", 0))[0]
    options = {} if hint is None else {"context": hint}
    main, merge_kernel = build(problem, config, arch=arch, **options)
    p = plan(problem, config, **options)
    assert p.partition == partition and p.split_kv == -(-(hint or 313 * 16) // partition)
    arrays = paged.random_inputs(problem, seed=5, contexts=contexts)
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    kernels = (load_build(main, "paged_"), merge_kernel and load_build(merge_kernel, "paged_merge_"), p, workspace(p, q.device))
    for _ in range(2):  # the second call through the same tickets (the last CTAs zeroed them)
        o, lse = _run(q, k, v, table, lens, None, None, kernels)
        o_ratio, lse_ratio = paged.compare(problem, arrays, o.float().cpu().numpy(), lse.cpu().numpy())
        assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)
    tickets = [w for w in kernels[3] if w.dtype == torch.uint32]
    assert all(int(t.view(torch.int32).abs().sum()) == 0 for t in tickets) and len(tickets) == (p.merge == "last-cta")


@pytest.mark.parametrize("split_major", [False, True])
@pytest.mark.parametrize("merge", ["kernel", "last-cta"])
@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_the_balanced_partition_matches_the_reference(target, merge, split_major):
    """``PagedDecodeConfig(balance=True)`` (the partition widened on the device to one wave of CTAs, issue 37's batch
    8), its CTAs in either launch order (``split_major``), on the H200 run's batch-8 / 9.4k contexts, GQA 32/8: every
    row within the bound, twice through one workspace."""
    import tvm_cdna4.torch as ours
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    if target == "sm90" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the sm90 kernel needs sm_90")
    contexts = [2611, 3812, 3929, 4696, 7479, 8581, 20409, 23784]
    problem = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 1487, 4700)
    config = PagedDecodeConfig(balance=True, merge=merge, split_major=split_major)
    arch = ours.cuda_target(torch.device("cuda", 0))[0]
    main, merge_kernel = paged_verb(target, "build")(problem, config, arch=arch)
    p = paged_verb(target, "plan")(problem, config)
    assert p.balance >= 1 and p.split_major == split_major
    arrays = paged.random_inputs(problem, seed=8, contexts=contexts)
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    kernels = (load_build(main, "paged_"), merge_kernel and load_build(merge_kernel, "paged_merge_"), p,
               workspace(p, q.device))
    for _ in range(2):
        o, lse = _run(q, k, v, table, lens, None, None, kernels)
        o_ratio, lse_ratio = paged.compare(problem, arrays, o.float().cpu().numpy(), lse.cpu().numpy())
        assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)


@pytest.mark.parametrize("merge_batch", [1, 16])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_the_last_cta_merge_in_rounds_of_merge_batch_matches_the_reference(kv_dtype, merge_batch):
    """``PagedDecodeConfig(merge="last-cta", merge_batch=n)`` (stop 53: the last CTA's partials n a round) on the short
    rows' contexts (batch 8, up to 4712 keys: 10 partitions of 512), GQA 32/8: within the bound, twice through one
    workspace (the tickets back to zero)."""
    import tvm_cdna4.torch as ours
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    contexts = [564, 911, 1203, 1499, 1771, 2086, 2802, 4712]
    problem = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 1200, kv_dtype=kv_dtype)
    config = PagedDecodeConfig(merge="last-cta", merge_batch=merge_batch, partition=512)
    arch = ours.cuda_target(torch.device("cuda", 0))[0]
    main, merge_kernel = paged_verb("sm80", "build")(problem, config, arch=arch)
    p = paged_verb("sm80", "plan")(problem, config)
    assert merge_kernel is None and p.merge == "last-cta" and p.split_kv == 10
    arrays = paged.random_inputs(problem, seed=9, contexts=contexts)
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    scales = (None, None)
    if problem.scaled:  # the e4m3 bytes as they are, the kernel's uint8 operands
        k, v = (torch.from_numpy(np.ascontiguousarray(arrays[n]).view(np.uint8)).cuda() for n in ("K_CACHE", "V_CACHE"))
        scales = tuple(torch.from_numpy(arrays[n]).cuda() for n in ("K_SCALE", "V_SCALE"))
    kernels = (load_build(main, "paged_"), None, p, workspace(p, q.device))
    for _ in range(2):
        o, lse = _run(q, k, v, table, lens, *scales, kernels)
        o_ratio, lse_ratio = paged.compare(problem, arrays, o.float().cpu().numpy(), lse.cpu().numpy())
        assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)


@pytest.mark.parametrize("max_pages, weigh", [(4, True), (32, True), (32, False)])
def test_the_prepared_launch_gives_the_checked_paths_results(max_pages, weigh, monkeypatch):
    """The dispatch benchmark's call (one sequence of 64 keys in pages of 16, 8/8 heads, D 64): 4 pages are one
    partition (one launch, the last-CTA merge), 32 pages two (the last-CTA merge by the model, ``WEIGH_LAST_CTA``;
    off: main, then the merge kernel). The first call takes the checked path, the next ones the prepared launch (its
    LSE a scratch where not returned): the same O and LSE, O a new tensor each call."""
    from tvm_cdna4.kernels.sm80 import paged_decode_plan
    from tvm_cdna4.kernels.sm80.paged_target import plan
    from tvm_cdna4.torch import paged_attention

    monkeypatch.setattr(paged_decode_plan, "WEIGH_LAST_CTA", weigh)  # a plan flag: the op's caches key it
    problem = PagedDecodeProblem(1, 8, 8, 64, 1, 16, max_pages, max_pages)
    merge = "last-cta" if weigh or max_pages == 4 else "kernel"
    assert (plan(problem).split_kv, plan(problem).merge) == ((1 if max_pages == 4 else 2), merge)
    arrays = paged.random_inputs(problem, seed=6, contexts=[64])
    q, k, v, table, lens = cuda_tensors(arrays, torch)
    o, lse = paged_attention(q, k, v, table, lens, return_lse=True)
    assert_within_bound(problem, arrays, o, lse)
    o2 = paged_attention(q, k, v, table, lens)
    o3, lse3 = paged_attention(q, k, v, table, lens, return_lse=True)
    torch.cuda.synchronize()
    assert torch.equal(o2, o) and torch.equal(o3, o) and torch.equal(lse3, lse)
    assert len({o.data_ptr(), o2.data_ptr(), o3.data_ptr()}) == 3 and lse3.data_ptr() != lse.data_ptr()


@pytest.mark.parametrize("fields", [{}, {"fp8_cvt": False}, {"min_ctas": 4}, {"fp8_cvt": False, "min_ctas": 4},
                                    {"tile_keys": 16}, {"tile_keys": 32, "stages": 2},
                                    {"tile_keys": 32, "fp8_cvt": False}])
def test_each_fp8_widening_and_register_cap_matches_the_reference(fields):
    """fp8 KV, 4 queries, odd contexts: the model's kernel (cvt widening on sm_89+, no register cap:
    ``WEIGH_REGISTER_CAP``; wide 32-key tiles: ``WIDE_FP8``), the bits moved instead, the cap forced, 16-key tiles
    and wide ones of 2 stages (``PagedDecodeConfig.fp8_cvt``, ``min_ctas``, ``tile_keys``), launched as ``benchmarks/paged_decode.py --configs`` launches them."""
    import numpy as np

    import tvm_cdna4.torch as ours
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.kernels.sm80.paged_target import build, plan
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    contexts = [1, 77, 300, 5000]
    problem = PagedDecodeProblem(4, 32, 8, 128, 4, 16, 313, 400, kv_dtype="fp8")
    config = PagedDecodeConfig(**fields)
    arch = ours.cuda_target(torch.device("cuda", 0))[0]
    main, merge_kernel = build(problem, config, arch=arch)
    p = plan(problem, config, arch=arch)
    assert p.fp8_cvt == fields.get("fp8_cvt", int(arch[3:5]) >= 89) and p.tile_keys == fields.get("tile_keys", 32)
    arrays = paged.random_inputs(problem, seed=6, contexts=contexts)
    q = torch.from_numpy(arrays["Q"].astype(np.float32)).cuda().bfloat16()
    k, v = (torch.from_numpy(np.ascontiguousarray(arrays[n]).view(np.uint8)).cuda().view(torch.float8_e4m3fn)
            for n in ("K_CACHE", "V_CACHE"))
    table, lens, ks, vs = (torch.from_numpy(arrays[n]).cuda()
                           for n in ("BLOCK_TABLE", "CONTEXT_LENS", "K_SCALE", "V_SCALE"))
    kernels = (load_build(main, "paged_"), merge_kernel and load_build(merge_kernel, "paged_merge_"), p,
               workspace(p, q.device))
    o, lse = _run(q, k, v, table, lens, ks, vs, kernels)
    assert_within_bound(problem, arrays, o, lse)
