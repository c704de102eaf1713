"""Carry FlashInfer's paged decode to a GPU machine that has no network: ``benchmarks/paged_decode.py``'s peer.

    python benchmarks/flashinfer_carry.py                  # FlashInfer 0.6.6 into .sm90tree/flashinfer (5-10 min)
    python benchmarks/flashinfer_carry.py --no-aot         # Python and JIT sources only (the device compiles)
    python benchmarks/flashinfer_carry.py --wheel W.whl    # from a wheel already here (no download)

Run here (network, nvcc, no GPU needed): ``pip download flashinfer-python==VERSION --no-deps`` from PyPI, then
writes ``--dest`` (git-ignored; name it in the device tool's ``carry`` list), a FlashInfer that imports and runs
``BatchDecodeWithPagedKVCacheWrapper`` (bf16 Q and O; bf16 or e4m3 KV; head dim 128; any page size; its GQA
groups 1, 2, 3, 4, 8) under the device's Python without its optional packages:

* ``flashinfer/``: the wheel's Python files that ``import flashinfer.decode`` loads (``CHILD``) and the whole
  ``flashinfer/jit`` package, unchanged, but ``__init__.py`` (``INIT``): the published one imports every API
  (MoE, GEMM, comm, ...); ours only the decode wrapper. Optional packages the device lacks
  (``nvidia-cudnn-frontend``, ``nvidia-cutlass-dsl``) are already optional in 0.6.6: each import sits in a
  ``try`` (``flashinfer/cudnn/decode.py``: ``CUDNN_AVAILABLE = False``) or is never reached on this path, so no
  shim stands in for them. ``flashinfer/data/``: only the headers and JIT templates the decode modules' builds read
  (``ninja -t deps`` of each build and the templates ``gen_*_module`` opens), so the device can JIT them again
  (``--no-aot``, or a module missing).
* ``flashinfer_jit_cache/``: FlashInfer's own hook for ahead-of-time modules (the ``flashinfer-jit-cache`` wheel;
  ``flashinfer.jit.env._get_aot_dir``): the modules of ``MODULES`` built here with nvcc for ``sm_90a``
  (``FLASHINFER_CUDA_ARCH_LIST``), stored xz-compressed (the four .so are 13.6 MB, 2.2 MB compressed) and unpacked
  on first use into ``$FLASHINFER_WORKSPACE_BASE/aot`` (``get_jit_cache_dir``), where ``JitSpec.is_aot`` finds
  them: the device compiles nothing. A module links ``libcudart.so.13`` (torch cu130 loads it first) and
  resolves ``TVMFFI*`` from the ``apache-tvm-ffi`` the TIRx wheels carry (0.1.15.post2; 0.6.6 asks >= 0.1.6, < 0.2).
* ``CARRIED.json``: version, modules, sizes, the nvcc used; ``LICENSE`` (Apache-2.0, from the wheel).

Why 0.6.6: the newest 0.7.x wheel is 101 MB (716 MB unpacked) and requires ``cuda-tile``, ``nccl4py``; 0.6.6 is a
7.8 MB wheel whose required packages the device has but ``nvidia-cudnn-frontend`` and ``nvidia-cutlass-dsl``
(optional on this path; 0.5.3 has the same needs and is older); 0.4.1 is an sdist pinning
``apache-tvm-ffi==0.1.0b15``, which PyPI no longer has; the 0.2.x releases JIT through torch's C++ extension, which
would tie a module to the device's torch build. Its decode kernel (the ``fa2`` CUDA-core decode,
``use_tensor_cores=False``) and the tensor-core one (``use_tensor_cores=True``: the ``fa2`` prefill kernel) are
both carried; the benchmark times each.
"""

from __future__ import annotations

import argparse
import glob
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VERSION = "0.6.6"
DEST = os.path.join(ROOT, ".sm90tree", "flashinfer")
ARCH = "9.0a"  # FLASHINFER_CUDA_ARCH_LIST: H100 / H200 (compute_90a, code=sm_90a)
BUDGET = 12 * 2**20  # bytes on disk the folder may take (the device tool's 64 MiB, less the tree and the wheels)
# (generator, kv dtype): the modules BatchDecodeWithPagedKVCacheWrapper.plan loads for bf16 Q / O, int32 indices,
# head dim 128, no RoPE, no sliding window, no soft cap: "decode" (use_tensor_cores=False), "prefill" (True, fa2)
MODULES = (("decode", "bfloat16"), ("decode", "float8_e4m3fn"), ("prefill", "bfloat16"), ("prefill", "float8_e4m3fn"))
# what FlashInfer's Python imports that the GPU machine has (its torch pulls jinja2 and filelock in)
DEVICE_HAS = {"einops": "einops", "click": "click", "tabulate": "tabulate", "tqdm": "tqdm", "requests": "requests",
              "pynvml": "nvidia-ml-py", "ninja": "ninja", "packaging": "packaging", "numpy": "numpy"}
