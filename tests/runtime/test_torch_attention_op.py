"""Issue 38, the torch op against the kernel alone (``benchmarks/attention_sm90.py --torch-op``): on the CPU, with the
launches stubbed (``benchmarks/dispatch.py``'s ``stubbed`` on an sm_90 device 0), what ``tvm_cdna4.torch.attention``
plans and launches for the benchmark's D 128 rows, against what the benchmark times as "kernel alone"."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4.kernels.sm90 import attention_target  # noqa: E402

dispatch = benchmark_module("dispatch")
bench = benchmark_module("attention_sm90")
D128 = bench.problems(dims=(128,), seqs=(2048, 4096, 16384))
"""The 12 D 128 rows of RESULTS.md's sm90 attention table (issue 38's torch op and kernel alone columns)."""


def _inputs(p, device="cpu"):
    s = p.shapes()
    return [torch.empty(s[n], dtype=torch.bfloat16, device=device) for n in ("Q", "K", "V")]


@pytest.mark.slow  # evidence for stop 55 (attnop): passes before and after
def test_the_op_plans_the_kernel_the_benchmark_times_alone_on_every_d128_row(monkeypatch):
    # the op builds through the target's build verb with its own problem (check_attention_arguments) and config None;
    # the benchmark builds the cost model's config (attention_cost.choose) of its AttentionProblem: the same plan
    planned = []

    def build(problem, config=None, arch="sm_90a"):
        planned.append(attention_target.plan(problem, config))
        return types.SimpleNamespace(config=planned[-1].config)

    assert len(D128) == 12
    with dispatch.stubbed("sm_90", "sm90"):
        with monkeypatch.context() as m:
            m.setattr(attention_target, "build", build)
            for p in D128:
                q, k, v = _inputs(p)
                tt.attention(q, k, v, causal=p.causal)
                assert planned[-1] == attention_target.plan(p, bench.default_config(p)), p
                assert tt.attention_kernel(q, p).plan == planned[-1]  # the benchmark's torch_op_config: the same kernel
                del q, k, v
    assert len(planned) == 12


def test_a_prepared_call_launches_the_kernel_once_and_allocates_o_only():
    # in the benchmark's CUDA graph each op call is its prepared launch: no copy, memset or cast around the kernel,
    # O of q's shape, contiguous (the kernel's [B, H, S, D], no transpose), LSE the key's scratch
    from aten_ops import Ops

    p = D128[0]
    q, k, v = _inputs(p)
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        tt.attention(q, k, v, causal=p.causal)  # the checked path (the custom op), which prepares the launch
        (launch,) = tt._CALLS.values()
        recorder = Ops()
        with recorder:
            o, lse = launch(q, k, v, False)
        assert len(calls) == 2 and calls[-1] == (q, k, v, o, lse)  # one launch a call, no workspace after LSE
        assert recorder.ops == ["aten.empty_like.default"]
        assert o.shape == p.shapes()["O"] and o.is_contiguous() and o.dtype == q.dtype
        assert lse is tt.empty_lse(p.shapes()["LSE"], q.device)


def test_timing_order_alternates_the_rounds():
    names = ["cudnn", "flash", "sm90 default", "torch op"]
    assert [bench.timing_order(names, r) for r in (0, 1)] == [names, names]
    assert bench.timing_order(names, 0, "alternate") == names
    assert bench.timing_order(names, 1, "alternate") == names[::-1] and bench.timing_order(names, 2, "alternate") == names
    with pytest.raises(ValueError, match="--order"):
        bench.timing_order(names, 0, "shuffled")


def test_op_over_kernel_reads_the_run_and_each_round():
    row = dict(default="sm90 c", tflops={"torch op": 588.0, "sm90 c": 635.0},
               rounds=[{"sm90 c": 1.0, "torch op": 1.1}, {"torch op": 2.0, "sm90 c": 2.0}])
    whole, by_round = bench.op_over_kernel(row)
    assert whole == pytest.approx(588 / 635) and by_round == pytest.approx([1 / 1.1, 1.0])
    assert bench.op_over_kernel(dict(row, tflops={"sm90 c": 635.0})) == (None, [])


def test_direction_ratios_split_the_rounds_in_order_from_the_reversed():
    row = dict(default="sm90 c", order="alternate", tflops={"torch op": 1.0, "sm90 c": 1.0},
               rounds=[{"sm90 c": 1.0, "torch op": 1.1}, {"torch op": 2.0, "sm90 c": 2.0}, {"sm90 c": 1.0, "torch op": 1.2}])
    even, odd = bench.direction_ratios([row, row])
    assert even == pytest.approx([1 / 1.1, 1 / 1.2] * 2) and odd == pytest.approx([1.0, 1.0])


def test_graph_seconds_settles_untimed_replays_first():
    # --settle-ms: the graph replayed untimed for settle_s before its reps are timed; none by default
    import contextlib

    class Graph:
        replays = 0

        def replay(self):
            Graph.replays += 1

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def elapsed_time(self, end):
            return 2.0

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    cuda = types.SimpleNamespace(Stream=lambda: stream, current_stream=lambda: stream, CUDAGraph=Graph, Event=Event,
                                 stream=lambda s: contextlib.nullcontext(), graph=lambda g: contextlib.nullcontext(),
                                 synchronize=lambda: None)
    fake, ran = types.SimpleNamespace(cuda=cuda), []
    torch_gemm = benchmark_module("torch_gemm")
    assert torch_gemm._graph_seconds(fake, [lambda: ran.append(1)] * 5, 3) == pytest.approx(2e-3 / 5)
    assert Graph.replays == 1 + 3 and len(ran) == 2 + 5  # warm-up calls, then the captured ones
    torch_gemm._graph_seconds(fake, [lambda: None] * 5, 3, settle_s=0.02)
    assert Graph.replays > 2 * (1 + 3)
