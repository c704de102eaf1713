"""Paged decode attention through ``tvm_cdna4.torch.paged_attention`` beside FlashInfer and torch SDPA, on one CUDA GPU.

    python3 benchmarks/paged_decode.py --out $OUT                      # the default run (< 4 min on an H100)
    python3 benchmarks/paged_decode.py --batches 8,32 --means 8192 --sets bf16,fp8 --out $OUT
    python3 benchmarks/paged_decode.py --target sm80 --out $OUT      # the sm80 row on an H100 (default: the op's)
    python3 benchmarks/paged_decode.py --flashinfer .sm90tree/flashinfer --out $OUT   # a carried FlashInfer peer

The problem is ``kernels.attention.paged`` (issue 37): bf16 Q, D 128, GQA ``--gqa`` (32/8 and 64/8), batch
``--batches`` (1, 8, 32, 64), each batch's contexts uneven (``draw_contexts``: log-uniform in ``mean / SPREAD
.. mean x SPREAD`` cut to ``MIN_CONTEXT .. MAX_CONTEXT``, around ``--means`` 2k, 8k, 32k; seeded by batch
and mean, so every set sees the same contexts), each sequence's pages distinct and shuffled through the cache,
``max_pages`` sized for the batch's longest context and the cache exactly the pages the batch needs. Row sets
(``SETS``): ``bf16`` (bf16 KV, page 16, 1 query), ``fp8`` (e4m3 KV with per-kv-head f32 scales), ``q4`` (4
speculative queries), ``page64`` (page 64; GQA 32/8 only).

Method (as ``benchmarks/torch_gemm.py``): every kernel is built first in ``--jobs`` spawned worker processes
(build and device-code caches), so the timing process only loads. Per row, ours is checked once against the
problem's float64 reference and error bound (``paged.compare``) on a sample (the batch's shortest sequence, kv
head 0: a sub-problem of its own pages), then timed in one CUDA graph (``torch_gemm._graph_seconds``, the median
replay over ``--reps``) of calls over ``copies`` KV caches whose bytes together exceed three L2s where one cache
is small (``copies_for``). The figure of merit is ``PagedDecodeProblem.bytes_moved`` (K and V's whole pages, Q,
O, LSE) over the time as a % of the HBM read rate measured in the same run (``torch_gemm.read_rate``).

Peers (1-query rows): FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` on the same pages (its NHD layout is
ours; ``flashinfer_pages``), its CUDA-core decode and (``use_tensor_cores``, unless ``--no-flashinfer-tc``) its
tensor-core one, where ``import flashinfer`` works ("flashinfer: not installed" otherwise; on a machine without
network ``--flashinfer PATH``: the folder ``benchmarks/flashinfer_carry.py`` writes). Its output is checked against
ours (bf16 over the batch; fp8, whose scales FlashInfer takes per tensor, on kv head 0's query heads with kv head
0's scales; ``flashinfer_peer``); torch SDPA (``sdpa_kernel`` flash, cuDNN, efficient: ``BACKENDS``, by torch's
own names, ``FLASH_ATTENTION`` ...; each where it runs) on the bf16 rows' KV gathered into a dense ``[B, Hkv, Lmax, D]`` cache padded to the batch's longest context (the gather not
timed; ``enable_gqa``, else the KV expanded to every head where that fits ``EXPANDED_BYTES``). SDPA reads the
padded cache, so its % is of its own bytes; its output is checked against ours on the longest sequence (the one
the padding does not change; ``runtime.cuda.tolerance("bf16")``, relative Frobenius). A peer's failure (a backend
this torch lacks, a shape it refuses, an exception of any kind) is said in its cell (``peer_safely``) and never
drops our row. ``--merge last-cta,kernel`` also times ours with each merge forced (one launch or two, at the
model's partition; the row's ``merge`` is the model's choice). ``--partitions 256,512,...`` also times ours at
those forced keys per CTA, unbalanced (``forced_runs``, ``partition_fields``): the
check of the partition cost model's choice in the same run; every row also carries the estimate
(``kernels.sm80.paged_decode_estimate``, given the drawn contexts) at the model's partition and each forced one,
each with its plan's merge (``estimates``: ``estimate`` in the JSON, printed after the forced times).

Bars (issue 37, ``bars``; judged in the memory-bound region ``batch >= 8`` and mean context ``>= 2k``, the
all-row worst printed beside): bf16 >= 85 % of the read rate; fp8 >= 1.7x bf16's speed on the same shapes; 4
queries <= 1.3x the 1-query time; then the peer lines (``peer_lines``: the best SDPA backend's time over ours,
FlashInfer's best of its two kernels', else where its published figures are). Output: the table and the bars on
stdout and in
``$OUT/paged_decode.md``, every figure in ``$OUT/paged_decode.json`` (rows also appended to
``paged_decode.partial.jsonl`` as measured).

``--target`` (``kernels.attention.PAGED_TARGETS``' CUDA rows): whose kernels are built and timed, by default the
row ``tvm_cdna4.torch.paged_attention`` runs on the GPU (``torch_paged.PAGED_ROW`` of ``tvm_cdna4.torch.cuda_target``:
sm80's on every NVIDIA GPU today); another row is launched as the op launches it
(``torch_paged.paged_launch``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
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

BATCHES = (1, 8, 32, 64)
MEANS = (2048, 8192, 32768)
GQAS = ((32, 8), (64, 8))
HEAD_DIM = 128
MIN_CONTEXT, MAX_CONTEXT = 512, 32768
SPREAD = 4  # contexts log-uniform in mean / SPREAD .. mean x SPREAD (cut to MIN_CONTEXT .. MAX_CONTEXT)
SETS = {  # name: (kv dtype, page size, queries, GQAs it runs on: None every one)
    "bf16": ("bf16", 16, 1, None),
    "fp8": ("fp8", 16, 1, None),
    "q4": ("bf16", 16, 4, None),
    "page64": ("bf16", 64, 1, ((32, 8),)),
}
FLASHINFER_MODES = {"flashinfer": False, "flashinfer_tc": True}  # row key: use_tensor_cores
BACKENDS = {  # ours: torch.nn.attention.SDPBackend's names for it, newest first (torch 2.11: FLASH_ATTENTION)
    "flash": ("FLASH_ATTENTION", "FLASH"),
    "cudnn": ("CUDNN_ATTENTION",),
    "efficient": ("EFFICIENT_ATTENTION",),
}
FLASHINFER_PUBLISHED = ("compare with FlashInfer's published decode figures (flashinfer.ai/2024/02/02/"
                        "introduce-flashinfer.html; FlashInfer paper, arXiv 2501.01005)")
GRAPH_BYTES = 4e9  # the KV bytes one graph replay reads at most beyond the rotation's copies
MAX_COPIES = 64
EXPANDED_BYTES = 16e9  # the most a dense KV expanded to every query head (SDPA without GQA) may take
BAR_REGION = dict(batch=8, mean=2048)  # the bars' memory-bound region: batch and mean context at least these
BARS = dict(read_rate=0.85, fp8_speedup=1.7, q4_ratio=1.3)  # issue 37's "Must show"


def draw_contexts(batch: int, mean: int, seed: int = 0) -> list[int]:
    """``batch`` context lengths log-uniform in ``mean / SPREAD .. mean x SPREAD``, that range cut to
    ``MIN_CONTEXT .. MAX_CONTEXT`` (no pile-up at the ends; seeded by ``seed``, batch and mean). ``mean`` is the
    range's geometric centre (the distribution's median), not its expected mean ((b - a) / ln(b / a) over the range
    a .. b: 2770 at 2048): a row's drawn mean (the table's) may sit either side of it (batch 8 at 2048: 1821, at 3072: 4658)."""
    import numpy as np

    rng = np.random.default_rng([seed, batch, mean])
    low, high = math.log(max(MIN_CONTEXT, mean / SPREAD)), math.log(min(MAX_CONTEXT, mean * SPREAD))
    return [int(v) for v in np.round(np.exp(rng.uniform(low, high, batch)))]


def row_specs(batches=BATCHES, means=MEANS, gqas=GQAS, sets=tuple(SETS)) -> list[dict]:
    """The rows of a run: one per (set, GQA, batch, mean), the sets' own GQA lists respected."""
    rows = []
    for name in sets:
        kv_dtype, page_size, queries, only = SETS[name]
        for heads, kv_heads in gqas:
            if only is not None and (heads, kv_heads) not in only:
                continue
            rows += [dict(set=name, batch=b, mean=m, heads=heads, kv_heads=kv_heads, page_size=page_size,
                          queries=queries, kv_dtype=kv_dtype) for b in batches for m in means]
    return rows


