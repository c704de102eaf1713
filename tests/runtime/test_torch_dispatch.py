"""``tvm_cdna4.torch``'s eager fast path (the prepared launch of each call key), on CPU tensors with the
kernel launch stubbed (``benchmarks/dispatch.py``'s ``stubbed``: the launch is tvm_ffi's ``testing.nop``,
its arguments recorded): what a repeated call launches, and when it does not take the fast path.
Its speed is ``benchmarks/dispatch.py``'s to measure, not a test's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402

dispatch = benchmark_module("dispatch")
BF = dict(dtype=torch.bfloat16)


@pytest.fixture
def calls(monkeypatch):
    """The stubbed ops; ``checks`` counts ``check_arguments`` calls (the checked path)."""
    checks = []
    real = tt.check_arguments
    monkeypatch.setattr(tt, "check_arguments", lambda *a: (checks.append(1), real(*a))[1])
    with dispatch.stubbed() as recorded:
        recorded.checks = checks
        recorded.record = True
        yield recorded


def test_a_repeated_call_launches_the_prepared_closure_without_checks(calls):
    a, b = torch.zeros(3, 64, **BF), torch.zeros(32, 64, **BF)
    bias, rs, res = torch.zeros(32), torch.zeros(3), torch.zeros(3, 32, dtype=torch.float32)
    kw = dict(out_dtype=torch.float32, bias=bias, row_scale=rs, residual=res, activation="relu")
    y1 = tt.gemm(a, b, **kw)
    assert len(calls.checks) == 2 and len(tt._CALLS) == 1  # the checked path: gemm's and the op's checks
    y2 = tt.gemm(a, b, **kw)
    assert len(calls.checks) == 2  # no check, no op: the prepared launch
    assert (y2.shape, y2.dtype) == ((3, 32), torch.float32) and y2.data_ptr() != y1.data_ptr()
    order = Fusion(activation="relu", bias=True, row_scale=True, residual=True).inputs()
    want = [a, b, y2, *(dict(bias=bias, row_scale=rs, residual=res)[n] for n in order)]
    assert [t.data_ptr() for t in calls[-1]] == [t.data_ptr() for t in want]
    assert [t.data_ptr() for t in calls[0]][3:] == [t.data_ptr() for t in want][3:]  # the op passed the same order
    out = torch.empty(3, 32)
    assert tt.gemm(a, b, out=out, **{k: v for k, v in kw.items() if k != "out_dtype"}) is out
    assert tt.gemm(a, b, out=out, **{k: v for k, v in kw.items() if k != "out_dtype"}) is out
    assert calls[-1][2] is out and len(calls.checks) == 4  # out= is a key of its own: checked once


def test_another_m_is_another_key_and_each_launches_its_bucket(calls):
    b = torch.zeros(32, 64, **BF)
    for M in (1, 17, 1, 17):
        tt.gemm(torch.zeros(M, 64, **BF), b)
    assert len(calls.checks) == 4 and len(tt._CALLS) == 2
    assert [c[2].shape[0] for c in calls] == [1, 17, 1, 17]
    (kernel,) = tt.kernel_cache().values()
    assert set(kernel._loaded) == {kernel.dynamic.bucket(1), kernel.dynamic.bucket(17)}
    tt.kernel_cache().clear()
    assert tt._CALLS == {}  # the prepared launches go with the kernels


@pytest.mark.parametrize("drop", [lambda c, k: c.__delitem__(k), lambda c, k: c.pop(k), lambda c, k: c.popitem()])
def test_removing_one_kernel_forgets_the_prepared_launches_that_hold_it(calls, drop):
    # a prepared launch holds its kernel: once the kernel is removed (a test rebuilding it under other planner
    # flags), the next call must take the checked path and build afresh, not launch the removed kernel
    a, b = torch.zeros(3, 64, **BF), torch.zeros(32, 64, **BF)
    tt.gemm(a, b)
    tt.gemm(a, b)
    assert len(calls.checks) == 2 and len(tt._CALLS) == 1
    (key,) = tt.kernel_cache()
    drop(tt.kernel_cache(), key)
    assert tt._CALLS == {} and tt.kernel_cache() == {}
    tt.gemm(a, b)
    assert len(calls.checks) == 4 and len(tt.kernel_cache()) == 1  # checked again, the kernel built again
    tt.kernel_cache().clear()


@pytest.mark.parametrize("bad,match", [
    (lambda: torch.zeros(64, 32, **BF).t(), "argument 'b': non-contiguous tensors are refused"),
    (lambda: torch.zeros(32 * 64 + 1, **BF)[1:].view(32, 64), "argument 'b': its data pointer"),
])
def test_a_bad_tensor_of_a_prepared_shape_gets_the_checked_error(calls, bad, match):
    a = torch.zeros(2, 64, **BF)
    tt.gemm(a, torch.zeros(32, 64, **BF))
    n = len(calls)
    with pytest.raises(ValueError, match=match):
        tt.gemm(a, bad())
    assert len(calls) == n  # nothing launched


def test_grouped_and_attention_launch_their_arguments_in_order(calls):
    x, w, offsets = torch.zeros(16, 64, **BF), torch.zeros(2, 32, 64, **BF), torch.tensor([0, 8, 16], dtype=torch.int32)
    for _ in range(2):
        y = tt.grouped_gemm(x, w, offsets, col_scale=torch.zeros(2, 32))
    assert len(tt._CALLS) == 1 and calls[-1][:4] == (x, w, y, offsets) and calls[-1][4].shape == (2, 32)
    q, k = torch.zeros(1, 2, 64, 64, **BF), torch.zeros(1, 1, 64, 64, **BF)
    tt.attention(q, k, k, causal=True)
    o, lse = tt.attention(q, k, k, causal=True, return_lse=True)
    assert len(tt._CALLS) == 2 and calls[-1] == (q, k, k, o, lse) and lse.shape == (1, 2, 64)
    assert tt.attention(q, k, k, causal=True).shape == q.shape and len(calls) == 5


def test_what_takes_the_custom_op(calls):
    a, b = torch.zeros(2, 64, **BF), torch.zeros(32, 64, **BF)
    assert tt._key("gemm", ("nt",), a, b) is not None
    assert tt._key("gemm", ("nt",), a.requires_grad_(), b) is None  # autograd: the op's answer
    with torch.no_grad():
        assert tt._key("gemm", ("nt",), a, b) is not None
    assert tt._key("gemm", (["nt"],), a.detach(), b) is None  # unhashable: the checks name it
    assert tt._key("gemm", ("nt",), torch.nn.Parameter(b, requires_grad=False), b) is not None
    from torch._subclasses.fake_tensor import FakeTensorMode

    d = a.detach()
    with FakeTensorMode():
        assert tt._key("gemm", ("nt",), d, b) is None
    assert torch.func.vmap(lambda x: (calls.append(tt._key("gemm", (), x)), x)[1])(a.detach()).shape == a.shape
    assert calls[-1] is None
    assert tt._key("gemm", ("nt",), a.detach(), torch.empty(32, 64, **BF, device="meta")) is not None
    tt.gemm(torch.empty(2, 64, **BF, device="meta"), torch.empty(32, 64, **BF, device="meta"))
    assert tt._CALLS == {}  # a meta call traces: nothing prepared


def test_a_prepared_launch_into_out_bumps_its_version_as_the_op_does(calls):
    # autograd must see the write: a tensor saved for backward then written by gemm(out=) is an error there
    a, b, out = torch.zeros(3, 64, **BF), torch.zeros(32, 64, **BF), torch.zeros(3, 32, **BF)
    tt.gemm(a, b, out=out)  # the checked path (the custom op's mutates_args bumps the version)
    before = out._version
    tt.gemm(a, b, out=out)  # the prepared launch
    assert len(calls.checks) == 2 and out._version == before + 1
    w = torch.ones(3, 32, **BF, requires_grad=True)
    y = (w * out).sum()  # saves out for w's gradient
    tt.gemm(a, b, out=out)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_tensor_without_strides_takes_the_checked_path_and_its_error(calls):
    a, b = torch.zeros(3, 64, **BF), torch.zeros(32, 64, **BF)
    tt.gemm(a, b)
    with pytest.raises(ValueError, match="argument 'b'"):
        tt.gemm(a, b.to_sparse())


def test_past_the_limit_the_oldest_prepared_launch_goes(calls, monkeypatch):
    monkeypatch.setattr(tt, "CALL_CACHE_LIMIT", 2)
    b = torch.zeros(32, 64, **BF)
    for M in (1, 2, 3):
        tt.gemm(torch.zeros(M, 64, **BF), b)
    assert len(tt._CALLS) == 2
    assert len(calls.checks) == 6
    tt.gemm(torch.zeros(3, 64, **BF), b)  # the newest: still prepared
    assert len(calls.checks) == 6
    tt.gemm(torch.zeros(1, 64, **BF), b)  # the oldest went: checked again
    assert len(calls.checks) == 8


def test_a_launch_makes_the_tensors_device_current_only_where_it_is_not(monkeypatch):
    """The loaded kernels launch on the current CUDA device: ``on_device`` switches to the tensors' device where
    another is current (a second GPU), and costs one read where it already is."""
    import torch

    import tvm_cdna4.torch as tt

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert tt.on_device(torch.device("cuda", 0)) is tt._SAME_DEVICE
    assert tt.on_device(torch.device("cpu")) is tt._SAME_DEVICE
    other = tt.on_device(torch.device("cuda", 1))
    assert isinstance(other, torch.cuda.device) and other.idx == 1


def _paged(pages=4, max_pages=4, kv=torch.bfloat16):
    """The dispatch benchmark's paged call (one sequence of 64 keys in pages of 16, 8/8 heads, D 64), CPU tensors;
    ``max_pages`` 32: 512 keys of capacity, two partitions (the merge kernel)."""
    q, k = torch.zeros(1, 1, 8, 64, **BF), torch.zeros(max(pages, max_pages), 16, 8, 64, dtype=kv)
    table = torch.arange(max_pages, dtype=torch.int32).view(1, max_pages)
    return q, k, k.clone(), table, torch.tensor([64], dtype=torch.int32)


def test_a_paged_call_of_one_partition_is_one_launch_its_workspace_converted_once(calls):
    import tvm_ffi

    args = _paged()
    o0 = tt.paged_attention(*args)  # the checked path (the custom op): one launch, O and LSE its own
    assert len(calls) == 1 and len(tt._CALLS) == 1
    o1, o2 = tt.paged_attention(*args), tt.paged_attention(*args)  # the prepared launch
    assert len(calls) == 3  # one launch a call: main merges in its last CTA (no merge kernel)
    main = calls[-1]
    assert main[:5] == args and all(isinstance(t, tvm_ffi.Tensor) for t in main[5:9])  # WO, WM, WL, TICKETS
    assert [tuple(t.shape) for t in main[5:9]] == [(8, 1, 64), (8, 1), (8, 1), (8,)]  # 8 slots of 1 row
    assert all(a is b for a, b in zip(calls[-2][5:9], main[5:9]))  # converted once, the same objects every call
    assert main[9] is o2 and len({o0.data_ptr(), o1.data_ptr(), o2.data_ptr()}) == 3  # O: a new tensor per call
    assert (o2.shape, o2.dtype) == (args[0].shape, torch.bfloat16) and main[10].shape == (1, 1, 8)


def test_the_lse_nobody_reads_goes_to_a_scratch_and_a_returned_one_is_new(calls):
    args = _paged()
    tt.paged_attention(*args)
    tt.paged_attention(*args)
    tt.paged_attention(*args)
    scratch = calls[-1][-1]
    assert calls[-2][-1] is scratch and scratch.dtype == torch.float32  # return_lse False: the key's scratch
    o, lse = tt.paged_attention(*args, return_lse=True)
    o2, lse2 = tt.paged_attention(*args, return_lse=True)
    assert calls[-1][-1] is lse2 and lse2.shape == (1, 1, 8) and lse2.dtype == torch.float32
    assert len({lse.data_ptr(), lse2.data_ptr(), scratch.data_ptr()}) == 3 and o.data_ptr() != o2.data_ptr()
    q, k = torch.zeros(1, 2, 64, 64, **BF), torch.zeros(1, 1, 64, 64, **BF)  # attention: the same
    tt.attention(q, k, k)
    tt.attention(q, k, k)
    tt.attention(q, k, k)
    scratch = calls[-1][-1]
    assert calls[-2][-1] is scratch and calls[-1][3].data_ptr() != calls[-2][3].data_ptr()
    o, lse = tt.attention(q, k, k, return_lse=True)
    assert calls[-1][3:] == (o, lse) and lse.data_ptr() != scratch.data_ptr() and lse.shape == (1, 2, 64)
    assert o.is_contiguous() and lse.is_contiguous()


def test_a_paged_call_of_two_partitions_launches_main_then_merge(calls, monkeypatch):
    from tvm_cdna4.kernels.sm80 import paged_decode_plan

    monkeypatch.setattr(paged_decode_plan, "WEIGH_LAST_CTA", False)  # the merge kernel (the last CTA's: below)
    args = _paged(max_pages=32)  # 512 keys of capacity: two partitions of 256
    for _ in range(3):
        o = tt.paged_attention(*args)
    assert len(calls) == 6 and len(tt._CALLS) == 1
    main, merge = calls[-2:]
    assert main[:5] == args and len(main) == 8  # no O, no LSE: the partials into WO, WM, WL
    assert merge[0] is args[4] and merge[1:4] == main[5:8] and merge[4] is o and merge[5].shape == (1, 1, 8)


def test_a_paged_call_of_two_partitions_merges_in_its_last_cta_by_default(calls):
    args = _paged(max_pages=32)  # two partitions, merged by the last CTA (paged_decode_plan.choose_merge): one launch
    for _ in range(3):
        o = tt.paged_attention(*args)
    assert len(calls) == 3 and len(tt._CALLS) == 1
    assert calls[-1][:5] == args and any(a is o for a in calls[-1][5:])


def test_fp8_caches_launch_as_bytes_with_their_scales(calls):
    q, k, v, table, lens = _paged(kv=torch.float8_e4m3fn)
    scales = dict(k_scale=torch.ones(8), v_scale=torch.ones(8))
    for _ in range(2):
        tt.paged_attention(q, k, v, table, lens, **scales)
    assert len(calls) == 2 and len(tt._CALLS) == 1
    main = calls[-1]
    assert main[1].dtype == main[2].dtype == torch.uint8 and main[1].data_ptr() == k.data_ptr()
    assert main[5] is scales["k_scale"] and main[6] is scales["v_scale"]


@pytest.mark.parametrize("operand", ["q", "k_cache", "v_cache"])
def test_a_misaligned_or_strided_tensor_of_a_prepared_paged_shape_gets_the_checked_error(calls, operand):
    from tvm_cdna4.errors import ContractError

    args = _paged()
    tt.paged_attention(*args)
    tt.paged_attention(*args)
    n, at = len(calls), ("q", "k_cache", "v_cache").index(operand)
    t = args[at]
    shifted = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape)
    with pytest.raises(ContractError, match="16-byte aligned") as info:
        tt.paged_attention(*args[:at], shifted, *args[at + 1:])
    assert info.value.operand == operand and info.value.check == "alignment"
    strided = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)[..., ::2]
    with pytest.raises(ContractError, match="contiguous") as info:
        tt.paged_attention(*args[:at], strided, *args[at + 1:])
    assert info.value.operand == operand and info.value.check == "layout"
    with pytest.raises(ContractError, match="dtype") as info:  # another key: the checked path
        tt.paged_attention(*args[:at], t.half(), *args[at + 1:])
    assert info.value.operand == ("k_cache" if operand == "q" else operand)
    with pytest.raises(ContractError, match="q's device") as info:
        tt.paged_attention(*args[:at], t.to("meta"), *args[at + 1:])
    assert info.value.operand == ("k_cache" if operand == "q" else operand)
    assert len(calls) == n  # nothing launched


def test_a_launch_is_bound_to_its_device_once(monkeypatch):
    """``bound``: the kernel itself where no other device can be current (one GPU, or not CUDA), else under
    ``on_device`` each call."""
    import contextlib

    def fn(*args):
        return args

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert tt.bound(fn, torch.device("cuda", 0)) is fn and tt.bound(fn, torch.device("cpu")) is fn
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    entered = []
    monkeypatch.setattr(tt, "on_device", lambda device: contextlib.nullcontext(entered.append(device)))
    switched = tt.bound(fn, torch.device("cuda", 1))
    assert switched is not fn and switched(1, 2) == (1, 2) and entered == [torch.device("cuda", 1)]


def test_the_lse_scratch_outlives_its_prepared_launch_and_goes_with_the_kernels(calls):
    # a CUDA graph captured through a prepared launch keeps the scratch's address: evicting the launch from the
    # call cache (its 4096-key limit) must not free it; kernel_cache().clear() frees it with the kernels
    args = _paged()
    for _ in range(2):
        tt.paged_attention(*args)
    scratch = calls[-1][-1]
    tt._CALLS.clear()  # what _store's eviction does to the oldest key
    for _ in range(2):
        tt.paged_attention(*args)
    assert calls[-1][-1] is scratch and any(t is scratch for t in tt._SCRATCH.values())
    tt.kernel_cache().clear()
    assert tt._SCRATCH == {} and tt._CALLS == {}


def test_clearing_the_kernel_cache_frees_the_paged_workspaces_and_scale_buffers(calls, monkeypatch):
    # a user clearing the cache expects the memory back: the paged op's kernels and workspaces, and the [Hkv]
    # buffers its prepared launches broadcast one-element and float scales into, go with the kernels
    import weakref

    from tvm_cdna4 import torch_paged

    monkeypatch.setattr(torch_paged, "_SCALES", {})
    q, k, v, table, lens = _paged(kv=torch.float8_e4m3fn)
    for scales in (dict(k_scale=torch.tensor(0.5), v_scale=torch.tensor(0.25)), dict(k_scale=0.5, v_scale=2.0)):
        for _ in range(2):  # the checked path, then the prepared launch (its buffers)
            tt.paged_attention(q, k, v, table, lens, **scales)
    assert len(torch_paged._KERNELS) == 1 and len(torch_paged._SCALES) == 4
    (work,) = (entry[3] for entry in torch_paged._KERNELS.values())
    held = [weakref.ref(t) for t in (*work, *torch_paged._SCALES.values())]
    del work
    calls.clear()  # the recorded launches hold the tensors too
    tt.kernel_cache().clear()
    assert torch_paged._KERNELS == {} and torch_paged._SCALES == {} and tt._CALLS == {}
    assert [r() for r in held] == [None] * len(held)  # freed, not only forgotten
    tt.paged_attention(q, k, v, table, lens, k_scale=0.5, v_scale=2.0)  # built afresh
    assert len(torch_paged._KERNELS) == 1 and len(calls) == 1


def test_a_changed_paged_row_is_a_new_key(calls, monkeypatch):
    from tvm_cdna4 import torch_paged

    args = _paged()
    for _ in range(2):
        tt.paged_attention(*args)
    assert len(tt._CALLS) == 1
    monkeypatch.setitem(torch_paged.PAGED_ROW, "sm90", "sm90")  # the device here is sm80: its row stays sm80's
    tt.paged_attention(*args)
    assert len(tt._CALLS) == 2  # the shape that ran before is prepared again, under the new mapping
