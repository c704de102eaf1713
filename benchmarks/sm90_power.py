"""The sm90 GEMM and cuBLAS at large M against the tensor cores' peak at the clock they sustain (issue 36's
"geometric mean >= 1.05x torch.matmul at M >= 768"): each contender runs back to back for a few seconds while
``nvidia-smi`` samples the SM clock and the board power every 20 ms.

Why: a large-M bf16 GEMM on an H100 / H200 SXM runs into the board's power limit, and the SM clock drops to hold it
(on the H200, 2026-11-30, cuBLAS ran at 1425-1485 MHz on random data and 1725 MHz on zeros: the journal's stop-9
record, ``benchmarks/cuda_gemm.py --sustain``). A kernel's speed is then its work per clock times a clock the power
sets. This script prints, per shape and contender: TFLOP/s, the median SM clock and power of the run's second half,
the work per clock as a fraction of the tensor cores' dense peak at that clock (SMs x the cost model's
``gemm_cost.TENSOR_FLOPS_PER_CLK`` x clock),
and the same with all-zero operands (nothing toggles: the power falls, the clock rises where power was what held it).
Reading: where both contenders sit at the power limit and cuBLAS already does ``f`` of the per-clock peak, running
1.05x faster than it needs ``1.05 f`` of it at the same clock, or the same work for 5 % less energy.

    python3 benchmarks/sm90_power.py --out DIR [--shapes 4096x4096x4096,3000x14336x3584] [--seconds 2]
    python3 benchmarks/sm90_power.py --epilogue --out DIR [--seconds 2] [--set chunks]

``--epilogue`` (issue 36's residual, journal "Stop 53: resclock"): at ``EPILOGUE_SHAPE`` our plain GEMM and ours
with the residual (``EPILOGUE_OURS``), ``torch.mm`` and cuBLAS's residual in place (``Tensor.addmm_``, beta = 1), each
with a call's time, clock, power, cycles and energy and its overheads over its own plain GEMM in time, cycles and
energy: a residual whose cost is a lower clock at the power limit (more bytes, more energy) costs time and few
cycles; one that costs work costs cycles at any clock (the all-zero run, below the limit, says it again).

Each contender is checked against the f32 product first (relative Frobenius error within the bf16 tolerance of
``tvm_cdna4.runtime.cuda.tolerance``). Needs an sm_90 GPU and ``nvidia-smi``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from gpu_clocks import sustained_chunks
from tvm_cdna4.kernels.sm90.gemm_cost import TENSOR_FLOPS_PER_CLK

SHAPES = ((4096, 4096, 4096), (8192, 4096, 4096), (3000, 14336, 3584), (8192, 3584, 18944), (768, 37888, 3584))
"""(M, N, K): 4096^3, and projections of the torch-op table at M >= 768 (Qwen2.5-7B gate/up and down; Gemma-2-9B's
14336-wide up half at 3000)."""


def sustained(fn, seconds: float) -> dict:
    """Back-to-back ``fn()`` (a CUDA graph replay) for ``seconds``: the median seconds a replay over chunks of four,
    and the median SM clock (MHz) and board power (W) ``nvidia-smi`` sampled every 20 ms; the first half warm-up."""
    chunks, steady = sustained_chunks(fn, 4, seconds)
    return dict(s=statistics.median(chunks[len(chunks) // 2:]), **steady)


def graph_of(torch, fn, calls: int):
    """A CUDA graph of ``calls`` calls of ``fn`` (warmed on a side stream first) and its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def calls_for(flops: float) -> int:
    """The calls a graph replay holds: about 2 ms of work at 800 TFLOP/s."""
    return max(1, int(2e-3 * 800e12 / flops))


def contenders(torch, ours, x, w, y):
    return {"ours": lambda: ours.gemm(x, w, out=y), "cuBLAS": lambda: torch.matmul(x, w.t(), out=y)}


