"""MoE grouped GEMMs through ``tvm_cdna4.torch.grouped_gemm`` beside ``torch._grouped_mm``, on one Hopper GPU.

    python3 benchmarks/torch_grouped_sm90.py --out $OUT                      # both models, every token count
    python3 benchmarks/torch_grouped_sm90.py --models mixtral-8x7b --tokens 2048 --out $OUT
    python3 benchmarks/torch_grouped_sm90.py --sweep --out $OUT     # the sm90 configs one by one (prefill)
    python3 benchmarks/torch_grouped_sm90.py --models mixtral-8x7b --tokens 2048,8192 --walk windows --out $OUT

y[offsets[g]:offsets[g+1]] = x[...] · W[g]ᵀ, bf16 in and out (layout ``nt``, W ``[G, N, K]``), the two expert
projections (fused gate/up, down: ``MODELS``) of a many-small-experts model (Qwen3-30B-A3B: 128 experts,
top-8, hidden 2048, moe_intermediate 768) and a few-large-experts one (Mixtral-8x7B: 8 experts, top-2, hidden
4096, intermediate 14336), at prefill (2048, 8192 tokens) and decode (1, 8, 32, 64 tokens) counts: T = tokens
x top-k rows. Routing is skewed (``sizes``): each token picks top-k distinct experts with Zipf-like
probabilities ``1 / rank^--zipf`` (a random permutation of the experts, ``--seed``), the rows sorted by
expert. What a serving stack sees: the torch op (argument checks, the grouped kernel of the shape class, its
bucket's plan: on sm_90 the sm90 grouped kernel above ``kernels.sm90.grouped_plan.DECODE_ROWS`` rows per
group, the sm80 grouped kernel at and below), not a kernel called directly.

Contenders: ``ours`` (``tvm_cdna4.torch.grouped_gemm(x, w, offsets, out=y)``), ``torch``
(``torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets[1:])``: CUTLASS's sm90 grouped kernels) and
``sm80`` (the sm80 grouped kernel of the same problem, ``kernels.sm80.gemm.build_grouped``, launched
directly: the evidence for the decode rule; ``--no-sm80`` drops it). Method (as ``benchmarks/torch_gemm.py``):
every kernel built first in ``--jobs`` spawned worker processes (build and device-code caches), each
contender checked once against the f32 product (C poisoned with NaN; ``runtime.cuda.tolerance("bf16")``,
the relative Frobenius error), then timed in one CUDA graph of ``--calls`` calls over ``copies`` weight
copies whose bytes together exceed three L2s (``torch_gemm._graph_seconds``: the median replay over
``--reps``). Output: the markdown table (and the per-phase summary: prefill geo-mean ours/torch, decode
worst) on stdout and in ``$OUT/torch_grouped_sm90.md``, every figure in ``$OUT/torch_grouped_sm90.json``.
Targets (issue 36): prefill >= 1.0x ``torch._grouped_mm`` on both models; decode >= 1.3x. ``--walk``: the walk the
cost model's grouped configs take (``gemm_cost.GROUPED_WALK``, set in every process before a plan is made; the
outputs named ``torch_grouped_sm90_<walk>``): an A/B of the walks is two runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.append(path)  # after PYTHONPATH: a package given there is the one measured

from torch_gemm import write_results  # noqa: E402

MODELS = {
    # name: experts, top-k, hidden, expert intermediate (Hugging Face config.json of each)
    "qwen3-30b-a3b": dict(experts=128, top=8, hidden=2048, inter=768),
    "mixtral-8x7b": dict(experts=8, top=2, hidden=4096, inter=14336),
}
PREFILL = (2048, 8192)
DECODE = (1, 8, 32, 64)


def projections(model: str) -> list[tuple[str, int, int, int]]:
    """(name, G, N, K) of a model's two expert projections."""
    m = MODELS[model]
    return [("gate_up", m["experts"], 2 * m["inter"], m["hidden"]), ("down", m["experts"], m["hidden"], m["inter"])]


