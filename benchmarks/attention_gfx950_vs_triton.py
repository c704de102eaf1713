"""Our gfx950 attention forward next to Triton's, both under one static model (no GPU, no ROCm).

Run: python benchmarks/attention_gfx950_vs_triton.py --triton-source PATH [--seq 8192] [--batch 16]
     [--heads 64] [--kv-heads 8] [--head-dim 128] [--quick] [--json FILE] [--results benchmarks/journal/YYYY-MM.md]

Triton's kernel is its fused-attention tutorial, ``python/tutorials/06-fused-attention.py`` of
triton-lang/triton (the forward for the installed Triton: tensor descriptors for Triton >= 3.9,
which removed block pointers; e.g. ``git show main:python/tutorials/06-fused-attention.py`` of a
clone, or https://raw.githubusercontent.com/triton-lang/triton/main/python/tutorials/06-fused-attention.py).
It is not part of this repository: ``--triton-source`` names the file, and ``triton_kernel`` takes
its forward functions (``_attn_fwd_inner``, ``_maybe_make_tensor_desc``, ``_attn_fwd``) out of it
with ``ast`` (the rest of the tutorial needs a GPU at import), writes them to a temporary module
with ``@triton.jit`` alone (its autotuner dropped) and compiles ``_attn_fwd`` offline for
``GPUTarget("hip", "gfx950", 64)`` over the tutorial's own HIP configuration space (BLOCK_M 64 /
128, BLOCK_N 32 / 64 / 128, 4 / 8 warps, one stage), specialised as Triton's JIT would for real
tensors (pointers 16-byte aligned within 2 GiB, sizes divisible by 16), ``STAGE`` 3 causal / 1
not. The tutorial computes in fp16 (its ``P`` is cast to fp16), so its inputs are fp16: the same
MFMA cycles as bf16 in the catalog. It has no GQA: its loop is the same per head; the estimate
counts the problem's (GQA) bytes for both kernels.

Both assembly listings go through ``tvm_cdna4.report.attention_kernel_report`` (the kv loop's
MFMA / VALU / LDS work, its in-order issue by one wave, occupancy, the whole-GPU estimate of
``kernels/gfx950/attention_cost.py``; docs/attention.md). Triton's row is its best configuration by
that estimate.
HipKittens' published MI355X figures (arXiv 2511.08083, GQA forward, bf16, D 128, H 64/8, B 16)
are printed beside: 1298 TFLOP/s non-causal at seq 8192, 1259 causal at seq 16384 (no causal
8192 figure is given; measured, not estimated).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import warnings

import attrs

from tvm_cdna4.report import attention_kernel_report, attention_report
from tvm_cdna4.rocm.build import llvm_tool, parse_metadata
from tvm_cdna4.kernels.gfx950.attention_plan import AttentionProblem

HIPKITTENS = {False: (8192, 1298), True: (16384, 1259)}  # causal -> (seq, TFLOP/s), arXiv 2511.08083
FORWARD = ("_attn_fwd_inner", "_maybe_make_tensor_desc", "_attn_fwd")
RESULTS_HEADING = "## gfx950 attention forward against Triton: static estimate"
METHOD = ("A static estimate, not a measurement (no AMD GPU is reachable): both kernels' gfx950 assembly through "
          "`tvm_cdna4.report.attention_kernel_report` (docs/attention.md, \"The static report\"): the kv loop issued in "
          "order by one wave (MFMA catalog cycles, VALU 4 cycles, transcendental 16, LDS by bytes, the MFMA pipe beside "
          "the VALU, s_waitcnt counters), the workgroups over 256 CUs at 2.4 GHz (causal: each query block's triangle), "
          "8 TB/s. Ours: the default `AttentionConfig` (bf16). Triton: its fused-attention tutorial "
          "(python/tutorials/06-fused-attention.py, tensor-descriptor forward, fp16, no GQA: the same loop per head) "
          "compiled offline for `GPUTarget(\"hip\", \"gfx950\", 64)` over the tutorial's HIP space; its best config "
          "by the estimate is shown (all in the JSON). Upper bound: the resident waves of a SIMD overlapping perfectly. "
          "HipKittens (measured, MI355X; arXiv 2511.08083, GQA forward, bf16, D 128, H 64/8, B 16): 1298 TFLOP/s "
          "non-causal at seq 8192, 1259 causal at seq 16384.")


@attrs.frozen
class TritonConfig:
    block_m: int
    block_n: int
    num_warps: int

    @property
    def label(self) -> str:
        return f"{self.block_m}x{self.block_n} w{self.num_warps}"


def triton_space(quick: bool = False) -> tuple[TritonConfig, ...]:
    """The tutorial's HIP configurations (BLOCK_N <= HEAD_DIM is its static assertion)."""
    space = tuple(TritonConfig(m, n, w) for m in (128, 64) for n in (64, 32, 128) for w in (4, 8))
    return space[:1] if quick else space


