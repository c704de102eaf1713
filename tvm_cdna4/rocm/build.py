"""Build TIRx kernels for gfx950: LLVM IR, assembly, code-object metadata, code object.

``register()`` (idempotent; ``tvm_cdna4.register()`` and the ``tvm_tirx.backends`` entry point call
it) registers the patterns (``T.rocm`` / ``T.amdgcn``, ``patterns.register_patterns``), then
``install_hooks()``, which hooks TIRx's ROCm codegen, scoped to what this package owns:

- the default-pipeline selector of ``tvm_tirx.tirx.compile`` (public; it selects nothing): a
  module that calls anything of this package gets the whole-kernel rules of ``rocm.analysis``
  before TileDispatch, while the operand regions of ``T.rocm.tile.apply`` are still in the IR.
- the dispatch of ``tirx.rocm.tile.apply`` (our op only): a pattern's ``ContractError`` leaves
  TileDispatch as itself, not inside TIRx's ``RuntimeError`` (``errors.unwrapped_dispatch``).
- ``target.build.rocm`` (every route into ROCm codegen, ``tvm_tirx.tirx.compile`` included): a
  device module that calls anything of this package gets the whole-kernel rules of
  ``rocm.analysis`` for the target being built, before LLVM sees it (an MFMA for a target other
  than gfx950 is a ``ContractError``, not an LLVM abort); such a module, and every gfx950 module,
  gets the LDS synchronization check of ``rocm.lds_sync`` on its lowered device functions, in the
  mode ``lds_check_mode()`` gives (``build(..., check="strict")``, else ``TVM_CDNA4_LDS_CHECK``,
  else ``"warn"``: what it cannot decide a WARNING or a ``ContractError``). A gfx950 build is marked
  for the callbacks below; any other module is built exactly as TIRx builds it. TIRx's ROCm codegen
  warnings go to the DEBUG log (``errors.codegen_warnings_to_logging``), as do those of every rocm
  ``Target``'s construction (``tirx_private.wrap_target_init``): on every route, not only
  ``errors.presented()``.
- ``tvm_callback_rocm_bitcode_path`` / ``tvm_callback_rocm_link``: during a gfx950 build, ROCm's
  device libraries when a ROCm install exists plus our helpers (``isa.llvm_helpers``), and ``ld.lld``
  (Debian's ``/usr/lib/llvm-22/bin`` on the search path; without a linker the build succeeds in
  *codegen-only* mode: the object file stands in for the code object and
  ``BuildResult.code_object`` is None). For every other ROCm target: TIRx's own callbacks
  (``tvm_tirx.support.rocm``), called unchanged.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager

import attrs

from ..errors import codegen_warnings_to_logging
from ..isa.hardware import GFX950, GFX950_LDS_BYTES, GFX950_MAX_WAVES_PER_SIMD, GFX950_VGPRS_PER_SIMD_LANE
from ..isa.llvm_helpers import helpers_path
from . import waitcheck

# ``analysis`` imports TIRx, whose backend autoload registers this package and with it
# ``install_hooks`` from this module: it is imported where it is used, so that importing this
# module first (``from tvm_cdna4.rocm import build``) does not run that registration half-way.

LLVM_BIN_DIRS = ("/usr/lib/llvm-22/bin", "/usr/lib/llvm-23/bin", "/opt/rocm/llvm/bin")

logger = logging.getLogger(__name__)
_state = threading.local()  # gfx950: inside a gfx950 build on this thread; code_object: its link result;
# lds_check: the LDS check's mode of the build (build(check=...))
LDS_CHECK_ENV = "TVM_CDNA4_LDS_CHECK"
LDS_CHECK_MODES = ("warn", "strict")
_installed = False


def llvm_tool(name: str) -> str | None:
    """Path of an LLVM tool that knows gfx950 (Debian llvm-22 first), or None."""
    import shutil

    found = next((os.path.join(d, name) for d in LLVM_BIN_DIRS if os.access(os.path.join(d, name), os.X_OK)), None)
    found = found or shutil.which(f"{name}-22") or shutil.which(name)
    logger.debug("LLVM tool %s: %s", name, found or "not found")
    return found


def _valid_mode(value: str, source: str) -> str:
    if value not in LDS_CHECK_MODES:
        raise ValueError(f"{source}={value!r} is not a mode of the LDS synchronization check; expected 'warn' or "
                         "'strict' ('warn': what it cannot decide is a WARNING; 'strict': a ContractError)")
    return value


def lds_check_mode() -> str:
    """The LDS synchronization check's mode (``rocm.lds_sync``): the innermost ``lds_checking(mode)``
    (``build(..., check=...)``), else ``TVM_CDNA4_LDS_CHECK``, else ``"warn"``."""
    chosen = getattr(_state, "lds_check", None)
    if chosen is not None:
        return chosen
    env = os.environ.get(LDS_CHECK_ENV)
    return _valid_mode(env, LDS_CHECK_ENV) if env is not None else "warn"


@contextmanager
def lds_checking(chosen: str | None):
    """Within: the LDS check runs in mode ``chosen`` (``"warn"``, ``"strict"``; None: ``lds_check_mode()``'s default)."""
    previous = getattr(_state, "lds_check", None)
    _state.lds_check = previous if chosen is None else _valid_mode(chosen, "check")
    try:
        yield
    finally:
        _state.lds_check = previous


def in_gfx950_build() -> bool:
    """Whether this thread is inside ``target.build.rocm`` for a gfx950 target."""
    return getattr(_state, "gfx950", False)


@contextmanager
def _gfx950_build(active: bool):
    previous = in_gfx950_build()
    _state.gfx950 = active
    try:
        yield
    finally:
        _state.gfx950 = previous


def _build_rocm(original):
    def build_rocm(mod, target):
        from ..patterns import origins
        from . import analysis, lds_sync

        functions = list(mod.functions.values())
        gfx950 = target.attrs.get("mcpu") == GFX950
        ours = any(analysis.uses_cdna4(f) for f in functions)
        if ours:
            for func in functions:
                analysis.check_kernel(func, target)
        try:
            if ours or gfx950:
                strict = lds_check_mode() == "strict"
                for func in functions:
                    lds_sync.check_lds_sync(func, strict)
        finally:
            origins.forget()  # what lowering noted for this module's messages
        with _gfx950_build(gfx950), codegen_warnings_to_logging():
            return original(mod, target)

    return build_rocm


def _rocm_target_warnings_to_logging(init):
    """``Target.__init__``, a rocm target's construction (TIRx's parser warns without ROCm) inside
    ``errors.codegen_warnings_to_logging``."""
    def __init__(self, target, host=None):
        if "rocm" not in str(target):
            return init(self, target, host)
        with codegen_warnings_to_logging():
            return init(self, target, host)

    return __init__


def _check_before_lowering(mod, target, target_to_bind=None):
    """Default-pipeline selector: the rules, on the module as written; returns None (no choice)."""
    from . import analysis

    if target is not None:
        for func in mod.functions.values():
            if analysis.uses_cdna4(func):
                analysis.check_kernel(func, target)
    return None


def _bitcode_path(rocdl_dir=None):
    import tvm_ffi
    import tvm_tirx.support.rocm as rocm_support

    if not in_gfx950_build():
        return rocm_support.callback_rocm_bitcode_path(rocdl_dir)
    try:
        files = list(rocm_support.callback_rocm_bitcode_path(rocdl_dir))
    except RuntimeError:  # no ROCm install: codegen needs no device libraries
        files = []
    return tvm_ffi.convert([*files, helpers_path()])


def _link(obj_bin):
    import tvm_tirx.support.rocm as rocm_support

    if not in_gfx950_build():
        return rocm_support.callback_rocm_link(obj_bin)
    lld = llvm_tool("ld.lld")
    if lld is None:
        logger.info("ld.lld not found: codegen only, the object file stands in for the gfx950 code object")
        _state.code_object = None
        return obj_bin  # codegen-only: keep the relocatable object
    with tempfile.TemporaryDirectory() as d:
        obj, co = os.path.join(d, "kernel.o"), os.path.join(d, "kernel.hsaco")
        with open(obj, "wb") as f:
            f.write(bytes(obj_bin))
        proc = subprocess.run([lld, "--no-undefined", "-shared", obj, "-o", co], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"ld.lld failed to link the gfx950 code object:\n{proc.stdout}{proc.stderr}")
        with open(co, "rb") as f:
            data = f.read()
    _state.code_object = data
    return bytearray(data)


def install_hooks() -> None:
    """Wrap ``target.build.rocm`` and the two ROCm callbacks (idempotent; see the module docstring)."""
    global _installed
    if _installed:
        return
    import tvm_ffi
    import tvm_tirx.support.rocm  # noqa: F401  (registers TIRx's callbacks, which ours delegate to)
    from tvm_tirx.tirx.compilation_pipeline import register_default_tir_pipeline_selector

    from ..errors import unwrapped_dispatch
    from ..tirx_private import ROCM_BUILD_FUNC, wrap_global_func, wrap_target_init, wrap_tile_dispatch
    from . import storage

    # analysis.TILE_APPLY (not imported here: see above); a pattern's ContractError reaches the caller as itself
    wrap_tile_dispatch("tirx.rocm.tile.apply", unwrapped_dispatch)
    storage.install()
    register_default_tir_pipeline_selector(_check_before_lowering)
    wrap_global_func(ROCM_BUILD_FUNC, _build_rocm)
    wrap_target_init(_rocm_target_warnings_to_logging)
    tvm_ffi.register_global_func("tvm_callback_rocm_bitcode_path", _bitcode_path, override=True)
    tvm_ffi.register_global_func("tvm_callback_rocm_link", _link, override=True)
    _installed = True


def register() -> dict:
    """The patterns (``T.rocm`` / ``T.amdgcn``, the ROCm scopes) and the build hooks, once; returns
    ``{"rocm": T.rocm namespace, "amdgcn": T.amdgcn}``."""
    pending = getattr(sys.modules.get("tvm_cdna4.tirx_private"), "WHEN_WHOLE", None)
    if pending is not None and pending[0] == threading.get_ident():  # TIRx's autoload, inside its import
        pending[1].append(register)  # tirx_private section 0: runs when the sections we need exist
        return {}
    from ..patterns import register_patterns

    namespaces = register_patterns()
    install_hooks()
    return namespaces


@attrs.frozen
class KernelInfo:
    """Resources of one kernel, from the code-object metadata in the assembly."""

    name: str
    vgprs: int  # unified count on gfx950 (ArchVGPRs + AccVGPRs)
    agprs: int
    sgprs: int
    lds_bytes: int
    scratch_bytes: int
    max_flat_workgroup_size: int
    vgpr_spills: int
    sgpr_spills: int

    def waves_per_simd(self, waves_per_workgroup: int = 4) -> int:
        """Occupancy limit from registers and LDS (a static estimate: 512-entry unified register
        file in granules of 8, 160 KiB LDS per CU shared by 4 SIMDs, at most 8 waves per SIMD)."""
        regs = max(8, -(-self.vgprs // 8) * 8)
        by_regs = GFX950_VGPRS_PER_SIMD_LANE // regs
        if self.lds_bytes:
            groups_per_cu = GFX950_LDS_BYTES // self.lds_bytes
            by_lds = groups_per_cu * waves_per_workgroup // 4
        else:
            by_lds = GFX950_MAX_WAVES_PER_SIMD
        return max(0, min(GFX950_MAX_WAVES_PER_SIMD, by_regs, by_lds))


_META_KEYS = {
    ".name": "name",
    ".vgpr_count": "vgprs",
    ".agpr_count": "agprs",
    ".sgpr_count": "sgprs",
    ".group_segment_fixed_size": "lds_bytes",
    ".private_segment_fixed_size": "scratch_bytes",
    ".max_flat_workgroup_size": "max_flat_workgroup_size",
    ".vgpr_spill_count": "vgpr_spills",
    ".sgpr_spill_count": "sgpr_spills",
}


def parse_metadata(asm: str) -> tuple[KernelInfo, ...]:
    """Kernel entries of the ``.amdgpu_metadata`` block (keys at kernel level, 4-space indent)."""
    match = re.search(r"\.amdgpu_metadata(.*?)\.end_amdgpu_metadata", asm, re.S)
    if not match:
        raise ValueError("assembly has no .amdgpu_metadata block")
    block = match.group(1).split("amdhsa.kernels:", 1)[-1]
    kernels = []
    for entry in re.split(r"^  - ", block, flags=re.M)[1:]:
        fields = {}
        for line in ("    " + entry).splitlines():
            m = re.match(r"^    (\.[a-z_]+):\s+(\S+)\s*$", line)
            if m and m.group(1) in _META_KEYS:
                fields[_META_KEYS[m.group(1)]] = m.group(2)
        if "name" in fields:
            kernels.append(
                KernelInfo(**{k: (v if k == "name" else int(v)) for k, v in fields.items()}
                           | {k: 0 for k in _META_KEYS.values() if k not in fields and k != "name"})
            )
    return tuple(kernels)


@attrs.frozen
class BuildResult:
    llvm_ir: str
    asm: str
    kernels: tuple[KernelInfo, ...]
    code_object: bytes | None  # linked gfx950 code object; None in codegen-only mode
    executable: object = attrs.field(repr=False)

    def kernel(self, name: str | None = None) -> KernelInfo:
        if name is None:
            if len(self.kernels) != 1:
                raise ValueError(f"module has {len(self.kernels)} kernels; name one of {[k.name for k in self.kernels]}")
            return self.kernels[0]
        return next(k for k in self.kernels if k.name == name)


def build(func, target: str = "gfx950", check: str | None = None) -> BuildResult:
    """Compile a TIRx PrimFunc for gfx950 (``pipeline="tirx"``).

    The whole-kernel rules of ``rocm.analysis`` run on ``func`` first and again on the device
    function TIRx lowers it to (in ``target.build.rocm``); a violation is a ``ContractError``.
    ``check``: the LDS synchronization check's mode (``rocm.lds_sync``): ``"warn"`` (what it cannot
    decide is a WARNING), ``"strict"`` (a ``ContractError``); None: ``TVM_CDNA4_LDS_CHECK``, else warn.
    The assembly LLVM produced then goes through ``rocm.waitcheck`` (every read of a register a load in
    flight writes is waited for, direct-to-LDS loads and LDS writes are published before the barrier
    that LDS reads follow): a finding is a ``ContractError`` with ``check="waitcheck"``. A cached build
    (``cached_build``) was checked when it was built: the cache key digests ``rocm/*.py``.
    """
    import tvm_tirx
    from tvm_tirx.target import Target

    from ..errors import presented
    from . import analysis

    register()
    if target not in (GFX950,):
        raise ValueError(f"target {target!r} is not supported; tvm_cdna4.build targets 'gfx950'")
    _state.code_object = None
    with lds_checking(check), presented():  # the ROCm target's construction prints TIRx's warnings too
        lds_check_mode()  # a wrong TVM_CDNA4_LDS_CHECK is refused before the build
        tirx_target = Target({"kind": "rocm", "mcpu": target})
        analysis.check_kernel(func, tirx_target)
        exe = tvm_tirx.tirx.compile(func, target=tirx_target, pipeline="tirx")
    dev = exe.mod.imports[0]
    llvm_ir, asm = dev.inspect_source("llvm"), dev.inspect_source("asm")
    waitcheck.require_clean(asm)
    return BuildResult(llvm_ir=llvm_ir, asm=asm, kernels=parse_metadata(asm),
                       code_object=_state.code_object, executable=exe)


def cached_build(kind: str, key: dict, make, enabled: bool = True) -> BuildResult:
    """``build(make())`` through the build cache (``cache.cached(kind, key, ...)``): the LLVM IR, the
    assembly and the code object. ``make`` (the kernel's emission) runs on a miss only; the result's
    ``executable`` is None on a hit and a miss alike (what the cache holds)."""
    from ..cache import cached

    def compile_() -> dict[str, bytes]:
        result = build(make())
        blobs = {"llvm_ir": result.llvm_ir.encode(), "asm": result.asm.encode()}
        if result.code_object is not None:
            blobs["code_object"] = result.code_object
        return blobs

    blobs = cached(kind, key, compile_, enabled=enabled, required=("llvm_ir", "asm"))
    asm = blobs["asm"].decode()
    return BuildResult(llvm_ir=blobs["llvm_ir"].decode(), asm=asm, kernels=parse_metadata(asm),
                       code_object=blobs.get("code_object"), executable=None)