INIT = '''"""FlashInfer {version} as tvm_cdna4's benchmarks/flashinfer_carry.py carries it: the published __init__
imports every API (MoE, GEMM, comm, ...); this one only BatchDecodeWithPagedKVCacheWrapper, from the unchanged
decode.py."""

from .version import __version__ as __version__
from .version import __git_version__ as __git_version__
from .decode import BatchDecodeWithPagedKVCacheWrapper as BatchDecodeWithPagedKVCacheWrapper
'''
JIT_CACHE = '''"""Stand-in for FlashInfer's flashinfer-jit-cache wheel (its ahead-of-time modules; flashinfer.jit.env
reads ``__version__`` and ``get_jit_cache_dir()``), written by tvm_cdna4's benchmarks/flashinfer_carry.py: the modules
built for sm_90a with nvcc {nvcc}, stored here as ``<name>.so.xz`` and unpacked on first use into
``$FLASHINFER_WORKSPACE_BASE/aot/<name>/<name>.so`` (default ``$TMPDIR/flashinfer/aot``); FLASHINFER_CARRIED_JIT=1
hides them (FlashInfer then JITs each from the carried sources)."""

import lzma
import os
import tempfile

__version__ = "{version}+carried"


def get_jit_cache_dir() -> str:
    """The folder of unpacked modules; with FLASHINFER_CARRIED_JIT=1 an empty one (FlashInfer JITs them)."""
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.environ.get("FLASHINFER_WORKSPACE_BASE") or os.path.join(tempfile.gettempdir(), "flashinfer")
    if os.environ.get("FLASHINFER_CARRIED_JIT") == "1":
        return os.path.join(base, "aot-none")
    out = os.path.join(base, "aot")
    for packed in sorted(os.listdir(here)):
        if not packed.endswith(".so.xz"):
            continue
        name = packed[:-len(".so.xz")]
        target = os.path.join(out, name, name + ".so")
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with lzma.open(os.path.join(here, packed)) as src, open(target + ".part", "wb") as dst:
                dst.write(src.read())
            os.replace(target + ".part", target)
    return out
'''
# run in a child process, the unpacked wheel first on sys.path: the import closure, then each module built
CHILD = r'''
import builtins, json, os, subprocess, sys
import flashinfer
root = os.path.dirname(os.path.abspath(flashinfer.__file__))
files = sorted({m.__file__ for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and m.__file__.startswith(root)})
out = dict(python=files, modules=[], read=[])
if sys.argv[1] == "aot":
    import torch
    from flashinfer.jit.attention.modules import gen_batch_decode_module, gen_batch_prefill_module
    opened, real_open = set(), builtins.open
    def tracing_open(path, *args, **kwargs):
        if str(path).startswith(root):
            opened.add(os.path.abspath(str(path)))
        return real_open(path, *args, **kwargs)
    builtins.open = tracing_open
    for kind, kv in json.loads(sys.argv[2]):
        args = (torch.bfloat16, getattr(torch, kv), torch.bfloat16, torch.int32, 128, 128, 0, False, False)
        spec = gen_batch_decode_module(*args) if kind == "decode" else gen_batch_prefill_module("fa2", *args, False)
        spec.build(verbose=False)
        deps = subprocess.run(["ninja", "-C", str(spec.build_dir), "-t", "deps"], capture_output=True, text=True,
                              check=True).stdout.split()
        opened |= {os.path.abspath(d) for d in deps if d.startswith(root)}
        out["modules"].append(dict(kind=kind, kv=kv, name=spec.name, so=str(spec.jit_library_path)))
    out["read"] = sorted(opened)
print("CHILD " + json.dumps(out))
'''
VERIFY = r'''
import json, sys, time
t = time.time()
import torch, flashinfer
from flashinfer.jit import env
out = dict(version=flashinfer.__version__, import_s=time.time() - t, aot_dir=str(env.FLASHINFER_AOT_DIR), loaded={})
def construct():
    return type(flashinfer.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8), "NHD")).__name__
try:
    out["wrapper"] = construct()
except RuntimeError as err:  # a CPU-only torch: no pinned memory; built again without it
    empty = torch.empty
    torch.empty = lambda *a, pin_memory=False, **k: empty(*a, **k)
    out["wrapper"] = construct() + f" (pin_memory dropped: {str(err).splitlines()[0][:80]})"
    torch.empty = empty
from flashinfer.jit.attention.modules import gen_batch_decode_module, gen_batch_prefill_module
for kind, kv in json.loads(sys.argv[1]):
    args = (torch.bfloat16, getattr(torch, kv), torch.bfloat16, torch.int32, 128, 128, 0, False, False)
    spec = gen_batch_decode_module(*args) if kind == "decode" else gen_batch_prefill_module("fa2", *args, False)
    t, aot = time.time(), spec.is_aot
    mod = spec.build_and_load()  # AOT: tvm_ffi.load_module (links without a GPU too); else a JIT build first
    out["loaded"][spec.name] = dict(aot=aot, seconds=round(time.time() - t, 1),
                                    functions=sorted(n for n in ("plan", "run", "paged_run") if hasattr(mod, n)))
print("VERIFY " + json.dumps(out))
'''


