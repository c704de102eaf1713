"""The SM clock and board power ``nvidia-smi`` samples while a benchmark runs (benchmarks/cuda_gemm.py --sustain,
benchmarks/sm90_power.py): a large GEMM runs into the board's power limit and the clock drops to hold it."""

from __future__ import annotations

import statistics
import subprocess
import time

QUERY = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]


class ClockSamples:
    """``with ClockSamples() as c: ...``: ``nvidia-smi`` samples (MHz, W) every ``interval_ms`` while the block runs;
    ``c.samples`` after it, ``c.steady()`` the medians of the second half (the first half warm-up)."""

    def __init__(self, interval_ms: int = 20):
        self.cmd = QUERY + ["-lms", str(interval_ms)]
        self.samples: list[tuple[float, float]] = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        lines = self.proc.communicate()[0].split("\n")
        self.samples = [tuple(float(v) for v in ln.split(",")) for ln in lines if ln.count(",") == 1]
        return False

    def steady(self) -> dict:
        """``{"mhz", "watts", "samples"}``: the medians of the second half of the samples (NaN without any)."""
        half = self.samples[len(self.samples) // 2:] or [(float("nan"), float("nan"))]
        return dict(mhz=statistics.median(c for c, _ in half), watts=statistics.median(w for _, w in half),
                    samples=len(self.samples))


def sustained_chunks(fn, per_chunk: int, seconds: float) -> tuple[list[float], dict]:
    """Back-to-back ``fn()`` for ``seconds`` in event-timed chunks of ``per_chunk`` calls: each chunk's seconds a
    call, and ``ClockSamples.steady`` of the run."""
    import torch

    chunks = []
    with ClockSamples() as clocks:
        end = time.time() + seconds
        while time.time() < end:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(per_chunk):
                fn()
            e.record()
            e.synchronize()
            chunks.append(s.elapsed_time(e) / 1e3 / per_chunk)
    return chunks, clocks.steady()
