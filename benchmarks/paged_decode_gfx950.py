"""gfx950 paged decode attention: the static whole-GPU estimate against the MI355X's 8 TB/s HBM, ours beside a
Triton paged decode compiled offline for gfx950 (CPU only: no GPU, no ROCm).

Run: python benchmarks/paged_decode_gfx950.py --out DIR [--triton-path DIR] [--quick]

Ours: ``tvm_cdna4.report.paged_report`` (the compiled kernel's kv loop: instruction mix, the global-load bytes a
wave keeps in flight, the in-order issue cycles, occupancy from VGPRs and LDS; ``decode_estimate`` in
``kernels/gfx950/paged_decode_cost.py``). The peer: pip Triton ships no paged attention, so ``triton_stage1``
below is the usual Triton split-KV paged decode (SGLang's / vLLM's ``_fwd_grouped_kernel_stage1`` shape: one
program per (sequence, kv head, split), the GQA group's heads padded to 16 rows of ``tl.dot``, pages through the
block table per key, 64 keys per iteration, 4 warps), bf16 KV only, compiled by ``triton.compile`` for
``GPUTarget("hip", "gfx950", 64)`` and put through the same ``paged_kernel_report`` at the same split count (its
merge kernel not counted; its partials, 16 padded rows, are). Both are static estimates, not measurements.
Writes ``DIR/paged_decode_gfx950.md`` (a markdown table) and ``DIR/paged_decode_gfx950.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

SHAPES = [  # (kv dtype, batch, context): GQA 32/8 and 64/8, D 128, page 16, one query
    ("bf16", 8, 2048), ("bf16", 8, 4096), ("bf16", 32, 4096), ("bf16", 8, 32768), ("bf16", 64, 2048),
    ("fp8", 8, 2048), ("fp8", 8, 4096), ("fp8", 32, 4096), ("fp8", 8, 32768), ("fp8", 64, 2048),
]
QUICK = [("bf16", 8, 4096), ("fp8", 8, 4096)]


def problem_of(kv: str, batch: int, context: int, heads: int = 32, queries: int = 1):
    from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem

    pages = -(-context // 16)
    return PagedDecodeProblem(batch, heads, 8, 128, queries, 16, pages, batch * pages, kv_dtype=kv)


def triton_stage1():
    """The Triton kernel (module docstring); None where Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def paged_decode_stage1(Q, K, V, BT, LENS, MID_O, MID_LSE, sm_scale, H: tl.constexpr, HKV: tl.constexpr,
                            D: tl.constexpr, PAGE: tl.constexpr, MAXP: tl.constexpr, SPLITS: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr):
        b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        G: tl.constexpr = H // HKV
        L = tl.load(LENS + b)
        per = tl.cdiv(tl.cdiv(L, BLOCK_N), SPLITS) * BLOCK_N
        start = s * per
        end = tl.minimum(start + per, L)
        offs_h = g * G + tl.arange(0, BLOCK_H)
        hmask = tl.arange(0, BLOCK_H) < G
        offs_d = tl.arange(0, D)
        q = tl.load(Q + (b * H + offs_h[:, None]) * D + offs_d[None, :], mask=hmask[:, None], other=0.0)
        m = tl.full([BLOCK_H], float("-inf"), tl.float32)
        lsum = tl.zeros([BLOCK_H], tl.float32)
        acc = tl.zeros([BLOCK_H, D], tl.float32)
        for n0 in range(start, end, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            nmask = offs_n < end
            page = tl.load(BT + b * MAXP + offs_n // PAGE, mask=nmask, other=0)
            row = (page * PAGE + offs_n % PAGE) * HKV + g
            k = tl.load(K + row[None, :] * D + offs_d[:, None], mask=nmask[None, :], other=0.0)
            qk = tl.where(nmask[None, :], tl.dot(q, k) * sm_scale, float("-inf"))
            mn = tl.maximum(m, tl.max(qk, 1))
            p = tl.exp(qk - mn[:, None])
            alpha = tl.exp(m - mn)
            v = tl.load(V + row[:, None] * D + offs_d[None, :], mask=nmask[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            lsum = lsum * alpha + tl.sum(p, 1)
            m = mn
        base = (b * HKV + g) * SPLITS + s
        tl.store(MID_O + (base * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]) * D + offs_d[None, :], acc / lsum[:, None])
        tl.store(MID_LSE + base * BLOCK_H + tl.arange(0, BLOCK_H), m + tl.log(lsum))

    return paged_decode_stage1


def triton_asm(kernel, problem, splits: int, block_n: int = 64, warps: int = 4) -> str:
    import triton
    from triton.backends.compiler import GPUTarget

    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "BT": "*i32", "LENS": "*i32", "MID_O": "*fp32", "MID_LSE": "*fp32",
           "sm_scale": "fp32", **{n: "constexpr" for n in ("H", "HKV", "D", "PAGE", "MAXP", "SPLITS", "BLOCK_N",
                                                           "BLOCK_H")}}
    consts = {"H": problem.heads, "HKV": problem.kv_heads, "D": problem.head_dim, "PAGE": problem.page_size,
              "MAXP": problem.max_pages, "SPLITS": splits, "BLOCK_N": block_n, "BLOCK_H": 16}
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=consts,
                                    attrs={(i,): [["tt.divisibility", 16]] for i in range(7)})
    return triton.compile(src, target=GPUTarget("hip", "gfx950", 64),
                          options={"num_warps": warps, "num_stages": 1}).asm["amdgcn"]


def row_of(report, who: str) -> dict:
    e, loop = report.estimate, report.loop
    return {"who": who, "us": 1e6 * e.time_s, "tb_s": e.problem_bytes / e.time_s / 1e12, "hbm": e.hbm_fraction,
            "split_kv": e.splits, "waves_per_simd": e.waves_per_simd, "vgprs": report.info.vgprs,
            "flight_bytes": report.flight_bytes, "tile_cycles": report.tile_cycles, "mix": dict(loop.mix)}


def run(shapes, use_triton: bool) -> list[dict]:
    from tvm_cdna4.report import paged_kernel_report, paged_report
    from tvm_cdna4.rocm.build import parse_metadata

    kernel = triton_stage1() if use_triton else None
    rows = []
    for kv, batch, context in shapes:
        problem = problem_of(kv, batch, context)
        contexts = [context] * batch
        ours = paged_report(problem, contexts)
        entry = {"kv": kv, "batch": batch, "context": context, "ours": row_of(ours, "ours")}
        if kernel is not None and kv == "bf16":
            asm = triton_asm(kernel, problem, ours.estimate.splits)
            info = parse_metadata(asm)[0]
            work = 2 * batch * problem.kv_heads * ours.estimate.splits * 16 * (problem.head_dim + 1) * 4
            peer = paged_kernel_report(asm, info, problem, contexts, block_kv=64, splits=ours.estimate.splits,
                                       units=problem.kv_heads, waves=4, work_bytes=work, title="triton")
            entry["triton"] = row_of(peer, "triton")
        rows.append(entry)
    return rows


def markdown(rows) -> str:
    head = ("| KV | B | context | ours us | ours TB/s | % of 8 TB/s | split | VGPRs | bytes in flight / wave | "
            "Triton us | Triton % | Triton VGPRs | Triton bytes in flight / wave (4 waves) |\n" + "|---" * 13 + "|\n")
    lines = []
    for r in rows:
        o, t = r["ours"], r.get("triton")
        peer = (f"{t['us']:.1f} | {100 * t['hbm']:.0f} | {t['vgprs']} | {t['flight_bytes']}" if t else "- | - | - | -")
        lines.append(f"| {r['kv']} | {r['batch']} | {r['context']} | {o['us']:.1f} | {o['tb_s']:.2f} | {100 * o['hbm']:.0f} "
                     f"| {o['split_kv']} | {o['vgprs']} | {o['flight_bytes']} | {peer} |")
    mixes = [f"- ours {r['kv']}: " + ", ".join(f"{k} {v}" for k, v in r["ours"]["mix"].items()) for r in rows[:1]]
    mixes += ["- Triton bf16: " + ", ".join(f"{k} {v}" for k, v in r["triton"]["mix"].items())
              for r in rows if "triton" in r][:1]
    fp8 = [r for r in rows if r["kv"] == "fp8"][:1]
    mixes += ["- ours fp8: " + ", ".join(f"{k} {v}" for k, v in r["ours"]["mix"].items()) for r in fp8]
    return head + "\n".join(lines) + "\n\nkv-loop instruction mix per iteration (one wave):\n" + "\n".join(mixes) + "\n"


def emulated() -> str:
    """The emulator run of the issue's odd contexts (fp8 KV, 4 queries, GQA 8/2, D 128, page 32)."""
    from tvm_cdna4.kernels.attention import validate_paged
    from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem

    v = validate_paged(PagedDecodeProblem(4, 8, 2, 128, 4, 32, 157, 400, kv_dtype="fp8"), "gfx950",
                       contexts=[1, 77, 300, 5000])
    return (f"Emulator: fp8 KV, 4 queries, GQA 8/2, D 128, contexts 1,77,300,5000: largest error / bound O "
            f"{v.o_ratio:.3f}, LSE {v.lse_ratio:.3f} ({'PASS' if v.ok else 'FAIL'}) in {v.seconds:.1f} s on one CPU core")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for the markdown table and the JSON")
    ap.add_argument("--triton-path", help="a directory holding the triton package (prepended to sys.path)")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--quick", action="store_true", help="two shapes")
    ap.add_argument("--emulate", action="store_true",
                    help="also validate fp8 KV, 4 queries, contexts 1,77,300,5000 in the CPU wavefront emulator")
    args = ap.parse_args(argv)
    if args.triton_path:
        sys.path.insert(0, args.triton_path)
    start = time.time()
    rows = run(QUICK if args.quick else SHAPES, not args.no_triton)
    os.makedirs(args.out, exist_ok=True)
    text = ("# gfx950 paged decode: static whole-GPU estimate (MI355X, 8 TB/s; not a measurement)\n\n"
            "GQA 32/8, D 128, page 16, one query, uniform contexts.\n\n" + markdown(rows))
    if args.emulate:
        text += "\n" + emulated() + "\n"
    with open(os.path.join(args.out, "paged_decode_gfx950.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "paged_decode_gfx950.json"), "w") as f:
        json.dump({"rows": rows, "seconds": time.time() - start}, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
