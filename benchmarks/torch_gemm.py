"""LLM projections through ``tvm_cdna4.torch.gemm`` beside ``torch.matmul`` (cuBLAS), on one CUDA GPU.

    python3 benchmarks/torch_gemm.py --out $OUT                 # the three DEFAULT_MODELS, every M
    python3 benchmarks/torch_gemm.py --models all --plans --device H100   # every model's bucket plans, no GPU
    python3 benchmarks/torch_gemm.py --ms 200 --models qwen2.5-7b --out $OUT
    python3 benchmarks/torch_gemm.py --ms 32,96,200 --swap-dynamic off,on --out $OUT   # the A/B of swapped buckets
    python3 benchmarks/torch_gemm.py --ms 96,200 --split-epilogue off,on --out $OUT    # the A/B of a K split's epilogue
    python3 benchmarks/torch_gemm.py --ms 96,200 --swap-dynamic on --swap-order off,on --out $OUT  # swapped tile walks
    python3 benchmarks/torch_gemm.py --ms 400,1200 --refine-buckets off,on --out $OUT  # buckets cut where a plan loses
    python3 benchmarks/torch_gemm.py --ms 16,17,24,32 --wide-decode off,on --out $OUT  # the decode kernel up to M = 32
    python3 benchmarks/torch_gemm.py --ms 260,288,300,320 --fine-cuts off,on --out $OUT  # 257..384 cut at 320
    python3 benchmarks/torch_gemm.py --ms 160,200,240,256 --swap-narrow off,on --out $OUT  # swapped 16-row buckets
    python3 benchmarks/torch_gemm.py --ms 200,260,300 --trim-loads off,on --out $OUT     # loads past M / N trimmed
    python3 benchmarks/torch_gemm.py --ms 200,260,300 --zero-fill off,on --out $OUT      # the model weighs TMA's zero fill
    python3 benchmarks/torch_gemm.py --ms 200,260,300 --shift-last off,on --out $OUT     # the last tile row's box shifted

y = x · Wᵀ, bf16 in and out (layout ``nt``), the projections (``MODELS``: fused QKV, attention output,
fused gate/up, down) of model families at ``MS`` (not only powers of two): ``DEFAULT_MODELS``' three unless
``--models`` names others of ``MODELS`` (``all``: every one). What a serving stack
sees: the torch op (argument checks, the dynamic-M kernel of the shape class, its bucket's plan), not a
kernel called directly.

Method (the device tool's METHOD.md): every kernel is built first, in ``--jobs`` worker processes
(the build and device-code caches, ``TVM_CDNA4_CACHE_DIR``), then each bucket is loaded and run once
before capture. Per shape, each contender is checked once against the f32 product of the same inputs
(C poisoned with NaN first; ``runtime.cuda.tolerance("bf16")``), then timed two ways:

* ``graph``: one CUDA graph of ``--calls`` calls, each over the next of ``copies`` weight copies whose
  bytes together exceed three L2s (as a model's layers stream their weights), replayed ``--reps``
  times; the median replay's time over the calls;
* ``eager``: the same calls from Python, synchronized once at the end (launch and argument-check cost
  included: what an eager serving loop pays).

Each row names the plan the torch op ran for M (its bucket's: the tile, ``swap`` for the swapped kernel,
``/kS`` for a K split of S slices; the JSON has the whole config). ``--plans`` prints those plans of every shape and
M without a GPU (the cost model's bucket plans, no torch needed) and exits.

``--swap-dynamic off,on``: the A/B of the swapped bucket plans (``gemm_cost.WEIGH_SWAP_DYNAMIC``; the buckets to ``SWAP_DYNAMIC_MAX_M``): each
setting is one run of this script in its own process (the flag set before any plan is made, in its build workers
too: the torch op's kernel cache keeps a shape's bucket plans, the build cache keys on the plan), tagged
``swapdyn_off`` / ``swapdyn_on``, then ``torch_gemm_swapdyn.{md,json}`` sets them side by side (each setting's
ours/cuBLAS against the cuBLAS of its own run). With ``--plans`` it prints each setting's bucket plan of every
shape and M and the cost model's estimate of both at that M (``--device``: the ``devices.DEVICES`` entry planned for,
default the planned GPU). ``--split-epilogue`` (``gemm_cost.WEIGH_SPLIT_EPILOGUE``: a K split's C stored once a tile,
from registers) is the same A/B of its flag (tags ``splitepi_*``, ``torch_gemm_splitepi.{md,json}``), and ``--swap-order``
(``gemm_cost.SWAP_PANEL_ADJACENT``: a swapped bucket plan's token tiles of one weight panel on adjacent CTAs; with
``--swap-dynamic on``) of its (``swaporder_*``), ``--refine-buckets`` (``gemm_dynamic.REFINE_BUCKETS``: the buckets cut
where one plan loses more than ``REGRET_MAX`` by the model) of its (``refine_*``), ``--wide-decode``
(``decode_plan.WEIGH_WIDE_DECODE``: the bucket 17..32 keeps the decode kernel, up to ``DECODE_MAX_M`` tokens; its
``--plans`` estimate is the decode model's) of its (``widedec_*``), ``--fine-cuts`` (``gemm_dynamic.FINE_CUTS``: a
bucket too narrow for a ``CUT_ROWS`` cut cut at ``FINE_CUT_ROWS``) of its (``finecut_*``), ``--trim-loads``
(``gemm_plan.TRIM_LOADS``: a tile past M or N loads only the rows that exist, ``Sm90Config.trim_loads``) of its
(``trim_*``), ``--zero-fill`` (``gemm_cost.WEIGH_ZERO_FILL``: the estimate weighs the rows past M / N TMA zero-fills) of
its (``zerofill_*``), ``--swap-narrow`` (``gemm_cost.WEIGH_SWAP_NARROW``: M past ``SWAP_DYNAMIC_MAX_M`` in swapped
buckets of ``SWAP_NARROW_ROWS`` rows, one token tile) of its (``swapnarrow_*``), ``--shift-last``
(``gemm_shift.SHIFT_LAST``: the last token tile row's box loaded at ``M - block``, inside the tokens, its own rows
stored, ``Sm90Config.shift_last``) of its (``shift_*``); of them (``SWITCHES``) one may take
``off,on``, the
others one setting for both runs. ``--projs`` keeps the projections named.

The roofline of a shape is ``max(2MNK / DENSE_BF16_FLOPS, (x + W + y bytes) / read rate)``, the read
rate measured in the same run (a sum over a 4 GiB tensor), and each contender's fraction of it is
printed beside its time. The table (markdown) is the output's last lines; every figure is in
``$OUT/torch_gemm.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.append(ROOT)  # after PYTHONPATH: a package given there is the one measured

MODELS = {
    # name: hidden, (fused QKV N), intermediate; public configs (Hugging Face config.json of each)
    "qwen2.5-7b": dict(hidden=3584, qkv=3584 + 2 * 4 * 128, inter=18944),  # 28 heads, 4 kv heads of 128
    "gemma-2-9b": dict(hidden=3584, qkv=16 * 256 + 2 * 8 * 256, o_in=16 * 256, inter=14336),  # 16 q heads, 8 kv of 256
    "phi-3-medium": dict(hidden=5120, qkv=5120 + 2 * 10 * 128, inter=17920),  # 40 heads, 10 kv heads of 128
    # beside the three (--models all or by name): a small model, a GQA one of hidden 5120, narrow odd widths
    "llama-3.2-3b": dict(hidden=3072, qkv=3072 + 2 * 8 * 128, inter=8192),  # 24 heads, 8 kv heads of 128
    "qwen2.5-14b": dict(hidden=5120, qkv=5120 + 2 * 8 * 128, inter=13824),  # 40 heads, 8 kv heads of 128
    "qwen2.5-1.5b": dict(hidden=1536, qkv=1536 + 2 * 2 * 128, inter=8960),  # 12 heads, 2 kv heads of 128
}
DEFAULT_MODELS = ("qwen2.5-7b", "gemma-2-9b", "phi-3-medium")
"""``--models``' default: the RESULTS table's three (``all``: every one of ``MODELS``)."""
MS = (1, 8, 32, 96, 200, 768, 3000, 8192)
DENSE_BF16_FLOPS = 989e12
"""Dense bf16 tensor-core peak of the H100 SXM and the H200 (NVIDIA H100 / H200 datasheets: 989 TFLOP/s
without sparsity)."""


def model_names(given: str) -> list[str]:
    """``--models``: ``all`` (every one of ``MODELS``) or names of ``MODELS``, comma-separated; an unknown name is a usage
    error."""
    names = list(MODELS) if given == "all" else given.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"--models: 'all' or names of {', '.join(MODELS)}; found {', '.join(unknown)}")
    return names


def selected(models, projs=None) -> list[tuple[str, str, int, int]]:
    """(model, name, N, K) of ``models``' projections, those named in ``projs`` only where given (``--projs``)."""
    return [(m, p, N, K) for m in models for p, N, K in projections(m) if not projs or p in projs]


