"""Build TIRx kernels for gfx950: LLVM IR, assembly, code-object metadata, code object.

``install_hooks()`` (run when the patterns register) replaces TIRx's two ROCm build callbacks:

- ``tvm_callback_rocm_bitcode_path``: ROCm's device libraries when a ROCm install exists, plus our
  helpers (``helpers.py``). Without ROCm the original raises; we return just the helpers.
- ``tvm_callback_rocm_link``: ``ld.lld`` (TIRx's finder, with Debian's ``/usr/lib/llvm-22/bin`` on
  the search path). Without a linker the build still succeeds in *codegen-only* mode: the
  object file stands in for the code object and ``BuildResult.code_object`` is None.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading

import attrs

from .helpers import helpers_path

LLVM_BIN_DIRS = ("/usr/lib/llvm-22/bin", "/usr/lib/llvm-23/bin", "/opt/rocm/llvm/bin")
MAX_FLAT_WORKGROUP = 256  # what TIRx 0.1.0a4's AMDGPU codegen emits without a ROCm device
GFX950_VGPRS_PER_SIMD_LANE = 512  # unified ArchVGPR + AccVGPR file
GFX950_MAX_WAVES_PER_SIMD = 8
GFX950_LDS_BYTES = 160 * 1024

_state = threading.local()
_installed = False


def llvm_tool(name: str) -> str | None:
    """Path of an LLVM tool that knows gfx950 (Debian llvm-22 first), or None."""
    import shutil

    for d in LLVM_BIN_DIRS:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return shutil.which(f"{name}-22") or shutil.which(name)


def install_hooks() -> None:
    global _installed
    if _installed:
        return
    import tvm_ffi
    import tvm_tirx.support.rocm as rocm_support

    original_bitcode = rocm_support.callback_rocm_bitcode_path

    def bitcode_path(rocdl_dir=None):
        try:
            files = list(original_bitcode(rocdl_dir))
        except Exception:  # no ROCm install: codegen needs no device libraries
            files = []
        return tvm_ffi.convert([*files, helpers_path()])

    def link(obj_bin):
        lld = llvm_tool("ld.lld")
        if lld is None:
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

    tvm_ffi.register_global_func("tvm_callback_rocm_bitcode_path", bitcode_path, override=True)
    tvm_ffi.register_global_func("tvm_callback_rocm_link", link, override=True)
    _installed = True


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


def _workgroup_sizes(func) -> list[int]:
    """threadIdx.x * .y * .z extents of every device entry in ``func`` (static extents only)."""
    text = func.script()
    sizes = {}
    for axis, extent in re.findall(r'T\.launch_thread\("threadIdx\.([xyz])",\s*(\d+)\)', text):
        sizes[axis] = int(extent)
    return [sizes.get("x", 1) * sizes.get("y", 1) * sizes.get("z", 1)] if sizes else []


def check_workgroup_size(func) -> None:
    for size in _workgroup_sizes(func):
        if size > MAX_FLAT_WORKGROUP:
            raise ValueError(
                f"workgroup of {size} threads: TIRx 0.1.0a4's AMDGPU codegen compiles every kernel with "
                f'"amdgpu-flat-work-group-size"="1,{MAX_FLAT_WORKGROUP}" when no ROCm device is present, so '
                f"this kernel would be register-allocated for {MAX_FLAT_WORKGROUP} threads and fail at launch; "
                f"use at most {MAX_FLAT_WORKGROUP} threads (4 waves) per workgroup"
            )
        if size % 64:
            raise ValueError(
                f"workgroup of {size} threads is not a whole number of 64-lane waves: wave-collective "
                "instructions (MFMA, ds_read_tr) need all 64 lanes of every wave active"
            )


def check_wave_uniform_applies(func) -> None:
    """Refuse a wave-collective pattern under a branch on the thread index: some lanes of the wave
    would skip it (conservative, on the printed TVMScript: any enclosing ``if`` that reads a
    ``threadIdx`` variable)."""
    lines = func.script().splitlines()
    thread_vars = set(re.findall(r'T\.launch_thread\("threadIdx\.[xyz]",[^)]*\) as (\w+)', "\n".join(lines)))
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if "T.rocm.tile.apply(" in line:
            for _, cond in stack:
                used = thread_vars & set(re.findall(r"\w+", cond))
                if used:
                    raise ValueError(
                        f"wave-collective {line.strip()[:80]}... runs under `{cond.strip()}`, which depends on "
                        f"the thread index ({', '.join(sorted(used))}): all 64 lanes of a wave must execute it"
                    )
        if line.lstrip().startswith(("if ", "elif ", "else")) or line.lstrip().startswith("while "):
            stack.append((indent, line))


def check_lds_address_spaces(llvm_ir: str) -> None:
    """Refuse a TIRx rocm codegen trap: a view of shared memory (``rearrange``/``decl_tensor`` on an
    LDS buffer) is lowered as an address-space cast from LDS to global, i.e. silently wrong loads."""
    for line in llvm_ir.splitlines():
        if "addrspacecast" in line and "addrspace(3)" in line and "to ptr addrspace(1)" in line:
            raise ValueError(
                "a shared-memory (LDS) tensor view was lowered to a global-memory pointer "
                "(addrspacecast from addrspace(3) to addrspace(1)): TIRx 0.1.0a4's rocm codegen "
                "mis-handles views of shared memory; give the LDS allocation itself the layout you "
                f"index with instead of a rearrange()/decl_tensor() view. Offending IR: {line.strip()}"
            )


def build(func, target: str = "gfx950") -> BuildResult:
    """Compile a TIRx PrimFunc for gfx950 (``pipeline="tirx"``).

    Refuses kernels TIRx would compile wrongly for ROCm (workgroups above 256 threads or not a
    multiple of 64, LDS views lowered to global pointers) with an error naming the rule.
    """
    import tvm_tirx
    from tvm_tirx.target import Target

    from ..errors import presented
    from ..patterns import register

    register()
    if target not in ("gfx950",):
        raise ValueError(f"target {target!r} is not supported; tvm_cdna4.build targets 'gfx950'")
    check_workgroup_size(func)
    check_wave_uniform_applies(func)
    _state.code_object = None
    with presented():
        exe = tvm_tirx.tirx.compile(func, target=Target({"kind": "rocm", "mcpu": target}), pipeline="tirx")
    dev = exe.mod.imports[0]
    llvm_ir, asm = dev.inspect_source("llvm"), dev.inspect_source("asm")
    check_lds_address_spaces(llvm_ir)
    return BuildResult(llvm_ir=llvm_ir, asm=asm, kernels=parse_metadata(asm),
                       code_object=_state.code_object, executable=exe)