def sizes(G: int, top: int, tokens: int, zipf: float, seed: int) -> list[int]:
    """Rows per expert: every token's ``top`` distinct experts drawn with probabilities ``1 / rank^zipf`` over
    a random permutation of the experts (the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weight = 1.0 / np.arange(1, G + 1) ** zipf
    p = (weight / weight.sum())[rng.permutation(G)]
    counts = np.zeros(G, np.int64)
    for _ in range(tokens):
        counts[rng.choice(G, top, replace=False, p=p)] += 1
    return [int(c) for c in counts]


def _prebuild(job) -> str:
    """Worker: build the bucket of T of the grouped kernel ``tvm_cdna4.torch.grouped_gemm`` runs on this
    device's target (sm80's where sm90 refuses the problem) and, with ``sm80``, the sm80 grouped kernel's, and
    compile their device code, so that the timing process only loads."""
    G, N, K, T, arch, target, sm80, walk = job
    set_walk(walk)
    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.sm80.gemm import build_grouped
    from tvm_cdna4.runtime.cuda import precompile

    built = []
    if target == "sm90":
        from tvm_cdna4.kernels.sm90.gemm_target import build

        try:
            built.append(build(GemmProblem(None, N, K, "bf16", "nt", "bf16", groups=G)))
        except ContractError:
            sm80 = True
    if sm80 or not built:
        built.append(build_grouped(G, N, K, "bf16", "nt", "bf16", arch))
    for grp in built:
        precompile(grp.kernel_for(T))
    return f"G={G} {N}x{K} T={T}: " + ", ".join(f"{type(grp.plan(T)).__name__} {grp.bucket(T).describe()}" for grp in built)


def set_walk(walk: str | None) -> None:
    """``gemm_cost.GROUPED_WALK`` in this process (``--walk``; None: the package's default)."""
    if walk is not None:
        from tvm_cdna4.kernels.sm90 import gemm_cost

        gemm_cost.GROUPED_WALK = walk


def _reference(torch, x, w, rows):
    ref, lo = torch.empty(x.shape[0], w.shape[1], device="cuda"), 0
    for g, m in enumerate(rows):
        ref[lo:lo + m] = x[lo:lo + m].float() @ w[g].float().t()
        lo += m
    return ref


def measure(torch, ours, model, proj, G, N, K, tokens, rows, args) -> dict:
    from torch_gemm import _graph_seconds

    from tvm_cdna4.runtime.cuda import DynamicKernel, tolerance

    T = sum(rows)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = max(2, min(16, math.ceil(3 * l2 / (G * N * K * 2))))
    g = torch.Generator(device="cuda").manual_seed(tokens * 7919 + N + K)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
    ws = [torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, generator=g) / math.sqrt(K) for _ in range(copies)]
    offsets = torch.tensor([0, *itertools_accumulate(rows)], dtype=torch.int32, device="cuda")
    ends = offsets[1:].clone()
    y = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    box = {}
    contenders = {"ours": (lambda w: ours.grouped_gemm(x, w, offsets, out=y), lambda: y),
                  "torch": (lambda w: box.__setitem__("t", torch._grouped_mm(x, w.transpose(-2, -1), offs=ends)),
                            lambda: box["t"])}
    if args.sm80:
        from tvm_cdna4.kernels.sm80.gemm import build_grouped

        arch = ours.cuda_target(x.device)[0]
        sm80 = DynamicKernel(build_grouped(G, N, K, "bf16", "nt", "bf16", arch), device=x.device).kernel(T)
        contenders["sm80"] = (lambda w: sm80.launch(x, w, y, offsets), lambda: y)
    ref = _reference(torch, x, ws[0], rows)
    row = dict(model=model, proj=proj, G=G, N=N, K=K, tokens=tokens, T=T, rows_per_group=-(-T // G),
               largest_group=max(rows), empty_groups=sum(1 for r in rows if not r), copies=copies,
               phase="prefill" if tokens in PREFILL or tokens > max(DECODE) else "decode")
    for name, (fn, out) in contenders.items():
        y.fill_(float("nan"))
        fn(ws[0])
        torch.cuda.synchronize()
        got = out().float()
        err = ((got - ref).norm() / ref.norm()).item()
        row[f"{name}_err"], row[f"{name}_ok"] = err, bool(torch.isfinite(got).all().item()) and err <= tolerance("bf16")
        calls = [(lambda w=w: fn(w)) for w in (ws * math.ceil(args.calls / copies))[:args.calls]]
        row[f"{name}_graph_us"] = _graph_seconds(torch, calls, args.reps) * 1e6
    row["speedup"] = row["torch_graph_us"] / row["ours_graph_us"]
    if args.sm80:
        row["speedup_sm80"] = row["torch_graph_us"] / row["sm80_graph_us"]
    key = ("grouped", G, N, K, "bf16", "bf16", "nt")
    plan = next(((k.dynamic.plan(T), name) for name, k in ours.kernel_cache().items() if name[:7] == key), None)
    row["kernel"] = "?" if plan is None else type(plan[0]).__name__ + (" sm90" if plan[1][-1] == "sm90" else "")
    row["walk"] = getattr(getattr(plan and plan[0], "config", None), "tile_walk", None)  # the sm90 grouped plan's
    del ws
    return row


def itertools_accumulate(values):
    import itertools

    return list(itertools.accumulate(values))


def table(rows, sm80: bool) -> list[str]:
    head = "| model | proj | tokens | T | rows/group (largest) | empty | kernel | ours µs | torch µs | torch/ours |"
    head += " sm80 µs | torch/sm80 | ok |" if sm80 else " ok |"
    out = [head, "|" + "---|" * (13 if sm80 else 11)]
    for r in rows:
        ok = r["ours_ok"] and r["torch_ok"] and (not sm80 or r["sm80_ok"])
        line = (f"| {r['model']} | {r['proj']} | {r['tokens']} | {r['T']} | {r['rows_per_group']} ({r['largest_group']}) | "
                f"{r['empty_groups']} | {r['kernel']} | {r['ours_graph_us']:.1f} | {r['torch_graph_us']:.1f} | "
                f"{r['speedup']:.2f}x |")
        if sm80:
            line += f" {r['sm80_graph_us']:.1f} | {r['speedup_sm80']:.2f}x |"
        out.append(line + f" {'yes' if ok else 'NO'} |")
    return out + ["", *summary(rows)]


def summary(rows) -> list[str]:
    out = ["| model | phase | geo-mean torch/ours | min | max |", "|---|---|---|---|---|"]
    for model in dict.fromkeys(r["model"] for r in rows):
        for phase in ("prefill", "decode"):
            s = [r["speedup"] for r in rows if r["model"] == model and r["phase"] == phase]
            if s:
                out.append(f"| {model} | {phase} | {math.prod(s) ** (1 / len(s)):.2f}x | {min(s):.2f}x | {max(s):.2f}x |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tokens", default=",".join(map(str, PREFILL + DECODE)))
    ap.add_argument("--zipf", type=float, default=1.0, help="the routing's skew: expert rank r drawn with 1 / r^zipf")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=20, help="calls per graph")
    ap.add_argument("--reps", type=int, default=20, help="graph replays (the median)")
    ap.add_argument("--no-sm80", dest="sm80", action="store_false", help="without the sm80 grouped kernel's timing")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--out", default=".")
    ap.add_argument("--sweep", action="store_true", help="time the sm90 grouped cost model's configs one by one on the "
                    "prefill counts (benchmarks/grouped_sm90_sweep.py) instead")
    import grouped_sm90_sweep

    ap.add_argument("--walk", choices=("prefix", "windows"), help="the walk of the cost model's grouped configs "
                    "(gemm_cost.GROUPED_WALK; default: the package's): windows keeps each tile window in one group")
    grouped_sm90_sweep.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.sweep:
        if args.tokens == ap.get_default("tokens"):
            args.tokens = ",".join(map(str, PREFILL))
        return grouped_sm90_sweep.run(args)
    import torch

    import tvm_cdna4.torch as ours

    set_walk(args.walk)

    arch, target = ours.cuda_target(torch.device("cuda", 0))
    tokens = [int(v) for v in args.tokens.split(",")]
    cases = []
    for model in args.models.split(","):
        for n_tokens in tokens:
            rows = sizes(MODELS[model]["experts"], MODELS[model]["top"], n_tokens, args.zipf, args.seed + n_tokens)
            cases += [(model, proj, G, N, K, n_tokens, rows) for proj, G, N, K in projections(model)]
    t0 = time.time()
    jobs = sorted({(G, N, K, sum(rows), arch, target, args.sm80, args.walk) for _, _, G, N, K, _, rows in cases})
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for line in pool.map(_prebuild, jobs):
            print(line, flush=True)
    name = torch.cuda.get_device_name(0)
    print(f"{name}: target {target} ({ours.TARGET_ENV}={ours.CUDA_TARGET}); built {len(jobs)} (shape, bucket) kernels "
          f"in {time.time() - t0:.0f} s on {args.jobs} workers", flush=True)
    out_rows = []
    for model, proj, G, N, K, n_tokens, rows in cases:
        r = measure(torch, ours, model, proj, G, N, K, n_tokens, rows, args)
        out_rows.append(r)
        print(f"{model} {proj} tokens={n_tokens} T={r['T']}: ours {r['ours_graph_us']:.1f} us ({r['kernel']}), torch "
              f"{r['torch_graph_us']:.1f} us ({r['speedup']:.2f}x), ok={r['ours_ok']}", flush=True)
    meta = dict(device=name, arch=arch, target=target, torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
                walk=args.walk, zipf=args.zipf, seed=args.seed, calls=args.calls, reps=args.reps, seconds=time.time() - t0)
    write_results(args.out, "torch_grouped_sm90" + (f"_{args.walk}" if args.walk else ""), meta, out_rows, table(out_rows, args.sm80))
    return 0 if all(r["ours_ok"] and r["torch_ok"] for r in out_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
