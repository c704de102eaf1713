"""Issue 38 on an H100 / H200: the sm90 attention forward (``kernels.sm90.attention_plan``: TMA + wgmma,
warp-specialized) against torch SDPA's cuDNN backend (the bar: >= 1.0x on every shape) and FlashAttention-2
backend, with the sm80-class kernel's default for context.

    python3 benchmarks/attention_sm90.py --out $OUT                 # the issue's shapes, the cost model's configs
    python3 benchmarks/attention_sm90.py --out $OUT --configs sweep # and every config of SWEEP per shape
    python3 benchmarks/attention_sm90.py --out $OUT --configs options --quick  # the default with each of OPTIONS
    python3 benchmarks/attention_sm90.py --out $OUT --seqs 2048,4096 --configs options --options tma-buffer --no-sm80
                                                                     # persistent CTAs, O's own buffer, at 2k / 4k
    python3 benchmarks/attention_sm90.py --out $OUT --seqs 2048,4096 --configs options --options item-overlap --no-sm80
                                                                     # the item's edges outside ping-pong's turns
    python3 benchmarks/attention_sm90.py --out $OUT --seqs 2048,4096 --configs options --options zigzag,fold --no-sm80
                                                                     # the persistent CTAs' walks (zig-zag, fold)
    python3 benchmarks/attention_sm90.py --out $OUT --head-dims 64 --seqs 2048,4096,16384 --configs consumers --no-sm80
                                                                     # three consumer warpgroups (192 rows) beside two
    python3 benchmarks/attention_sm90.py --out $OUT --seqs 2048,4096,16384 --torch-op --no-sm80
                                                                     # and tvm_cdna4.torch.attention (the op's plan)
    python3 benchmarks/attention_sm90.py --out $OUT --head-dims 128 --seqs 2048,4096 --torch-op --no-sm80 --rounds 4 \
        --order alternate                                            # the op against the kernel alone, both orders
    python3 benchmarks/attention_sm90.py --out $OUT --quick         # D 128, 4k and 16k tokens only
    python3 benchmarks/attention_sm90.py --out $OUT --fp8           # e4m3 Q, K, V (D 128), SDPA in bf16 beside

Shapes: bf16, 16k tokens (batch x seq) at seq 2k, 4k, 8k, 16k and 32k (batch 1), hidden 2048 (32 heads at D
64, 16 at D 128: FlashAttention-3's benchmark convention), MHA and GQA (a quarter of the heads for K / V),
causal and not. SDPA gets GQA by ``enable_gqa=True`` where the backend takes it, else K / V repeated.

Method. Every kernel is built first in spawned worker processes (``attention_target.build``, device code
compiled into the device-code cache: ``runtime.cuda.precompile``). On the GPU each kernel is first checked
(O and LSE of two heads against an f32 reference: ``attention_h200.f32_check``), then timed by CUDA-graph
replay (``torch_gemm._graph_seconds``: ``--calls`` launches captured in one graph, the median of ``--reps``
replays; SDPA the same way), interleaved over ``--rounds`` rounds (median; ``--order alternate``: odd rounds in reverse
order, ``ORDERS``; ``--settle-ms``: each graph replayed untimed that long first; each row's ``rounds`` keeps every
round's seconds). TFLOP/s =
``AttentionProblem.flops()`` (causal: the pairs it needs). ``--torch-op``: the torch op ``tvm_cdna4.torch.attention``
too (``torch op``: its kernel built on the first call, in the process, from the cost model's config, which the row's
``torch_op_config`` records; checked and timed as the others). Prints a markdown table; writes
``$OUT/attention_sm90.json`` after every shape (a run cut short keeps what it timed). Expected (not yet run) to take
about five minutes for the
40 default shapes on an H100 (builds in parallel first); ``--configs sweep`` with ``--quick`` (8 shapes) about as
long.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.devices import DEVICES, named  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_cost import candidates, estimate, fits  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_cost import choose as default_config  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig  # noqa: E402

C = Sm90AttentionConfig
TOKENS, HIDDEN = 16384, 2048
SEQS = (2048, 4096, 8192, 16384, 32768)
SCHEDULES = {"plain": {}, "overlap": {"overlap": True}, "pingpong": {"overlap": True, "pingpong": True},
             "pingpong-persistent": {"overlap": True, "pingpong": True, "persistent": True}}
SWEEP = [C(kv, stages, **SCHEDULES[s]) for kv, stages in ((128, 2), (176, 2), (128, 3), (64, 4), (192, 2))
         for s in SCHEDULES]
OPTIONS = {"split-kv": {"split_kv_barrier": True}, "tma-epilogue": {"epilogue": "tma"},
           "split-kv+tma-epilogue": {"split_kv_barrier": True, "epilogue": "tma"},
           "tma-buffer": {"epilogue": "tma_buffer"}, "item-overlap": {"item_overlap": True},
           "zigzag": {"walk": "zigzag"}, "fold": {"walk": "fold"},
           "176-keys": {"block_kv": 176}, "176-keys+split-kv": {"block_kv": 176, "split_kv_barrier": True},
           "pv-wait-8": {"exps_before_pv_wait": 8}, "pv-wait-16": {"exps_before_pv_wait": 16}}
"""The opt-in kernel options not yet in the cost model's candidates (``Sm90AttentionConfig.split_kv_barrier``,
``epilogue``, ``item_overlap``: ping-pong configs only; ``walk``: persistent only; ``176-keys``: FlashAttention-3's
non-causal D 128 tile, fewer consumer instructions a key, docs/sm90_attention.md "Against FlashAttention-3's SASS";
``pv-wait-*``: ``exps_before_pv_wait``, the P V wait after that many exps as in FA3's SASS, overlapped configs only):
``--configs options`` times each shape's default config with each of them (``--options``: those
named), one CTA per item and persistent (an option past the shared memory at the default's ring: the deepest ring
that fits, ``tma-buffer`` at D 128: 2 stages); ``SWEEP`` has the first three on the D 128 default (128 keys, 3
stages, ping-pong)."""
SWEEP += [C(128, 3, **SCHEDULES[s], **OPTIONS[o]) for s in ("pingpong", "pingpong-persistent")
          for o in ("split-kv", "tma-epilogue", "split-kv+tma-epilogue")]
"""``--configs sweep``: the tiles, ring depths and schedules timed beside the default (those the planner refuses
for the shape, such as 192 keys at D 128 past the shared memory, are reported as build failures): what the cost
model's rates (``attention_cost.FITTED``, ``EXPOSED``) are fitted to (``benchmarks/attention_sm90_fit.py``); and
``OPTIONS`` on the D 128 default."""


def option_configs(problem: AttentionProblem, default: Sm90AttentionConfig, names=None) -> list[Sm90AttentionConfig]:
    """``--configs options``: ``default``'s tile, ring and schedule, one CTA per item and persistent, with and
    without each of ``OPTIONS`` (``names``: those only), but ``default`` itself (timed as ever), those the planner
    takes for ``problem`` (fp8: no TMA epilogue), each in the deepest ring up to the default's that fits."""
    import attrs

    smem = DEVICES["H100"].smem_per_unit
    base = attrs.evolve(default, split_kv_barrier=False, epilogue="registers", persistent=False, ctas=0,
                        item_overlap=False, walk="round_robin")
    grids = (base, attrs.evolve(base, persistent=True, ctas=0))
    chosen = [OPTIONS[n] for n in (names or OPTIONS)]
    found = []
    for c in (attrs.evolve(g, **o) for g in grids for o in ({}, *chosen)):
        c = next((attrs.evolve(c, stages=s) for s in range(c.stages, 0, -1) if fits(problem, attrs.evolve(c, stages=s),
                                                                                  smem)), None)
        if c is not None and c != default and c not in found:
            found.append(c)
    return found


