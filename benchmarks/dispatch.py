"""What one eager call of a ``tvm_cdna4.torch`` op costs on the host, beside torch's equivalent.

    python3 benchmarks/dispatch.py --out $OUT     # on a CUDA GPU: the table last, $OUT/dispatch.json
    python3 benchmarks/dispatch.py --cpu          # no GPU: the per-call Python path, stage by stage

GPU (issue 37 item 5: "every op called eagerly costs at most torch's equivalent + 5 µs at its smallest
shapes"): each op at its smallest shape beside torch's op, ``--calls`` calls from Python after a
warm-up (the kernels built and loaded first), per-call µs three ways: ``host`` (each call's own Python
time, the GPU's queue drained every 16 calls outside the timing: the dispatch cost alone, what the bar is
about), ``async`` (wall / calls, one ``torch.cuda.synchronize`` at the end: the dispatch cost while it
exceeds the kernel's time, else the kernel's) and ``sync`` (a synchronize after every call: launch latency
and the kernel included). The rows:

* ``gemm`` M = 1, bf16, N = K = 4096 and N = K = 256, beside ``torch.nn.functional.linear``;
* ``grouped_gemm`` 2 groups of 8 rows, N = K = 256, beside ``torch._grouped_mm`` where torch has it;
* ``attention`` batch 1, 1 head, seq 64, head dim 64, beside
  ``torch.nn.functional.scaled_dot_product_attention``;
* ``paged_attention`` one sequence of 64 keys in 4 pages of 16, 8 heads, head dim 64, beside SDPA on the
  same keys held densely.

CPU (``--cpu``): the ops' Python path with the kernel launch stubbed (``stubbed``: CPU tensors pass the
device check, the loaded kernels are tvm_ffi's ``testing.nop``, nothing is built), each stage timed
with ``time.perf_counter_ns`` over ``--cpu-calls`` calls (the median and the minimum of 20 interleaved rounds:
the machine may be shared): where the host time of a call goes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(1, ROOT)

import torch  # noqa: E402

import tvm_cdna4.torch as tt  # noqa: E402


# ------------------------------------------------------------------------------------ the CPU harness


@contextlib.contextmanager
def stubbed(arch: str = "sm_80", target: str = "sm80"):
    """The ops on CPU tensors, every kernel launch a call of tvm_ffi's ``testing.nop`` (the same
    argument conversion as a loaded kernel, nothing run): CPU tensors pass the device check, device 0
    is ``(arch, target)``, the GEMMs' buckets and the attention are planned, not built. Yields the
    list of the launches' argument tuples when ``record`` is set on it (``calls.record = True``)."""
    import tvm_ffi

    from tvm_cdna4.kernels.gemm.dynamic_m import DynamicGemm
    from tvm_cdna4.kernels.sm80 import attention_target as sm80_attention
    from tvm_cdna4.kernels.sm80.attention_plan import plan_sm80_attention
    from tvm_cdna4.kernels.sm90 import attention_target as sm90_attention
    from tvm_cdna4.kernels.sm80 import paged_target
    from tvm_cdna4.runtime import cuda
    from tvm_cdna4 import _torch_checks as checks
    from tvm_cdna4.torch_paged import HOOKS as paged_hooks

    nop = tvm_ffi.get_global_func("testing.nop")

    class Calls(list):
        record = False

    calls = Calls()

    def launch(*args):
        if calls.record:
            calls.append(args)
        return nop(*args)

    saved = dict(_DEVICES=tt._DEVICES, _KERNELS=tt._KERNELS, _SM90_REFUSED=tt._SM90_REFUSED)
    device_types = checks.DEVICE_TYPES  # the checks read it there (tvm_cdna4._torch_checks)
    paged_kernels = tt._paged._KERNELS
    patches = [(DynamicGemm, "kernel_for", lambda self, M: None),
               (cuda, "load_build", lambda exe, prefix="", workdir=None: launch),
               (sm80_attention, "build",  # the attention targets' build verbs (torch.attention_kernel's)
                lambda problem, config=None, arch="sm_80": types.SimpleNamespace(config=plan_sm80_attention(
                    problem, config, arch=arch).config)),
               (sm90_attention, "build",
                lambda problem, config=None, arch="sm_90a": types.SimpleNamespace(config=sm90_attention.choose(problem))),
               (paged_target, "build", lambda problem, arch="sm_80": (
                   "main", "merge" if paged_target.plan(problem).merge_params else None)),
               (torch.cuda, "current_device", lambda: 0),
               (torch.cuda, "device", lambda device: contextlib.nullcontext())]
    old = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        checks.DEVICE_TYPES = (*device_types, "cpu")
        paged_hooks["DEVICE_TYPES"] = checks.DEVICE_TYPES
        tt._paged._KERNELS = {}
        tt._DEVICES, tt._KERNELS, tt._SM90_REFUSED = {0: (arch, target)}, type(tt._KERNELS)(), set()
        tt.__dict__.get("_CALLS", {}).clear()
        tt.__dict__.get("_SCRATCH", {}).clear()
        yield calls
    finally:
        for obj, name, value in old:
            setattr(obj, name, value)
        for name, value in saved.items():
            setattr(tt, name, value)
        checks.DEVICE_TYPES = device_types
        paged_hooks["DEVICE_TYPES"], tt._paged._KERNELS = device_types, paged_kernels
        tt.__dict__.get("_CALLS", {}).clear()
        tt.__dict__.get("_SCRATCH", {}).clear()