def problem_of(spec: dict, contexts):
    """The ``PagedDecodeProblem`` of a row: ``max_pages`` for the longest context, the cache the pages needed."""
    from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
    from tvm_cdna4.kernels.gemm.dynamic_m import ceil_div

    ps = spec["page_size"]
    return PagedDecodeProblem(spec["batch"], spec["heads"], spec["kv_heads"], HEAD_DIM, spec["queries"], ps,
                              ceil_div(max(contexts), ps), sum(ceil_div(L, ps) for L in contexts),
                              kv_dtype=spec["kv_dtype"], q_dtype="bf16")


def copies_for(kv_bytes: int, l2_bytes: int) -> int:
    """KV caches to rotate so that one pass over them reads more than three L2s (1 where one cache does)."""
    return max(1, min(MAX_COPIES, math.ceil(3 * l2_bytes / kv_bytes)))


def calls_for(kv_bytes: int, copies: int, calls: int) -> int:
    """Calls per graph: every copy at least once, ``calls`` where the replay stays under ``GRAPH_BYTES``."""
    return max(copies, min(calls, max(2, int(GRAPH_BYTES // kv_bytes))))


def _prebuild(job) -> str:
    """Worker: build the two kernels ``tvm_cdna4.torch.paged_attention`` runs for ``problem`` (build cache) and
    compile their device code (device-code cache), so that the timing process only loads; ``forced``: those of
    that ``PagedDecodeConfig``'s fields (``--partitions``, ``--merge``) instead."""
    problem, arch, target, *forced = job
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.runtime.cuda import precompile

    build = paged_verb(target, "build")

    name = f"B={problem.batch} {problem.heads}/{problem.kv_heads} {problem.kv_dtype} q{problem.queries}"
    config = PagedDecodeConfig(**forced[0]) if forced else None
    try:
        main, merge = build(problem, config, arch=arch)
        precompile(main)
        if merge is not None:  # the last-CTA merge: one kernel
            precompile(merge)
    except Exception as err:  # the row fails when measured; the other builds go on
        return f"{name}: build failed: {str(err).splitlines()[0][:200]}"
    return ""


def _inputs(torch, problem, contexts, copies: int, seed: int, device: str = "cuda") -> dict:
    """Q, ``copies`` (K, V) caches (fp8: quantized per kv head, scales ``amax / 448``), the block table (each
    sequence's pages distinct, shuffled) and the lengths, on ``device``."""
    from tvm_cdna4.kernels.gemm.dynamic_m import ceil_div

    g = torch.Generator(device=device).manual_seed(seed)
    ps = problem.page_size
    shapes = problem.shapes()
    order = torch.randperm(problem.num_pages, device=device, generator=g).to(torch.int32)
    table = torch.zeros(shapes["BLOCK_TABLE"], dtype=torch.int32, device=device)
    start = 0
    for b, L in enumerate(contexts):
        n = ceil_div(L, ps)
        table[b, :n], start = order[start:start + n], start + n
    out = dict(q=torch.randn(shapes["Q"], device=device, dtype=torch.bfloat16, generator=g), table=table,
               lens=torch.tensor(contexts, dtype=torch.int32, device=device), caches=[], scales=[])
    for _ in range(copies):
        pair, scales = [], []
        for _kv in "kv":
            x = torch.randn(shapes["K_CACHE"], device=device, dtype=torch.bfloat16, generator=g)
            if problem.scaled:
                s = (x.abs().amax(dim=(0, 1, 3)).float() / torch.finfo(torch.float8_e4m3fn).max).contiguous()
                x = (x.float() / s[None, None, :, None]).to(torch.float8_e4m3fn)
                scales.append(s)
            pair.append(x)
        out["caches"].append(tuple(pair))
        out["scales"].append(tuple(scales) if scales else (None, None))
    return out


def _numpy(t, dtype: str):
    """A CUDA tensor as numpy of the package's format ``dtype`` (bits kept)."""
    import numpy as np

    from tvm_cdna4.isa.formats import fmt

    if dtype == "fp8":
        return t.contiguous().view(__import__("torch").uint8).cpu().numpy().view(fmt("fp8").dtype)
    if dtype == "f32":
        return t.float().cpu().numpy()
    return t.float().cpu().numpy().astype(fmt(dtype).dtype) if dtype != "i32" else t.cpu().numpy().astype(np.int32)


def check_sample(torch, problem, contexts, inputs, o, lse) -> tuple[float, float]:
    """``paged.compare``'s ``(o_ratio, lse_ratio)`` (pass: both <= 1) of ours on the batch's shortest sequence,
    kv head 0: a one-sequence, one-kv-head sub-problem over that sequence's own pages."""
    import attrs
    import numpy as np

    from tvm_cdna4.kernels.attention import paged
    from tvm_cdna4.kernels.gemm.dynamic_m import ceil_div

    b = int(np.argmin(contexts))
    L, group = contexts[b], problem.group
    n = ceil_div(L, problem.page_size)
    sub = attrs.evolve(problem, batch=1, heads=group, kv_heads=1, max_pages=n, num_pages=n)
    pages = inputs["table"][b, :n].long()
    k, v = ((c.view(torch.uint8) if problem.scaled else c)[pages][:, :, :1].contiguous() for c in inputs["caches"][0])
    arrays = {"Q": _numpy(inputs["q"][b:b + 1, :, :group], "bf16"), "K_CACHE": _numpy(k, problem.kv_dtype),
              "V_CACHE": _numpy(v, problem.kv_dtype), "BLOCK_TABLE": np.arange(n, dtype=np.int32)[None],
              "CONTEXT_LENS": np.array([L], np.int32)}
    if problem.scaled:
        arrays["K_SCALE"], arrays["V_SCALE"] = (_numpy(s[:1], "f32") for s in inputs["scales"][0])
    return paged.compare(sub, arrays, o[b:b + 1, :, :group].float().cpu().numpy(),
                         lse[b:b + 1, :, :group].cpu().numpy())


def _dense(torch, problem, contexts, inputs, cache):
    """One (K, V) cache gathered into dense ``[B, Hkv, Lmax, D]`` bf16, each sequence padded to the longest."""
    Lmax, ps = max(contexts), problem.page_size
    j = torch.arange(Lmax, device=inputs["table"].device)
    index = (inputs["table"][:, j // ps].long() * ps + j % ps)  # [B, Lmax]; padding reads page rows, unused
    flat = [c.view(-1, problem.kv_heads, HEAD_DIM) for c in cache]
    return tuple(f[index].transpose(1, 2).contiguous() for f in flat)


def sdpa_backend(enum, name: str):
    """The ``SDPBackend`` member of our backend ``name`` (``BACKENDS``: the first of its spellings this torch has),
    None where it has none."""
    for attr in BACKENDS[name]:
        member = getattr(enum, attr, None)
        if member is not None:
            return member
    return None


def peer_safely(fn, *args, keys=None) -> dict:
    """``fn(*args)``, or its exception as ``dict(error=...)`` (per backend of ``keys`` where given): a peer's failure
    is said in the row and never drops our timing."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001
        error = dict(error=f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
        return {k: dict(error) for k in keys} if keys is not None else error


def sdpa_peers(torch, graph_seconds, problem, contexts, inputs, o, args, l2: int) -> dict:
    """Each SDPA backend's graph time, mode (``gqa`` / ``expanded``), own bytes and error against ours on the
    longest sequence, or the reason it did not run."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tvm_cdna4.runtime.cuda import tolerance

    B, H, Hkv = problem.batch, problem.heads, problem.kv_heads
    dense_bytes = 2 * B * Hkv * max(contexts) * HEAD_DIM * 2
    copies = copies_for(dense_bytes, l2)
    dense = [_dense(torch, problem, contexts, inputs, inputs["caches"][i % len(inputs["caches"])])
             for i in range(copies)]
    q = inputs["q"][:, 0].unsqueeze(2)  # [B, H, 1, D]
    top = max(range(B), key=lambda i: contexts[i])
    out = {}
    for name in BACKENDS:
        backend = sdpa_backend(SDPBackend, name)
        if backend is None:
            out[name] = dict(error=f"torch {torch.__version__}: no SDPBackend {' / '.join(BACKENDS[name])}")
            continue
        for mode in ("gqa", "expanded"):
            if mode == "expanded" and dense_bytes * H // Hkv > EXPANDED_BYTES:
                out[name] = dict(error=f"{out[name]['error']}; expanded KV over {EXPANDED_BYTES / 1e9:.0f} GB")
                break
            kvs = dense if mode == "gqa" else [tuple(t.repeat_interleave(H // Hkv, 1) for t in kv) for kv in dense]

            def call(kv, backend=backend, mode=mode):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, *kv, enable_gqa=True) if mode == "gqa" else \
                        F.scaled_dot_product_attention(q, *kv)
            try:
                got = call(kvs[0])
                torch.cuda.synchronize()
            except Exception as err:  # noqa: BLE001 (a backend that refuses the shape: said in the row)
                out[name] = dict(error=f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
                continue
            ref = o[top, 0].float()
            err = ((got[top, :, 0].float() - ref).norm() / ref.norm()).item()
            calls = [(lambda kv=kv: call(kv)) for kv in (kvs * math.ceil(args.calls / len(kvs)))[:max(args.calls,
                                                                                                       len(kvs))]]
            bytes_ = dense_bytes * (1 if mode == "gqa" else H // Hkv) + B * H * (2 * 2 * HEAD_DIM)
            try:
                us = graph_seconds(torch, calls, args.reps) * 1e6
            except Exception as failure:  # noqa: BLE001 (a backend that cannot be captured: said in the row
                out[name] = dict(error=f"graph: {str(failure).splitlines()[0][:160]}")
                break
            out[name] = dict(us=us, mode=mode, bytes=bytes_, err=err,
                             ok=bool(math.isfinite(err) and err <= tolerance("bf16")))
            del kvs
            break
    return out


def use_flashinfer(path: str) -> None:
    """Put a carried FlashInfer (``benchmarks/flashinfer_carry.py``'s folder) first on ``sys.path`` and its JIT
    workspace (the unpacked modules, any JIT build) under the temporary directory unless
    ``FLASHINFER_WORKSPACE_BASE`` says where; before ``flashinfer`` is imported."""
    import tempfile

    if not os.path.isdir(os.path.join(path, "flashinfer")):
        raise SystemExit(f"--flashinfer {path}: no flashinfer/ there (python benchmarks/flashinfer_carry.py "
                         f"writes it)")
    sys.path.insert(0, os.path.abspath(path))
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(tempfile.gettempdir(), "flashinfer"))


def flashinfer_pages(torch, problem, contexts, table) -> tuple:
    """FlashInfer's page arguments for our block table: ``indptr [B + 1]`` (each sequence's first entry in
    ``indices``), ``indices`` (the pages, in order; the NHD cache is ours, ``[num_pages, page_size, Hkv, D]``) and
    ``last_page_len [B]`` (keys on the last page, 1..page_size), on ``table``'s device."""
    from tvm_cdna4.kernels.gemm.dynamic_m import ceil_div

    ps, device = problem.page_size, table.device
    pages = [ceil_div(L, ps) for L in contexts]
    indptr = torch.tensor([0] + list(itertools_accumulate(pages)), dtype=torch.int32, device=device)
    indices = torch.cat([table[b, :n] for b, n in enumerate(pages)])
    last = torch.tensor([L - (n - 1) * ps for L, n in zip(contexts, pages)], dtype=torch.int32, device=device)
    return indptr, indices, last


def flashinfer_peer(torch, graph_seconds, problem, contexts, inputs, o, args, tensor_cores=False) -> dict:
    """FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` (``use_tensor_cores``: its CUDA-core decode kernel, or
    the tensor-core one) on the same pages and copies: its graph time and its error against ours (relative
    Frobenius; bf16 over the batch; fp8, whose scales FlashInfer takes per tensor, over kv head 0's query heads
    run with kv head 0's scales); ``error`` where it is not installed or refuses. fp8 is timed with ``k_scale``
    (folded into the softmax scale) and without ``v_scale``, which FlashInfer applies as a separate elementwise
    kernel after its own: the time is its kernel's alone."""
    try:
        import flashinfer
    except ImportError:
        return dict(error="flashinfer: not installed")
    from tvm_cdna4.runtime.cuda import tolerance

    indptr, indices, last = flashinfer_pages(torch, problem, contexts, inputs["table"])
    ks, vs = (None, None) if not problem.scaled else (float(s[0]) for s in inputs["scales"][0])
    heads = slice(0, problem.group) if problem.scaled else slice(None)
    try:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda"), "NHD", use_tensor_cores=tensor_cores)
        wrapper.plan(indptr, indices, last, problem.heads, problem.kv_heads, HEAD_DIM, problem.page_size,
                     pos_encoding_mode="NONE", q_data_type=torch.bfloat16, kv_data_type=inputs["caches"][0][0].dtype)
        q = inputs["q"][:, 0].contiguous()
        got = wrapper.run(q, inputs["caches"][0], k_scale=ks, v_scale=vs)
        torch.cuda.synchronize()
    except Exception as err:  # an API it does not have, a shape it refuses: said in the row
        return dict(error=f"flashinfer {getattr(flashinfer, '__version__', '?')}: {str(err).splitlines()[0][:160]}")
    out = dict(version=getattr(flashinfer, "__version__", "?"), tensor_cores=tensor_cores)
    ref = o[:, 0, heads].float()
    out["err"] = ((got[:, heads].float() - ref).norm() / ref.norm()).item()
    out["ok"] = bool(math.isfinite(out["err"]) and out["err"] <= tolerance("bf16"))
    caches = inputs["caches"]
    n = calls_for(problem.kv_bytes(contexts), len(caches), args.calls)
    calls = [(lambda c=c: wrapper.run(q, c, k_scale=ks)) for c in (caches * math.ceil(n / len(caches)))[:n]]
    try:
        out["us"] = graph_seconds(torch, calls, args.reps) * 1e6
    except RuntimeError as err:
        out["error"] = f"graph: {str(err).splitlines()[0][:160]}"
    return out


def itertools_accumulate(values):
    total = 0
    for v in values:
        total += v
        yield total


def forced_configs(problem, args) -> dict:
    """``{label: PagedDecodeConfig fields}`` of the forced runs: each ``--partitions`` keys per CTA, each ``--merge``
    (at the model's partition), each ``--configs`` entry (``warps=8:stages=4``: those fields, the rest the model's)."""
    from tvm_cdna4.kernels.attention import paged_verb

    plan = paged_verb(args.target or "sm80", "plan")  # not resolved yet: the CUDA rows plan the same partition
    out = {partition: partition_fields(partition) for partition in args.partitions}
    for merge in args.merges:
        out[f"merge {merge}"] = {"partition": plan(problem).partition, "merge": merge}
    for entry in args.configs:
        out[entry] = {k: config_value(v) for k, v in (f.split("=") for f in entry.split(":"))}
    if getattr(args, "rule", False):
        out["rule"] = rule_fields(problem, args.target or "sm80")
    return out


def partition_fields(partition: int) -> dict:
    """A ``--partitions`` entry's ``PagedDecodeConfig`` fields: ``partition`` keys per CTA, the balanced partition off
    (``paged_decode_rule.WEIGH_BALANCE`` would otherwise take it for some, and its CTAs compute another)."""
    return {"partition": partition, "balance": False}


def rule_fields(problem, target: str) -> dict:
    """``--rule``: the ``balance`` and ``split_major`` the plan takes with ``paged_decode_rule.WEIGH_BALANCE`` on (the
    balanced partition partition-major, or neither), as ``PagedDecodeConfig`` fields."""
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.sm80 import paged_decode_rule as rule

    weigh, rule.WEIGH_BALANCE = rule.WEIGH_BALANCE, True
    try:
        p = paged_verb(target, "plan")(problem)
    finally:
        rule.WEIGH_BALANCE = weigh
    return {"balance": bool(p.balance), "split_major": p.split_major}


def config_value(text: str):
    """A ``--configs`` field's value: an int (``stages=2``, ``min_ctas=0``), a bool (``fp8_cvt=false``), None
    (``min_ctas=none``: the model's), else the text (``merge=kernel``)."""
    if text.isdigit():
        return int(text)
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def forced_runs(torch, graph_seconds, problem, arch, inputs, n: int, args, checked=None) -> dict:
    """Ours at each forced config (``forced_configs``: ``--partitions`` keys per CTA, ``--merge`` places; the torch
    op's launch with those kernels): ``{label: us}`` or ``{label: error}``, to check the cost model's choices. Each
    is first checked against ``checked`` (the row's O and LSE, itself checked against the reference: ``same_output``);
    a mismatch is its cell, untimed."""
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig
    from tvm_cdna4.runtime.cuda import load_build
    from tvm_cdna4.torch_paged import _run, workspace

    build, plan = paged_verb(args.target, "build"), paged_verb(args.target, "plan")
    out = {}
    for label, fields in forced_configs(problem, args).items():
        try:
            config = PagedDecodeConfig(**fields)
            main, merge = build(problem, config, arch=arch)
            p = plan(problem, config, arch=arch)  # as built (choose_cvt, choose_pdl)
            kernels = (load_build(main, "paged_"), merge and load_build(merge, "paged_merge_"), p,
                       workspace(p, inputs["q"].device))
            copies = len(inputs["caches"])

            def call(i, kernels=kernels):
                (k, v), (ks, vs) = inputs["caches"][i], inputs["scales"][i]
                return _run(inputs["q"], k, v, inputs["table"], inputs["lens"], ks, vs, kernels)
            if checked is not None and (wrong := same_output(torch, checked, call(0))):
                out[label] = wrong
                continue
            out[label] = graph_seconds(torch, [(lambda i=i % copies: call(i)) for i in range(n)], args.reps) * 1e6
        except Exception as err:  # noqa: BLE001 (said in the row)
            out[label] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    return out


def same_output(torch, checked, got) -> str | None:
    """Where a forced config's ``(O, LSE)`` is not the row's ``checked`` one: O's relative Frobenius error over
    ``runtime.cuda.tolerance("bf16")``, or an LSE off by more than that (the infinite ones equal); None: the same."""
    from tvm_cdna4.runtime.cuda import tolerance

    (o, lse), (o2, lse2) = checked, got
    if o2.is_cuda:
        torch.cuda.synchronize()
    err = float((o2.float() - o.float()).norm() / o.float().norm().clamp_min(1e-30))
    finite = torch.isfinite(lse)
    lse_ok = bool(torch.equal(finite, torch.isfinite(lse2)) and torch.equal(lse[~finite], lse2[~finite])
                  and ((lse2[finite] - lse[finite]).abs() <= tolerance("bf16") * lse[finite].abs().clamp_min(1)).all())
    return None if math.isfinite(err) and err <= tolerance("bf16") and lse_ok else (
        f"MISMATCH: O rel. error {err:.3g} (tolerance {tolerance('bf16')}), LSE {'ok' if lse_ok else 'off'}")


def estimates(problem, contexts, args) -> dict:
    """The estimate (``kernels.sm80.paged_decode_estimate.partition_seconds`` plus the plan's ``merge_term``: the
    launch a last-CTA merge saves, us) at the model's partition (``"model"``), at each ``--partitions`` keys and,
    where a ``--configs`` entry has ``balance=true``, at the partition the balanced kernel takes on the device
    (``"balanced"``: ``paged_decode_plan.balance_tiles``), each with the merge its plan takes: what the partition
    choice is checked against (fitted to bf16)."""
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.kernels.devices import planned
    from tvm_cdna4.kernels.sm80.paged_decode_estimate import cta_partition, merge_term, partition_seconds
    from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, balance_divisor, resident_ctas

    plan = paged_verb(args.target or "sm80", "plan")
    p = plan(problem)
    resident = resident_ctas(p, planned("sm80"))
    plans = [("model", p), *((k, plan(problem, PagedDecodeConfig(**partition_fields(k)))) for k in args.partitions)]
    divisor = balance_divisor(problem, resident * planned("sm80").units)
    if divisor >= 1 and any("balance=true" in c.lower() for c in args.configs):  # the device's partition, known here
        plans.append(("balanced", plan(problem, PagedDecodeConfig(balance=True))))
    return {str(k): (partition_seconds(problem, cta_partition(q, contexts), contexts, problem.capacity, resident)
                     + merge_term(q, contexts)) * 1e6 for k, q in plans}


def measure(torch, ours, graph_seconds, spec: dict, args, rate: float, l2: int) -> dict:
    """One row: ours checked on a sample and timed; the peers where the row has them (1 query)."""
    from tvm_cdna4.kernels.attention import paged_verb
    from tvm_cdna4.torch_paged import paged_launch

    plan = paged_verb(args.target, "plan")
    contexts = draw_contexts(spec["batch"], spec["mean"], args.seed)
    problem = problem_of(spec, contexts)
    kv_bytes = problem.kv_bytes(contexts)
    copies = copies_for(kv_bytes, l2)
    inputs = _inputs(torch, problem, contexts, copies, args.seed + spec["batch"] + spec["mean"])
    row = dict(spec, contexts=contexts, context_mean=sum(contexts) / len(contexts), context_min=min(contexts),
               context_max=max(contexts), split_kv=plan(problem).split_kv, partition=plan(problem).partition,
               merge=plan(problem).merge,
               copies=copies, kv_bytes=kv_bytes,
               bytes=problem.bytes_moved(contexts))

    launch = None if args.target == args.op_target else paged_launch(problem, inputs["q"], args.target)

    def call(i):
        k, v = inputs["caches"][i]
        ks, vs = inputs["scales"][i]
        if launch is not None:  # another row than the op's (--target)
            return launch(inputs["q"], k, v, inputs["table"], inputs["lens"], ks, vs)
        return ours.paged_attention(inputs["q"], k, v, inputs["table"], inputs["lens"], k_scale=ks, v_scale=vs,
                                    return_lse=True)

    o, lse = call(0)
    torch.cuda.synchronize()
    row["o_ratio"], row["lse_ratio"] = check_sample(torch, problem, contexts, inputs, o, lse)
    row["ok"] = row["o_ratio"] <= 1 and row["lse_ratio"] <= 1
    n = calls_for(kv_bytes, copies, args.calls)
    row["calls"] = n
    row["us"] = graph_seconds(torch, [(lambda i=i % copies: call(i)) for i in range(n)], args.reps) * 1e6
    row["pct_rate"] = 100 * row["bytes"] / (row["us"] * 1e-6) / rate
    row["estimate"] = estimates(problem, contexts, args)
    if args.partitions or args.merges or args.configs:
        row["forced"] = forced_runs(torch, graph_seconds, problem, args.arch, inputs, n, args, (o, lse))
    if spec["queries"] == 1 and spec["set"] in ("bf16", "fp8") and args.peers:
        for key, tensor_cores in FLASHINFER_MODES.items():
            if tensor_cores and not args.flashinfer_tc:
                continue
            row[key] = peer_safely(flashinfer_peer, torch, graph_seconds, problem, contexts, inputs, o, args,
                                   tensor_cores)
    if spec["set"] == "bf16" and args.peers:
        row["sdpa"] = peer_safely(sdpa_peers, torch, graph_seconds, problem, contexts, inputs, o, args, l2,
                                  keys=BACKENDS)
        for peer in row["sdpa"].values():
            if "us" in peer:
                peer["pct_rate"] = 100 * peer["bytes"] / (peer["us"] * 1e-6) / rate
    inputs.clear()  # the caches freed before the next row's
    del o, lse
    torch.cuda.empty_cache()
    return row


def _key(r) -> tuple:
    return (r["batch"], r["mean"], r["heads"], r["kv_heads"])


def in_region(r) -> bool:
    return r["batch"] >= BAR_REGION["batch"] and r["mean"] >= BAR_REGION["mean"]


def bars(rows) -> list[dict]:
    """Issue 37's three bars over ``rows``: each ``name``, ``values`` (one per shape of the memory-bound
    region, ``BAR_REGION``), ``worst`` over the region and over every row, ``ok`` (the region's worst meets
    the bar; None where the run has no such shape)."""
    base = {_key(r): r for r in rows if r["set"] == "bf16"}
    measures = [  # name, rows, value of a row, higher is better, bar
        ("bf16 % of the read rate", [r for r in rows if r["set"] in ("bf16", "page64")], lambda r: r["pct_rate"],
         True, 100 * BARS["read_rate"]),
        ("fp8 speed / bf16", [r for r in rows if r["set"] == "fp8" and _key(r) in base],
         lambda r: base[_key(r)]["us"] / r["us"], True, BARS["fp8_speedup"]),
        ("4q time / 1q", [r for r in rows if r["set"] == "q4" and _key(r) in base],
         lambda r: r["us"] / base[_key(r)]["us"], False, BARS["q4_ratio"]),
    ]
    out = []
    for name, subset, value, higher, bar in measures:
        pick = max if not higher else min
        region = [value(r) for r in subset if in_region(r)]
        every = [value(r) for r in subset]
        worst = pick(region) if region else None
        out.append(dict(name=name, bar=bar, higher=higher, values=region, worst=worst,
                        worst_all=pick(every) if every else None,
                        ok=None if worst is None else (worst >= bar if higher else worst <= bar)))
    return out


def bar_lines(results) -> list[str]:
    out = []
    for b in results:
        sign = ">=" if b["higher"] else "<="
        if b["worst"] is None:
            out.append(f"bar {b['name']} {sign} {b['bar']:g}: no shape in the region (batch >= "
                       f"{BAR_REGION['batch']}, mean context >= {BAR_REGION['mean']})")
            continue
        out.append(f"bar {b['name']} {sign} {b['bar']:g}: worst {b['worst']:.2f} over {len(b['values'])} shapes "
                   f"(batch >= {BAR_REGION['batch']}, mean context >= {BAR_REGION['mean']}), all rows' worst "
                   f"{b['worst_all']:.2f}: {'PASS' if b['ok'] else 'FAIL'}")
    return out


def peer_lines(rows) -> list[str]:
    """Ours against the peers in the bars' region: the best SDPA backend's time over ours (>= 1.0 passes; SDPA reads
    a dense cache padded to the longest context), and FlashInfer's where it ran, else where to compare."""
    out = []
    for name, pick in (("the best SDPA backend", lambda r: [p["us"] for p in r.get("sdpa", {}).values() if "us" in p]),
                       ("FlashInfer", lambda r: [r[k]["us"] for k in FLASHINFER_MODES if "us" in r.get(k, {})])):
        ratios = [min(pick(r)) / r["us"] for r in rows if in_region(r) and pick(r)]
        if not ratios:
            why = {r.get(k, {}).get("error") for r in rows for k in FLASHINFER_MODES} - {None} \
                if name == "FlashInfer" else set()
            out.append(f"peer {name}: no time in the region" + (f" ({'; '.join(sorted(why))})" if why else "")
                       + (f": {FLASHINFER_PUBLISHED}" if name == "FlashInfer" else ""))
            continue
        worst = min(ratios)
        out.append(f"peer {name} time / ours >= 1.0: worst {worst:.2f}x over {len(ratios)} shapes (batch >= "
                   f"{BAR_REGION['batch']}, mean context >= {BAR_REGION['mean']}): {'PASS' if worst >= 1 else 'FAIL'}")
    return out


def _peer_cell(peer) -> str:
    if not peer:
        return ""
    if "us" not in peer:
        return "—"
    return f"{peer['us']:.1f}" + (" ✗" if peer.get("ok") is False else "")


def table(rows) -> list[str]:
    out = ["| set | B | H/Hkv | page | q | KV | contexts mean (min..max) | splits | ours µs | MB | ours % read "
           "| FlashInfer µs | FlashInfer TC µs | SDPA flash µs | cuDNN µs | efficient µs | best SDPA % own bytes "
           "| ok |",
           "|" + "---|" * 18]
    for r in rows:
        sdpa = r.get("sdpa", {})
        best = max((p["pct_rate"] for p in sdpa.values() if "pct_rate" in p), default=None)
        out.append(f"| {r['set']} | {r['batch']} | {r['heads']}/{r['kv_heads']} | {r['page_size']} | {r['queries']} "
                   f"| {r['kv_dtype']} | {r['context_mean']:.0f} ({r['context_min']}..{r['context_max']}) "
                   f"| {r['split_kv']} | {r['us']:.1f} | {r['bytes'] / 1e6:.1f} | {r['pct_rate']:.0f} "
                   f"| {_peer_cell(r.get('flashinfer'))} | {_peer_cell(r.get('flashinfer_tc'))} "
                   f"| {_peer_cell(sdpa.get('flash'))} "
                   f"| {_peer_cell(sdpa.get('cudnn'))} | {_peer_cell(sdpa.get('efficient'))} "
                   f"| {'' if best is None else f'{best:.0f}'} | {'yes' if r['ok'] else 'NO'} |")
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--means", default=",".join(map(str, MEANS)),
                    help="the draws' centres (draw_contexts: a log-uniform range's geometric centre; the table's "
                         "mean is the drawn arithmetic one)")
    ap.add_argument("--gqa", default=",".join(f"{h}/{k}" for h, k in GQAS), help="heads/kv_heads pairs")
    ap.add_argument("--sets", default=",".join(SETS), help=f"row sets, of {tuple(SETS)}")
    ap.add_argument("--no-peers", dest="peers", action="store_false", help="ours only (no FlashInfer, no SDPA)")
    ap.add_argument("--flashinfer", default=os.environ.get("FLASHINFER_CARRIED", ""), metavar="PATH",
                    help="a FlashInfer carried by benchmarks/flashinfer_carry.py (e.g. .sm90tree/flashinfer), first "
                    "on sys.path (default $FLASHINFER_CARRIED; none: the installed one, if any)")
    ap.add_argument("--no-flashinfer-tc", dest="flashinfer_tc", action="store_false",
                    help="FlashInfer's CUDA-core decode only (not also use_tensor_cores=True)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=10, help="calls per graph (at least the rotation's copies)")
    ap.add_argument("--reps", type=int, default=10, help="graph replays (the median)")
    ap.add_argument("--partitions", default="", help="also time ours at these keys per CTA (e.g. 256,512,1024)")
    ap.add_argument("--merge", default="", help="also time ours with the partials merged in these places "
                    "(last-cta,kernel: PagedDecodeConfig.merge, at the model's partition)")
    ap.add_argument("--configs", default="", help="also time ours at these PagedDecodeConfig fields, comma-separated "
                    "entries of colon-separated field=value (e.g. warps=8:stages=4,warps=2,fp8_cvt=false:min_ctas=0,"
                    "pdl=true:merge=kernel)")
    ap.add_argument("--rule", action="store_true", help="also time ours at the plan paged_decode_rule.WEIGH_BALANCE "
                    "takes (the forced cell \"rule\": the balanced partition partition-major, or the default's)")
    ap.add_argument("--target", default="", choices=("", "sm80", "sm90"),
                    help="the kernels' row (default: the one tvm_cdna4.torch.paged_attention runs on this GPU)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    args.batches = [int(v) for v in args.batches.split(",")]
    args.means = [int(v) for v in args.means.split(",")]
    args.gqa = [tuple(int(x) for x in v.split("/")) for v in args.gqa.split(",")]
    args.sets = args.sets.split(",")
    args.partitions = [int(v) for v in args.partitions.split(",") if v]
    args.merges = [v for v in args.merge.split(",") if v]
    args.configs = [v for v in args.configs.split(",") if v]
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        ap.error(f"--sets: unknown {unknown}; expected of {tuple(SETS)}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.flashinfer:
        use_flashinfer(args.flashinfer)
    import torch

    import tvm_cdna4.torch as ours
    from torch_gemm import _graph_seconds, read_rate

    from tvm_cdna4.torch_paged import PAGED_ROW

    arch, device_target = ours.cuda_target(torch.device("cuda", 0))
    args.op_target = PAGED_ROW.get(device_target, device_target)
    target = args.target = args.target or args.op_target
    specs = row_specs(args.batches, args.means, args.gqa, args.sets)
    t0 = time.time()
    args.arch = arch
    problems = [problem_of(s, draw_contexts(s["batch"], s["mean"], args.seed)) for s in specs]
    jobs = [(pr, arch, target) for pr in problems] + [(pr, arch, target, fields) for pr in problems
                                                      for fields in forced_configs(pr, args).values()]
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for line in pool.map(_prebuild, jobs):
            if line:
                print(line, flush=True)
    print(f"built {2 * len(jobs)} kernels ({len(jobs)} problems) in {time.time() - t0:.0f} s on {args.jobs} workers",
          flush=True)
    rate = read_rate(torch)
    name, l2 = torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{name} ({arch}, the {target} kernels): read rate {rate / 1e12:.2f} TB/s (4 GiB sum), L2 {l2 / 2**20:.0f} MiB", flush=True)
    found = importlib.util.find_spec("flashinfer") if args.peers else None
    print(f"flashinfer: {os.path.dirname(found.origin)}" if found else "flashinfer: not installed", flush=True)
    rows, failed, partial = [], [], os.path.join(args.out, "paged_decode.partial.jsonl")
    for spec in specs:
        try:
            rows.append(measure(torch, ours, _graph_seconds, spec, args, rate, l2))
        except Exception as err:  # one device call: the other rows still run
            failed.append(dict(spec, error=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"))
            print(f"FAILED {spec}: {failed[-1]['error']}", flush=True)
            torch.cuda.empty_cache()
            continue
        r = rows[-1]
        with open(partial, "a") as f:
            f.write(json.dumps(r) + "\n")
        print(f"{r['set']} B={r['batch']} {r['heads']}/{r['kv_heads']} mean {r['mean']}: {r['us']:.1f} us, "
              f"{r['pct_rate']:.0f} % of the read rate, partition {r['partition']} x {r['split_kv']}, "
              f"merge {r['merge']}, ok={r['ok']}"
              + "".join(f", {k}: {v:.1f} us" if isinstance(v, float) else f", {k}: {v}"
                        for k, v in r.get("forced", {}).items())
              + ", estimate " + ", ".join(f"{k}: {v:.1f}" for k, v in r["estimate"].items()), flush=True)
    results = bars(rows)
    meta = dict(device=name, arch=arch, target=target, read_rate=rate, l2_bytes=l2, torch=torch.__version__,
                date=time.strftime("%Y-%m-%d"), calls=args.calls, reps=args.reps, seconds=time.time() - t0)
    with open(os.path.join(args.out, "paged_decode.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows, failed=failed, bars=results, peers=peer_lines(rows)), f, indent=1)
    lines = [f"{name}, the {target} kernels, read rate {rate / 1e12:.2f} TB/s", "", *table(rows), "", *bar_lines(results),
             *peer_lines(rows),
             *(f"FAILED {f['set']} B={f['batch']} {f['heads']}/{f['kv_heads']} mean {f['mean']}: {f['error']}"
               for f in failed)]
    with open(os.path.join(args.out, "paged_decode.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["ok"] for r in rows) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
