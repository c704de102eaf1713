"""What one eager call of a ``tvm_cdna4.torch`` op costs on the host, beside torch's equivalent.

    python3 benchmarks/dispatch.py --out $OUT     # on a CUDA GPU: the table last, $OUT/dispatch.json
    python3 benchmarks/dispatch.py --cpu          # no GPU: the per-call Python path, stage by stage

GPU (issue 37 item 5: "every op called eagerly costs at most torch's equivalent + 5 µs at its smallest
shapes"): each op at its smallest shape beside torch's op, ``--calls`` calls from Python after a
warm-up (the kernels built and loaded first), per-call µs = wall / calls, two ways: ``async`` (one
``torch.cuda.synchronize`` at the end: the host's dispatch cost, while it exceeds the kernel's time)
and ``sync`` (a synchronize after every call: launch latency included). The rows:

* ``gemm`` M = 1, bf16, N = K = 4096 and N = K = 256, beside ``torch.nn.functional.linear``;
* ``grouped_gemm`` 2 groups of 8 rows, N = K = 256, beside ``torch._grouped_mm`` where torch has it;
* ``attention`` batch 1, 1 head, seq 64, head dim 64, beside
  ``torch.nn.functional.scaled_dot_product_attention``.

CPU (``--cpu``): the ops' Python path with the kernel launch stubbed (``stubbed``: CPU tensors pass the
device check, the loaded kernels are tvm_ffi's ``testing.nop``, nothing is built), each stage timed
with ``time.perf_counter_ns`` over ``--cpu-calls`` calls: where the host time of a call goes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
    from tvm_cdna4.kernels.sm80 import attention as sm80_attention
    from tvm_cdna4.kernels.sm80.attention_plan import plan_sm80_attention
    from tvm_cdna4.runtime import cuda

    nop = tvm_ffi.get_global_func("testing.nop")

    class Calls(list):
        record = False

    calls = Calls()

    def launch(*args):
        if calls.record:
            calls.append(args)
        return nop(*args)

    saved = dict(DEVICE_TYPES=tt.DEVICE_TYPES, _DEVICES=tt._DEVICES, _KERNELS=tt._KERNELS,
                 _SM90_REFUSED=tt._SM90_REFUSED)
    patches = [(DynamicGemm, "kernel_for", lambda self, M: None),
               (cuda, "load_build", lambda exe, prefix="", workdir=None: launch),
               (sm80_attention, "build_sm80_attention",
                lambda problem, arch="sm_80": types.SimpleNamespace(config=plan_sm80_attention(problem, None,
                                                                                              arch=arch).config)),
               (torch.cuda, "current_device", lambda: 0),
               (torch.cuda, "device", lambda device: contextlib.nullcontext())]
    old = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        tt.DEVICE_TYPES = (*tt.DEVICE_TYPES, "cpu")
        tt._DEVICES, tt._KERNELS, tt._SM90_REFUSED = {0: (arch, target)}, {}, set()
        tt.__dict__.get("_CALLS", {}).clear()
        yield calls
    finally:
        for obj, name, value in old:
            setattr(obj, name, value)
        for name, value in saved.items():
            setattr(tt, name, value)
        tt.__dict__.get("_CALLS", {}).clear()


def cpu_inputs() -> dict:
    """The smallest shapes of the GPU rows, as CPU tensors: ``{op: (args, kwargs)}``."""
    bf = dict(dtype=torch.bfloat16)
    x, w = torch.zeros(16, 256, **bf), torch.zeros(2, 256, 256, **bf)
    q = torch.zeros(1, 1, 64, 64, **bf)
    return {"gemm": ((torch.zeros(1, 256, **bf), torch.zeros(256, 256, **bf)), {}),
            "gemm_bias_silu": ((torch.zeros(1, 256, **bf), torch.zeros(256, 256, **bf)),
                               dict(bias=torch.zeros(256), activation="silu")),
            "grouped_gemm": ((x, w, torch.tensor([0, 8, 16], dtype=torch.int32)), {}),
            "attention": ((q, q.clone(), q.clone()), {})}


def per_call_ns(fn, calls: int) -> float:
    """Mean ns of ``fn()`` over ``calls`` calls after ``calls // 10`` warm-up calls."""
    for _ in range(max(1, calls // 10)):
        fn()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def cpu_stages(calls: int = 10_000) -> dict:
    """``{stage: µs per call}`` of the ops' Python path (``stubbed``): the whole eager call of each op,
    and the pieces it is made of."""
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
        for name, fn in stages.items():
            out[name] = per_call_ns(fn, calls) / 1e3
    return out