def projections(model: str) -> list[tuple[str, int, int]]:
    """(name, N, K) of a model's four projections."""
    m = MODELS[model]
    h = m["hidden"]
    return [("qkv", m["qkv"], h), ("o", h, m.get("o_in", h)), ("gate_up", 2 * m["inter"], h), ("down", h, m["inter"])]


def _prebuild(job) -> str:
    """Worker: build the bucket of M of the dynamic-M kernel that ``tvm_cdna4.torch.gemm`` runs on this
    device's target (``target``: ``tvm_cdna4.torch.cuda_target``; sm80's where sm90 refuses the problem)
    through the build cache, and compile its device code (device-code cache), so that the timing
    process only loads."""
    N, K, M, arch, target, switches = job
    set_switches(dict(switches))
    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.sm80.gemm import build_dynamic
    from tvm_cdna4.runtime.cuda import precompile

    dyn = None
    if target == "sm90":
        from tvm_cdna4.kernels.sm90.gemm_target import build

        try:
            dyn = build(GemmProblem(None, N, K, "bf16", "nt", "bf16"))
            if M > dyn.limit:
                dyn = None
        except ContractError:
            dyn = None
    if dyn is None:
        dyn = build_dynamic(N, K, "bf16", "nt", "bf16", arch)
    precompile(dyn.kernel_for(M))
    return f"{N}x{K} M={M}: bucket {dyn.bucket(M).describe()}"