def _run(cmd, env=None, tag=None) -> dict | None:
    """``cmd``'s stdout; with ``tag`` the JSON after the line that starts with it."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd[:4])} ...\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    if tag is None:
        return None
    line = next(v for v in done.stdout.splitlines() if v.startswith(tag + " "))
    return json.loads(line[len(tag) + 1:])


def fetch(version: str, tmp: str, wheel: str | None) -> str:
    """The ``flashinfer-python`` wheel: ``wheel`` or ``pip download`` from PyPI (no dependencies)."""
    if wheel:
        return wheel
    _run([sys.executable, "-m", "pip", "download", f"flashinfer-python=={version}", "--no-deps", "-q", "-d", tmp])
    return glob.glob(os.path.join(tmp, f"flashinfer_python-{version}-*.whl"))[0]


def unpack(wheel: str, tmp: str, version: str) -> str:
    """The wheel unpacked under ``tmp/wheel`` with ``INIT`` as ``flashinfer/__init__.py``: its root."""
    import zipfile

    root = os.path.join(tmp, "wheel")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(root)
    with open(os.path.join(root, "flashinfer", "__init__.py"), "w") as f:
        f.write(INIT.format(version=version))
    return root


def deps(tmp: str) -> str:
    """A folder with the packages the device has and this Python lacks (``DEVICE_HAS``), for the child's import."""
    import importlib.util

    target = os.path.join(tmp, "deps")
    missing = [pkg for mod, pkg in DEVICE_HAS.items() if importlib.util.find_spec(mod) is None]
    if missing:
        _run([sys.executable, "-m", "pip", "install", "-q", "--target", target, *missing])
    return target


def child_env(tmp: str, paths, jobs: int) -> dict:
    """The build's environment: nvcc and ninja on PATH, sm_90a, a workspace under ``tmp``, and a link stub for
    ``-lcuda`` where the toolkit has none (a machine without a driver; the modules use no driver symbol, so the
    linker drops it)."""
    cuda = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    stubs = os.path.join(tmp, "stubs")
    os.makedirs(stubs, exist_ok=True)
    if not glob.glob(os.path.join(cuda, "lib64", "stubs", "libcuda.so")):
        subprocess.run(["gcc", "-shared", "-x", "c", "-", "-o", os.path.join(stubs, "libcuda.so"),
                        "-Wl,-soname,libcuda.so.1"], input="void flashinfer_carry_stub(void) {}\n", text=True,
                       check=True)
    env = dict(os.environ, CUDA_HOME=cuda, FLASHINFER_CUDA_ARCH_LIST=ARCH, MAX_JOBS=str(jobs),
               FLASHINFER_WORKSPACE_BASE=os.path.join(tmp, "ws"), FLASHINFER_EXTRA_LDFLAGS=f"-L{stubs}",
               PYTHONPATH=os.pathsep.join(paths), LD_LIBRARY_PATH=os.path.join(cuda, "lib64"))
    env["PATH"] = os.pathsep.join([os.path.join(cuda, "bin"), *(os.path.join(p, "bin") for p in paths),
                                   env.get("PATH", "")])
    return env