def row_for(torch, ours, shape, args, sms: int, device: str = "cuda", extra=None) -> list[dict]:
    """The rows of one shape: each contender (``contenders``, then ``extra``'s: name -> ``fn(x, w, y)``, e.g. static
    kernels of other configs, ``benchmarks/sm90_widen.py``) checked, then run sustained on random and on all-zero
    operands."""
    from tvm_cdna4.runtime.cuda import tolerance

    M, N, K = shape
    g = torch.Generator(device=device).manual_seed(M + N + K)
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=g)
    w = torch.randn(N, K, device=device, dtype=torch.bfloat16, generator=g) / K ** 0.5
    y = torch.empty(M, N, device=device, dtype=torch.bfloat16)
    ref = x.float() @ w.float().t()
    x0, w0 = x.clone(), w.clone()  # each contender zeroes x and w for its all-zero run
    flops = 2 * M * N * K
    rows = []
    more = {name: (lambda f=f: f(x, w, y)) for name, f in (extra or {}).items()}
    for name, fn in {**contenders(torch, ours, x, w, y), **more}.items():
        y.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = ((y.float() - ref).norm() / ref.norm()).item()
        ok = bool(torch.isfinite(y).all().item()) and err <= tolerance("bf16")
        calls = calls_for(flops)
        rnd = sustained(lambda r=graph_of(torch, fn, calls): r(), args.seconds)
        x.zero_(), w.zero_()
        zero = sustained(lambda r=graph_of(torch, fn, calls): r(), args.seconds)
        x.copy_(x0), w.copy_(w0)  # the next contender's check and random run: the operands of ``ref``
        row = dict(M=M, N=N, K=K, contender=name, ok=ok, err=err)
        for tag, r in (("random", rnd), ("zeros", zero)):
            row.update(fields(tag, r, flops, calls, sms))
        rows.append(row)
    return rows


def fields(tag: str, r: dict, flops: float, calls: int, sms: int) -> dict:
    """One sustained run's fields (``tag``: random / zeros): TFLOP/s, MHz, W, the work per clock against the peak at
    that clock, and a call's microseconds, cycles (seconds x clock) and millijoules (seconds x power)."""
    tflops, call_s = flops * calls / r["s"] / 1e12, r["s"] / calls
    return {f"{tag}_tflops": tflops, f"{tag}_mhz": r["mhz"], f"{tag}_watts": r["watts"],
            f"{tag}_per_clock": tflops * 1e12 / (sms * TENSOR_FLOPS_PER_CLK * r["mhz"] * 1e6),
            f"{tag}_us": call_s * 1e6, f"{tag}_mcycles": call_s * r["mhz"], f"{tag}_mj": call_s * r["watts"] * 1e3}


EPILOGUE_SHAPE = (4096, 4096, 4096)
OURS_PLAIN, PEER_PLAIN = "ours plain", "torch.mm"
"""``--epilogue``'s bases: our rows' overheads are over ``OURS_PLAIN``, cuBLAS's over ``PEER_PLAIN``."""
CHUNKS = {"epilogue_tile": 64, "stages": 4}
"""The 64-column staging with a fourth ring stage (CUTLASS's epilogue carve-out), as config changes."""
EPILOGUE_OURS = ((OURS_PLAIN, False, None), ("ours plain, tma/64 s4", False, CHUNKS),
                 ("ours residual global", True, {"residual_read": "global"}),
                 ("ours residual prefetch", True, {"residual_read": "prefetch"}),
                 ("ours residual tma", True, {"residual_read": "tma"}),
                 ("ours residual prefetch, tma/64 s4", True, {"residual_read": "prefetch", **CHUNKS}))
