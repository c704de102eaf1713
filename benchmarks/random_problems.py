"""Random problems through the families' public API, every family and target: counts by outcome, every bug listed.

Run: python benchmarks/random_problems.py --cases 80 [--seed 0] [--invalid-rate 0.3] [--batch 20] [--jobs 2]
                                          [--families gemm,attention] [--targets gfx950,sm80] [--jsonl out.jsonl]
     python benchmarks/random_problems.py --summarize out.jsonl[.gz]   (the report of an earlier run)
``--cases`` per family x target. Cases come from ``tests/problem_fuzz.py`` (a seeded numpy draw:
same seed, same cases; ``--invalid-rate`` of them carry one change that takes them outside what the
target documents); each goes through ``kernels.<family>.validate(problem, target)``: gfx950 in the CPU
wavefront emulator, sm80 in the CUDA emulator (its sizes stay within the emulator's reach). Batches
of ``--batch`` cases run in their own processes (``--jobs`` at a time): a crash is counted as an
internal error of the case in flight and the run goes on. The table: one row per family x target,
the problems, PASS (valid, within the error bound), clean refusals (invalid, a ValueError naming the
change) and the bug columns (wrong results, internal errors, valid problems refused, invalid ones
accepted, refusals for another reason), then the draws kept out as known bugs
(``problem_fuzz.KNOWN_BUGS``). Exit status 1 when a bug column is non-zero.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # this checkout's tvm_cdna4 and the test helpers

COLUMNS = [("pass", "PASS"), ("refused", "clean refusals"), ("wrong", "wrong results"),
           ("internal_error", "internal errors"), ("valid_refused", "valid refused"),
           ("invalid_accepted", "invalid accepted"), ("refused_otherwise", "refused otherwise")]


def worker(family: str, target: str, n: int, seed: int, invalid_rate: float, first: int, count: int, out: str) -> None:
    import problem_fuzz as rp

    redrawn = collections.Counter()
    cases = rp.sample(family, target, first + count, seed, invalid_rate, redrawn=redrawn)  # the draw's first cases
    with open(out, "a") as f:
        if first + count == n:  # the last batch drew them all: the known bugs' redraws of the whole sample
            f.write(json.dumps({"redrawn": dict(redrawn), "family": family, "target": target}) + "\n")
        for case in cases[first:first + count]:
            cpu = time.process_time()
            r = rp.check(case)
            f.write(json.dumps({"family": family, "target": target, "outcome": r.outcome, "case": case.describe(),
                                "detail": r.detail, "seconds": round(r.seconds, 3),
                                "cpu": round(time.process_time() - cpu, 3)}) + "\n")
            f.flush()


def batch(family, target, n, seed, invalid_rate, first, count) -> list[dict]:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as f:
        proc = subprocess.run([sys.executable, __file__, "--worker", f"{family},{target},{first},{count}", "--cases",
                               str(n), "--seed", str(seed), "--invalid-rate", str(invalid_rate), "--jsonl", f.name],
                              capture_output=True, text=True)
        rows = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    done = sum("outcome" in r for r in rows)
    if proc.returncode != 0:
        rows.append({"family": family, "target": target, "outcome": "internal_error",
                     "case": f"{family} {target} seed {seed}, case {first + done}", "seconds": 0.0,
                     "detail": f"worker exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"})
    return rows


def report(rows: list[dict], elapsed: float | None = None) -> int:
    import problem_fuzz as rp

    cases = [r for r in rows if "outcome" in r]
    rate = f" in {elapsed:.0f} s (wall)" if elapsed else ""
    print(f"{len(cases)} problems{rate}\n")
    print("| family | target | problems | " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    groups = collections.defaultdict(list)
    for r in cases:
        groups[r["family"], r["target"]].append(r)
    total = collections.Counter(r["outcome"] for r in cases)
    for (family, target), group in sorted(groups.items()):
        counts = collections.Counter(r["outcome"] for r in group)
        print(f"| {family} | {target} | {len(group)} | " + " | ".join(str(counts[k]) for k, _ in COLUMNS) + " |")
    print(f"| all | | {len(cases)} | " + " | ".join(str(total[k]) for k, _ in COLUMNS) + " |")
    cpu = sorted(r.get("cpu", r["seconds"]) for r in cases if r["outcome"] == "pass")
    if cpu:
        print(f"\nPASS problems: CPU {sum(cpu):.0f} s in all, median {cpu[len(cpu) // 2]:.2f} s, longest {cpu[-1]:.2f} s "
              "each (a worker's first pays the warm-up)")
    redrawn = collections.Counter()
    for r in rows:
        redrawn.update(r.get("redrawn", {}))
    for bug, n in redrawn.items():
        print(f"known bug kept out of the draw: {bug}: {n} draws drawn again")
    worst = collections.defaultdict(float)
    for r in cases:
        if r["outcome"] == "pass" and "of the bound" in r["detail"]:
            key = (r["family"], r["target"])
            worst[key] = max(worst[key], float(r["detail"].split()[0]))
    for (family, target), w in sorted(worst.items()):
        print(f"largest error of a PASS, {family} {target}: {w:.3g} of the bound")
    bugs = collections.defaultdict(list)
    for r in cases:
        if r["outcome"] in rp.BUGS:
            bugs[r["outcome"], r["family"], r["target"], r["detail"].splitlines()[0][:160] if r["detail"] else ""].append(r)
    print(f"\n{len(bugs)} distinct bugs (outcome, family, target, symptom): cases, first case")
    for (outcome, family, target, symptom), group in sorted(bugs.items(), key=lambda kv: -len(kv[1])):
        print(f"- {outcome} {family} {target}: {symptom}\n    {len(group)} cases, e.g. {group[0]['case']}")
    return 1 if bugs else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=25, help="problems per family x target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--invalid-rate", type=float, default=0.3, help="share of invalid problems")
    parser.add_argument("--batch", type=int, default=20, help="problems per worker process")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--families", default="gemm,attention")
    parser.add_argument("--targets", default="gfx950,sm80")
    parser.add_argument("--jsonl", help="also write every result here, one JSON object a line")
    parser.add_argument("--summarize", metavar="JSONL", help="print the report of an earlier --jsonl run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.summarize:
        with (gzip.open if args.summarize.endswith(".gz") else open)(args.summarize, "rt") as f:
            return report([json.loads(line) for line in f if line.strip()])
    if args.worker:
        family, target, first, count = args.worker.split(",")
        worker(family, target, args.cases, args.seed, args.invalid_rate, int(first), int(count), args.jsonl)
        return 0
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(family, target, args.cases, args.seed, args.invalid_rate, first, min(args.batch, args.cases - first))
            for family in args.families.split(",") for target in args.targets.split(",")
            for first in range(0, args.cases, args.batch)]
    start, rows = time.time(), []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in pool.map(lambda job: batch(*job), jobs):
            rows += done
            print(f"# {sum('outcome' in r for r in rows)} problems, {time.time() - start:.0f} s", file=sys.stderr,
                  flush=True)
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return report(rows, time.time() - start)


if __name__ == "__main__":
    sys.exit(main())
