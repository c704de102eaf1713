"""benchmarks/sm90_power.py's CPU parts: the per-clock peak it divides by and the table it prints."""

import pytest

from tests.benchmark_modules import benchmark_module


def test_the_per_clock_peak_is_the_datasheets_989_tflops_at_its_clock():
    power, torch_gemm = benchmark_module("sm90_power"), benchmark_module("torch_gemm")
    # 132 SMs at 1.83 GHz (the clock of NVIDIA's dense bf16 figure): the same peak torch_gemm's roofline uses
    assert 132 * power.TENSOR_FLOPS_PER_CLK * 1.83e9 == pytest.approx(torch_gemm.DENSE_BF16_FLOPS, rel=1e-3)


def test_the_table_reads_each_contender_at_its_own_clock():
    power = benchmark_module("sm90_power")
    row = dict(M=4096, N=4096, K=4096, contender="cuBLAS", ok=True, random_tflops=700.0, random_mhz=1500.0,
               random_watts=690.0, random_per_clock=700e12 / (132 * power.TENSOR_FLOPS_PER_CLK * 1500e6),
               zeros_tflops=850.0, zeros_mhz=1980.0, zeros_watts=400.0, zeros_per_clock=0.8)
    line = power.table([row], "H100")[-1]
    assert line.startswith("| 4096 | 4096 | 4096 | cuBLAS | y | 700 | 1500 | 690 | 86.3 % | 850 | 1980 | 400 | 80.0 % |")
    assert power.parse(["--shapes", "768x4096x4096"]).shapes == "768x4096x4096"


def test_every_contender_runs_and_is_checked_on_the_same_random_operands(monkeypatch):
    # each contender: the check, the random run, the all-zero run (x and w zeroed); the next contender finds the
    # operands the reference was computed from again (a fresh draw was checked against the old product: err ~1.4, "NO")
    import argparse

    import torch

    power = benchmark_module("sm90_power")
    seen = {}

    def contender(name):
        def fn(x, w, y):
            seen.setdefault(name, []).append((x.clone(), w.clone()))
            torch.matmul(x, w.t(), out=y)
        return fn

    monkeypatch.setattr(power, "contenders", lambda torch, ours, x, w, y: {
        n: (lambda f=contender(n): f(x, w, y)) for n in ("ours", "cuBLAS")})
    monkeypatch.setattr(power, "sustained", lambda fn, seconds: (fn(), dict(s=1e-3, mhz=1500.0, watts=600.0))[1])
    monkeypatch.setattr(power, "graph_of", lambda torch, fn, calls: fn)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rows = power.row_for(torch, None, (64, 48, 32), argparse.Namespace(seconds=0.0), 132, device="cpu")
    assert [r["contender"] for r in rows] == ["ours", "cuBLAS"] and all(r["ok"] for r in rows), rows
    x0, w0 = seen["ours"][0]
    for name in ("ours", "cuBLAS"):
        (xc, wc), (xr, wr), (xz, wz) = seen[name]  # the check, the random run, the zero run
        assert torch.equal(xc, x0) and torch.equal(wc, w0) and torch.equal(xr, x0) and torch.equal(wr, w0), name
        assert not xz.any() and not wz.any()
    flops = 2 * 64 * 48 * 32
    assert rows[1]["random_tflops"] == pytest.approx(flops * power.calls_for(flops) / 1e-3 / 1e12)
    assert rows[1]["random_per_clock"] == pytest.approx(rows[1]["random_tflops"] * 1e12 / (132 * power.TENSOR_FLOPS_PER_CLK * 1500e6))


def test_main_prints_and_writes_each_shape_as_it_comes(monkeypatch, tmp_path, capsys):
    # a step's timeout must not lose the shapes done: after the first shape the files hold its rows
    import sys
    import types

    power = benchmark_module("sm90_power")
    done = []

    def row_for(torch, ours, shape, args, sms):
        if done:
            assert "| 64 | 48 | 32 | ours |" in (tmp_path / "sm90_power.md").read_text()
        done.append(shape)
        row = dict(M=shape[0], N=shape[1], K=shape[2], contender="ours", ok=True, err=0.0)
        row.update({f"{t}_{k}": 1.0 for t in ("random", "zeros") for k in ("tflops", "mhz", "watts", "per_clock")})
        return [row]

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: types.SimpleNamespace(
        name="H100", multi_processor_count=132)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "tvm_cdna4.torch", types.ModuleType("tvm_cdna4.torch"))
    monkeypatch.setattr(power, "row_for", row_for)
    assert power.main(["--shapes", "64x48x32,128x48x32", "--out", str(tmp_path)]) == 0
    assert done == [(64, 48, 32), (128, 48, 32)]
    out = capsys.readouterr().out
    assert out.count("| ours |") == 2 and out.count("| M | N | K |") == 1
    assert (tmp_path / "sm90_power.md").read_text().count("| ours |") == 2