"""``--epilogue``: our kernels, (name, with the residual, the config's changes from the model's plan or None): the
plain GEMM, the residual read in the epilogue (``global``, the model's choice) and after the producer's L2 prefetch
(``prefetch``; the two within 0.5 % of each other on the H200, runs/sm90_epilogue_h200_2026-12-07d.md), staged by
TMA into the D staging buffer halfway through the mainloop (``tma``, +11.1 % there), and plain and ``prefetch`` with
the 64-column staging and a fourth stage (CUTLASS's epilogue carve-out: 32 KB of staging, four ring stages; plain
ran +3.9 % there on the H200)."""
EPILOGUE_CHUNKS = ((OURS_PLAIN, False, None), ("ours plain, tma/64 s4", False, CHUNKS),
                   ("ours residual global", True, {"residual_read": "global"}),
                   ("ours residual global, tma/64 s4", True, {"residual_read": "global", **CHUNKS}),
                   ("ours residual prefetch, tma/64 s4", True, {"residual_read": "prefetch", **CHUNKS}))
"""``--epilogue --set chunks`` (journal "Stop 54: chunkepi"): the 64-column staging with a fourth stage, its chunk loop
one named barrier a chunk since stop 54 (``gemm_epilogue.store_tma_chunks``), plain and with the residual read from
global memory or after the producer's L2 prefetch, beside the whole-tile plain GEMM and residual (the model's)."""
EPILOGUE_STAGEDC = (*EPILOGUE_CHUNKS, ("ours residual chunks, tma/64 s4", True, {"residual_read": "chunks", **CHUNKS}))
"""``--epilogue --set stagedc`` (journal "Stop 55: stagedc"): ``EPILOGUE_CHUNKS`` and the residual staged by the
producer in the chunk buffers (``residual_read="chunks"``, ``gemm_chunkres``), four stages kept."""
EPILOGUE_SETS = {"residual": EPILOGUE_OURS, "chunks": EPILOGUE_CHUNKS, "stagedc": EPILOGUE_STAGEDC}
"""``--set``: our kernels of ``--epilogue`` (the default ``residual``: stop 53's ``EPILOGUE_OURS``)."""
BUILD_SECONDS = 90
"""``--epilogue``: the most seconds its kernels' parallel builds may take (a GPU step's timeout keeps the runs)."""


def built_kernels(shape, ours=EPILOGUE_OURS) -> dict:
    """Our bf16 kernels of ``shape`` (``EPILOGUE_OURS``' entries) built in parallel (``benchmarks/sm90_gemm.py``'s
    ``build_all``: the model's plan with the entry's changes) and loaded: name -> (kernel, its config's short name)."""
    from sm90_gemm import build_all

    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    todo = [(name, (*shape, "bf16", "bf16", Fusion(residual=res)), updates and ("choice", updates))
            for name, res, updates in ours]
    built, out = build_all(todo, min(len(todo), os.cpu_count() or 1), BUILD_SECONDS), {}
    for key, _, _ in todo:
        if isinstance(built[key], str):
            raise RuntimeError(f"build of {key}: {built[key]}")
        p, cb, _, cfgd = built[key]
        tile = f"/{cfgd['epilogue_tile']}" if cfgd.get("epilogue_tile") else ""
        name = f"{cfgd['block_m']}x{cfgd['block_n']} s{cfgd['stages']} {cfgd.get('epilogue')}{tile}"
        if p.fusion.residual:
            name += f" res {cfgd['residual_read']}"
        out[key] = Kernel(load_build(cb), p), name
    return out


def addmm_in_place(torch):
    """cuBLAS's residual in place (``res.addmm_(x, w^T)``, beta = 1), alpha alternating +1 / -1 call by call so that
    the residual returns to itself every second call (a graph of an even number of calls does not drift it)."""
    sign = [1.0]

    def fn(x, w, y, res):
        res.addmm_(x, w.t(), alpha=sign[0])
        sign[0] = -sign[0]
        return res
    return fn, sign