def config_label(c: Sm90AttentionConfig, default: Sm90AttentionConfig) -> str:
    """A column of ``--configs options`` / ``consumers``' second table: the grid, the epilogue, the split barriers, a
    ring, a tile and consumer warpgroups other than the default's."""
    return "/".join([("persistent" if c.persistent else "grid"), c.epilogue] + ["split-kv"] * c.split_kv_barrier
                    + ["item-overlap"] * c.item_overlap
                    + [c.walk] * (c.walk != "round_robin")
                    + [f"{c.stages} stages"] * (c.stages != default.stages)
                    + [f"{c.block_kv} keys"] * (c.block_kv != default.block_kv)
                    + [f"{c.consumers} consumers"] * (c.consumers != default.consumers)
                    + [f"P V wait after {c.exps_before_pv_wait} exps"] * bool(c.exps_before_pv_wait))


def consumer_configs(problem: AttentionProblem, default: Sm90AttentionConfig) -> list[Sm90AttentionConfig]:
    """``--configs consumers``: three consumer warpgroups (``Sm90AttentionConfig.consumers``: 192-row blocks, D 64)
    beside two, one CTA per item and persistent: the default's schedule with three at the widest tile their
    registers fit (``attention_target.replace_fields``: 128 keys) and at 64 keys, two at the 128-key tile (the same
    tile, two consumers: the A/B of the count alone), and the cost model's first two-consumer config (the default
    before ``attention_cost.WEIGH_CONSUMERS``); those the planner takes for ``problem`` (none at D 128), but the
    default itself."""
    import attrs

    from tvm_cdna4.kernels.sm90.attention_plan import CONSUMERS, WIDE_HEAD_DIM
    from tvm_cdna4.kernels.sm90.attention_target import replace_fields

    gpu = DEVICES["H100"]
    smem, found = gpu.smem_per_unit, []
    if problem.head_dim > WIDE_HEAD_DIM:
        return found
    paired = min((c for c in candidates(problem, smem) if c.consumers == CONSUMERS),
                 key=lambda c: estimate(problem, c, gpu.units))
    for persistent in (False, True):
        base = attrs.evolve(default, persistent=persistent, ctas=0)
        three = replace_fields(problem, base, smem, consumers=3)
        two = replace_fields(problem, base, smem, consumers=CONSUMERS, block_kv=three.block_kv)
        for c in (three, attrs.evolve(three, block_kv=64), two, attrs.evolve(paired, persistent=persistent, ctas=0)):
            if c != default and c not in found and fits(problem, c, smem):
                found.append(c)
    return found


