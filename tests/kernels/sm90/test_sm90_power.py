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
