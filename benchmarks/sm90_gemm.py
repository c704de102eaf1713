"""The sm90 GEMM (``kernels/sm90``) on a Hopper GPU: build, check, time beside torch.matmul.

    python benchmarks/sm90_gemm.py [--out DIR] [--quick] [--validate-only]

1. builds every kernel it runs (the TIRx lowering in a process pool; the device code is compiled by
   the loader on first use);
2. checks odd shapes (M = 1, 5, 77, 333, 4096; ragged N and K; bf16/f16 in, f32/bf16/f16 out) against
   a float32 torch reference of the same inputs, C poisoned with NaN first: ``|C - ref|_max /
   |ref|_max`` under the output's bound, and one ``gemm.validate(problem, "sm90", run=run_gemm)``;
3. times (CUDA graphs of one launch per input set, the sets rotated so that A and B come from beyond
   the 50 MB L2; the median over replays) several configs at 4096^3 and the cost model's choice on a
   Llama-3-8B projection set, beside ``torch.mm(a, b.t(), out=c)`` in the same run, and prints the table
   last. Logs go to ``--out`` (default ``$OUT`` or ``.``).

``--validate-only``: only ``gemm.validate(problem, "sm90", run=run_gemm)`` on ``VALIDATE`` (fused
epilogues, odd N, every output dtype), each against the family's float64 reference and bound.
``--study``: only the epilogue / schedule study (``STUDY``: stores from registers, TMA, TMA in 64-column
chunks, ping-pong) at 4096^3 and the Llama set. ``--epilogue``: only the fused epilogue's cost, each of the five
steps alone and all five (``epilogue_cases``) beside the plain GEMM at 4096^3 with the cost model's choice,
each checked once against a torch reference, timed with CUDA graphs, the overhead over plain against the
issue's 3% bar, then the peer's cost of the same steps in the same run (``peer_rows``: cuBLAS's residual through
``beta = 1`` and cuBLASLt's fused bias + gelu beside ``torch.mm``, each checked first); the table also in
``--out``'s ``sm90_epilogue.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import time

L2_BYTES = 50 * 2**20


def _problem(M, N, K, dtype="bf16", out="bf16", fusion=None):
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gemm.epilogue import Fusion

    return gemm.GemmProblem(M=M, N=N, K=K, dtype=dtype, layout="nt", out_dtype=out, fusion=fusion or Fusion())


def job_config(problem, cfg):
    """The config a job runs (``_build``): a config dict (a ``Sm90Config``'s fields), ``"tile"`` (the sm90 kernel's
    cost-model choice at any M: ``gemm_cost.choose_config``, swapped where the model says), ``"tma"`` (the best
    unswapped choice with ``epilogue="tma"``, the ring re-planned beside the staging buffer: the swapped kernel
    stores from registers), ``("choice", updates)`` (the target's choice with those fields changed) or None (the
    target's choice: the decode kernel for M <= 16)."""
    import attrs

    from tvm_cdna4.kernels import devices, gemm
    from tvm_cdna4.kernels.sm90.gemm_cost import choose_config, deepest, ranked
    from tvm_cdna4.kernels.sm90 import gemm_shift
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    if isinstance(cfg, tuple):  # a cluster or TMA stores: the shift where gemm_shift.allows it (Sm90Config.shift_last)
        fields = cfg[1]
        if not gemm_shift.allows(fields.get("cluster_m", 1), fields.get("epilogue", "registers"),
                                 fields.get("residual_read", "global")):
            fields = {"shift_last": False, **fields}
        return attrs.evolve(gemm.plan(problem, "sm90").config, **fields)
    if cfg in ("tile", "tma"):
        device = devices.planned("sm80")
        shape = (problem.M, problem.N, problem.K, 4 if problem.out == "f32" else 2, device)
        if cfg == "tile":
            return choose_config(*shape)
        tile = ranked(*shape, swap=False)[0][1]
        return attrs.evolve(tile, epilogue="tma", shift_last=tile.shift_last and gemm_shift.allows(1, "tma"),
                            stages=deepest(tile.block_m, tile.block_n, tile.consumers, device.smem_per_unit,
                                           -(-problem.K // 64), "tma"))
    return None if cfg is None else Sm90Config(**cfg)


def _build(job):
    """(key, CudaBuild or error text) of one (problem args, config): the config ``job_config`` makes of the job's."""
    import attrs

    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    key, args, cfg = job
    try:
        problem = _problem(*args)
        cfg = job_config(problem, cfg)
        p = gemm.plan(problem, "sm90", cfg)
        t = time.time()
        b = build_plan(p, "sm_90a", cache=False)
        cfg_dict = attrs.asdict(p.config) if attrs.has(type(p.config)) else p.config.as_dict()
        return key, (p, b, time.time() - t, cfg_dict)
    except Exception as e:  # noqa: BLE001 (reported in the table)
        return key, f"{type(e).__name__}: {e}"[:400]


CHECKS = [(1, 4096, 4096, "bf16", "bf16"), (5, 256, 136, "bf16", "f32"), (77, 200, 520, "bf16", "bf16"),
          (333, 1000, 4096, "f16", "f16"), (333, 77, 64, "bf16", "f32"), (4096, 4096, 4096, "bf16", "bf16"),
          (300, 4000, 1000, "bf16", "bf16")]
CHECK_CONFIGS = [None, {"block_m": 128, "block_n": 256, "stages": 4, "consumers": 2},
                 {"block_m": 64, "block_n": 128, "stages": 6, "consumers": 1},
                 {"block_m": 256, "block_n": 128, "stages": 4, "consumers": 2}]
SQUARE = [None, {"block_m": 128, "block_n": 256, "stages": 3, "consumers": 2},
          {"block_m": 128, "block_n": 256, "stages": 3, "consumers": 2, "epilogue": "tma"},
          {"block_m": 128, "block_n": 128, "stages": 6, "consumers": 2},
          {"block_m": 128, "block_n": 192, "stages": 5, "consumers": 2}]
LLAMA = [(N, K) for N, K in ((4096, 4096), (14336, 4096), (4096, 14336))]
LLAMA_M = (768, 3000, 8192)
STUDY = [{"block_m": 128, "block_n": 256, "stages": 4, "consumers": 2},
         {"block_m": 128, "block_n": 256, "stages": 3, "consumers": 2, "epilogue": "tma"},
         {"block_m": 128, "block_n": 128, "stages": 7, "consumers": 2, "schedule": "pingpong"},
         {"block_m": 128, "block_n": 128, "stages": 5, "consumers": 2, "schedule": "pingpong", "epilogue": "tma"},
         {"block_m": 64, "block_n": 256, "stages": 5, "consumers": 2, "schedule": "pingpong"},
         {"block_m": 64, "block_n": 256, "stages": 4, "consumers": 2, "schedule": "pingpong", "epilogue": "tma"},
         {"block_m": 128, "block_n": 256, "stages": 4, "consumers": 2, "epilogue": "tma", "epilogue_tile": 64}]
"""``--study``: the epilogue and consumer schedules (cooperative / ping-pong, stores from registers / TMA)
at 4096^3 and on the Llama-3-8B set, each checked at ragged shapes too. The last: C staged in 64-column
chunks through two buffers (``Sm90Config.epilogue_tile``), which leaves 128x256 room for a fourth stage."""
SMALL_M = (1, 16, 64, 128)
"""Small M, timed with the target's choice (the decode kernel for M <= 16) and the sm90 tile kernel: the
timing ``gemm_target.DECODE_KEEPS`` waits for."""


EPILOGUE_SHAPE = (4096, 4096, 4096)
EPILOGUE_BAR = 0.03
"""``--epilogue``: the issue's bar, a fused epilogue at most 3% over the plain GEMM of the same config."""


def epilogue_cases():
    """``--epilogue``: the plain GEMM, each of the five epilogue steps alone (``kernels.gemm.epilogue.Fusion``:
    bias, the activation (silu and gelu), residual, row_scale, col_scale) and all five at once."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion

    return [("plain", Fusion()), ("bias", Fusion(bias=True)), ("activation silu", Fusion(activation="silu")),
            ("activation gelu", Fusion(activation="gelu")), ("residual", Fusion(residual=True)),
            ("row_scale", Fusion(row_scale=True)), ("col_scale", Fusion(col_scale=True)),
            ("all five", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True))]


EPILOGUE_BEFORE = {"residual_read": "global", "activation_form": "ex2"}
"""The fused epilogue's choices before issue 36 (``Sm90Config.residual_read``, ``activation_form``): the
``(before)`` rows of ``--epilogue`` time them beside the cost model's choice in the same run."""


EPILOGUE_READS = {"tma": {"residual_read": "tma"}, "sliced": {"residual_read": "sliced"},
                  "prefetch": {"residual_read": "prefetch"}, "preread": {"residual_read": "preread"},
                  "prefetch, tma/64, s4": {"residual_read": "prefetch", "epilogue_tile": 64, "stages": 4},
                  "early": {"residual_read": "early"},
                  "early, tma/64, s4": {"residual_read": "early", "epilogue_tile": 64, "stages": 4}}
"""``--epilogue``: the residual reads (``Sm90Config.residual_read``, ``gemm_plan.RESIDUAL_READS``) timed beside the cost
model's choice for the cases with a residual: ``tma`` (one load of the warpgroup's rows halfway through the mainloop;
``preread``: the same load, its words read into registers under the mainloop's last wgmma, not in the epilogue),
``sliced`` (those loads in 8-row boxes over the mainloop's second half), ``prefetch`` (the producer's L2 prefetch, the
epilogue's read from global memory), and ``prefetch`` with the sub-tiled staging, whose 32 KB free a fourth ring stage;
``early`` (``global``'s loads issued in the mainloop's last k-tiles into registers, stop 52), with the whole-tile and the
sub-tiled staging (``gemm_residual``'s docstring)."""


EPILOGUE_VARIANTS = {"tma/64, s4": {"residual_read": "global", "epilogue_tile": 64, "stages": 4},
                     "c2": {"cluster_m": 2}, "c2, sliced": {"cluster_m": 2, "residual_read": "sliced"},
                     "pp 128x128 s5": {"block_m": 128, "block_n": 128, "stages": 5, "schedule": "pingpong",
                                       "epilogue": "registers", "residual_read": "global"},
                     "pp 128x128 s5, prefetch": {"block_m": 128, "block_n": 128, "stages": 5, "schedule": "pingpong",
                                                 "epilogue": "registers", "residual_read": "prefetch"},
                     "pp 128x128 s5, early": {"block_m": 128, "block_n": 128, "stages": 5, "schedule": "pingpong",
                                              "epilogue": "registers", "residual_read": "early"}}
"""``--epilogue``: the plain GEMM and all five steps again with the 64-column staging and a fourth stage (is the
fourth stage what the residual's best read gained?), in a cluster of two (``cluster_m``: each B byte leaves L2
once a pair of tile rows) and in CUTLASS's ping-pong schedule (one warpgroup's epilogue under the other's
mainloop), each over the cost model's choice (the sliced, prefetch and early reads only where there is a residual)."""


def epilogue_jobs():
    """``--epilogue``'s builds: each case at ``EPILOGUE_SHAPE`` (bf16 in and out), the cost model's choice; the
    cases the choice changes again as before (``EPILOGUE_BEFORE``); the cases with a residual with each of
    ``EPILOGUE_READS``; plain and all five in each of ``EPILOGUE_VARIANTS`` (among them the sub-tiled TMA epilogue:
    64 columns, four stages, the residual from global memory)."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion

    shape = (*EPILOGUE_SHAPE, "bf16", "bf16")
    jobs = [(("epilogue", name), (*shape, fusion), None) for name, fusion in epilogue_cases()]
    jobs += [(("epilogue", f"{name} (before)"), (*shape, fusion), ("choice", EPILOGUE_BEFORE))
             for name, fusion in epilogue_cases() if fusion.residual or fusion.activation in ("silu", "gelu")]
    jobs += [(("epilogue", f"{name} ({read})"), (*shape, fusion), ("choice", updates))
             for name, fusion in epilogue_cases() if fusion.residual for read, updates in EPILOGUE_READS.items()]
    five = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)
    jobs += [(("epilogue", f"{name} ({variant})"), (*shape, fusion), ("choice", updates))
             for name, fusion in (("plain", Fusion()), ("all five", five))
             for variant, updates in EPILOGUE_VARIANTS.items() if fusion.residual or "residual_read" not in updates or updates["residual_read"] == "global"]
    return jobs


def validate_cases():
    from tvm_cdna4.kernels.gemm.epilogue import Fusion

    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    tma = Sm90Config(128, 128, 4, 2, epilogue="tma")
    pp, pp_tma = Sm90Config(128, 128, 5, 2, schedule="pingpong"), Sm90Config(64, 256, 4, 2, schedule="pingpong",
                                                                             epilogue="tma")
    return [(77, 200, 264, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True),
             None),
            (130, 77, 136, "f32", Fusion(bias=True, activation="silu"), None),
            (300, 1000, 520, "f16", Fusion(residual=True, activation="relu", col_scale=True), None),
            (1, 256, 512, "bf16", Fusion(), None), (333, 77, 64, "bf16", Fusion(row_scale=True), None),
            (77, 200, 264, "bf16", Fusion(bias=True, activation="gelu", residual=True), tma),
            (300, 1000, 520, "f16", Fusion(residual=True, col_scale=True), tma), (333, 136, 64, "bf16", Fusion(), tma),
            (77, 200, 264, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True), pp),
            (130, 77, 136, "f32", Fusion(bias=True, activation="silu"), pp), (1000, 1000, 520, "bf16", Fusion(), pp),
            (300, 1000, 520, "f16", Fusion(residual=True, col_scale=True), pp_tma),
            (77, 200, 1000, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True),
             Sm90Config(128, 96, 4, 2, epilogue="tma", residual_read="sliced")),
            (300, 1000, 520, "f16", Fusion(residual=True, col_scale=True), Sm90Config(128, 128, 4, 2, residual_read="prefetch")),
            (77, 200, 1000, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True),
             Sm90Config(128, 96, 4, 2, epilogue="tma", residual_read="early"))]


def validate_only() -> int:
    """``--validate-only``: the family's validation of ``validate_cases()`` on the GPU; the failures."""
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.runtime.cuda import run_gemm

    bad = 0
    for M, N, K, out, fusion, config in validate_cases():
        problem = gemm.GemmProblem(M, N, K, "f16" if out == "f16" else "bf16", "nt", out, fusion)
        what = f"{M} {N} {K} {out} {fusion.describe()} {config.epilogue + ' ' + config.schedule if config else ''}"
        try:
            v = gemm.validate(problem, "sm90", config, run=run_gemm)
            print(what, "ok" if v.ok else "FAILED", v.where, flush=True)
            bad += not v.ok
        except Exception as e:  # noqa: BLE001 (counted and printed)
            bad += 1
            print(what, "ERROR", type(e).__name__, str(e)[:300], flush=True)
    print(f"{bad} failures")
    return bad


def build_all(todo, workers: int, seconds: float) -> dict:
    """``_build`` of every job in a pool of fresh (spawned) processes: a forked child of a process that
    has initialized CUDA must not touch the driver; the jobs not done after ``seconds`` are reported."""
    import multiprocessing as mp

    built = {}
    pool = cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
    futures = [pool.submit(_build, job) for job in todo]
    try:
        for f in cf.as_completed(futures, timeout=seconds):
            key, value = f.result()
            built[key] = value
            print(f"  built {key}: {'FAILED ' + value if isinstance(value, str) else f'{value[2]:.1f} s'}",
                  flush=True)
    except cf.TimeoutError:
        print(f"  builds still running after {seconds} s: skipped", flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    for key, _, _ in todo:
        built.setdefault(key, "not built in time")
    return built


def jobs(quick: bool):
    """(key, problem args, config dict or None) of every kernel run: the checks (the cost model's choice on
    every shape, the other tilings on two), the 4096^3 configs and the Llama-3-8B set."""
    out = [(("check", i, 0), shape, None) for i, shape in enumerate(CHECKS)]
    out += [(("check", i, "tile"), CHECKS[i], "tile") for i in (0, 1)]  # the sm90 kernel at M = 1, 5 too
    if not quick:
        out += [(("check", i, j), CHECKS[i], cfg) for i in (2, 5) for j, cfg in enumerate(CHECK_CONFIGS) if j]
    out += [(("square", j), (4096, 4096, 4096), cfg) for j, cfg in enumerate(SQUARE) if j]
    out += [(("llama", M, N, K), (M, N, K), None) for M in LLAMA_M for N, K in LLAMA]
    out += [(("llama-tma", M, N, K), (M, N, K), "tma") for M in LLAMA_M for N, K in LLAMA]
    out += [(("check", i, "tma"), CHECKS[i], "tma") for i in (2, 5, 6)]  # 16-bit C, N % 8 == 0
    if not quick:
        out += [(("small", M, N, K, how), (M, N, K), cfg) for M in SMALL_M for N, K in LLAMA
                for how, cfg in (("choice", None), ("tile", "tile")) if M <= 16 or how == "choice"]
    return out


def study_jobs():
    """``--study``: every ``STUDY`` config at 4096^3 and the Llama set, and checked on ragged shapes."""
    out = [(("study", j, M, N, K), (M, N, K), cfg) for M, N, K in [(4096, 4096, 4096)] + [
        (M, N, K) for M in LLAMA_M for N, K in LLAMA] for j, cfg in enumerate(STUDY)]
    return out + [(("check", i, "study", j), CHECKS[i], cfg) for i in (2, 3, 6) for j, cfg in enumerate(STUDY)
                  if j and (CHECKS[i][4] != "f32" or "epilogue" not in cfg)]


def torch_dtype(name):
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[name]


def check(kernel, p, shape, log):
    import torch

    M, N, K, dt, out = shape
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
    a = torch.randn(M, K, device="cuda", generator=g).to(torch_dtype(dt))
    b = torch.randn(N, K, device="cuda", generator=g).to(torch_dtype(dt))
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch_dtype(out))
    kernel.launch(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    bound = 1e-5 if out == "f32" else 1e-2
    ok = bool(err <= bound) and not torch.isnan(c.float()).any().item()
    log.write(json.dumps({"check": shape, "config": str(p.config), "err": err, "ok": ok}) + "\n")
    return ok, err


def timed(fn_for_set, sets, replays=20):
    """Median seconds of one launch: a CUDA graph of one launch per set, replayed
    (``torch_gemm._graph_seconds``)."""
    import torch

    from torch_gemm import _graph_seconds

    return _graph_seconds(torch, [lambda i=i: fn_for_set(i) for i in range(sets)], replays)


def bench(kernel, shape):
    """(ours, torch) seconds per launch on rotating input sets beyond the L2."""
    import torch

    M, N, K, dt, out = shape
    per = (M * K + N * K) * 2
    sets = max(2, min(64, -(-3 * L2_BYTES // per)))
    a = [torch.randn(M, K, device="cuda").to(torch_dtype(dt)) for _ in range(sets)]
    b = [torch.randn(N, K, device="cuda").to(torch_dtype(dt)) for _ in range(sets)]
    c = torch.empty(M, N, device="cuda", dtype=torch_dtype(out))
    ours = timed(lambda i: kernel.launch(a[i], b[i], c), sets)
    theirs = timed(lambda i: torch.mm(a[i], b[i].t(), out=c), sets)
    return ours, theirs


def fused_tensors(p, M, N, sets, seed=0):
    """Per input set, the fused epilogue's inputs of plan ``p`` by name (``p.params`` after C): each drawn from
    its ``Input.values`` on the GPU; the residual (C's shape) one per set, like A and B, so that it streams
    from beyond the L2 as it would in a model; the vectors shared."""
    import torch

    from tvm_cdna4.kernels.gemm.epilogue import INPUT

    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

    def draw(q):
        lo, hi = INPUT[q.name].values
        return (torch.rand(q.shape, device="cuda", generator=g) * (hi - lo) + lo).to(dt[q.dtype])
    fused = [q for q in p.params[3:] if q.name in INPUT]  # a split-K workspace is the runtime's
    shared = {q.name: draw(q) for q in fused if len(q.shape) == 1}
    return [{**shared, **{q.name: draw(q) for q in fused if len(q.shape) == 2}} for _ in range(sets)]


def fused_error(p, a, b, c, inputs) -> float:
    """``|C - ref|_max / |ref|_max`` of one launch's C against the fused epilogue (``epilogue.apply``) of the
    f32 product in torch (float32)."""
    from types import SimpleNamespace

    import torch

    from tvm_cdna4.kernels.gemm.epilogue import INPUT, apply

    ops = SimpleNamespace(max=lambda x, y: torch.clamp_min(x, y), exp2=torch.exp2, const=float, f32=lambda x: x.float())
    at = {k: v[:, None] if INPUT[k].broadcast == "row" else v for k, v in inputs.items()}
    ref = apply(p.fusion, a.float() @ b.float().t(), at, ops)
    return ((c.float() - ref).abs().max() / ref.abs().max()).item()


def epilogue_run(todo, built, out_dir) -> int:
    """``--epilogue``: each case checked once against the torch reference, then timed (CUDA graphs, A, B and
    a residual rotated beyond the L2); the table (overhead over "plain", the issue's bar) printed and
    written to ``sm90_epilogue.md`` / ``.json`` in ``out_dir``; the failures (builds, checks; a case over the
    bar is reported, not failed)."""
    import torch

    from tvm_cdna4.runtime.cuda import Kernel, load_build

    M, N, K = EPILOGUE_SHAPE
    sets = max(2, -(-3 * L2_BYTES // ((M * K + N * K + M * N) * 2)))
    a = [torch.randn(M, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
    b = [torch.randn(N, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    rows, failures = [], 0
    for key, _, _ in todo:
        if isinstance(built[key], str):
            print(f"{key}: BUILD FAILED {built[key]}", flush=True)
            failures += 1
            continue
        p, cb, _, cfgd = built[key]
        kernel, inputs = Kernel(load_build(cb), p), fused_tensors(p, M, N, sets)
        names = list(p.fusion.inputs())
        kernel.launch(a[0], b[0], c, *[inputs[0][n] for n in names])
        torch.cuda.synchronize()
        err = fused_error(p, a[0], b[0], c, inputs[0])
        ok = err <= 1e-2 and not torch.isnan(c.float()).any().item()
        failures += not ok
        us = timed(lambda i: kernel.launch(a[i], b[i], c, *[inputs[i][n] for n in names]), sets) * 1e6
        rows.append({"case": key[1], "steps": p.fusion.describe(), "config": cfgd, "ok": ok, "err": err, "us": us})
        print(json.dumps(rows[-1]), flush=True)
    peers = peer_rows(a, b, sets)
    failures += sum(not r["ok"] for r in peers)
    over = epilogue_report(rows + peers, out_dir, torch.cuda.get_device_name(0))
    print(f"{over} fused case(s) over the {EPILOGUE_BAR:.0%} bar; {failures} failure(s)", flush=True)
    return failures


PEER_BASE = "torch.mm"
"""``--epilogue``'s peer rows (``peer_rows``): the case their overheads are over (cuBLAS's plain GEMM)."""


def peer_cases():
    """``--epilogue``'s peer cases: (case, steps, the call on one input set ``(a, b, c, bias, residual)`` returning its
    output, the expected output from the f32 product ``ref``): cuBLAS's plain GEMM (``torch.mm``), its residual through
    ``beta = 1`` (``torch.addmm`` into C: torch copies the residual into C first, then runs the GEMM on C in place;
    ``Tensor.addmm_``: in place on the residual, the GEMM alone) and cuBLASLt's fused bias + gelu epilogue
    (``torch._addmm_activation``, gelu's tanh form)."""
    import torch

    return [(PEER_BASE, "none", lambda a, b, c, bias, res: torch.mm(a, b.t(), out=c),
             lambda ref, bias, res: ref),
            ("torch.addmm (residual, out=C)", "acc + residual",
             lambda a, b, c, bias, res: torch.addmm(res, a, b.t(), out=c), lambda ref, bias, res: ref + res.float()),
            ("Tensor.addmm_ (residual, in place)", "acc + residual", lambda a, b, c, bias, res: res.addmm_(a, b.t()),
             lambda ref, bias, res: ref + res.float()),
            ("torch._addmm_activation (bias, gelu)", "acc + bias -> gelu",
             lambda a, b, c, bias, res: torch._addmm_activation(bias, a, b.t(), use_gelu=True),
             lambda ref, bias, res: torch.nn.functional.gelu(ref + bias.float(), approximate="tanh"))]


def peer_rows(a, b, sets) -> list:
    """``--epilogue``: what the peer pays for the same steps, in the same run: each of ``peer_cases`` checked once
    against its f32 reference (the in-place residual on a copy), then timed like ours (CUDA graphs, the input sets
    rotated, each its own residual); rows marked ``peer``, their overhead over ``PEER_BASE``."""
    import torch

    M, N = a[0].shape[0], b[0].shape[0]
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    res = [torch.randn(M, N, device="cuda").to(torch.bfloat16) for _ in range(sets)]
    ref = a[0].float() @ b[0].float().t()
    rows = []
    for case, steps, call, want in peer_cases():
        expected = want(ref, bias, res[0])
        out = call(a[0], b[0], c, bias, res[0].clone())
        torch.cuda.synchronize()
        err = ((out.float() - expected).abs().max() / expected.abs().max()).item()
        ok = err <= 1e-2 and not torch.isnan(out.float()).any().item()
        us = timed(lambda i, call=call: call(a[i], b[i], c, bias, res[i]), sets) * 1e6
        rows.append({"case": case, "steps": steps, "config": {"peer": "cuBLASLt" if "activation" in case else "cuBLAS"},
                     "ok": ok, "err": err, "us": us, "peer": True})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def peer_line(r, base) -> str:
    """A peer row of the ``--epilogue`` table: its overhead over ``PEER_BASE`` (``base`` us), no verdict."""
    r["overhead"] = None if base is None else r["us"] / base - 1.0
    pct = "-" if r["overhead"] is None else f"{r['overhead'] * 100:+.1f}% over {PEER_BASE}"
    return (f"| {r['case']} | {r['steps']} | {r['config']['peer']} (peer) | {'y' if r['ok'] else 'N'} | {r['us']:.1f} "
            f"| {pct} | peer |")


def epilogue_report(rows, out_dir, device) -> int:
    """The ``--epilogue`` table: each case's time and its overhead over "plain" against ``EPILOGUE_BAR``;
    printed, and written as markdown and JSON; the cases over the bar."""
    plain = next((r["us"] for r in rows if r["case"] == "plain"), None)
    peer = next((r["us"] for r in rows if r["case"] == PEER_BASE), None)
    lines = [f"sm90 GEMM {'x'.join(map(str, EPILOGUE_SHAPE))} bf16, the cost model's choice, fused epilogues "
             f"vs plain (CUDA graphs; bar: <= {EPILOGUE_BAR:.0%} over plain), {device}", "",
             "| case | steps | config | ok | us | over plain | bar |", "|---|---|---|---|---|---|---|"]
    over = 0
    for r in rows:
        if r.get("peer"):
            lines.append(peer_line(r, peer))
            continue
        cfg = r["config"]
        r["overhead"] = None if plain is None else r["us"] / plain - 1.0
        passed = r["overhead"] is not None and r["overhead"] <= EPILOGUE_BAR
        over += r["case"] != "plain" and not passed
        pct = "-" if r["overhead"] is None else f"{r['overhead'] * 100:+.1f}%"
        verdict = "" if r["case"] == "plain" else "PASS" if passed else "OVER"
        how = f"{cfg['epilogue']}{'/' + str(cfg['epilogue_tile']) if cfg.get('epilogue_tile') else ''}"
        choices = f" res {cfg.get('residual_read', '-')}, act {cfg.get('activation_form', '-')}"
        lines.append(f"| {r['case']} | {r['steps']} | {cfg['block_m']}x{cfg['block_n']} s{cfg['stages']} "
                     f"{how}{choices} | {'y' if r['ok'] else 'N'} | {r['us']:.1f} | {pct} | {verdict} |")
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    with open(os.path.join(out_dir, "sm90_epilogue.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "sm90_epilogue.json"), "w") as f:
        json.dump({"device": device, "shape": EPILOGUE_SHAPE, "bar": EPILOGUE_BAR, "rows": rows}, f, indent=1)
    return over


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1))
    ap.add_argument("--validate-only", action="store_true", help="only validate the fused and odd cases")
    ap.add_argument("--study", action="store_true", help="only the epilogue / schedule study (STUDY)")
    ap.add_argument("--epilogue", action="store_true", help="only the fused epilogues vs the plain GEMM at 4096^3")
    ap.add_argument("--limit", type=int, default=0, help="run only the first LIMIT kernels")
    ap.add_argument("--build-s", type=float, default=240, help="stop waiting for builds after this many seconds")
    ap.add_argument("--prebuild", help="only build every kernel (no GPU) and pickle them into this file")
    ap.add_argument("--prebuilt", help="run the kernels pickled by --prebuild instead of building them")
    args = ap.parse_args(argv)
    if args.validate_only:
        return 1 if validate_only() else 0
    todo = (epilogue_jobs() if args.epilogue else study_jobs() if args.study else jobs(args.quick))[:args.limit or None]
    if args.prebuild:
        import pickle

        t0 = time.time()
        built = build_all(todo, args.workers, args.build_s)
        with open(args.prebuild, "wb") as f:
            pickle.dump(built, f)
        print(f"built {len(built)} kernels in {time.time() - t0:.0f} s; failed: "
              f"{[k for k, v in built.items() if isinstance(v, str)]}")
        return 0
    import torch

    from tvm_cdna4.runtime.cuda import Kernel, load_build

    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "sm90_gemm.jsonl"), "w")
    name = torch.cuda.get_device_name(0)
    print(f"device: {name}", flush=True)
    t0 = time.time()
    if args.prebuilt:
        import pickle

        with open(args.prebuilt, "rb") as f:
            built = pickle.load(f)
    else:
        built = build_all(todo, args.workers, args.build_s)
    print(f"built {len(built)} kernels in {time.time() - t0:.0f} s", flush=True)
    if args.epilogue:
        return 1 if epilogue_run(todo, built, args.out) else 0
    rows, failures = [], 0
    for key, shape, cfg in todo:
        b = built[key]
        if isinstance(b, str):
            print(f"{key}: BUILD FAILED {b}", flush=True)
            log.write(json.dumps({"key": key, "build_error": b}) + "\n")
            failures += 1
            continue
        p, cb, secs, cfgd = b
        try:
            kernel = Kernel(load_build(cb), p)
            full = shape if len(shape) == 5 else (*shape, "bf16", "bf16")
            ok, err = check(kernel, p, full, log)
            failures += not ok
            line = {"key": key, "shape": full[:3], "config": cfgd, "ok": ok, "err": err}
            if key[0] != "check" or shape[0] >= 4096:
                ours, theirs = bench(kernel, full)
                fl = 2 * full[0] * full[1] * full[2]
                line.update(us=ours * 1e6, torch_us=theirs * 1e6, tflops=fl / ours / 1e12, speedup=theirs / ours)
            rows.append(line)
            log.write(json.dumps(line) + "\n")
            log.flush()
            print(json.dumps(line), flush=True)
        except Exception as e:  # noqa: BLE001
            failures += 1
            print(f"{key}: RUN FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    try:
        from tvm_cdna4.kernels import gemm
        from tvm_cdna4.runtime.cuda import run_gemm

        v = gemm.validate(_problem(77, 136, 264, "bf16", "bf16"), "sm90", run=run_gemm)
        print(f"gemm.validate(77x136x264, sm90, run=run_gemm): ok={v.ok} where={v.where}", flush=True)
        failures += not v.ok
    except Exception as e:  # noqa: BLE001
        failures += 1
        print(f"validate FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"\n{name}; {failures} failures")
    print(f"{'case':<26}{'M':>6}{'N':>7}{'K':>7}  {'config':<22}{'ok':>4}{'us':>10}{'torch us':>10}{'TF/s':>8}{'x torch':>8}")
    chunk = "epilogue_tile"
    for r in rows:
        if "us" not in r:
            continue
        cfg = r["config"]
        text = (f"{cfg['block_m']}x{cfg['block_n']} s{cfg['stages']} c{cfg['consumers']}"
                f"{' tma' if cfg.get('epilogue') == 'tma' else ''}{f'/{cfg[chunk]}' if cfg.get(chunk) else ''}"
                f"{' pp' if cfg.get('schedule') == 'pingpong' else ''}"
                if "consumers" in cfg
                else f"decode w{cfg['warps']} k{cfg['split_k']}")
        print(f"{str(r['key'][0]) + str(r['key'][1:2]):<26}{r['shape'][0]:>6}{r['shape'][1]:>7}{r['shape'][2]:>7}  "
              f"{text:<22}{'y' if r['ok'] else 'N':>4}{r['us']:>10.1f}{r['torch_us']:>10.1f}{r['tflops']:>8.0f}"
              f"{r['speedup']:>8.2f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