def write(root: str, found: dict, dest: str, version: str, nvcc: str) -> dict:
    """``dest``: the closure's Python files, ``flashinfer/jit``, the sources the builds read, the modules (xz),
    ``flashinfer_jit_cache``, the license and ``CARRIED.json``; returns the manifest."""
    shutil.rmtree(dest, ignore_errors=True)
    package = os.path.join(root, "flashinfer")
    keep = set(found["python"]) | set(found["read"])
    keep |= {p for p in glob.glob(os.path.join(package, "jit", "**", "*.py"), recursive=True)}
    for path in sorted(keep):
        target = os.path.join(dest, os.path.relpath(path, root))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(path, target)
    cache = os.path.join(dest, "flashinfer_jit_cache")
    os.makedirs(cache, exist_ok=True)
    modules = []
    for m in found["modules"]:
        with open(m["so"], "rb") as src, lzma.open(os.path.join(cache, m["name"] + ".so.xz"), "wb", preset=9) as dst:
            dst.write(src.read())
        modules.append(dict(kind=m["kind"], kv=m["kv"], name=m["name"], so_bytes=os.path.getsize(m["so"]),
                            xz_bytes=os.path.getsize(os.path.join(cache, m["name"] + ".so.xz"))))
    if modules:
        with open(os.path.join(cache, "__init__.py"), "w") as f:
            f.write(JIT_CACHE.format(version=version, nvcc=nvcc))
    for lic in glob.glob(os.path.join(root, "flashinfer_python-*.dist-info", "licenses", "LICENSE*")):
        shutil.copy2(lic, os.path.join(dest, os.path.basename(lic)))
    manifest = dict(flashinfer=version, arch=ARCH, nvcc=nvcc, date=time.strftime("%Y-%m-%d"), modules=modules,
                    python_files=len(found["python"]), data_files=len(found["read"]), bytes=tree_bytes(dest))
    with open(os.path.join(dest, "CARRIED.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    manifest["bytes"] = tree_bytes(dest)
    return manifest


def probe(path: str) -> int:
    """``VERIFY`` on the carried folder ``path`` under this Python (its PYTHONPATH after ``path``)."""
    paths = [os.path.abspath(path), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    done = subprocess.run([sys.executable, "-c", VERIFY, json.dumps(MODULES)], env=env, capture_output=True, text=True)
    print(done.stdout[-6000:] + done.stderr[-6000:])
    return done.returncode


def tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def nvcc_version(env: dict) -> str:
    out = subprocess.run(["nvcc", "--version"], env=env, capture_output=True, text=True).stdout
    return next((v.split("release ")[1].split(",")[0] for v in out.splitlines() if "release " in v), "?")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=VERSION, help="flashinfer-python's version (the modules are 0.6.6's)")
    ap.add_argument("--dest", default=DEST)
    ap.add_argument("--wheel", default=None, help="a flashinfer-python wheel already here (no download)")
    ap.add_argument("--no-aot", dest="aot", action="store_false", help="no built modules: the device JITs them")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="ninja's parallel compiles")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    ap.add_argument("--probe", metavar="PATH", help="only check a carried folder (on the GPU machine): import, the "
                    "wrapper, each module loaded (AOT) or built (JIT); exit 1 where one fails")
    args = ap.parse_args(argv)
    if args.probe:
        return probe(args.probe)
    tmp = tempfile.mkdtemp(prefix="flashinfer_carry_")
    t0 = time.time()
    try:
        root = unpack(fetch(args.version, tmp, args.wheel), tmp, args.version)
        env = child_env(tmp, [root, deps(tmp)], args.jobs)
        found = _run([sys.executable, "-c", CHILD, "aot" if args.aot else "import", json.dumps(MODULES)], env=env,
                     tag="CHILD")
        manifest = write(root, found, args.dest, args.version, nvcc_version(env))
        venv = dict(env, PYTHONPATH=os.pathsep.join([args.dest, os.path.join(tmp, "deps")]),
                    FLASHINFER_WORKSPACE_BASE=os.path.join(tmp, "verify"))
        check = _run([sys.executable, "-c", VERIFY, json.dumps(MODULES if args.aot else [])], env=venv, tag="VERIFY")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(dict(manifest, verify=check), indent=1))
    size = manifest["bytes"]
    print(f"{args.dest}: FlashInfer {args.version}, {size / 2**20:.2f} MiB ({'within' if size <= BUDGET else 'OVER'} "
          f"the {BUDGET / 2**20:.0f} MiB budget), {len(manifest['modules'])} AOT modules, {time.time() - t0:.0f} s")
    return 0 if size <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
