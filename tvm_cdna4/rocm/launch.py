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


def gfx950_device() -> int | None:
    """Index of the first gfx950 GPU visible through hip-python, or None."""
    try:
        from hip import hip
    except ImportError:
        return None
    try:
        err, count = hip.hipGetDeviceCount()
        if int(err) != 0:
            return None
        for i in range(count):
            err, props = hip.hipGetDeviceProperties(i)
            if int(err) == 0 and props.gcnArchName.decode(errors="replace").split(":")[0] == "gfx950":
                return i
    except Exception:
        return None
    return None


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


def run_on_gfx950(kernel, *arrays) -> None:
    """Build ``kernel``, run it on the first gfx950 GPU with ``arrays`` (outputs copied back)."""
    from hip import hip

    from ..emulator import _launch_extents, device_function
    from .build import build

    device = gfx950_device()
    if device is None:
        raise RuntimeError("no gfx950 GPU is visible through hip-python")
    _check(hip.hipSetDevice(device))
    result = build(kernel)
    if result.code_object is None:
        raise RuntimeError("no linked code object: install ld.lld (Debian lld-22)")
    grid, block = _launch_extents(device_function(kernel))
    module = _check(hip.hipModuleLoadData(result.code_object))
    name = result.kernel().name
    function = _check(hip.hipModuleGetFunction(module, name.encode()))
    names = [p.name for p in kernel.params]
    pointers = {}
    for pname, arr in zip(names, arrays):
        ptr = _check(hip.hipMalloc(arr.nbytes))
        _check(hip.hipMemcpy(ptr, arr.ctypes.data, arr.nbytes, hip.hipMemcpyKind.hipMemcpyHostToDevice))
        pointers[pname] = ptr
    layout = kernel_args(result.asm)
    buf = bytearray(max(off + size for _, off, size in layout))
    for aname, off, size in layout:
        base = aname[:-4] if aname.endswith("_ptr") else aname
        struct.pack_into("<Q", buf, off, int(pointers[base]))
    _check(hip.hipModuleLaunchKernel(function, grid.get("x", 1), grid.get("y", 1), grid.get("z", 1),
                                     block.get("x", 1), block.get("y", 1), block.get("z", 1), 0, None, None,
                                     hip.HipModuleLaunchKernel_extra(bytes(buf)) if hasattr(hip, "HipModuleLaunchKernel_extra") else bytes(buf)))
    _check(hip.hipDeviceSynchronize())
    for pname, arr in zip(names, arrays):
        _check(hip.hipMemcpy(arr.ctypes.data, pointers[pname], arr.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        _check(hip.hipFree(pointers[pname]))
    np.asarray(arrays[0])  # keep arrays alive until here