RANKED = 4
"""``--configs sweep`` also times the cost model's first ``RANKED`` candidates of each shape on the GPU present
(``devices.named``; an unlisted one: the H100's) (those not in ``SWEEP``: D 64's deeper rings of wider tiles, say)."""


PLAUSIBLE_TFLOPS = 2000
"""More than an H100 / H200's dense fp8 peak (about 1979 TFLOP/s): a timing above it is reported as suspect."""
FP8_CHECK = 5e-2
"""fp8: the f32 reference check's largest ``||O - ref|| / ||ref||`` (P rounds to e4m3: 2^-4 relative a term)."""


def problems(quick: bool = False, fp8: bool = False, dims=None, seqs=None):
    seqs = seqs or ((4096, 16384) if quick else SEQS)
    dims = dims or ((128,) if quick or fp8 else (64, 128))
    out = []
    for d in dims:
        heads = HIDDEN // d
        for s in seqs:
            for kv in (heads, heads // 4):
                for causal in (False, True):
                    out.append(AttentionProblem(max(1, TOKENS // s), heads, kv, s, s, d, causal=causal,
                                                dtype="fp8" if fp8 else "bf16"))
    return out


ORDERS = ("fixed", "alternate")
"""``--order``: each round times the contenders in one order (cuDNN, FA2, the kernels, the torch op: each kernel after
the same one every round), or alternates it, odd rounds reversed (``timing_order``): at D 128 the H100 runs at its
power limit and a timing may depend on what ran just before it; a row's ``rounds`` records each round's seconds in
the order timed, so that the two directions can be compared (issue 38: the torch op against the kernel alone)."""


def timing_order(names: list, round_index: int, order: str = "fixed") -> list:
    """The contenders of round ``round_index`` in the order they are timed (``ORDERS``)."""
    if order not in ORDERS:
        raise ValueError(f"--order: {order!r} not in {ORDERS}")
    return names[::-1] if order == "alternate" and round_index % 2 else list(names)


def sdpa_call(backend, q, k, v, causal):
    """The SDPA call of ``backend`` (GQA: ``enable_gqa``, else K / V repeated), or None where it does not run."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    group = q.shape[1] // k.shape[1]
    variants = [(k, v, {"enable_gqa": True})] if group > 1 else []
    variants.append((k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), {}) if group > 1 else (k, v, {}))
    for kk, vv, extra in variants:
        def fn(kk=kk, vv=vv, extra=extra):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, **extra)
        try:
            fn()
            torch.cuda.synchronize()
            return fn
        except Exception as e:  # noqa: BLE001 - a backend that does not run here is reported, not timed
            print(f"sdpa {backend} {extra}: {type(e).__name__}: {str(e)[:120]}", flush=True)
    return None


def check(fn, p, q, k, v, extra=()) -> dict:
    """O and LSE of two heads of batch 0 against an f32 reference (GQA: K / V repeated for it; fp8 unit scales,
    the O check at ``FP8_CHECK``)."""
    import torch

    from attention_h200 import f32_check

    s = p.shapes()
    o = torch.full(s["O"], float("nan"), dtype=torch.bfloat16 if p.dtype == "fp8" else q.dtype, device="cuda")
    lse = torch.full(s["LSE"], float("nan"), dtype=torch.float32, device="cuda")
    fn(q, k, v, o, lse, *extra)
    torch.cuda.synchronize()
    group = p.group
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    row = f32_check(o, lse, q, kk, vv, p.causal, heads=(0, p.heads - 1))
    if p.dtype == "fp8":
        row["ok"] = bool(row["o_rel"] < FP8_CHECK and row["lse_abs"] < 1e-2)
    return row


def torch_op(p: AttentionProblem, q):
    """``--torch-op``: (``check``'s form of ``tvm_cdna4.torch.attention`` on ``p``, the op's config); the op's kernel
    built here (``attention_kernel``, cached for its calls)."""
    import tvm_cdna4.torch as tt

    def fn(q, k, v, o, lse):
        out, got = tt.attention(q, k, v, causal=p.causal, return_lse=True)
        o.copy_(out)
        lse.copy_(got)

    return fn, tt.attention_kernel(q, p).plan.config


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder of the JSON (default: $OUT, else .)")
    ap.add_argument("--configs", default="default", choices=("default", "sweep", "options", "consumers"))
    ap.add_argument("--quick", action="store_true", help="D 128 (or --head-dims) at 4k and 16k tokens only")
    ap.add_argument("--head-dims", default="", help="comma-separated head dims (default: 64,128; --quick, --fp8: 128)")
    ap.add_argument("--seqs", default="", help="comma-separated tokens a sequence (default: SEQS; --quick: 4k, 16k)")
    ap.add_argument("--options", default="", help="--configs options: comma-separated OPTIONS names (default: all)")
    ap.add_argument("--no-sm80", action="store_true", help="leave out the sm80-class kernel's default")
    ap.add_argument("--causal-only", action="store_true", help="the causal shapes only")
    ap.add_argument("--torch-op", action="store_true", help="time tvm_cdna4.torch.attention too (16-bit inputs)")
    ap.add_argument("--fp8", action="store_true", help="e4m3 Q, K, V at D 128 (SDPA timed on their bf16 values)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--calls", type=int, default=10, help="launches per CUDA graph")
    ap.add_argument("--reps", type=int, default=10, help="graph replays per round (median)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--order", default="fixed", choices=ORDERS,
                    help="the contenders' order in each round (timing_order): fixed, or alternate (odd rounds reversed)")
    ap.add_argument("--settle-ms", type=float, default=0.0,
                    help="--timing graph: each contender's graph replayed untimed this long before its replays are "
                         "timed (the clock settles to its own power, not to what ran before it)")
    ap.add_argument("--timing", default="graph", choices=("graph", "events"),
                    help="graph: CUDA-graph replay (torch_gemm._graph_seconds); events: runtime.cuda.bench_ms "
                         "(CUDA events around each call, method 'warm'), should a graph not capture a launch")
    args = ap.parse_args(argv)

    import torch
    from torch.nn.attention import SDPBackend

    from torch_gemm import _graph_seconds
    from tvm_cdna4.runtime.cuda import bench_ms, load_kernel

    ints = lambda text: tuple(int(x) for x in text.split(",") if x)  # noqa: E731
    timed = problems(args.quick, args.fp8, ints(args.head_dims), ints(args.seqs))
    timed = [p for p in timed if p.causal or not args.causal_only]
    configs = {p: [default_config(p)] for p in timed}
    if args.configs == "sweep":
        for p in timed:
            gpu = named(torch.cuda.get_device_name()) or DEVICES["H100"]
            ranked = sorted(candidates(p, gpu.smem_per_unit), key=lambda c: estimate(p, c, gpu.units))
            configs[p] = list(dict.fromkeys(configs[p] + SWEEP + ranked[:RANKED]))
    elif args.configs == "options":
        for p in timed:
            names = [n for n in args.options.split(",") if n]
            unknown = sorted(set(names) - set(OPTIONS))
            if unknown:
                ap.error(f"--options: {unknown} not in {sorted(OPTIONS)}")
            configs[p] = list(dict.fromkeys(configs[p] + option_configs(p, configs[p][0], names)))
    elif args.configs == "consumers":
        for p in timed:
            configs[p] = list(dict.fromkeys(configs[p] + consumer_configs(p, configs[p][0])))
    jobs = [(("sm90", str(p), str(c)), "sm90", p, c) for p in timed for c in configs[p]]
    if not (args.no_sm80 or args.fp8):
        jobs += [(("sm80", str(p), "default"), "sm80", p, None) for p in timed]
    from attention_h200 import _build  # the build worker of every attention row

    from tvm_cdna4.runtime.cuda import device_arch

    arch, workdir = device_arch(), tempfile.mkdtemp(prefix="attn_sm90_")
    t0 = time.time()
    built = {}
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for key, path, err, _ in pool.map(_build, [(*j, arch, workdir) for j in jobs]):
            built[key] = (path, err)
            if err:
                print(f"build failed {key}: {err[:300]}", flush=True)
    print(f"built {len(jobs)} kernels in {time.time() - t0:.0f} s", flush=True)

    report = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
                  method=f"CUDA graph of {args.calls} calls, median of {args.reps} replays, median of {args.rounds} "
                         "rounds; flops = AttentionProblem.flops()", rows=[])
    for p in timed:
        gen = torch.Generator(device="cuda").manual_seed(p.seq_q + p.causal)
        s = p.shapes()
        dtype = torch.float8_e4m3fn if p.dtype == "fp8" else torch.bfloat16
        q, k, v = (torch.randn(s[n], generator=gen, device="cuda").to(dtype) for n in ("Q", "K", "V"))
        o = torch.empty(s["O"], dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(s["LSE"], dtype=torch.float32, device="cuda")
        extra = (torch.ones(3, dtype=torch.float32, device="cuda"),) if p.dtype == "fp8" else ()
        qb, kb, vb = (x.to(torch.bfloat16) for x in (q, k, v))
        calls = {"cudnn": sdpa_call(SDPBackend.CUDNN_ATTENTION, qb, kb, vb, p.causal),
                 "flash": sdpa_call(SDPBackend.FLASH_ATTENTION, qb, kb, vb, p.causal)}
        checks = {}
        for key in [k_ for k_ in built if k_[1] == str(p)]:
            path, err = built[key]
            name = f"{key[0]} {key[2]}"
            if path:
                fn = load_kernel(path)
                checks[name] = check(fn, p, q, k, v, extra)
                if checks[name]["ok"]:
                    calls[name] = lambda fn=fn, q=q, k=k, v=v, o=o, lse=lse, extra=extra: fn(q, k, v, o, lse, *extra)
            else:
                checks[name] = {"ok": False, "error": err}
        op_config = None
        if args.torch_op and p.dtype != "fp8":
            try:
                fn, op_config = torch_op(p, q)
                checks["torch op"] = check(fn, p, q, k, v)
            except Exception as e:  # noqa: BLE001 - an op that fails is reported, not timed
                checks["torch op"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
            if checks["torch op"]["ok"]:
                import tvm_cdna4.torch as tt

                calls["torch op"] = lambda q=q, k=k, v=v, causal=p.causal: tt.attention(q, k, v, causal=causal)
        samples = {name: [] for name, fn in calls.items() if fn}
        rounds = []
        for r in range(args.rounds):
            rounds.append({})
            for name in timing_order(list(samples), r, args.order):
                if args.timing == "graph":
                    seconds = _graph_seconds(torch, [calls[name]] * args.calls, args.reps, args.settle_ms / 1e3)
                else:
                    seconds = bench_ms(calls[name], rep_ms=50, method="warm") / 1e3
                samples[name].append(seconds)
                rounds[-1][name] = seconds
        tflops = {name: p.flops() / statistics.median(t) / 1e12 for name, t in samples.items()}
        for name, value in tflops.items():
            if value > PLAUSIBLE_TFLOPS:  # a graph that captured no launch times nothing
                print(f"suspect timing {name}: {value:.0f} TFLOP/s (try --timing events)", flush=True)
        ours = {n: t for n, t in tflops.items() if n.startswith("sm90")}
        best = max(ours, key=ours.get) if ours else None
        row = dict(problem=str(p), batch=p.batch, seq=p.seq_q, heads=p.heads, kv_heads=p.kv_heads, head_dim=p.head_dim,
                   causal=p.causal, tflops=tflops, checks=checks, default=f"sm90 {configs[p][0]}", best=best,
                   default_over_cudnn=(tflops.get(f"sm90 {configs[p][0]}", 0) / tflops["cudnn"]) if "cudnn" in tflops
                   else None, torch_op_config=op_config and str(op_config), torch_op_label=op_config and op_label(op_config),
                   torch_op_over_cudnn=(tflops["torch op"] / tflops["cudnn"]) if {"torch op", "cudnn"} <= set(tflops)
                   else None, rounds=rounds, order=args.order, settle_ms=args.settle_ms)
        report["rows"].append(row)
        print(json.dumps({k_: row[k_] for k_ in ("problem", "tflops", "default_over_cudnn", "torch_op_over_cudnn")},
                         default=str), flush=True)
        os.makedirs(args.out, exist_ok=True)  # after every shape: a run cut short keeps what it timed
        with open(os.path.join(args.out, "attention_sm90.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
        del q, k, v, o, lse, calls, qb, kb, vb
        torch.cuda.empty_cache()
    print("\n| D | B x S | H / Hkv | causal | cuDNN | FA2 | sm80 | sm90 default | sm90 best | default / cuDNN | best config |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    from attention_h200 import cell

    for r in report["rows"]:
        t = r["tflops"]
        print(f"| {r['head_dim']} | {r['batch']} x {r['seq']} | {r['heads']} / {r['kv_heads']} | {r['causal']} | "
              f"{cell(t.get('cudnn'))} | {cell(t.get('flash'))} | {cell(t.get('sm80 default'))} | "
              f"{cell(t.get(r['default']))} | {cell(t.get(r['best']))} | {cell(r['default_over_cudnn'], '.2f')} | {r['best']} |")
    if args.torch_op:
        op_table(report["rows"], cell)
    if args.configs in ("options", "consumers"):  # every config's TFLOP/s beside cuDNN's, the columns by config_label
        options_table(report["rows"], configs, cell)
    return 0


def op_table(rows, cell) -> None:
    """``--torch-op``: a markdown table of the torch op against cuDNN, FA2 and the kernel alone (the row's default;
    ``op_over_kernel``: the whole run's and each round's), with the op's config."""
    print("\n| D | B x S | H / Hkv | causal | cuDNN | FA2 | torch op | op / cuDNN | op / FA2 | kernel alone | op / kernel "
          "| op / kernel by round | the op's config |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, c = r["tflops"], r.get("torch_op_label") or "-"
        fa2 = t["torch op"] / t["flash"] if t.get("torch op") and t.get("flash") else None
        whole, by_round = op_over_kernel(r)
        print(f"| {r['head_dim']} | {r['batch']} x {r['seq']} | {r['heads']} / {r['kv_heads']} | {r['causal']} | "
              f"{cell(t.get('cudnn'))} | {cell(t.get('flash'))} | {cell(t.get('torch op'))} | "
              f"{cell(r['torch_op_over_cudnn'], '.2f')} | {cell(fa2, '.2f')} | {cell(t.get(r['default']))} | "
              f"{cell(whole, '.3f')} | {' '.join(format(x, '.3f') for x in by_round) or '-'} | {c} |")
    if any(r.get("order") == "alternate" for r in rows):
        even, odd = (statistics.geometric_mean(ratios) if ratios else None for ratios in direction_ratios(rows))
        print(f"\nop / kernel, geometric mean over the rows' rounds: in order (the kernel after FA2, the op after the "
              f"kernel) {cell(even, '.3f')}; reversed (the kernel after the op) {cell(odd, '.3f')}")


def direction_ratios(rows) -> tuple[list, list]:
    """``--order alternate``: each row's op / kernel ratios of its even rounds (timed in order) and of its odd rounds
    (reversed)."""
    even, odd = [], []
    for r in rows:
        for i, ratio in enumerate(op_over_kernel(r)[1]):
            (odd if i % 2 else even).append(ratio)
    return even, odd


def op_over_kernel(row: dict) -> tuple:
    """(the torch op's TFLOP/s over the kernel alone's, the row's default config, in ``row``; each round's ratio,
    ``row["rounds"]`` seconds: the kernel's over the op's): (None, []) where either was not timed."""
    t, kernel = row["tflops"], row["default"]
    if not (t.get("torch op") and t.get(kernel)):
        return None, []
    by_round = [r[kernel] / r["torch op"] for r in row.get("rounds", ()) if r.get("torch op") and r.get(kernel)]
    return t["torch op"] / t[kernel], by_round


def op_label(c: Sm90AttentionConfig) -> str:
    """The torch op's config in a few words: keys, stages, grid, consumer warpgroups, epilogue."""
    return f"{c.block_kv} keys/{c.stages} stages/{'persistent' if c.persistent else 'grid'}/{c.consumers} wg/{c.epilogue}"


def options_table(rows, configs, cell) -> None:
    """``--configs options`` / ``consumers``: a markdown table of each shape's configs (``config_label``) against
    cuDNN."""
    by_problem = {str(p): cs for p, cs in configs.items()}
    labels = list(dict.fromkeys(config_label(c, cs[0]) for cs in by_problem.values() for c in cs))
    print(f"\n| D | B x S | H / Hkv | causal | cuDNN | {' | '.join(labels)} |")
    print("|---|---|---|---|---|" + "---|" * len(labels))
    for r in rows:
        cs = by_problem[r["problem"]]
        got = {config_label(c, cs[0]): r["tflops"].get(f"sm90 {c}") for c in cs}
        print(f"| {r['head_dim']} | {r['batch']} x {r['seq']} | {r['heads']} / {r['kv_heads']} | {r['causal']} | "
              f"{cell(r['tflops'].get('cudnn'))} | {' | '.join(cell(got.get(label)) for label in labels)} |")


if __name__ == "__main__":
    sys.exit(main())
