"""Each device's numbers once (issue 34): the table, the driver reading, and the cost models reading them."""

import pytest

from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.devices import DEVICES, DeviceSpec


def test_every_device_names_its_target_and_source():
    for spec in DEVICES.values():
        assert spec.target in devices.DEFAULT and spec.source and spec.units > 0 and spec.hbm_bytes_s > 0


def test_the_cost_models_read_the_table():
    from tvm_cdna4.kernels.gfx950 import gemm_cost
    from tvm_cdna4.kernels.sm80 import attention_plan

    assert (gemm_cost.MI355X_CUS, gemm_cost.CLOCK_HZ, gemm_cost.HBM_BYTES_PER_S) == (256, 2.4e9, 8.0e12)
    assert gemm_cost.MI355X_CUS == DEVICES["MI355X"].units
    assert attention_plan.H200_SMS == DEVICES["H200"].units and attention_plan.L2_BYTES == DEVICES["H200"].l2_bytes


def test_a_present_gpu_is_read_from_the_driver_attributes():
    """An H100 PCIe's attributes (114 SMs, 2 TB/s): its own numbers, not the H200's."""
    a = dict(name="NVIDIA H100 PCIe", units=114, l2_bytes=50 << 20, major=9, minor=0, smem_optin=232448, regs=65536,
             clock_khz=1755000, mem_clock_khz=1593000, bus_bits=5120)
    spec = devices.spec_from_attributes(a)
    assert isinstance(spec, DeviceSpec) and spec.arch == "sm_90a" and spec.units == 114
    assert spec.hbm_bytes_s == pytest.approx(2.039e12, rel=1e-3)
    del a["mem_clock_khz"]  # CUDA 13 may refuse the deprecated clock attributes: the default's figure stands
    assert devices.spec_from_attributes(a).hbm_bytes_s == DEVICES["H200"].hbm_bytes_s


def test_a_refused_clock_takes_the_named_gpu_s_figures():
    """The H100 SXM where the driver refuses the deprecated clock attributes: the H100 entry's figures, by the
    driver's name. (The 2026-12-06/07 H100 runs planned with the H200's figures for another reason: the minor
    compute capability 0 was taken for a refused attribute, ``test_an_h100_is_read_from_the_driver_though_its_minor_version_is_0``.)"""
    a = dict(name="NVIDIA H100 80GB HBM3", units=132, l2_bytes=50 << 20, major=9, minor=0, smem_optin=232448,
             regs=65536)
    spec = devices.spec_from_attributes(a)
    assert (spec.hbm_bytes_s, spec.clock_hz, spec.units) == (DEVICES["H100"].hbm_bytes_s, DEVICES["H100"].clock_hz, 132)
    assert devices.spec_from_attributes({**a, "name": "NVIDIA H200"}).hbm_bytes_s == DEVICES["H200"].hbm_bytes_s
    assert devices.named("NVIDIA A100-SXM4-80GB") is DEVICES["A100"]
    assert devices.named("NVIDIA H100 PCIe") is None and devices.named("NVIDIA GeForce RTX 4090") is None


def test_planned_is_the_present_gpu_else_the_default(monkeypatch):
    devices.present.cache_clear()
    monkeypatch.setattr(devices, "_driver_attributes", lambda: None)
    assert devices.present("sm80") is None and devices.planned("sm80") is DEVICES["H200"]
    devices.present.cache_clear()
    fake = dict(name="A100", units=108, l2_bytes=40 << 20, major=8, minor=0, smem_optin=166912, regs=65536)
    monkeypatch.setattr(devices, "_driver_attributes", lambda: fake)
    assert devices.planned("sm80").units == 108 and devices.planned("gfx950") is DEVICES["MI355X"]
    devices.present.cache_clear()
    with pytest.raises(ValueError, match="device target: expected one of"):
        devices.present("sm70")


class FakeDriver:
    """``libcuda`` as ``_driver_attributes`` calls it (ctypes), answering ``attributes`` (CUdevice_attribute -> value;
    a missing one refused, CUDA_ERROR_INVALID_VALUE) for one device named ``name``."""

    def __init__(self, name: str, attributes: dict):
        self.name, self.attributes = name, attributes

    def cuInit(self, flags):
        return 0

    def cuDeviceGet(self, dev, ordinal):
        dev._obj.value = ordinal
        return 0

    def cuDeviceGetAttribute(self, value, attribute, dev):
        if attribute not in self.attributes:
            return 1
        value._obj.value = self.attributes[attribute]
        return 0

    def cuDeviceGetName(self, text, size, dev):
        text.value = self.name.encode()
        return 0


def test_an_h100_is_read_from_the_driver_though_its_minor_version_is_0(monkeypatch):
    """Compute capability 9.0: ``CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`` is 0, a valid answer (not a refusal);
    refusing it left every H100 / A100 planned with the H200's numbers (the H100 runs of 2026-12-06/07)."""
    cu = devices._CU
    h100 = {cu["units"]: 132, cu["l2_bytes"]: 50 << 20, cu["major"]: 9, cu["minor"]: 0, cu["smem_optin"]: 232448,
            cu["regs"]: 65536}  # CUDA 13: the clock attributes refused
    monkeypatch.setattr(devices.ctypes, "CDLL", lambda name: FakeDriver("NVIDIA H100 80GB HBM3", h100))
    a = devices._driver_attributes()
    assert a is not None and (a["major"], a["minor"], a["units"]) == (9, 0, 132)
    devices.present.cache_clear()
    try:
        spec = devices.planned("sm80")
        assert (spec.arch, spec.units, spec.hbm_bytes_s) == ("sm_90a", 132, DEVICES["H100"].hbm_bytes_s)
        assert spec.name == "NVIDIA H100 80GB HBM3" and spec.source == "read from the CUDA driver"
    finally:
        devices.present.cache_clear()
    del h100[cu["regs"]]  # a required attribute refused: no reading
    assert devices._driver_attributes() is None