def test_the_clock_samples_are_the_medians_of_the_second_half():
    clocks = benchmark_module("gpu_clocks").ClockSamples()
    clocks.cmd = ["printf", "1980, 300.5\\n1980, 310.0\\n1500, 690.0\\n1470, 692.0\\n1530, 688.0\\n1510, 691.0\\n"]
    with clocks:
        clocks.proc.wait()  # the samples printed before the block ends (nvidia-smi prints while a benchmark runs)
    assert clocks.samples[0] == (1980.0, 300.5) and len(clocks.samples) == 6
    assert clocks.steady() == dict(mhz=1510.0, watts=691.0, samples=6)  # of (1470, 692), (1530, 688), (1510, 691)


def test_extra_contenders_run_after_the_two_on_the_same_operands(monkeypatch):
    # benchmarks/sm90_widen.py's static kernels: name -> fn(x, w, y), each checked and run like the two
    import argparse

    import torch

    power = benchmark_module("sm90_power")
    seen = []

    def static(x, w, y):
        seen.append((x.clone(), w.clone()))
        torch.matmul(x, w.t(), out=y)

    monkeypatch.setattr(power, "contenders", lambda torch, ours, x, w, y: {
        "cuBLAS": lambda: torch.matmul(x, w.t(), out=y)})
    monkeypatch.setattr(power, "sustained", lambda fn, seconds: (fn(), dict(s=1e-3, mhz=1500.0, watts=600.0))[1])
    monkeypatch.setattr(power, "graph_of", lambda torch, fn, calls: fn)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rows = power.row_for(torch, None, (64, 48, 32), argparse.Namespace(seconds=0.0), 132, device="cpu",
                         extra={"w240": static, "broken": lambda x, w, y: y.zero_()})
    assert [r["contender"] for r in rows] == ["cuBLAS", "w240", "broken"]
    assert [r["ok"] for r in rows] == [True, True, False]  # a wrong C is caught by the check, not timed as right
    (xc, wc), _, (xz, _) = seen
    assert xc.any() and wc.any() and not xz.any()


def _cpu_runs(monkeypatch, power):
    import torch

    monkeypatch.setattr(power, "sustained", lambda fn, seconds: (fn(), dict(s=2e-3, mhz=1500.0, watts=700.0))[1])
    monkeypatch.setattr(power, "graph_of", lambda torch, fn, calls: lambda: [fn() for _ in range(calls)])
    monkeypatch.setattr(power, "calls_for", lambda flops: 3)  # odd: a graph holds 4
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def test_epilogue_contenders_are_the_plain_gemm_each_read_and_cublas_in_place(monkeypatch):
    import types

    import torch

    power = benchmark_module("sm90_power")
    asked = []

    def build_all(todo, workers, seconds):  # sm90_gemm.build_all: key -> (plan, build, seconds, config dict)
        asked.extend((key, args[:3], args[5].residual, cfg) for key, args, cfg in todo)
        return {key: (types.SimpleNamespace(fusion=args[5]), None, 1.0, dict(
            block_m=128, block_n=256, stages=3, epilogue="tma", epilogue_tile=64 * ("tma/64" in key),
            residual_read=key.split()[2].rstrip(",") if "residual" in key else "global")) for key, args, _ in todo}
    monkeypatch.setattr(benchmark_module("sm90_gemm"), "build_all", build_all)
    monkeypatch.setattr("tvm_cdna4.runtime.cuda.load_build", lambda cb: None)
    monkeypatch.setattr("tvm_cdna4.runtime.cuda.Kernel", lambda fn, p: "kernel")
    got = power.epilogue_contenders(torch, (64, 48, 32))
    assert list(got) == ["ours plain", "ours plain, tma/64 s4", "ours residual global", "ours residual prefetch",
                         "ours residual tma", "ours residual prefetch, tma/64 s4", "torch.mm", "Tensor.addmm_ (in place)"]
    chunks = {"epilogue_tile": 64, "stages": 4}
    assert asked == [("ours plain", (64, 48, 32), False, None),
                     ("ours plain, tma/64 s4", (64, 48, 32), False, ("choice", chunks)),
                     ("ours residual global", (64, 48, 32), True, ("choice", {"residual_read": "global"})),
                     ("ours residual prefetch", (64, 48, 32), True, ("choice", {"residual_read": "prefetch"})),
                     ("ours residual tma", (64, 48, 32), True, ("choice", {"residual_read": "tma"})),
                     ("ours residual prefetch, tma/64 s4", (64, 48, 32), True,
                      ("choice", {"residual_read": "prefetch", **chunks}))]
    assert [v[1] for v in got.values()] == [False, False, True, True, True, True, False, True]  # which add the residual
    assert [v[2] for v in got.values()] == ["ours plain"] * 6 + ["torch.mm"] * 2  # each one's base