def epilogue_contenders(torch, shape, ours=EPILOGUE_OURS) -> dict:
    """``--epilogue``'s contenders: name -> (``fn(x, w, y, res)`` returning its output, adds the residual, base name,
    config, the sign of ``addmm_in_place`` or None): ``ours``' kernels (``built_kernels``; over ``OURS_PLAIN``),
    ``torch.mm`` and ``Tensor.addmm_`` (over ``PEER_PLAIN``)."""
    kernels, out = built_kernels(shape, ours), {}
    for name, res, _ in ours:
        k, cfg = kernels[name]
        out[name] = ((lambda x, w, y, r, k=k: (k.launch(x, w, y, r), y)[1]) if res else
                     (lambda x, w, y, r, k=k: (k.launch(x, w, y), y)[1]), res, OURS_PLAIN, cfg, None)
    out[PEER_PLAIN] = (lambda x, w, y, res: torch.mm(x, w.t(), out=y), False, PEER_PLAIN, "cuBLAS", None)
    fn, sign = addmm_in_place(torch)
    out["Tensor.addmm_ (in place)"] = (fn, True, PEER_PLAIN, "cuBLAS, beta = 1", sign)
    return out


def epilogue_rows(torch, contenders: dict, args, sms: int, shape=EPILOGUE_SHAPE, device: str = "cuda") -> list[dict]:
    """Each contender checked against the f32 product (plus the residual where it adds one), then run sustained on
    random operands and with x and w zeroed (the residual kept: its bytes still move, the tensor cores toggle
    nothing); the residual restored before each run (``addmm_`` writes it); an even number of calls a graph."""
    from tvm_cdna4.runtime.cuda import tolerance

    M, N, K = shape
    g = torch.Generator(device=device).manual_seed(M + N + K)
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=g)
    w = torch.randn(N, K, device=device, dtype=torch.bfloat16, generator=g) / K ** 0.5
    res = torch.randn(M, N, device=device, dtype=torch.bfloat16, generator=g)
    y = torch.empty(M, N, device=device, dtype=torch.bfloat16)
    x0, w0, res0 = x.clone(), w.clone(), res.clone()
    ref, flops = x.float() @ w.float().t(), 2 * M * N * K
    calls = calls_for(flops) + calls_for(flops) % 2
    rows = []
    for name, (fn, adds, base, cfg, sign) in contenders.items():
        res.copy_(res0), y.fill_(float("nan"))
        if sign:
            sign[0] = 1.0
        out = fn(x, w, y, res)
        torch.cuda.synchronize()
        want = ref + res0.float() if adds else ref
        err = ((out.float() - want).norm() / want.norm()).item()
        row = dict(M=M, N=N, K=K, contender=name, base=base, config=cfg, ok=bool(torch.isfinite(out).all().item())
                   and err <= tolerance("bf16"), err=err)
        for tag in ("random", "zeros"):
            if tag == "zeros":
                x.zero_(), w.zero_()
            replay = graph_of(torch, lambda: fn(x, w, y, res), calls)
            res.copy_(res0)  # after the graph's warm-up call
            row.update(fields(tag, sustained(lambda: replay(), args.seconds), flops, calls, sms))
        x.copy_(x0), w.copy_(w0)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def over(rows, r, key: str) -> str:
    """``r[key]`` over its base row's (``r["base"]``), as a signed percentage ("-" without the base)."""
    base = next((b[key] for b in rows if b["contender"] == r["base"]), None)
    return "-" if not base else f"{100 * (r[key] / base - 1):+.1f} %"


