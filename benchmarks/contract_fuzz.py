"""Randomized contract check over every opcode of the catalog and both scopes: counts by outcome, every bug listed.

Run: python benchmarks/contract_fuzz.py --cases 5000 [--seed 0] [--batch 100] [--jobs 2] [--storage-rate 0.3]
                                        [--jsonl out.jsonl]
     python benchmarks/contract_fuzz.py --summarize out.jsonl[.gz]   (the report of an earlier run)
Cases come from ``tests/contract_fuzz.py`` (hypothesis, one seed per batch of ``--batch`` cases, so
a run is reproducible); ``--storage-rate`` of them are storage cases (bf16 / fp8 storage anywhere,
mixed storage and view dtypes: ``contract_fuzz.storage_cases``). Each batch runs in its own process
(``--jobs`` at a time): a crash (e.g. an LLVM abort) is counted as an internal error of the case in
flight and the run goes on.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # this checkout's tvm_cdna4 and test kernels


def worker(n_cases: int, seed: int, out: str, storage_rate: float) -> None:
    import contract_fuzz

    with open(out, "a") as f:
        def record(result):
            f.write(json.dumps({"outcome": result.outcome, "case": result.case.describe(),
                                "opcode": result.case.opcode, "detail": result.detail}) + "\n")
            f.flush()

        contract_fuzz.run(n_cases, seed, record, storage_rate=storage_rate)


def batch(n_cases: int, seed: int, storage_rate: float = 0.0) -> list[dict]:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as f:
        proc = subprocess.run([sys.executable, __file__, "--worker", "--cases", str(n_cases), "--seed", str(seed),
                               "--storage-rate", str(storage_rate), "--jsonl", f.name], capture_output=True, text=True)
        rows = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    if proc.returncode != 0:
        rows.append({"outcome": "internal_error", "case": f"batch seed {seed}, case {len(rows)}", "opcode": "?",
                     "detail": f"worker exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"})
    return rows


def bug_class(row: dict) -> tuple[str, str, str]:
    """(outcome, what was mutated, the error or symptom without numbers): one line per distinct bug."""
    mutation = row["case"].split(" | ", 1)[-1]
    kind = mutation.removeprefix("mutation: ").split("=")[0].split(":")[0].split(" ")[0]
    detail = (row["detail"].splitlines() or [""])[0]
    detail = re.sub(r"-?\d+(\.\d+)?", "N", re.sub(r"\d+ of \d+ D elements wrong.*", "D elements wrong", detail))
    dtypes = re.search(r"dtypes=(\{[^}]*\})", row["case"])
    special = sorted({d for d in re.findall(r"'(\w+)'", dtypes.group(1)) if d.startswith(("bfloat", "float8"))}) if dtypes else []
    if row["outcome"] == "valid_wrong" and special:
        detail += " (declared dtypes " + ", ".join(special) + ")"
    return row["outcome"], kind, detail[:160]


def report(rows: list[dict], elapsed: float | None = None) -> int:
    import contract_fuzz

    counts = collections.Counter(r["outcome"] for r in rows)
    rate = f" in {elapsed:.0f} s ({len(rows) / elapsed:.2f} cases/s)" if elapsed else ""
    print(f"{len(rows)} cases{rate}, {len({r['opcode'] for r in rows})} opcodes")
    storage = collections.Counter(r["outcome"] for r in rows if " storage=" in r["case"])
    for outcome, meaning in contract_fuzz.OUTCOMES.items():
        print(f"{counts[outcome]:7d}  {outcome:26s} {meaning} (storage cases {storage[outcome]}, "
              f"other {counts[outcome] - storage[outcome]})")
    bugs = collections.defaultdict(list)
    for r in rows:
        if r["outcome"] in contract_fuzz.BUGS or r["outcome"] == "checker_error":
            bugs[bug_class(r)].append(r)
    print(f"\n{len(bugs)} distinct bugs (outcome, mutation, symptom): cases, opcodes, first case")
    for (outcome, kind, symptom), group in sorted(bugs.items(), key=lambda kv: -len(kv[1])):
        ops = sorted({r["opcode"] for r in group})
        print(f"- {outcome} [{kind}] {symptom}\n    {len(group)} cases, {len(ops)} opcodes: {', '.join(ops)}\n"
              f"    e.g. {group[0]['case']}")
    return 1 if bugs else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1, help="batches run at once")
    parser.add_argument("--storage-rate", type=float, default=0.3, help="share of storage cases")
    parser.add_argument("--jsonl", help="also write every result here, one JSON object a line")
    parser.add_argument("--summarize", metavar="JSONL", help="print the report of an earlier --jsonl run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.summarize:
        with (gzip.open if args.summarize.endswith(".gz") else open)(args.summarize, "rt") as f:
            return report([json.loads(line) for line in f if line.strip()])
    if args.worker:
        worker(args.cases, args.seed, args.jsonl, args.storage_rate)
        return 0
    from concurrent.futures import ThreadPoolExecutor

    start, rows = time.time(), []
    sizes = [(min(args.batch, args.cases - first), args.seed * 100003 + i)
             for i, first in enumerate(range(0, args.cases, args.batch))]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in pool.map(lambda b: batch(*b, args.storage_rate), sizes):
            rows += done
            print(f"# {len(rows)} cases, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return report(rows, time.time() - start)


if __name__ == "__main__":
    sys.exit(main())