def triton_kernel(source: str):
    """The tutorial's ``_attn_fwd``, its forward functions extracted to a temporary module."""
    text = open(source).read()
    lines = text.splitlines()
    found = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name in FORWARD}
    if "_attn_fwd" not in found or "_attn_fwd_inner" not in found:
        raise SystemExit(f"{source}: no _attn_fwd / _attn_fwd_inner (Triton's fused-attention tutorial expected)")
    body = ["import triton", "import triton.language as tl", ""]
    for name in FORWARD:
        if name in found:
            node = found[name]
            body += ["", "@triton.jit", *lines[node.lineno - 1 : node.end_lineno], ""]
    folder = tempfile.mkdtemp(prefix="triton_attention_")
    path = os.path.join(folder, "tutorial_attention_forward.py")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
    spec = importlib.util.spec_from_file_location("tutorial_attention_forward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._attn_fwd


def signature(fn, problem: AttentionProblem, cfg: TritonConfig):
    """(signature, constexprs, attrs) of ``_attn_fwd`` for the problem, as the JIT specialises."""
    B, H, S, D = problem.batch, problem.heads, problem.seq_q, problem.head_dim
    ints = {"Z": B, "H": H, "N_CTX": S}
    consts = {"HEAD_DIM": D, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "STAGE": 3 if problem.causal else 1,
              "FP8_OUTPUT": False, "warp_specialize": False, "IS_HOPPER": False}
    sig, attrs_ = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in ("M",) or name.startswith("desc_") or name in ("Q", "K", "V", "Out"):
            sig[name] = "*fp32" if name == "M" else "*fp16"
            attrs_[(i,)] = [["tt.divisibility", 16], ["tt.pointer_range", 32]]
        elif name == "sm_scale":
            sig[name] = "fp32"
        elif name in ints:
            sig[name] = "i32"
            if ints[name] % 16 == 0:
                attrs_[(i,)] = [["tt.divisibility", 16]]
        elif name in consts:
            sig[name] = "constexpr"
        else:
            raise SystemExit(f"_attn_fwd argument {name!r}: not the tutorial's tensor-descriptor forward")
    return sig, {k: v for k, v in consts.items() if k in fn.arg_names}, attrs_


def triton_row(fn, problem: AttentionProblem, cfg: TritonConfig) -> dict:
    """One configuration compiled and reported; a refusal is a row with its reason."""
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = triton.compile(triton.compiler.ASTSource(fn, *signature(fn, problem, cfg)),
                                      target=GPUTarget("hip", "gfx950", 64),
                                      options={"num_warps": cfg.num_warps, "num_stages": 1})
    except Exception as err:  # Triton refuses a config: record why, keep going
        last = next((ln for ln in reversed(str(err).splitlines()) if ln.strip()), "")
        return {"kernel": "Triton", "config": cfg.label, "error": f"{type(err).__name__}: {last.strip()[:160]}"}
    asm = compiled.asm["amdgcn"]
    (info,) = parse_metadata(asm)
    info = attrs.evolve(info, lds_bytes=max(info.lds_bytes, compiled.metadata.shared))  # Triton's LDS is dynamic
    try:
        report = attention_kernel_report(asm, info, problem, cfg.block_m, cfg.block_n, cfg.num_warps, True,
                                         f"Triton {cfg.label}")
    except ValueError as err:  # llvm-mca failed or did not finish on this loop
        return {"kernel": "Triton", "config": cfg.label, "error": str(err)}
    return row_dict("Triton", cfg.label, report)


def row_dict(kernel: str, config: str, r) -> dict:
    w, e, info = r.work, r.estimate, r.kernel.info
    return {"kernel": kernel, "config": config, "error": None, "vgprs": info.vgprs, "agprs": info.agprs,
            "lds_bytes": info.lds_bytes, "scratch_bytes": info.scratch_bytes, "waves_per_simd": e.waves_per_simd,
            "loop_instructions": r.kernel.loop.instructions, "mix": r.kernel.loop.mix, "work": attrs.asdict(w),
            "pipes": w.pipes(e.waves_per_simd), "bound": e.bound, "loop_fraction": r.loop_fraction,
            "overlapped_fraction": r.overlapped_fraction, "estimate": attrs.asdict(e), "time_us": 1e6 * e.time_s,
            "tflops": e.tflops, "overlapped_tflops": e.overlapped_tflops}


def table_row(problem: AttentionProblem, row: dict) -> str:
    name = f"{row['kernel']} {'causal' if problem.causal else 'non-causal'}"
    if row["error"]:
        return f"| {name} | {row['config']} | {row['error']} |" + " |" * 8
    w, p = row["work"], row["pipes"]
    return (f"| {name} | {row['config']} | {row['vgprs']} ({row['agprs']}) | {row['waves_per_simd']} | "
            f"{w['valu']} ({w['trans']}) | {row['estimate']['iteration_cycles']:.0f} | {100 * row['loop_fraction']:.0f} % | "
            f"{row['time_us']:.0f} | **{row['tflops']:.0f}** | {p['mfma']:.0f} / {p['valu']:.0f} / {p['lds']:.0f} / "
            f"{p['chain']:.0f} ({row['bound']}) | {row['overlapped_tflops']:.0f} |")


TABLE_HEAD = ("| kernel | config | VGPR (AGPR) | waves/SIMD | VALU per loop (transcendental) | cycles per wave "
              "iteration (the wave alone) | loop % of peak | est. µs | **est. TFLOP/s** | upper bound: MFMA / VALU / LDS / "
              "chain÷waves (bound) | upper bound TFLOP/s |\n|" + "---|" * 11)


def compare(problem: AttentionProblem, fn, quick: bool) -> tuple[dict, list[dict]]:
    """Our row and Triton's rows for one problem (Triton's: none without ``fn``)."""
    r = attention_report(problem)
    ours = row_dict("ours", r.title.removeprefix("ours "), r)
    rows = [triton_row(fn, problem, cfg) for cfg in triton_space(quick)] if fn else []
    return ours, rows


def best(rows: list[dict]) -> dict | None:
    scored = [r for r in rows if not r["error"] and r["waves_per_simd"] >= 1]
    return max(scored, key=lambda r: r["tflops"]) if scored else None


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("triton", "apache-tvm-tirx"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    out["llvm-mca"] = llvm_tool("llvm-mca") or "not installed"
    return out


def summary(problem: AttentionProblem, ours: dict, triton: dict | None) -> str:
    seq, hk = HIPKITTENS[problem.causal]
    ratio = f"{ours['tflops'] / triton['tflops']:.2f}x Triton's ({triton['config']})" if triton else "no Triton row"
    return (f"{'causal' if problem.causal else 'non-causal'}: ours {ours['tflops']:.0f} TFLOP/s (estimate), {ratio}; "
            f"HipKittens measured {hk} TFLOP/s at seq {seq}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triton-source", help="Triton's python/tutorials/06-fused-attention.py (not shipped here)")
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="one Triton config")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--results", help="append the dated section to this journal file (benchmarks/journal/YYYY-MM.md)")
    args = parser.parse_args(argv)
    fn = triton_kernel(args.triton_source) if args.triton_source else None
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines, data, notes = [TABLE_HEAD], [], []
    for causal in (False, True):
        problem = AttentionProblem(args.batch, args.heads, args.kv_heads, args.seq, args.seq, args.head_dim,
                                   causal=causal)
        ours, rows = compare(problem, fn, args.quick)
        for row in (ours, *rows):
            print(table_row(problem, row), flush=True)
        top = best(rows)
        lines += [table_row(problem, ours)] + ([table_row(problem, top)] if top else [])
        notes.append(summary(problem, ours, top))
        data.append({"causal": causal, "ours": ours, "triton": rows})
    command = "python benchmarks/attention_gfx950_vs_triton.py " + " ".join(argv if argv is not None else sys.argv[1:])
    section = "\n".join([f"{RESULTS_HEADING} ({date[:10]})", "", f"Date: {date}. Versions: "
                         + ", ".join(f"{k} {v}" for k, v in versions().items()) + f". Command: `{command.strip()}`.",
                         "", METHOD, "", *lines, "", *(f"- {n}" for n in notes), ""])
    print(section)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": date, "versions": versions(), "rows": data}, f, indent=1, default=str)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