def test_the_chunks_set_times_the_chunked_staging_plain_and_with_each_residual_read(monkeypatch):
    # --epilogue --set chunks (the GPU step chunkepi): the whole-tile plain GEMM and residual beside the 64-column
    # staging with a fourth stage, plain and with the residual read from global memory or after the L2 prefetch
    import types

    import torch

    power = benchmark_module("sm90_power")
    asked = []

    def build_all(todo, workers, seconds):
        asked.extend((key, args[5].residual, cfg) for key, args, cfg in todo)
        return {key: (types.SimpleNamespace(fusion=args[5]), None, 1.0, dict(
            block_m=128, block_n=256, stages=3, epilogue="tma", residual_read="global")) for key, args, _ in todo}
    monkeypatch.setattr(benchmark_module("sm90_gemm"), "build_all", build_all)
    monkeypatch.setattr("tvm_cdna4.runtime.cuda.load_build", lambda cb: None)
    monkeypatch.setattr("tvm_cdna4.runtime.cuda.Kernel", lambda fn, p: "kernel")
    args = power.parse(["--epilogue", "--set", "chunks"])
    got = power.epilogue_contenders(torch, (64, 48, 32), power.EPILOGUE_SETS[args.set])
    chunks = {"epilogue_tile": 64, "stages": 4}
    assert asked == [("ours plain", False, None), ("ours plain, tma/64 s4", False, ("choice", chunks)),
                     ("ours residual global", True, ("choice", {"residual_read": "global"})),
                     ("ours residual global, tma/64 s4", True, ("choice", {"residual_read": "global", **chunks})),
                     ("ours residual prefetch, tma/64 s4", True, ("choice", {"residual_read": "prefetch", **chunks}))]
    assert list(got)[-2:] == ["torch.mm", "Tensor.addmm_ (in place)"] and power.parse(["--epilogue"]).set == "residual"


def test_the_stagedc_set_adds_the_residual_staged_in_the_chunk_buffers():
    # --epilogue --set stagedc (the GPU step stagedc): the chunks set and the residual_read="chunks" row on four stages
    power = benchmark_module("sm90_power")
    got = power.EPILOGUE_SETS[power.parse(["--epilogue", "--set", "stagedc"]).set]
    assert got[:-1] == power.EPILOGUE_CHUNKS
    assert got[-1] == ("ours residual chunks, tma/64 s4", True, {"residual_read": "chunks", "epilogue_tile": 64, "stages": 4})


def test_epilogue_rows_check_with_the_residual_and_report_cycles_and_energy(monkeypatch):
    # cuBLAS's in-place residual alternates alpha +1 / -1: after the runs the residual is itself again; a contender
    # that forgets the residual fails its check; each run's cycles are seconds x clock, its energy seconds x power
    import argparse

    import torch

    power = benchmark_module("sm90_power")
    _cpu_runs(monkeypatch, power)
    fn, sign = power.addmm_in_place(torch)
    seen = {}

    def plain(x, w, y, res):
        torch.matmul(x, w.t(), out=y)
        return y

    def forgets(x, w, y, res):
        return plain(x, w, y, res)

    def inplace(x, w, y, res):
        seen.setdefault("signs", []).append(sign[0])
        return fn(x, w, y, res)
    contenders = {"ours plain": (plain, False, "ours plain", "cfg", None),
                  "ours residual forgets": (forgets, True, "ours plain", "cfg", None),
                  "torch.mm": (plain, False, "torch.mm", "cuBLAS", None),
                  "Tensor.addmm_ (in place)": (inplace, True, "torch.mm", "cuBLAS", sign)}
    rows = power.epilogue_rows(torch, contenders, argparse.Namespace(seconds=0.0), 132, shape=(64, 48, 32),
                               device="cpu")
    assert [r["ok"] for r in rows] == [True, False, True, True]
    signs = seen["signs"]  # the check, then per run a graph of 4 calls, replayed once by the fake sustained
    assert len(signs) == 1 + 2 * 4 and signs == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]
    even = 4
    r = rows[0]
    assert r["random_us"] == pytest.approx(2e-3 / even * 1e6)
    assert r["random_mcycles"] == pytest.approx(2e-3 / even * 1500.0)  # seconds x MHz: millions of cycles
    assert r["random_mj"] == pytest.approx(2e-3 / even * 700.0 * 1e3)
    lines = power.epilogue_table(rows, "H200")
    assert len(lines) == 4 + 2 * len(rows)
    assert "| random | Tensor.addmm_ (in place) | cuBLAS | y |" in lines[7] and "| +0.0 % |" in lines[7]
    assert lines[4].split(" | ")[5] == "+0.0 %"  # ours plain over itself
