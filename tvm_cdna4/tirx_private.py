"""Every use of TIRx / tvm_ffi internals, in one place (pinned to apache-tvm-tirx 0.1.0a4).

1. ROCm thread scopes. ``ThreadScope`` is a C++-backed ``tvm_ffi`` enum with no public way to add
   entries; we add ``rocm.kernel/workgroup/wave/thread`` through the private enum helpers of
   ``tvm_ffi.dataclasses.enum``.
2. The wave lane / wave id layout axes get their thread classification through the enum attribute
   columns (``Axis.def_attr``), as TIRx's C++ does for CUDA axes.
3. The CUDA tile-pattern ``Context``/``Region`` (``tvm_tirx.backend.cuda.tile.patterns.common``)
   are subclassed by ``tvm_cdna4.patterns.common``; the members we rely on are listed in
   ``CUDA_COMMON_MEMBERS``.

4. ``lowered_device_modules`` intercepts the private codegen step of ``tvm_tirx.tirx.compile``.
5. ``cuda_compile_log`` calls the private compiler drivers of ``tvm_tirx.support.nvcc``
   (``_compile_cuda_nvrtc`` / ``_compile_cuda_nvcc``), whose log the public ``compile_source`` drops.
6. ``wrap_global_func`` wraps ``target.build.rocm``, the global function TIRx's C++ ``codegen.Build``
   looks up for every ROCm device module (every route into ROCm codegen passes it), and the two
   callbacks the ROCm codegen calls, ``tvm_callback_rocm_bitcode_path`` / ``tvm_callback_rocm_link``
   (TIRx's own: ``tvm_tirx.support.rocm.callback_rocm_bitcode_path`` / ``callback_rocm_link``).

``tests/test_tirx_private.py`` fails loudly when any of these change.
"""

from __future__ import annotations

import threading

from tvm_ffi.dataclasses import enum as _ffi_enum
from tvm_tirx.backend.cuda.tile.patterns import common as cuda_common
from tvm_tirx.tirx.layout import Axis
from tvm_tirx.tirx.thread_scope import ThreadScope

ENUM_PRIVATE_NAMES = ("_state", "_create", "_register", "_EnumEntry", "ENUM_STATE_ATTR")
CUDA_COMMON_MEMBERS = {
    "Context": ("require", "loops", "finish", "add_range", "region"),
    "Region": ("physical", "indices", "memory", "contiguous", "aligned", "nonoverlapping", "value", "require_bits"),
}

# rank: smaller is wider (CUDA uses kernel=-1, cta=1, warp=3, thread=4)
ROCM_SCOPES = {"kernel": -1, "workgroup": 0, "wave": 1, "thread": 2}
WAVE_LANE_AXIS = "wave_lane"
WAVE_ID_AXIS = "wave_id"

CudaContext = cuda_common.Context
CudaRegion = cuda_common.Region


def _register_scope(local: str, rank: int) -> ThreadScope:
    name = f"rocm.{local}"
    state = _ffi_enum._state(ThreadScope, create=False)
    if name in state.indexes:
        return state.indexes[name]
    inst = _ffi_enum._create(ThreadScope, len(state.entries), name, _ffi_enum._EnumEntry(), True)
    _ffi_enum._register(state.entries, state.indexes, inst)
    ThreadScope.def_attr("backend")[inst] = "rocm"
    ThreadScope.def_attr("rank")[inst] = rank
    return inst


def register_rocm_scopes() -> dict[str, ThreadScope]:
    """Idempotently add the ROCm thread scopes; returns them by local name."""
    return {local: _register_scope(local, rank) for local, rank in ROCM_SCOPES.items()}


def register_rocm_axes() -> tuple[Axis, Axis]:
    """The ``wave_lane`` (0..63, scope wave) and ``wave_id`` (scope workgroup) thread axes."""
    register_rocm_scopes()
    lane, wave = Axis.get(WAVE_LANE_AXIS), Axis.get(WAVE_ID_AXIS)
    for axis, scope, sub in ((lane, "rocm.wave", "rocm.thread"), (wave, "rocm.workgroup", "rocm.wave")):
        Axis.def_attr("thread")[axis] = True
        Axis.def_attr("backend")[axis] = "rocm"
        Axis.def_attr("scope")[axis] = ThreadScope(scope)
        Axis.def_attr("subscope")[axis] = ThreadScope(sub)
    return lane, wave


# 4. The device TIR that reaches codegen. ``tvm_tirx.tirx.compile`` runs the pipeline, splits host
#    and device modules, finalizes them and hands them to the private ``_codegen_host_and_device``;
#    we stop there and keep the finalized device modules (the emulator executes them).
COMPILE_MODULE = "tvm_tirx.tirx._compile"
_CAPTURE_LOCK = threading.Lock()
CODEGEN_HOOK = "_codegen_host_and_device"


class _Captured(Exception):
    pass


def lowered_device_modules(func, target) -> dict:
    """{target: device IRModule} exactly as ``tvm_tirx.tirx.compile(func, target, pipeline="tirx")``
    would pass them to LLVM/CUDA codegen."""
    import importlib

    import tvm_tirx

    compile_module = importlib.import_module(COMPILE_MODULE)
    captured: dict = {}

    def capture(host_mod, device_mod_dict, target_host):
        captured.update(device_mod_dict)
        raise _Captured

    with _CAPTURE_LOCK:
        original = getattr(compile_module, CODEGEN_HOOK)
        setattr(compile_module, CODEGEN_HOOK, capture)
        try:
            tvm_tirx.tirx.compile(func, target=target, pipeline="tirx")
        except _Captured:
            pass
        finally:
            setattr(compile_module, CODEGEN_HOOK, original)
    return captured


CUDA_DRIVER_PREFIX = "_compile_cuda_"
CUDA_DRIVER_PARAMS = ["code", "target_format", "arch", "options", "path_target", "use_nvshmem"]


def cuda_compile_log(source: str, arch: str) -> str:
    """The device compiler's log for CUDA ``source`` built as TIRx builds a kernel for ``arch``: its
    default backend config (NVRTC with ``ptxas -v``, unless the installation configures nvcc), so
    the log reports the registers and spills of the machine code that actually runs. Needs the
    compiler (``cuda-bindings`` for NVRTC) on this machine."""
    from tvm_tirx.backend.cuda.backend_config import compiler_options, resolve_backend_config
    from tvm_tirx.support import nvcc
    from tvm_tirx.target import Target

    config = resolve_backend_config(None, Target({"kind": "cuda", "arch": arch}))
    driver = getattr(nvcc, CUDA_DRIVER_PREFIX + config["compiler"])
    _, log = driver(source, "cubin", config["arch"], compiler_options(config))
    return log.decode() if isinstance(log, bytes | bytearray) else str(log or "")


# 6. The ROCm codegen entry and its callbacks (global functions looked up at each build).
ROCM_BUILD_FUNC = "target.build.rocm"
ROCM_BUILD_PARAMS = ("mod", "target")
ROCM_CALLBACKS = {"tvm_callback_rocm_bitcode_path": "callback_rocm_bitcode_path",
                  "tvm_callback_rocm_link": "callback_rocm_link"}  # global name -> tvm_tirx.support.rocm function


def wrap_global_func(name: str, make_wrapper) -> bool:
    """Replace the global function ``name`` by ``make_wrapper(original)``; False when TIRx has no
    such function (a build without that backend)."""
    import tvm_ffi

    original = tvm_ffi.get_global_func(name, allow_missing=True)
    if original is None:
        return False
    tvm_ffi.register_global_func(name, make_wrapper(original), override=True)
    return True