SWAP_SETTINGS = ("off", "on")
"""A switch's values (``SWITCHES``): its ``gemm_cost`` flag False or True."""
SWITCHES = {"swap_dynamic": ("WEIGH_SWAP_DYNAMIC", "swapdyn"), "split_epilogue": ("WEIGH_SPLIT_EPILOGUE", "splitepi"),
            "swap_order": ("SWAP_PANEL_ADJACENT", "swaporder"), "refine_buckets": ("REFINE_BUCKETS", "refine"),
            "wide_decode": ("WEIGH_WIDE_DECODE", "widedec"), "split_one_wave": ("SPLIT_IN_ONE_WAVE", "splitwave"),
            "fine_cuts": ("FINE_CUTS", "finecut"), "trim_loads": ("TRIM_LOADS", "trim"),
            "zero_fill": ("WEIGH_ZERO_FILL", "zerofill"), "deep_waves": ("WEIGH_DEEP_WAVES", "deepwaves"),
            "swap_narrow": ("WEIGH_SWAP_NARROW", "swapnarrow"), "shift_last": ("SHIFT_LAST", "shift"),
            "shift_tma": ("SHIFT_TMA", "shifttma")}
"""The options (``--swap-dynamic``, ``--split-epilogue``, ... one a key, ``_`` for ``-``) that
set a flag of the bucket plans (in ``gemm_cost``, or the module ``SWITCH_MODULES`` names): the flag, and the tag of an
A/B's runs and table (``torch_gemm_<tag>_<setting>``, ``torch_gemm_<tag>``)."""
SWITCH_HELP = {"swap_dynamic": "the buckets weigh the swapped kernel",
               "split_epilogue": "a K split's C stored once a tile, from registers",
               "swap_order": "a swapped bucket plan's token tiles of one weight panel on adjacent CTAs (with "
                             "--swap-dynamic on)",
               "refine_buckets": "buckets cut where one plan loses more than gemm_dynamic.REGRET_MAX",
               "wide_decode": "the bucket 17..32 keeps the decode kernel",
               "split_one_wave": "a K split makes no more units than SMs",
               "fine_cuts": "a bucket too narrow for a CUT_ROWS cut is cut at FINE_CUT_ROWS",
               "trim_loads": "a tile past M or N loads only the rows that exist",
               "zero_fill": "the cost model weighs the rows past M / N TMA zero-fills",
               "deep_waves": "the wave-fitting widths fill up to gemm_cost.DEEP_MAX_WAVES waves",
               "swap_narrow": "M past SWAP_DYNAMIC_MAX_M in swapped buckets of SWAP_NARROW_ROWS rows (one token tile)",
               "shift_last": "the last token tile row loads its box at M - block (no zero fill), stores its own rows",
               "shift_tma": "TMA-store plans shift their last token tile row too (it stores from registers); half: only "
                            "where that tile is at most half full"}
"""What each ``SWITCHES`` option sets (its ``--help``)."""
SWITCH_MODULES = {"wide_decode": "tvm_cdna4.kernels.sm80.decode_plan",
                  "refine_buckets": "tvm_cdna4.kernels.sm90.gemm_dynamic",
                  "fine_cuts": "tvm_cdna4.kernels.sm90.gemm_dynamic",
                  "trim_loads": "tvm_cdna4.kernels.sm90.gemm_plan", "shift_last": "tvm_cdna4.kernels.sm90.gemm_shift",
                  "shift_tma": "tvm_cdna4.kernels.sm90.gemm_shift"}
"""The module of a ``SWITCHES`` flag that is not ``kernels.sm90.gemm_cost``'s."""
MORE_SETTINGS = {"shift_tma": {"half": "HALF"}}
"""A switch's settings past off / on: the setting and the name of the constant of its module the flag then takes
(``--shift-tma half``: ``gemm_shift.HALF``, the TMA-store plans' last tile shifted only where it is at most half full)."""