def epilogue_table(rows, device: str) -> list[str]:
    """``--epilogue``'s table: per contender and run (random / zeros), a call's time, clock, power, cycles, energy,
    the work per clock, and the time and cycles over its base."""
    M, N, K = EPILOGUE_SHAPE
    out = [f"The residual at the clock it sustains, {M}x{N}x{K} bf16 nt, {device} (ours over '{OURS_PLAIN}', cuBLAS "
           f"over '{PEER_PLAIN}')", "",
           "| run | contender | config | ok | us | over | SM MHz | W | Mcycles | cycles over | mJ | energy over "
           "| of the peak at that clock |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for tag in ("random", "zeros"):
        for r in rows:
            out.append(f"| {tag} | {r['contender']} | {r['config']} | {'y' if r['ok'] else 'NO'} | {r[tag + '_us']:.1f} "
                       f"| {over(rows, r, tag + '_us')} | {r[tag + '_mhz']:.0f} | {r[tag + '_watts']:.0f} | "
                       f"{r[tag + '_mcycles']:.3f} | {over(rows, r, tag + '_mcycles')} | {r[tag + '_mj']:.1f} | "
                       f"{over(rows, r, tag + '_mj')} | {100 * r[tag + '_per_clock']:.1f} % |")
    return out



def epilogue_main(torch, args, props) -> int:
    """``--epilogue``: the rows, the table printed and written (``sm90_power_epilogue.md`` / ``.json``); 1 where a
    contender's check failed."""
    rows = epilogue_rows(torch, epilogue_contenders(torch, EPILOGUE_SHAPE, EPILOGUE_SETS[args.set]), args,
                         props.multi_processor_count)
    lines = epilogue_table(rows, props.name)
    print("\n".join(lines), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sm90_power_epilogue.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "sm90_power_epilogue.json"), "w") as f:
        json.dump(dict(device=props.name, rows=rows), f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


def table(rows, device: str) -> list[str]:
    out = [f"sm90 GEMM and cuBLAS at the clock they sustain, bf16 nt, {device} (random operands / all zeros)", "",
           "| M | N | K | contender | ok | TFLOP/s | SM MHz | W | of the peak at that clock | zeros: TFLOP/s | MHz | W |"
           " per clock |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['M']} | {r['N']} | {r['K']} | {r['contender']} | {'y' if r['ok'] else 'NO'} | "
                   f"{r['random_tflops']:.0f} | {r['random_mhz']:.0f} | {r['random_watts']:.0f} | "
                   f"{100 * r['random_per_clock']:.1f} % | {r['zeros_tflops']:.0f} | {r['zeros_mhz']:.0f} | "
                   f"{r['zeros_watts']:.0f} | {100 * r['zeros_per_clock']:.1f} % |")
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES), help="MxNxK,...")
    ap.add_argument("--seconds", type=float, default=2.0, help="each sustained run (its second half measured)")
    ap.add_argument("--epilogue", action="store_true", help="the residual at %s (EPILOGUE_SHAPE) beside cuBLAS's "
                    "addmm_ in place: time, clock, power, cycles and energy a call" % "x".join(map(str, EPILOGUE_SHAPE)))
    ap.add_argument("--set", choices=sorted(EPILOGUE_SETS), default="residual", help="--epilogue's kernels of ours: "
                    "EPILOGUE_SETS (residual: EPILOGUE_OURS; chunks: EPILOGUE_CHUNKS; stagedc: EPILOGUE_STAGEDC)")
    ap.add_argument("--out", default=".")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    import torch

    import tvm_cdna4.torch as ours

    props = torch.cuda.get_device_properties(0)
    if args.epilogue:
        return epilogue_main(torch, args, props)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    rows = []
    print("\n".join(table(rows, props.name)), flush=True)
    for shape in shapes:  # each shape's rows printed and the files rewritten as they come (a step's timeout keeps them)
        new = row_for(torch, ours, shape, args, props.multi_processor_count)
        rows += new
        print("\n".join(table(new, props.name)[len(table([], props.name)):]), flush=True)
        with open(os.path.join(args.out, "sm90_power.md"), "w") as f:
            f.write("\n".join(table(rows, props.name)) + "\n")
        with open(os.path.join(args.out, "sm90_power.json"), "w") as f:
            json.dump(dict(device=props.name, rows=rows), f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
