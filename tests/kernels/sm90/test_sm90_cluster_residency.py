"""``benchmarks/sm90_clusters.py``'s residency line: the driver's ``cuOccupancyMaxActiveClusters`` asked with the
launch the plan makes (grid, threads, dynamic shared memory, ``clusterDim``), its ``CUlaunchConfig`` laid out as
``cuda.h``'s, and the run going on with a reason where the driver is missing (a fake driver stands in: no GPU)."""

from __future__ import annotations

import ctypes
import types

import pytest
from benchmark_modules import benchmark_module

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

SOURCE = ('extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(const __grid_constant__ CUtensorMap mapA, '
          'const __grid_constant__ CUtensorMap mapB) {\n}\n')


@pytest.fixture(scope="module")
def bench():
    return benchmark_module("sm90_clusters")


def clustered_plan(cluster_m=2):
    return gemm.plan(GemmProblem(3000, 3584, 3584, "bf16", "nt", "bf16"), "sm90",
                     Sm90Config(128, 224, 3, 2, epilogue="tma", cluster_m=cluster_m), sms=132)


def test_the_launch_config_has_the_driver_layout(bench):
    # cuda.h: CUlaunchAttribute is the id padded to 8 bytes and a 64-byte value; CUlaunchConfig 7 uints, the stream,
    # the attributes, their count
    assert ctypes.sizeof(bench._Attr) == 72 and bench._Attr.value.offset == 8
    assert (bench._LaunchConfig.hStream.offset, bench._LaunchConfig.attrs.offset, bench._LaunchConfig.numAttrs.offset,
            ctypes.sizeof(bench._LaunchConfig)) == (32, 40, 48, 56)
    cfg, _ = bench.launch_config(132, 384, 192512, 2)
    assert (cfg.gridDimX, cfg.blockDimX, cfg.sharedMemBytes, cfg.numAttrs) == (132, 384, 192512, 1)
    assert cfg.attrs[0].id == 4 and (cfg.attrs[0].value.clusterDim.x, cfg.attrs[0].value.clusterDim.y) == (2, 1)


def test_the_kernel_name_is_read_off_the_source(bench):
    assert bench.kernel_name(SOURCE) == "main_kernel"


class FakeDriver:
    """The five driver calls ``residency`` makes; cuOccupancyMaxActiveClusters answers ``active``."""

    def __init__(self, active):
        self.active, self.calls, self.seen = active, [], {}

    def cuModuleLoadData(self, module, image):
        self.calls.append("load")
        module._obj.value = 0x1000
        return 0

    def cuModuleGetFunction(self, func, module, name):
        self.seen["name"] = name
        func._obj.value = 0x2000
        return 0

    def cuFuncSetAttribute(self, func, attribute, value):
        self.seen["max_dynamic_smem"] = (attribute, value)
        return 0

    def cuFuncGetAttribute(self, out, attribute, func):
        out._obj.value = 168 if attribute == 4 else -1
        return 0

    def cuOccupancyMaxActiveClusters(self, n, func, cfg):
        c = cfg._obj
        self.seen["launch"] = (c.gridDimX, c.blockDimX, c.sharedMemBytes, c.attrs[0].value.clusterDim.x)
        n._obj.value = self.active
        return 0

    def cuModuleUnload(self, module):
        self.calls.append("unload")
        return 0


def fake_runtime(monkeypatch, driver):
    import tvm_cdna4.runtime.cuda as runtime

    monkeypatch.setattr(ctypes, "CDLL", lambda name: driver)
    monkeypatch.setattr(runtime, "device_code_cache", lambda: lambda code, config: (b"\x7fELF", "cubin"))
    return types.SimpleNamespace(source=SOURCE, device_config="{}")


@pytest.mark.parametrize("active, words", [(66, "(one wave)"), (60, "(MORE THAN ONE WAVE)")])
def test_residency_asks_the_driver_with_the_plans_launch_and_says_whether_the_grid_is_one_wave(
        bench, monkeypatch, active, words):
    p = clustered_plan()  # planning asks the driver (kernels.devices) too: before the fake stands in
    driver = FakeDriver(active)
    build = fake_runtime(monkeypatch, driver)
    r = bench.residency(build, p)
    assert driver.seen["launch"] == (132, 384, p.smem_bytes, 2) and driver.seen["name"] == b"main_kernel"
    assert driver.seen["max_dynamic_smem"] == (8, p.smem_bytes) and driver.calls == ["load", "unload"]
    assert (r["grid_clusters"], r["max_active_clusters"], r["regs"]) == (66, active, 168)
    line = bench.wave_line("qwen qkv", "c2", {**r, "M": 3000})
    assert line.startswith("residency qwen qkv M=3000 c2: grid 66 clusters of 2, at most") and words in line


def test_an_unclustered_launch_counts_single_ctas(bench, monkeypatch):
    p, driver = clustered_plan(1), FakeDriver(132)
    r = bench.residency(fake_runtime(monkeypatch, driver), p)
    assert driver.seen["launch"][3] == 1 and (r["grid_clusters"], r["cluster"]) == (132, 1)


def test_a_failing_driver_call_or_a_missing_driver_is_a_reason_not_an_error(bench, monkeypatch):
    p, driver = clustered_plan(), FakeDriver(66)
    driver.cuModuleLoadData = lambda module, image: 218  # CUDA_ERROR_INVALID_PTX
    r = bench.residency(fake_runtime(monkeypatch, driver), p)
    assert r["residency"] == "skipped: cuModuleLoadData returned CUresult 218" and "max_active_clusters" not in r

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    r = bench.residency(types.SimpleNamespace(source=SOURCE, device_config="{}"), p)
    assert r["residency"].startswith("skipped: no driver entry point cuOccupancyMaxActiveClusters (libcuda.so.1")
    assert bench.wave_line("x", "c2", {**r, "M": 8}).endswith(r["residency"])


def test_the_summary_line_counts_the_launches_in_one_wave_and_the_unmeasured(bench):
    rows = [dict(us=1.0, cluster=2, grid_clusters=66, max_active_clusters=66),
            dict(us=1.0, cluster=2, grid_clusters=60, max_active_clusters=66),
            dict(us=1.0, cluster=1, grid_clusters=132, max_active_clusters=120),
            dict(us=1.0, residency="skipped: cuModuleLoadData returned CUresult 218"),
            dict(error="not built in time")]
    assert bench.residency_summary(rows) == (
        "residency: 2 of 3 measured launches one wave (clusters of 1: grid 132, at most 120 active, clusters of 2: "
        "grid 60, at most 66 active, clusters of 2: grid 66, at most 66 active); 1 not measured: skipped: "
        "cuModuleLoadData returned CUresult 218")
