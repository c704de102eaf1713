"""Each device's numbers, once: the GPUs the kernels are planned for, and the one that is present.

``DeviceSpec`` holds what the planners and cost models read of a GPU: its compute units (SMs or
CUs), shared memory (LDS) and registers per unit, clock, HBM bandwidth and L2 size. ``DEVICES``
has the datasheet figures of the GPUs this package plans for, each with its public source;
``DEFAULT[target]`` names the one a target plans for when no GPU is present (the H200 the CUDA
figures were measured on; the MI355X of the gfx950 static estimates).

``present("sm80")`` is the NVIDIA GPU of this machine, read from the driver itself
(``libcuda``'s ``cuDeviceGetAttribute``, through ctypes: no torch, no CUDA toolkit; once per
process), or None where there is none; ``planned("sm80")`` is that GPU where one is present, else
the default. gfx950 has no such reading: no AMD GPU is reachable from this project, so it is always
``DEVICES["MI355X"]``.

The cost models keep their *fitted* rates (``kernels.sm80.gemm_plan.Device``: the clock under the
power cap, the bandwidth after an L2 flush, ...) beside these: a fitted rate is a measurement of one
kernel class, not a property of the chip.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import attrs

from ..isa.hardware import GFX950_LDS_BYTES, GFX950_VGPRS_PER_SIMD_LANE


@attrs.frozen
class DeviceSpec:
    """One GPU's numbers. ``units``: SMs (NVIDIA) or CUs (AMD); ``smem_per_unit``: the shared memory
    (LDS) one block (workgroup) can use on one unit, bytes; ``regs_per_unit``: 32-bit registers per
    SM (NVIDIA) or VGPRs per SIMD lane (AMD); ``clock_hz``: the boost clock; ``hbm_bytes_s``: the
    memory bandwidth; ``l2_bytes``; ``source``: where the figures come from."""

    name: str
    target: str
    arch: str
    units: int
    smem_per_unit: int
    regs_per_unit: int
    clock_hz: float
    hbm_bytes_s: float
    l2_bytes: int
    source: str

    def to_json(self) -> dict:
        return attrs.asdict(self)


NVIDIA_HOPPER = ("NVIDIA H100/H200 datasheets, the NVIDIA H100 Tensor Core GPU Architecture whitepaper (50 MB L2 on the "
                 "GH100 as shipped) and the Hopper tuning guide (docs.nvidia.com/cuda/hopper-tuning-guide)")
DEVICES = {
    "H200": DeviceSpec("NVIDIA H200", "sm80", "sm_90a", 132, 227 * 1024, 65536, 1.98e9, 4.8e12, 50 * 2**20,
                       NVIDIA_HOPPER),
    "H100": DeviceSpec("NVIDIA H100 SXM", "sm80", "sm_90a", 132, 227 * 1024, 65536, 1.98e9, 3.35e12, 50 * 2**20,
                       NVIDIA_HOPPER),
    "A100": DeviceSpec("NVIDIA A100 SXM", "sm80", "sm_80", 108, 163 * 1024, 65536, 1.41e9, 2.04e12, 40 * 2**20,
                       "NVIDIA A100 datasheet and the Ampere tuning guide (docs.nvidia.com/cuda/ampere-tuning-guide)"),
    "MI355X": DeviceSpec("AMD Instinct MI355X", "gfx950", "gfx950", 256, GFX950_LDS_BYTES, GFX950_VGPRS_PER_SIMD_LANE,
                         2.4e9, 8.0e12, 4 * 2**20,
                         "AMD Instinct MI355X datasheet and the CDNA4 ISA reference guide (4 MB L2 per XCD)"),
}
DEFAULT = {"sm80": "H200", "gfx950": "MI355X"}
"""The device each target plans for when none is present."""

# cuDeviceGetAttribute's attributes (CUDA driver API, cuda.h: CUdevice_attribute); the clocks are
# deprecated in CUDA 13 and may be refused: then the default device's figures stand in for them
_CU = {"units": 16, "l2_bytes": 38, "major": 75, "minor": 76, "smem_optin": 97, "regs": 82}
_CU_OPTIONAL = {"clock_khz": 13, "mem_clock_khz": 36, "bus_bits": 37}
_CU_ZERO = ("minor",)
"""The attributes whose answer may be 0 (compute capability 9.0's and 8.0's minor version); any other 0 is taken as
no answer."""


def _driver_attributes() -> dict | None:
    """GPU 0's attributes from ``libcuda`` (None without a driver or a device)."""
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    dev, value, text = ctypes.c_int(), ctypes.c_int(), ctypes.create_string_buffer(256)
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return None
    out = {}
    for key, attribute in (*_CU.items(), *_CU_OPTIONAL.items()):
        if lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, dev) == 0 and (value.value > 0 or (
                key in _CU_ZERO and value.value == 0)):
            out[key] = value.value
        elif key in _CU:
            return None
    lib.cuDeviceGetName(text, 256, dev)
    out["name"] = text.value.decode(errors="replace")
    return out


def spec_from_attributes(a: dict) -> DeviceSpec:
    """A ``DeviceSpec`` from the driver's attributes (``_driver_attributes``): the HBM bandwidth is
    twice the memory clock times the bus width (double data rate). Where the driver refuses the clocks
    (CUDA 13 deprecates them), the figures of the ``DEVICES`` entry the GPU's name names (``named``) stand
    in, else the default device's."""
    arch = f"sm_{a['major']}{a['minor']}" + ("a" if a["major"] == 9 else "")
    fallback = named(a.get("name", "")) or DEVICES[DEFAULT["sm80"]]
    clock = a["clock_khz"] * 1e3 if "clock_khz" in a else fallback.clock_hz
    hbm = (2 * a["mem_clock_khz"] * 1e3 * a["bus_bits"] / 8 if "mem_clock_khz" in a and "bus_bits" in a
           else fallback.hbm_bytes_s)
    return DeviceSpec(a["name"], "sm80", arch, a["units"], a["smem_optin"], a["regs"], clock, hbm, a["l2_bytes"],
                      "read from the CUDA driver")


def named(name: str) -> DeviceSpec | None:
    """The ``DEVICES`` entry whose key the driver's device name holds as a word ("NVIDIA H100 80GB HBM3" ->
    ``DEVICES["H100"]``), None for a GPU not listed. The H100 entry is the SXM card's: a PCIe card
    ("NVIDIA H100 PCIe", 2.0 TB/s) is not listed, so its name names no entry."""
    words = name.replace("-", " ").split()
    hits = [key for key, spec in DEVICES.items() if spec.target != "gfx950" and key in words]
    return DEVICES[hits[0]] if len(hits) == 1 and "PCIe" not in words else None


@functools.lru_cache(maxsize=None)
def present(target: str) -> DeviceSpec | None:
    """The GPU of ``target`` on this machine (read once per process), None where there is none."""
    if target not in DEFAULT:
        raise ValueError(f"device target: expected one of {tuple(DEFAULT)}, found {target!r}")
    if target != "sm80":
        return None
    attributes = _driver_attributes()
    return None if attributes is None else spec_from_attributes(attributes)


def planned(target: str) -> DeviceSpec:
    """The device ``target``'s plans are made for: the present GPU, else ``DEVICES[DEFAULT[target]]``."""
    return present(target) or DEVICES[DEFAULT[target]]


__all__ = ["DEFAULT", "DEVICES", "DeviceSpec", "named", "planned", "present", "spec_from_attributes"]