def switch_module(option: str):
    """The module that holds ``option``'s flag (``SWITCH_MODULES``, else ``kernels.sm90.gemm_cost``)."""
    import importlib

    return importlib.import_module(SWITCH_MODULES.get(option, "tvm_cdna4.kernels.sm90.gemm_cost"))


def switch_values() -> dict:
    """``{option: its flag's value now}`` of every ``SWITCHES`` option (for ``restore_switches``)."""
    return {o: getattr(switch_module(o), flag) for o, (flag, _) in SWITCHES.items()}


def restore_switches(values: dict) -> None:
    """Each ``SWITCHES`` option's flag set back to its value in ``values`` (``switch_values``), whatever it is (a
    flag may hold more than on / off: ``SHIFT_TMA``'s ``HALF``)."""
    for o, value in values.items():
        setattr(switch_module(o), SWITCHES[o][0], value)


def set_switches(settings: dict) -> None:
    """Each ``SWITCHES`` option's flag in this process: ``{option: "on" | "off" | None}`` (None: the package's default).
    Before any plan is made (the torch op keeps a shape's bucket plans)."""
    for option, setting in settings.items():
        if setting is None:
            continue
        more = MORE_SETTINGS.get(option, {})
        if setting not in SWAP_SETTINGS + tuple(more):
            raise SystemExit(f"--{option.replace('_', '-')}: one or more of {SWAP_SETTINGS + tuple(more)}, found {setting!r}")
        module = switch_module(option)
        setattr(module, SWITCHES[option][0], getattr(module, more[setting]) if setting in more else setting == "on")


def switch_settings(args) -> tuple[str | None, list, dict]:
    """The A/B of the command line: (the option given two settings or None, its settings, every other option's one
    setting or None); more than one A/B is a usage error."""
    given = {o: getattr(args, o).split(",") if getattr(args, o) else [] for o in SWITCHES}
    ab = [o for o, v in given.items() if len(v) > 1]
    if len(ab) > 1:
        raise SystemExit(" / ".join("--" + o.replace("_", "-") for o in SWITCHES) + ": one of them "
                         f"may take two settings (off,on), found {len(ab)}")
    fixed = {o: (v[0] if v else None) for o, v in given.items() if o not in ab}
    return (ab[0], given[ab[0]], fixed) if ab else (None, [], fixed)


def read_rate(torch) -> float:
    """Bytes per second of a sum over a 4 GiB bf16 tensor (the best of five)."""
    t = torch.ones(2 * 2**30, dtype=torch.bfloat16, device="cuda")
    best = math.inf
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t.sum()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    del t
    return 4 * 2**30 / best