def cpu_inputs() -> dict:
    """The smallest shapes of the GPU rows, as CPU tensors: ``{op: (args, kwargs)}``."""
    bf = dict(dtype=torch.bfloat16)
    x, w = torch.zeros(16, 256, **bf), torch.zeros(2, 256, 256, **bf)
    q = torch.zeros(1, 1, 64, 64, **bf)
    kc = torch.zeros(4, 16, 8, 64, **bf)  # the GPU row's: one sequence of 64 keys in 4 pages of 16, 8/8 heads
    paged = (torch.zeros(1, 1, 8, 64, **bf), kc, kc.clone(), torch.arange(4, dtype=torch.int32).view(1, 4),
             torch.tensor([64], dtype=torch.int32))
    return {"gemm": ((torch.zeros(1, 256, **bf), torch.zeros(256, 256, **bf)), {}),
            "gemm_bias_silu": ((torch.zeros(1, 256, **bf), torch.zeros(256, 256, **bf)),
                               dict(bias=torch.zeros(256), activation="silu")),
            "grouped_gemm": ((x, w, torch.tensor([0, 8, 16], dtype=torch.int32)), {}),
            "attention": ((q, q.clone(), q.clone()), {}),
            "paged_attention": (paged, {})}


def per_call_ns(stages: dict, calls: int, rounds: int = 20) -> dict:
    """``{stage: (median, min)}`` ns per call of each zero-argument callable of ``stages``, after ``calls // 10``
    warm-up calls each: ``rounds`` rounds of ``calls // rounds`` calls per stage, the stages interleaved in each
    round (a shared, noisy machine's slow spells fall on every stage alike), the median and the minimum of the
    rounds' means."""
    for fn in stages.values():
        for _ in range(max(1, calls // 10)):
            fn()
    n, means = max(1, calls // rounds), {name: [] for name in stages}
    for _ in range(rounds):
        for name, fn in stages.items():
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            means[name].append((time.perf_counter_ns() - t0) / n)
    return {name: (statistics.median(m), min(m)) for name, m in means.items()}


def cpu_stages(calls: int = 10_000) -> dict:
    """``{stage: (median, min) µs per call}`` of the ops' Python path (``stubbed``): the whole eager call of each
    op, and the pieces it is made of (``per_call_ns``)."""
    import tvm_ffi

    nop = tvm_ffi.get_global_func("testing.nop")
    out = {}
    with stubbed():
        ins = cpu_inputs()
        (a, b), _ = ins["gemm"]
        c = torch.empty(1, 256, dtype=torch.bfloat16)
        fa, fb, fc = (tvm_ffi.from_dlpack(t) for t in (a, b, c))
        stages = {
            "gemm: the whole call": lambda: tt.gemm(a, b),
            "gemm bias+silu: the whole call": lambda: tt.gemm(*ins["gemm_bias_silu"][0], **ins["gemm_bias_silu"][1]),
            "grouped_gemm: the whole call": lambda: tt.grouped_gemm(*ins["grouped_gemm"][0]),
            "attention: the whole call": lambda: tt.attention(*ins["attention"][0]),
            "attention return_lse: the whole call": lambda: tt.attention(*ins["attention"][0], return_lse=True),
            "paged_attention: the whole call": lambda: tt.paged_attention(*ins["paged_attention"][0]),
            "paged_attention return_lse: the whole call":
                lambda: tt.paged_attention(*ins["paged_attention"][0], return_lse=True),
            **serving_stages(ins),
            "check_arguments (gemm)": lambda: tt.check_arguments(a, b, "nt", None, None, None, None, None, None, None),
            "torch.ops.tvm_cdna4.gemm (op dispatch + body)":
                lambda: torch.ops.tvm_cdna4.gemm(a, b, "nt", None, None, None, None, None, None),
            "the op's body alone (_gemm_op._init_fn)":
                lambda: tt._gemm_op._init_fn(a, b, "nt", None, None, None, None, None, None),
            "torch.empty of the output": lambda: torch.empty((1, 256), dtype=torch.bfloat16, device=a.device),
            "torch.compiler.is_compiling()": torch.compiler.is_compiling,
            "nop(a, b, c): torch tensors": lambda: nop(a, b, c),
            "nop(a, b, c): tvm_ffi tensors": lambda: nop(fa, fb, fc),
            "tvm_ffi.from_dlpack, 3 tensors": lambda: [tvm_ffi.from_dlpack(t) for t in (a, b, c)],
        }
        for name, (median, least) in per_call_ns(stages, calls).items():
            out[name] = (median / 1e3, least / 1e3)
    return out


def serving_stages(ins: dict) -> dict:
    """The whole eager call of what a serving stack passes (stop 55, serving2): fp8 paged caches with per-kv-head
    scales, one-element ones (vLLM's ``layer._k_scale``: copied to every head each call) and floats (FlashInfer's),
    ``gemm`` of an activation ``[1, 1, K]`` (viewed as [M, K]) and of M = 0."""
    fp8 = torch.float8_e4m3fn
    q, kc, vc, table, lens = ins["paged_attention"][0]
    paged = (q, kc.to(fp8), vc.to(fp8), table, lens)
    heads, one = torch.ones(kc.shape[2]), torch.ones(())
    (a, b), _ = ins["gemm"]
    a3, a0 = a.view(1, *a.shape), a[:0].contiguous()
    return {"paged_attention fp8, [Hkv] scales: the whole call": lambda: tt.paged_attention(*paged, k_scale=heads,
                                                                                            v_scale=heads),
            "paged_attention fp8, 0-d scales: the whole call": lambda: tt.paged_attention(*paged, k_scale=one,
                                                                                          v_scale=one),
            "paged_attention fp8, float scales: the whole call": lambda: tt.paged_attention(*paged, k_scale=0.5,
                                                                                            v_scale=0.5),
            "gemm [1, 1, K]: the whole call": lambda: tt.gemm(a3, b),
            "gemm M = 0: the whole call": lambda: tt.gemm(a0, b)}


def cpu_report(calls: int) -> str:
    """``cpu_stages`` as lines of text (median µs, min µs), slowest first."""
    rows = sorted(cpu_stages(calls).items(), key=lambda kv: -kv[1][0])
    return "\n".join(["   median       min"] + [f"{us:9.2f} {least:9.2f} µs  {name}" for name, (us, least) in rows])


# ------------------------------------------------------------------------------------ on the GPU


def gpu_rows() -> list[tuple[str, object, object]]:
    """``(row, ours, torch's or None)``: zero-argument callables on CUDA tensors at the smallest shapes."""
    F = torch.nn.functional
    bf = dict(dtype=torch.bfloat16, device="cuda")
    rows = []
    for n in (4096, 256):
        a, w = torch.randn(1, n, **bf), torch.randn(n, n, **bf)
        rows.append((f"gemm M=1 N=K={n}", lambda a=a, w=w: tt.gemm(a, w), lambda a=a, w=w: F.linear(a, w)))
    x, w = torch.randn(16, 256, **bf), torch.randn(2, 256, 256, **bf)
    offsets = torch.tensor([0, 8, 16], dtype=torch.int32, device="cuda")
    ends, wt = offsets[1:].contiguous(), w.transpose(-2, -1)
    ref = (lambda: torch._grouped_mm(x, wt, offs=ends)) if hasattr(torch, "_grouped_mm") else None
    rows.append(("grouped_gemm G=2 T=16 N=K=256", lambda: tt.grouped_gemm(x, w, offsets), ref))
    q, k, v = (torch.randn(1, 1, 64, 64, **bf) for _ in range(3))
    rows.append(("attention 1x1x64x64", lambda: tt.attention(q, k, v),
                 lambda: F.scaled_dot_product_attention(q, k, v)))
    # paged decode: one sequence of 64 keys in 4 pages of 16, 8 heads on 8 kv heads, D 64; torch's equivalent
    # is SDPA on the same keys held densely (a serving stack without paged attention)
    qp = torch.randn(1, 1, 8, 64, **bf)
    kc, vc = (torch.randn(4, 16, 8, 64, **bf) for _ in range(2))
    table = torch.arange(4, dtype=torch.int32, device="cuda").view(1, 4)
    lens = torch.tensor([64], dtype=torch.int32, device="cuda")
    qd, kd, vd = qp.transpose(1, 2), kc.reshape(1, 64, 8, 64).transpose(1, 2), vc.reshape(1, 64, 8, 64).transpose(1, 2)
    rows.append(("paged_attention B=1 8/8 heads 64 keys", lambda: tt.paged_attention(qp, kc, vc, table, lens),
                 lambda: F.scaled_dot_product_attention(qd, kd, vd)))
    return rows


def host_us(fn, calls: int, queue: int = 16) -> float:
    """µs per call spent in Python (the host's dispatch alone): each call timed on its own, the GPU's queue
    drained every ``queue`` calls outside the timing, so that a launch never waits for a full queue and a slow
    kernel is not counted."""
    torch.cuda.synchronize()
    spent = 0.0
    for i in range(calls):
        t0 = time.perf_counter()
        fn()
        spent += time.perf_counter() - t0
        if i % queue == queue - 1:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return spent / calls * 1e6


def per_call_us(fn, calls: int, sync_each: bool) -> float:
    """µs per call of ``calls`` calls from Python: wall / calls, synchronized once at the end or after
    every call (``sync_each``)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def gpu_table(calls: int) -> list[dict]:
    """Each row's per-call µs (``async``, ``sync``) for ours and torch's, after a warm-up (``calls // 10``
    calls: the kernels built and loaded, the launches prepared); torch's None where it has no such op
    or its op refuses the shapes on this GPU."""
    out = []
    for name, ours, theirs in gpu_rows():
        row = {"row": name}
        for who, fn in (("tvm_cdna4", ours), ("torch", theirs)):
            try:
                for _ in range(max(3, calls // 10)):
                    fn()
                row[who] = {mode: per_call_us(fn, calls, mode == "sync") for mode in ("async", "sync")}
                row[who]["host"] = host_us(fn, calls)
            except Exception as err:  # torch._grouped_mm: sm_90 and newer only, bf16 only ...
                row[who] = None if fn is None else {"error": f"{type(err).__name__}: {err}"[:200]}
        out.append(row)
    return out


def markdown(rows: list[dict]) -> str:
    def cell(r, who, mode):
        v = r.get(who)
        return f"{v[mode]:.1f}" if v and mode in v else "n/a"

    lines = ["| op | ours host µs | torch host µs | ours - torch (host) | ours async µs | torch async µs | ours sync µs "
             "| torch sync µs |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ours, theirs = r.get("tvm_cdna4") or {}, r.get("torch") or {}
        delta = f"{ours['host'] - theirs['host']:+.1f}" if "host" in ours and "host" in theirs else "n/a"
        lines.append(f"| {r['row']} | {cell(r, 'tvm_cdna4', 'host')} | {cell(r, 'torch', 'host')} | {delta} | "
                     f"{cell(r, 'tvm_cdna4', 'async')} | {cell(r, 'torch', 'async')} | "
                     f"{cell(r, 'tvm_cdna4', 'sync')} | {cell(r, 'torch', 'sync')} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="the stubbed CPU path, stage by stage (no GPU)")
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--cpu-calls", type=int, default=10_000)
    p.add_argument("--out", default=os.environ.get("OUT"))
    args = p.parse_args(argv)
    if args.cpu:
        print(cpu_report(args.cpu_calls))
        return
    rows = gpu_table(args.calls)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": args.calls, "rows": rows,
              "target": tt.cuda_target(torch.device("cuda"))}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "dispatch.json"), "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result["rows"], indent=1))
    print(f"\n{result['device']}, torch {result['torch']}, target {result['target']}, {args.calls} calls\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
