"""Run a compiled gfx950 code object on a real AMD GPU through HIP's module API (``hip-python``).

TIRx 0.1.0a4 ships no ROCm runtime, so on an MI350/MI355X machine this module loads the code object
that ``tvm_cdna4.build`` linked, packs the kernel arguments as the code-object metadata lays them
out, and launches with the grid/workgroup of the kernel's ``launch_thread`` extents. Without a
gfx950 device ``gfx950_device()`` returns None and the hardware tests skip.
"""

from __future__ import annotations

import re
import struct

import numpy as np


def find_gfx950() -> tuple[int | None, str]:
    """(index of the first gfx950 GPU visible through hip-python, or None; what was found)."""
    try:
        from hip import hip
    except ImportError:
        return None, "hip-python not installed"
    try:
        err, count = hip.hipGetDeviceCount()
        if int(err) != 0:
            return None, f"hipGetDeviceCount failed: {err}"
        archs = []
        for i in range(count):
            err, props = hip.hipGetDeviceProperties(i)
            if int(err) == 0:
                archs.append(props.gcnArchName.decode(errors="replace").split(":")[0])
                if archs[-1] == "gfx950":
                    return i, f"HIP device {i}"
    except Exception as e:  # a broken HIP install is "no device", said in the reason
        return None, f"HIP failed: {e}"
    return None, f"HIP devices: {', '.join(archs)}" if archs else "HIP sees no device"


def gfx950_device() -> int | None:
    """Index of the first gfx950 GPU visible through hip-python, or None."""
    return find_gfx950()[0]


def kernel_args(asm: str) -> list[tuple[str, int, int]]:
    """(name, offset, size) of every kernel argument, from the code-object metadata in the assembly."""
    block = re.search(r"\.args:(.*?)\n\s{4}\.\w+:", asm, re.S)
    if not block:
        raise ValueError("no .args in the kernel metadata")
    args = []
    for entry in re.split(r"\n\s+- ", block.group(1))[1:]:
        fields = dict(re.findall(r"\.(\w+):\s+(\S+)", "." + entry.strip()))
        args.append((fields.get("name", f"arg{len(args)}"), int(fields["offset"]), int(fields["size"])))
    return args


def _check(result):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"HIP error {err}")
    return result[1:] if isinstance(result, tuple) and len(result) > 2 else (result[1] if isinstance(result, tuple) else None)


def pack_args(layout: list[tuple[str, int, int]], values: dict[str, bytes]) -> bytes:
    """The kernarg segment: each argument's bytes (``values``, by parameter name; a pointer
    parameter ``X`` appears in the metadata as ``X_ptr``) at its metadata offset."""
    buf = bytearray(max((off + size for _, off, size in layout), default=0))
    for aname, off, size in layout:
        base = aname[:-4] if aname.endswith("_ptr") else aname
        if base not in values:
            raise ValueError(f"run_on_gfx950: no value for kernel parameter {base}")
        if len(values[base]) != size:
            raise ValueError(f"run_on_gfx950: parameter {base} is {size} bytes; found {len(values[base])}")
        buf[off:off + size] = values[base]
    return bytes(buf)


def run_on_gfx950(kernel, *arrays, **scalars) -> None:
    """Build ``kernel``, run it on the first gfx950 GPU with ``arrays`` (outputs copied back);
    ``scalars`` bind scalar parameters by name, as in ``emulate``."""
    from hip import hip

    from ..emulator import check_argument, device_function
    from ..emulator.interp import np_dtype
    from ..rocm.build import build
    from ..rocm.launch import launch_extents

    device = gfx950_device()
    if device is None:
        raise RuntimeError("no gfx950 GPU is visible through hip-python")
    _check(hip.hipSetDevice(device))
    result = build(kernel)
    if result.code_object is None:
        raise RuntimeError("no linked code object: install ld.lld (Debian lld-22)")
    grid, block = launch_extents(device_function(kernel).body).constant("run_on_gfx950")
    module = _check(hip.hipModuleLoadData(result.code_object))
    name = result.kernel().name
    function = _check(hip.hipModuleGetFunction(module, name.encode()))
    names = [p.name for p in kernel.params]
    for param, arr in zip(kernel.params, arrays):
        check_argument(param.name, param.ty, arr)
    pointers = {}
    for pname, arr in zip(names, arrays):
        ptr = _check(hip.hipMalloc(arr.nbytes))
        _check(hip.hipMemcpy(ptr, arr.ctypes.data, arr.nbytes, hip.hipMemcpyKind.hipMemcpyHostToDevice))
        pointers[pname] = ptr
    values = {name: struct.pack("<Q", int(ptr)) for name, ptr in pointers.items()}
    for p in kernel.params:
        if p.name in scalars:
            values[p.name] = np.asarray(scalars[p.name], np_dtype(p.ty.dtype)[0]).tobytes()
    buf = pack_args(kernel_args(result.asm), values)
    _check(hip.hipModuleLaunchKernel(function, grid.get("x", 1), grid.get("y", 1), grid.get("z", 1),
                                     block.get("x", 1), block.get("y", 1), block.get("z", 1), 0, None, None,
                                     hip.HipModuleLaunchKernel_extra(bytes(buf)) if hasattr(hip, "HipModuleLaunchKernel_extra") else bytes(buf)))
    _check(hip.hipDeviceSynchronize())
    for pname, arr in zip(names, arrays):
        _check(hip.hipMemcpy(arr.ctypes.data, pointers[pname], arr.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        _check(hip.hipFree(pointers[pname]))
    np.asarray(arrays[0])  # keep arrays alive until here
