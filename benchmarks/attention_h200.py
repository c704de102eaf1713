"""Issue 26 on the H200: the sm80 attention forward (``kernels.sm80.attention_plan``) against torch
SDPA's FlashAttention-2 backend (and cuDNN's, for context).

    python3 benchmarks/attention_h200.py --out $OUT            # the issue's table: bf16, D 128, 32 heads
    python3 benchmarks/attention_h200.py --configs default     # only the cost model's choice
    python3 benchmarks/attention_h200.py --configs skew        # the skewed warps against the best before
    python3 benchmarks/attention_h200.py --configs mbarrier    # sync="mbarrier" against its "cta" twins
    python3 benchmarks/attention_h200.py --configs lazy        # rescale_slack, and two m-tiles at 64 keys
    python3 benchmarks/attention_h200.py --configs m2          # around lazy's winners
    python3 benchmarks/attention_h200.py --configs final       # the new default against its CTA orders and twins

Method. Every kernel is built first, in worker processes (``build_sm80_attention``, its device code
compiled into the device-code cache: ``runtime.cuda.precompile``). Then, on the GPU:

1. **Validation, exact bound.** Each config on odd lengths (1031 queries and keys, causal and not, GQA
   4:2, seed per case) against the float64 reference (``kernels.attention.problem.reference``) within
   ``error_bound``, outputs poisoned with NaN first (every element written).
2. **Validation, timed shapes.** Each timed kernel's O and LSE on two (batch 0) heads against an f32
   reference computed on the GPU: ``||O - ref|| / ||ref||`` under 1e-2 (bf16 operands) and the largest
   LSE error under 1e-3; a kernel that fails is not timed.
3. **Timing.** ``runtime.cuda.bench_ms`` (the project's helper: ``triton.testing.do_bench`` median,
   the L2 flushed before every call; ``--rounds R``: R times round-robin, the median) of ours and of
   ``F.scaled_dot_product_attention`` under
   ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` (and ``CUDNN_ATTENTION`` where it runs), random normal
   inputs. TFLOP/s = ``AttentionProblem.flops()`` (4 D per visible pair; causal: the pairs it needs,
   the convention of FlashAttention's tables) over the median time.

Prints a markdown table last; writes every figure to ``$OUT/attention_h200.json``. The Hopper kernel
(``--target sm90`` of the CLI, issue 38) has its own script on these helpers: ``benchmarks/attention_sm90.py``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.sm80.attention_plan import Sm80AttentionConfig, default_config  # noqa: E402

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

C = Sm80AttentionConfig
SHAPES = [(4, 4096), (2, 8192), (1, 16384)]  # (batch, seq): batch x seq = 16k tokens
HEADS, HEAD_DIM = 32, 128
SWEEP = [C(32, 4, 2, 2, False), C(32, 8, 2, 2, False), C(64, 8, 3, overlap=True), C(64, 8, 4, overlap=True),
         C(64, 8, 2), C(128, 8, 3), C(32, 4, 3, 2, False)]
SKEW = [C(32, 4, 2, 2, False), C(32, 8, 2, 2, False), C(128, 8, 3), C(128, 8, 3, skew=True), C(64, 8, 3, skew=True),
        C(64, 8, 4, skew=True), C(32, 8, 3, 2, False, skew=True)]  # 2026-12-02 h-attn-sm80b: the best before, skewed
MBARRIER = [C(128, 8, 3), C(128, 8, 3, sync="mbarrier"), C(64, 8, 3), C(64, 8, 3, sync="mbarrier"), C(64, 8, 4),
            C(64, 8, 4, sync="mbarrier"), C(32, 8, 3, 2, False), C(32, 8, 3, 2, False, sync="mbarrier")]
"""2026-12-02 h-mbar: the per-buffer full / empty mbarriers (docs/attention.md, "Decoupled barriers") against
their one-``__syncthreads`` twins; sm_90 (TIRx's ``mbarrier.try_wait``)."""
ALL_HEADS = 1 << 20  # head_group: every head in one group (resolves to batch x heads), the order before stop 31
LAZY = [C(128, 8, 3, sync="mbarrier", head_group=ALL_HEADS),
        C(128, 8, 2, rescale_slack=8, head_group=ALL_HEADS),
        C(128, 8, 3, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
        C(32, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
        C(64, 4, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
        C(64, 8, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
        C(64, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
        C(64, 8, 3, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS)]
"""2026-12-02 (stop 31; ran before the causal warps skipped their dead diagonal tiles): ``rescale_slack`` (O rescaled only when a row's max grows past 2^8) on the previous
bests, and two m-tiles at 64 keys (FlashAttention-2's 128 x 64 tile) that it lets fit."""
M2 = [C(64, 8, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
      C(64, 8, 2, 2, False, rescale_slack=8, head_group=1),
      C(64, 8, 3, 2, False, rescale_slack=8, head_group=ALL_HEADS),
      C(48, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
      C(48, 8, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
      C(32, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
      C(32, 8, 4, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
      C(32, 4, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
      C(32, 4, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=ALL_HEADS),
      C(64, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=1)]
"""2026-12-02 (stop 31; also before the diagonal skip): around LAZY's winners (two m-tiles, ``rescale_slack``): 48-key tiles, more stages, four-warp
CTAs (two per SM), the L2-friendly CTA order."""
FINAL = [C(64, 8, 2, 2, False, rescale_slack=8, head_group=1),
         C(64, 8, 2, 2, False, rescale_slack=8, head_group=ALL_HEADS),
         C(64, 8, 3, 2, False, sync="mbarrier", rescale_slack=8),
         C(48, 8, 3, 2, False, sync="mbarrier", rescale_slack=8),
         C(64, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=1),
         C(128, 8, 2, head_group=ALL_HEADS), C(64, 8, 3, 2, False, rescale_slack=8, head_group=1),
         C(48, 8, 2, 2, False, rescale_slack=8, head_group=1)]
"""2026-12-02 (stop 31): the cost model's new default (two m-tiles at 64 keys, ``rescale_slack``, ``l2_head_group``'s
CTA order, causal warps skipping their dead diagonal tiles) against its other CTA orders, the mbarrier twins, and
the default before (128 keys, one m-tile, every head's blocks interleaved)."""
SWEEPS = {"sweep": SWEEP, "skew": SKEW, "mbarrier": MBARRIER, "lazy": LAZY, "m2": M2, "final": FINAL, "default": []}
ODD = (1, 4, 2, 1031, 1031)  # batch, heads, kv heads, seq q, seq kv of the exact-bound check


def problems(causals=(False, True), head_dim=HEAD_DIM):
    return [AttentionProblem(b, HEADS, HEADS, s, s, head_dim, causal=c) for b, s in SHAPES for c in causals]


def _build(job):
    """Worker: build, export and precompile one kernel of an attention row (``target``: a key of
    ``kernels.attention.TARGETS``; ``benchmarks/attention_sm90.py`` builds through it too); (key, path or None,
    error, seconds)."""
    key, target, problem, config, arch, workdir = job
    from tvm_cdna4.kernels.attention import TARGETS
    from tvm_cdna4.runtime.cuda import precompile

    t0 = time.perf_counter()
    try:
        exe = TARGETS[target].verb("build")(problem, config, arch=arch)
        path = os.path.join(workdir, "attn_" + hashlib.sha256(repr(key).encode()).hexdigest()[:16] + ".so")
        exe.export_library(path)
        precompile(exe)
        return key, path, None, time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - a kernel that fails to build is reported, not timed
        return key, None, f"{type(e).__name__}: {e}", time.perf_counter() - t0


def build_all(jobs_list, arch, jobs):
    workdir = tempfile.mkdtemp(prefix="attn_h200_")
    done = {}
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        for key, path, err, sec in pool.map(_build, [(k, "sm80", p, c, arch, workdir) for k, p, c in jobs_list]):
            done[key] = (path, err)
            if err:
                print(f"build failed {key}: {err}", flush=True)
    return done


def torch_inputs(problem, seed):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    s = problem.shapes()
    dt = torch.bfloat16 if problem.dtype == "bf16" else torch.float16
    return [torch.randn(s[n], generator=gen, device="cuda", dtype=torch.float32).to(dt) for n in ("Q", "K", "V")]


def run_ours(fn, problem, q, k, v):
    import torch

    s = problem.shapes()
    o = torch.full(s["O"], float("nan"), dtype=q.dtype, device="cuda")
    lse = torch.full(s["LSE"], float("nan"), dtype=torch.float32, device="cuda")
    fn(q, k, v, o, lse)
    torch.cuda.synchronize()
    return o, lse


def exact_check(fn, problem, seed) -> dict:
    """The float64 reference within ``error_bound`` (small problem): the largest error / bound."""
    import numpy as np

    from tvm_cdna4.kernels.attention.problem import error_bound, reference

    q, k, v = torch_inputs(problem, seed)
    o, lse = run_ours(fn, problem, q, k, v)
    qn, kn, vn = (x.float().cpu().numpy() for x in (q, k, v))
    want_o, want_lse = reference(qn, kn, vn, problem.causal)
    bo, bl = error_bound(qn, kn, vn, problem.causal, dtype=problem.dtype)
    o, lse = o.float().cpu().numpy(), lse.cpu().numpy()
    ro = float(np.nanmax(np.abs(o - want_o) / bo)) if np.isfinite(o).all() else float("nan")
    rl = float(np.nanmax(np.abs(lse - want_lse) / bl)) if np.isfinite(lse).all() else float("nan")
    return dict(o_over_bound=ro, lse_over_bound=rl, ok=bool(ro <= 1 and rl <= 1))


def f32_check(o, lse, q, k, v, causal, heads=(0, HEADS - 1)) -> dict:
    """O and LSE of batch 0's ``heads`` against an f32 reference on the GPU."""
    import torch

    worst_o = worst_l = 0.0
    for h in heads:
        qh, kh, vh = (x[0, h].float() for x in (q, k, v))
        s = (qh @ kh.T) / qh.shape[-1] ** 0.5
        if causal:
            s.masked_fill_(torch.ones_like(s, dtype=torch.bool).triu_(1), float("-inf"))
        ref_lse = torch.logsumexp(s, -1)
        ref = torch.softmax(s, -1) @ vh
        worst_o = max(worst_o, float(torch.linalg.norm(o[0, h].float() - ref) / torch.linalg.norm(ref)))
        worst_l = max(worst_l, float((lse[0, h] - ref_lse).abs().max()))
        del s
    return dict(o_rel=worst_o, lse_abs=worst_l, ok=bool(worst_o < 1e-2 and worst_l < 1e-3))


def sdpa_fn(backend, q, k, v, causal):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def fn():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        fn()
        torch.cuda.synchronize()
        return fn
    except Exception as e:  # noqa: BLE001 - a backend that does not run here is reported, not timed
        print(f"sdpa {backend}: {type(e).__name__}: {str(e)[:120]}", flush=True)
        return None


def cell(x, spec=".0f") -> str:
    """A table cell: ``x`` formatted, ``-`` where there is none (a peer that did not run)."""
    return "-" if x is None else format(x, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    ap.add_argument("--configs", default="sweep", choices=tuple(SWEEPS), help="the list timed with the default: "
                    "'sweep' SWEEP, 'skew' SKEW, 'mbarrier' MBARRIER, 'lazy' LAZY, 'm2' M2, 'final' FINAL, 'default' none")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--rep-ms", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1, help="times each kernel (SDPA included) is timed, round-robin; "
                    "the median is reported")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds: expected 1 or more, found {args.rounds}")

    import torch
    from torch.nn.attention import SDPBackend

    from tvm_cdna4.runtime.cuda import bench_ms, device_arch, load_kernel

    arch = device_arch()
    timed = problems()
    sweep = SWEEPS[args.configs]
    defaults = {p: default_config(p, arch=arch) for p in timed}
    configs = {p: [defaults[p]] + [c for c in sweep if c != defaults[p]] for p in timed}
    all_configs = sorted({c for cs in configs.values() for c in cs}, key=str)
    odd = {(c, causal): AttentionProblem(*ODD, HEAD_DIM, causal=causal) for c in all_configs for causal in (False, True)}
    jobs = [(("odd", str(c), causal), p, c) for (c, causal), p in odd.items()]
    jobs += [(("timed", str(p), str(c)), p, c) for p in timed for c in configs[p]]
    t0 = time.time()
    built = build_all(jobs, arch, args.jobs)
    print(f"built {len(jobs)} kernels in {time.time() - t0:.0f} s ({args.jobs} workers)", flush=True)
    report = dict(arch=arch, gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
                  method="bench_ms flush (do_bench median), flops = AttentionProblem.flops()", odd=[], timed=[])

    bad_configs = set()
    for (c, causal), p in odd.items():
        path, err = built[("odd", str(c), causal)]
        row = dict(config=str(c), causal=causal, problem=str(p), error=err)
        if path:
            row.update(exact_check(load_kernel(path), p, seed=len(report["odd"])))
        if not row.get("ok"):
            bad_configs.add(c)
        report["odd"].append(row)
        print(f"odd {ODD} causal={causal} {c}: {row.get('o_over_bound')} {row.get('lse_over_bound')} ok={row.get('ok')}",
              flush=True)

    table = []
    for p in timed:
        q, k, v = torch_inputs(p, seed=p.seq_q + p.causal)
        flops = p.flops()
        timers = {}  # name -> the call to time: SDPA's backends, then every config that passed the f32 check
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            timers[name] = sdpa_fn(backend, q, k, v, p.causal)
        rows = []
        for c in configs[p]:
            path, err = built[("timed", str(p), str(c))]
            row = dict(problem=str(p), config=str(c), default=c == configs[p][0], error=err)
            if path and c not in bad_configs:
                fn = load_kernel(path)
                o, lse = run_ours(fn, p, q, k, v)
                row.update(f32_check(o, lse, q, k, v, p.causal))
                if row["ok"]:
                    s = p.shapes()
                    o = torch.empty(s["O"], dtype=q.dtype, device="cuda")
                    lse = torch.empty(s["LSE"], dtype=torch.float32, device="cuda")
                    timers[str(c)] = lambda fn=fn, o=o, lse=lse: fn(q, k, v, o, lse)
            rows.append(row)
        samples = {name: [] for name, fn in timers.items() if fn}
        for _ in range(args.rounds):  # round-robin: every round times each kernel once, SDPA first
            for name in samples:
                samples[name].append(bench_ms(timers[name], rep_ms=args.rep_ms))
        ref = {name: statistics.median(samples[name]) if name in samples else None for name in ("flash", "cudnn")}
        best = None
        for row in rows:
            if row["config"] in samples:
                ms = statistics.median(samples[row["config"]])
                row.update(ms=ms, tflops=flops / ms / 1e9, ms_rounds=samples[row["config"]])
                if best is None or ms < best["ms"]:
                    best = row
            report["timed"].append(row)
            print(f"{p.batch}x{p.seq_q} causal={p.causal} {row['config']}: {row.get('tflops', 0):.0f} TFLOP/s "
                  f"rounds {row.get('ms_rounds')} o_rel={row.get('o_rel')} ok={row.get('ok')}", flush=True)
        print(f"{p.batch}x{p.seq_q} causal={p.causal} flash rounds {samples.get('flash')} cudnn {samples.get('cudnn')}",
              flush=True)
        fl = ref["flash"]
        default_row = next(r for r in report["timed"] if r["problem"] == str(p) and r["default"])
        table.append(dict(batch=p.batch, seq=p.seq_q, causal=p.causal, flash_tflops=fl and flops / fl / 1e9,
                          flash_ms_rounds=samples.get("flash"),
                          cudnn_tflops=ref["cudnn"] and flops / ref["cudnn"] / 1e9,
                          default_tflops=default_row.get("tflops"), best_tflops=best and best["tflops"],
                          best_config=best and best["config"],
                          best_over_flash=best and fl and fl / best["ms"],
                          default_over_flash=default_row.get("ms") and fl and fl / default_row["ms"]))
        del q, k, v
        torch.cuda.empty_cache()
    report["table"] = table
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "attention_h200.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    print("\n| B x S | causal | SDPA flash | cuDNN | ours (default) | ours (best) | best / flash | best config |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['batch']} x {r['seq']} | {r['causal']} | {cell(r['flash_tflops'])} | {cell(r['cudnn_tflops'])} | "
              f"{cell(r['default_tflops'])} | {cell(r['best_tflops'])} | {cell(r['best_over_flash'], '.2f')} | "
              f"{r['best_config']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