def _graph_seconds(torch, calls, reps: int, settle_s: float = 0.0) -> float:
    """The median replay's seconds over ``len(calls)`` calls captured in one CUDA graph; ``settle_s``: the graph
    replayed untimed that long first (the clock settles to this work's power, not the work timed before it)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls[:2]:
            c()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in calls:
            c()
    graph.replay()
    torch.cuda.synchronize()
    settled = time.perf_counter() + settle_s
    while time.perf_counter() < settled:
        graph.replay()
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times) / len(calls)


def _eager_seconds(torch, calls, reps: int) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for c in calls:
            c()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / len(calls)


def measure(torch, ours, model, proj, M, N, K, args, rate) -> dict:
    from tvm_cdna4.runtime.cuda import tolerance

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    wbytes = N * K * 2
    copies = max(2, min(64, math.ceil(3 * l2 / wbytes)))
    g = torch.Generator(device="cuda").manual_seed(M * 7919 + N + K)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) / math.sqrt(K) for _ in range(copies)]
    y = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = x.float() @ ws[0].float().t()
    contenders = {
        "ours": lambda w: ours.gemm(x, w, out=y),
        "torch": lambda w: torch.matmul(x, w.t(), out=y),
    }
    row = dict(model=model, proj=proj, M=M, N=N, K=K, copies=copies)
    flops, bytes_ = 2 * M * N * K, 2 * (M * K + N * K + M * N)
    roof = max(flops / DENSE_BF16_FLOPS, bytes_ / rate)
    row["roofline_us"] = roof * 1e6
    for name, fn in contenders.items():
        y.fill_(float("nan"))
        fn(ws[0])
        torch.cuda.synchronize()
        err = ((y.float() - ref).norm() / ref.norm()).item()
        ok = bool(torch.isfinite(y).all().item()) and err <= tolerance("bf16")
        row[f"{name}_err"], row[f"{name}_ok"] = err, ok
        calls = [(lambda w=w: fn(w)) for w in (ws * math.ceil(args.calls / copies))[:args.calls]]
        row[f"{name}_graph_us"] = _graph_seconds(torch, calls, args.reps) * 1e6
        row[f"{name}_eager_us"] = _eager_seconds(torch, calls, max(3, args.reps // 4)) * 1e6
        row[f"{name}_roofline"] = roof * 1e6 / row[f"{name}_graph_us"]
    row["plan"], row["tile"] = _plan_of(ours, N, K, M)
    row["speedup_graph"] = row["torch_graph_us"] / row["ours_graph_us"]
    row["speedup_eager"] = row["torch_eager_us"] / row["ours_eager_us"]
    del ws
    return row


def _plan_of(ours, N: int, K: int, M: int) -> tuple[str, str]:
    """The plan the torch op ran for M (its kernel cache's entry of the shape class: ``kernel_cache``) and its
    ``plan_label``."""
    for key, kernel in ours.kernel_cache().items():
        if key[:2] == (N, K) and not isinstance(key[0], str):
            dynamic = getattr(kernel, "dynamic", None)
            p = dynamic.plan(M) if dynamic is not None else None
            return (f"{type(p).__name__} {p.config}", plan_label(p)) if p is not None else ("?", "?")
    return "?", "?"


def plan_label(p) -> str:
    """A plan in a table's cell: ``decode`` (the weight-streaming kernel), else the config's tile ``block_m x block_n``
    (C^T's with ``swap``), ``raster-n`` for the walk with the tile columns fastest (``gemm_cost.SWAP_PANEL_ADJACENT``),
    ``/kS`` for a K split, ``tma`` for TMA stores, ``trim`` / ``shift`` for ``trim_loads`` / ``shift_last``."""
    c = getattr(p, "config", None)
    if not hasattr(c, "swap_ab"):
        return "decode" if c is not None else "?"
    return (f"{c.block_m}x{c.block_n}" + (" swap" if c.swap_ab else "") + (" raster-n" if c.raster == "n" else "")
            + (f" /k{c.split_k}" if c.split_k > 1 else "") + (" tma" if c.epilogue == "tma" else "")
            + (" trim" if getattr(c, "trim_loads", False) else "") + (" shift" if getattr(c, "shift_last", False) else ""))


def planned_device() -> dict:
    """The ``DeviceSpec`` the torch op's plans are made for in this process (``devices.planned``) and whether the driver
    was read (``devices.present``; without it the plans are the default device's, ``devices.DEFAULT``)."""
    from tvm_cdna4.kernels import devices

    spec = devices.planned("sm80")
    return dict(name=spec.name, source=spec.source, read_from_driver=devices.present("sm80") is not None,
                hbm_bytes_s=spec.hbm_bytes_s, clock_hz=spec.clock_hz, units=spec.units)


def bucket_plan(N: int, K: int, M: int, device):
    """The sm90 bucket plan covering ``M`` of the bf16 ``nt`` projection (N, K), no fusion, on ``device`` (a
    ``DeviceSpec``): ``gemm_dynamic.plan_bucket`` of the bucket of ``dynamic_buckets`` (the problem's) that holds M."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90.gemm_dynamic import dynamic_buckets, plan_bucket

    bucket = next(b for b in dynamic_buckets(N, K, "bf16", "bf16", device) if b.lo <= M <= b.hi)
    return plan_bucket(bucket, N, K, "bf16", "nt", "bf16", Fusion(), device)


def print_plans(models, ms, device_name: str | None = None) -> None:
    """``--plans``: the sm90 bucket plan (``plan_label``) of each projection at each M, as the torch op plans it on
    ``devices.DEVICES[device_name]`` (``--device``; default the planned GPU: ``gemm.build``'s own plans)."""
    from tvm_cdna4.kernels import devices, gemm
    from tvm_cdna4.kernels.gemm import GemmProblem

    def plan(N, K, m):
        if device_name is None:
            return gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16"), "sm90").plan(m)
        return bucket_plan(N, K, m, devices.DEVICES[device_name])

    print("| model | proj | N | K | " + " | ".join(f"M = {m} (bucket)" for m in ms) + " |")
    print("|---|---|---|---|" + "---|" * len(ms))
    for model in models:
        for proj, N, K in projections(model):
            plans = [plan(N, K, m) for m in ms]
            cells = [f"{plan_label(p)} ({p.dynamic_m.lo}-{p.dynamic_m.hi})" for p in plans]
            print(f"| {model} | {proj} | {N} | {K} | " + " | ".join(cells) + " |")


def table(rows) -> list[str]:
    out = ["| model | proj | M | N | K | plan | ours µs | cuBLAS µs | ours/cuBLAS speed | ours % roof | cuBLAS % roof "
           "| eager ours µs | eager cuBLAS µs | ok |", "|" + "---|" * 14]
    for r in rows:
        out.append(f"| {r['model']} | {r['proj']} | {r['M']} | {r['N']} | {r['K']} | {r.get('tile', '?')} | "
                   f"{r['ours_graph_us']:.1f} | "
                   f"{r['torch_graph_us']:.1f} | {r['speedup_graph']:.2f}x | {100 * r['ours_roofline']:.0f} | "
                   f"{100 * r['torch_roofline']:.0f} | {r['ours_eager_us']:.1f} | {r['torch_eager_us']:.1f} | "
                   f"{'yes' if r['ours_ok'] and r['torch_ok'] else 'NO'} |")
    return out + ["", *by_m(rows, "speedup_graph", "ours/cuBLAS (graph)", eager="speedup_eager")]


def write_results(out: str, name: str, meta: dict, rows: list, lines: list[str]) -> None:
    """A benchmark's results into the folder ``out``: ``name.json`` (``meta`` and ``rows``) and ``name.md`` (the
    markdown table ``lines``), the table also printed; the folder made if missing (a run's minutes are not lost to it)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def geomean(values) -> float:
    values = list(values)
    return math.prod(values) ** (1 / len(values))


def by_m(rows, key: str, title: str, eager: str | None = None) -> list[str]:
    """The per-M summary of ``rows``' ``key`` ratios: geo-mean, min, max (and ``eager``'s geo-mean)."""
    out = [f"| M | geo-mean {title} | min | max |" + (" eager geo-mean |" if eager else ""),
           "|---|---|---|---|" + ("---|" if eager else "")]
    for M in sorted({r["M"] for r in rows}):
        s = [r[key] for r in rows if r["M"] == M]
        out.append(f"| {M} | {geomean(s):.2f}x | {min(s):.2f}x | {max(s):.2f}x |"
                   + (f" {geomean(r[eager] for r in rows if r['M'] == M):.2f}x |" if eager else ""))
    return out


def swap_plan_rows(models, ms, settings, device_name: str | None = None, option: str = "swap_dynamic",
                   fixed: dict | None = None, projs=None) -> list[dict]:
    """``--plans --swap-dynamic off,on`` (``option``'s settings; ``fixed``: the other options'): per shape and M, the
    bucket plan under each setting (``gemm_dynamic.plan_bucket`` on ``devices.DEVICES[device_name]``, default the planned GPU)
    and the cost model's estimate of it at that M, µs (a decode plan's: ``decode_plan.decode_estimate``, the H200-fitted
    decode model at the device's SMs)."""
    from tvm_cdna4.kernels import devices

    device = devices.DEVICES[device_name] if device_name else devices.planned("sm80")
    rows, defaults = [], switch_values()
    set_switches(fixed or {})
    try:
        for model, proj, N, K in selected(models, projs):
            for M in ms:
                row = dict(model=model, proj=proj, N=N, K=K, M=M)
                for s in settings:
                    set_switches({option: s})
                    p = bucket_plan(N, K, M, device)
                    row["bucket"] = f"{p.dynamic_m.lo}-{p.dynamic_m.hi}"
                    cfg = getattr(p, "config", None)
                    row[f"plan_{s}"] = plan_label(p)
                    row[f"est_{s}_us"] = plan_estimate_us(cfg, M, N, K, device)
                rows.append(row)
    finally:
        restore_switches(defaults)
    return rows


def plan_estimate_us(cfg, M: int, N: int, K: int, device) -> float | None:
    """The cost model's µs of a bucket plan's config at M (bf16 out): the sm90 model's for an ``Sm90Config``, the decode
    model's (``decode_plan.decode_estimate``) for a ``DecodeConfig``, else None."""
    from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, decode_estimate
    from tvm_cdna4.kernels.sm80.gemm_cost import Device
    from tvm_cdna4.kernels.sm90 import gemm_cost

    if hasattr(cfg, "swap_ab"):
        return gemm_cost.estimate(cfg, M, N, K, 2, device).total * 1e6
    if isinstance(cfg, DecodeConfig):
        return decode_estimate(M, N, K, cfg, 2, Device(sms=device.units)).time_s * 1e6
    return None


def print_swap_plans(models, ms, settings, device_name: str | None = None, option: str = "swap_dynamic",
                     fixed: dict | None = None, projs=None) -> list[dict]:
    """The table of ``swap_plan_rows`` (markdown; a changed plan marked, its estimate's ratio), then the count of changed
    plans and the geometric mean of the estimates' ratio per M."""
    rows = swap_plan_rows(models, ms, settings, device_name, option, fixed, projs)
    a, b = settings[0], settings[-1]
    print(f"| model | proj | N | K | M (bucket) | plan {a} | plan {b} | est {a} µs | est {b} µs | {a}/{b} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ea, eb = r[f"est_{a}_us"], r[f"est_{b}_us"]
        changed = r[f"plan_{a}"] != r[f"plan_{b}"]
        ratio = f"{ea / eb:.2f}x" if ea and eb else "-"
        print(f"| {r['model']} | {r['proj']} | {r['N']} | {r['K']} | {r['M']} ({r['bucket']}) | {r[f'plan_{a}']} | "
              + (f"**{r[f'plan_{b}']}**" if changed else r[f"plan_{b}"]) + " | "
              + " | ".join(f"{e:.1f}" if e else "-" for e in (ea, eb)) + f" | {ratio} |")
    print(f"\n| M | plans changed | geo-mean est {a}/{b} |\n|---|---|---|")
    for M in ms:
        sub = [r for r in rows if r["M"] == M and r[f"est_{a}_us"] and r[f"est_{b}_us"]]
        n = sum(r[f"plan_{a}"] != r[f"plan_{b}"] for r in rows if r["M"] == M)
        ratio = geomean(r[f"est_{a}_us"] / r[f"est_{b}_us"] for r in sub) if sub else float("nan")
        print(f"| {M} | {n} of {sum(r['M'] == M for r in rows)} | {ratio:.3f}x |")
    return rows


def _run_rows(out: str, name: str) -> list[dict]:
    """The rows of one run in the folder ``out``: ``name.json``, else the rows it wrote as it went
    (``name.partial.jsonl``: a run cut short), else none."""
    path = os.path.join(out, name)
    if os.path.exists(f"{path}.json"):
        with open(f"{path}.json") as f:
            return json.load(f)["rows"]
    if not os.path.exists(f"{path}.partial.jsonl"):
        return []
    with open(f"{path}.partial.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def swap_ab_runs(args, settings, option: str = "swap_dynamic", fixed: dict | None = None) -> int:
    """``--swap-dynamic off,on`` (``option``'s settings, ``SWITCHES``; ``fixed``: the other options' one setting): this
    script once per setting, each in its own process (``--tag swapdyn_<setting>``), then
    ``torch_gemm_swapdyn.{md,json}``: per shape and M both settings' plans and times, and per M the geometric means of each setting's ours/cuBLAS
    (against its own run's cuBLAS) and of on over off."""
    import subprocess

    runs, flag, short = {}, f"--{option.replace('_', '-')}", SWITCHES[option][1]
    others = [v for o, s in (fixed or {}).items() if s for v in (f"--{o.replace('_', '-')}", s)]
    for s in settings:
        cmd = [sys.executable, os.path.abspath(__file__), "--models", args.models, "--ms", args.ms, "--calls",
               str(args.calls), "--reps", str(args.reps), "--jobs", str(args.jobs), "--out", args.out,
               *(["--projs", args.projs] if args.projs else []), *others, flag, s, "--tag", f"{short}_{s}"]
        print(f"{flag} {s}: {' '.join(cmd[1:])}", flush=True)
        code = subprocess.run(cmd).returncode
        runs[s] = {(r["model"], r["proj"], r["M"]): r for r in _run_rows(args.out, f"torch_gemm_{short}_{s}")}
        if code:
            print(f"{flag} {s}: exit {code}", flush=True)
    rows = [dict(model=k[0], proj=k[1], M=k[2], N=r["N"], K=r["K"], **{f"plan_{s}": runs[s][k]["tile"] for s in settings},
                 **{f"ours_{s}_us": runs[s][k]["ours_graph_us"] for s in settings},
                 **{f"speedup_{s}": runs[s][k]["speedup_graph"] for s in settings}, cublas_us=r["torch_graph_us"],
                 **{over(settings, s): r["ours_graph_us"] / runs[s][k]["ours_graph_us"] for s in settings[1:]},
                 ok=all(runs[s][k]["ours_ok"] for s in settings))
            for k, r in runs[settings[0]].items() if all(k in runs[s] for s in settings)]
    write_results(args.out, f"torch_gemm_{short}", ab_meta(option, settings, fixed), rows, ab_lines(rows, settings))
    return 0 if rows and all(r["ok"] for r in rows) else 1


def over(settings, s: str) -> str:
    """The key of setting ``s``'s speed over the first one's in an A/B's rows: ``on_over_off`` for the last (whatever the
    settings' names), ``speed_<s>`` for one between."""
    return "on_over_off" if s == settings[-1] else f"speed_{s}"


def ab_meta(option: str, settings, fixed: dict | None) -> dict:
    """An A/B's results' meta: the flag, its settings and the other options set for every run."""
    given = {o: v for o, v in (fixed or {}).items() if v}
    return dict(switch=SWITCHES[option][0], settings=settings, fixed=given, date=time.strftime("%Y-%m-%d"))


def ab_lines(rows, settings) -> list[str]:
    """An A/B's table: per row each setting's plan and µs, each later setting's speed over the first, cuBLAS and each
    setting's speed over it; then per M the geo-means of those speeds."""
    a, later = settings[0], settings[1:]
    lines = ["| model | proj | M | N | K | " + " | ".join(f"plan {s}" for s in settings) + " | "
             + " | ".join(f"{s} µs" for s in settings) + " | " + " | ".join(f"{s}/{a} speed" for s in later)
             + " | cuBLAS µs | " + " | ".join(f"{s}/cuBLAS" for s in settings) + " | ok |",
             "|" + "---|" * (7 + 4 * len(settings) - 1)]
    lines += [f"| {r['model']} | {r['proj']} | {r['M']} | {r['N']} | {r['K']} | "
              + " | ".join(r[f"plan_{s}"] for s in settings) + " | "
              + " | ".join(f"{r[f'ours_{s}_us']:.1f}" for s in settings) + " | "
              + " | ".join(f"{r[over(settings, s)]:.2f}x" for s in later) + f" | {r['cublas_us']:.1f} | "
              + " | ".join(f"{r[f'speedup_{s}']:.2f}x" for s in settings) + f" | {'yes' if r['ok'] else 'NO'} |"
              for r in rows]
    for s in later:
        lines += ["", *by_m(rows, over(settings, s), f"{s}/{a} speed")]
    for s in settings:
        lines += ["", *by_m(rows, f"speedup_{s}", f"{s}/cuBLAS")]
    return lines


def main(argv=None) -> int:
    from tvm_cdna4.kernels.devices import DEVICES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="all, or names of MODELS (default the three of DEFAULT_MODELS)")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--calls", type=int, default=40, help="calls per graph")
    ap.add_argument("--reps", type=int, default=20, help="graph replays (the median)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--out", default=".")
    ap.add_argument("--tag", default="", help="suffix of the output files")
    ap.add_argument("--plans", action="store_true", help="print the sm90 bucket plans of the shapes and exit (no GPU)")
    for option in SWITCHES:  # off, on or off,on: one run each, then side by side (default: the package's setting)
        flag = f"{switch_module(option).__name__.rsplit('.', 1)[1]}.{SWITCHES[option][0]}"
        ap.add_argument("--" + option.replace("_", "-"), default=None,
                        help=f"off, on or off,on: {SWITCH_HELP[option]} ({flag}; default the package's); two: one run "
                        "each, then side by side")
    ap.add_argument("--projs", default=None, help="only these projections (qkv,o,gate_up,down; default every one)")
    ap.add_argument("--device", default=None, choices=[k for k, v in DEVICES.items() if v.target == "sm80"],
                    help="--plans: the devices.DEVICES entry planned for (default the planned GPU)")
    args = ap.parse_args(argv)
    option, settings, fixed = switch_settings(args)
    projs = args.projs.split(",") if args.projs else None
    if args.plans and option:
        print_swap_plans(model_names(args.models), [int(v) for v in args.ms.split(",")], settings, args.device, option,
                         fixed, projs)
        return 0
    if option:
        return swap_ab_runs(args, settings, option, fixed)
    set_switches(fixed)
    if args.plans:
        print_plans(model_names(args.models), [int(v) for v in args.ms.split(",")], args.device)
        return 0
    import torch

    import tvm_cdna4.torch as ours

    arch, target = ours.cuda_target(torch.device("cuda", 0))
    shapes = selected(model_names(args.models), projs)
    ms = [int(v) for v in args.ms.split(",")]
    t0 = time.time()
    switches = tuple(sorted((o, v) for o, v in fixed.items() if v))
    jobs = sorted({(N, K, M, arch, target, switches) for _, _, N, K in shapes for M in ms})
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for line in pool.map(_prebuild, jobs):
            pass
    print(f"target {target} ({ours.TARGET_ENV}={ours.CUDA_TARGET})", flush=True)
    print(f"built {len(jobs)} (shape, bucket) kernels in {time.time() - t0:.0f} s on {args.jobs} workers", flush=True)
    rate = read_rate(torch)
    name = torch.cuda.get_device_name(0)
    print(f"{name}: read rate {rate / 1e12:.2f} TB/s (4 GiB sum); plans made for {planned_device()}", flush=True)
    rows = []
    tag = f"_{args.tag}" if args.tag else ""
    partial = os.path.join(args.out, f"torch_gemm{tag}.partial.jsonl")  # each row as it is measured
    for model, proj, N, K in shapes:
        for M in ms:
            rows.append(measure(torch, ours, model, proj, M, N, K, args, rate))
            r = rows[-1]
            with open(partial, "a") as f:
                f.write(json.dumps(r) + "\n")
            print(f"{model} {proj} M={M}: ours {r['ours_graph_us']:.1f} us ({r['tile']}), cuBLAS {r['torch_graph_us']:.1f} "
                  f"us ({r['speedup_graph']:.2f}x), ok={r['ours_ok']}", flush=True)
    meta = dict(device=name, arch=arch, target=target, read_rate=rate, torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
                calls=args.calls, reps=args.reps, seconds=time.time() - t0, swap_dynamic=args.swap_dynamic,
                split_epilogue=args.split_epilogue, swap_order=args.swap_order, wide_decode=args.wide_decode,
                planned=planned_device())
    write_results(args.out, f"torch_gemm{tag}", meta, rows, table(rows))
    return 0 if all(r["ours_ok"] and r["torch_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
