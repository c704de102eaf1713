"""Host-side helpers for the CUDA GEMM: inputs, numpy reference, compile-and-load, launch, timing.

Nothing here needs a GPU to import. Running needs an NVIDIA GPU, PyTorch (for device memory and
event timing) and the TVM CUDA runtime. Modules are run through ``export_library`` +
``tvm_ffi.load_module`` so that no ORC JIT is needed.
"""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np

def _format(name: str):
    """The element format (``tvm_cdna4.isa.formats``) of ``f16``/``bf16``/``f32`` or a TIR dtype name;
    imported on first use (the benchmark loads this module before it needs a dtype)."""
    from ..isa.formats import by_tir

    return by_tir(name)


def np_dtype(name: str):
    """numpy dtype for f16/bf16/f32 or their TIR names (bf16 through ml_dtypes): ``Format.dtype``."""
    return _format(name).dtype


def torch_dtype(name: str):
    """The torch dtype of the same name as the format's TIR dtype (``torch.float16`` ...)."""
    import torch

    return getattr(torch, _format(name).tir)


def random_inputs(M, N, K, dtype, layout, rng):
    """Random A, B in their storage layout (numpy arrays of the input dtype)."""
    from ..kernels.sm80.gemm import operand_shapes

    a_shape, b_shape = operand_shapes(M, N, K, layout)
    dt = np_dtype(dtype)
    a = rng.uniform(-1, 1, size=a_shape).astype(np.float32).astype(dt)
    b = rng.uniform(-1, 1, size=b_shape).astype(np.float32).astype(dt)
    return a, b


def grid_inputs(M, N, K, dtype, layout, rng):
    """Random A, B (storage layout, input dtype) on the grid of 1/8 in [-1/2, 1/2]: every product is a
    multiple of 2^-6 and every partial sum of K < 2^18 of them is exact in f32, so any summation order
    (the tensor cores', a K split's) gives the exact product: the fused epilogue is then checked
    against its reference with nothing of the GEMM's own rounding in between (``check_fused``)."""
    from ..kernels.sm80.gemm import operand_shapes

    dt = np_dtype(dtype)
    return tuple((rng.integers(-4, 5, size=shape) / 8).astype(np.float32).astype(dt)
                 for shape in operand_shapes(M, N, K, layout))


def fused_inputs(fusion, M, N, out_dtype, rng) -> dict:
    """The fused epilogue's inputs (``kernels.gemm.epilogue.random_inputs``: f32 scales and bias, the
    residual in C's dtype), by name."""
    from ..kernels.gemm.epilogue import random_inputs as epilogue_inputs

    return epilogue_inputs(fusion, M, N, rng, np_dtype(out_dtype))


def check_fused(out, a, b, layout, fusion, inputs, out_dtype, acc_error=0.0) -> tuple[float, bool]:
    """(largest error ratio, whether every element is within ``kernels.gemm.epilogue.error_bound``) of a
    fused kernel's C against ``kernels.gemm.epilogue.reference`` of the float64 product of A and B
    (``acc_error``: a bound of the product's own error, 0 for ``grid_inputs``)."""
    from ..kernels.gemm.epilogue import check

    return check(out, reference(a, b, layout), fusion, inputs, out_dtype, acc_error)


def reference(a, b, layout):
    """float64 ``op(A) @ op(B)`` of inputs stored per ``layout``."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if layout[0] == "t":
        a64 = a64.T
    if layout[1] == "t":
        b64 = b64.T
    return a64 @ b64


def tolerance(out_dtype: str) -> float:
    """Relative Frobenius-norm error allowed against the float64 reference."""
    return {"f32": 1e-4, "f16": 2e-3}.get(_format(out_dtype).name, 1e-2)


def rel_error(out, ref) -> float:
    out = np.asarray(out, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def check_output(out, ref, out_dtype: str) -> tuple[float, bool]:
    """(relative error of ``out`` against ``ref``, whether ``out_dtype``'s tolerance allows it); an
    output with any non-finite element (say, one left poisoned) has error inf and fails."""
    err = rel_error(out, ref)
    return err, err <= tolerance(out_dtype)


def have_cuda_gpu() -> tuple[bool, str]:
    """(available, reason). Looks for a usable NVIDIA GPU without initializing anything heavy."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        try:
            if torch.cuda.is_available() and torch.cuda.device_count() > 0:
                return True, torch.cuda.get_device_name(0)
            return False, "torch sees no CUDA device"
        except Exception as e:  # pragma: no cover
            return False, f"torch.cuda failed: {e}"
    try:
        import tvm_tirx

        dev = tvm_tirx.runtime.cuda(0) if hasattr(tvm_tirx, "runtime") else None
        if dev is not None and dev.exist:
            return True, "tvm cuda device"
    except Exception:
        pass
    return False, "no CUDA device (and no torch to reach one)"


def device_arch() -> str:
    """``sm_XY`` of GPU 0 (so that an sm_80-class kernel runs natively on an sm_90 device)."""
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def export_kernel(exe, path: str) -> str:
    exe.export_library(path)
    return path


def load_kernel(path: str):
    """Load an exported library and return its ``main`` function (the device code through
    ``device_code_cache``)."""
    import tvm_ffi
    import tvm_tirx  # noqa: F401  (registers the CUDA module loader)

    device_code_cache()
    return tvm_ffi.load_module(path)["main"]


def _device_compiler_version() -> str:
    """NVRTC's version where ``cuda-bindings`` has it (part of the device-code cache key)."""
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc-{major}.{minor}"
    except Exception:  # no bindings: the key still holds the source, the config and the versions
        return "unknown"


def device_code_cache():
    """Cache the device compile that loading a CUDA library runs (NVRTC, ~1-3 s a GEMM) on disk,
    keyed by the source's SHA-256, the backend config and the compiler version
    (``tirx_private.cache_cuda_device_code`` over TIRx's callback). Returns the cached
    ``compile(code, config) -> (binary, format)``. Idempotent."""
    import hashlib

    from ..cache import entry_path, load, store
    from ..tirx_private import cache_cuda_device_code

    version = _device_compiler_version()

    def path(code, config):
        return entry_path("cuda-device-code", dict(source=hashlib.sha256(code.encode()).hexdigest(), config=config,
                                                     compiler=version))

    def read(code, config):
        blobs = load(path(code, config), required=("binary", "format"))
        return None if blobs is None else (blobs["binary"], blobs["format"].decode())

    def write(code, config, binary, fmt):
        try:
            store(path(code, config), {"binary": binary, "format": fmt.encode()})
        except OSError:  # a read-only cache costs the next load a compile, not this one
            pass

    return cache_cuda_device_code(read, write)


def precompile(exe) -> None:
    """Compile a build's device code into the device-code cache, so that a later ``load_kernel`` of
    it (in this or another process) skips the compile: worker processes call it after building,
    and the timing process then only loads (``gpu_timer``, ``benchmarks/llm_linear.py``)."""
    if exe.device_config:
        device_code_cache()(exe.source, exe.device_config)


def compile_and_load(M, N, K, dtype, layout, out_dtype, config=None, arch=None, workdir=None, cache=True,
                     tune=False, bias=False, activation=None, residual=False, row_scale=False, col_scale=False,
                     fusion=None):
    """Build (``kernels.sm80.gemm.build``: the planner's choice without a ``config``, ``tune`` as there; the
    fused epilogue by keywords or ``fusion``, as there), export and load the kernel: a :class:`Kernel`,
    called with A, B, C and the epilogue's inputs like ``main``."""
    from ..kernels.sm80.gemm import build, plan
    from ..kernels.gemm.epilogue import fusion_of

    fusion = fusion_of(bias, activation, residual, row_scale, col_scale, fusion)

    arch = arch or device_arch()
    if tune:  # the candidates built in parallel, timed here, the winner stored (as build(tune=True))
        problem = (M, N, K, dtype, layout, out_dtype)
        config = tune_problems([problem], arch)[problem]["config"]
    exe = build(M, N, K, dtype, layout, out_dtype, config, arch=arch, cache=cache, fusion=fusion)
    return Kernel(load_build(exe, f"gemm_{M}_{N}_{K}_{dtype}_{layout}_{out_dtype}_", workdir),
                  plan(M, N, K, dtype, layout, out_dtype, exe.config, fusion=fusion))


def load_build(exe, prefix: str = "gemm_", workdir=None):
    """Export a ``CudaBuild`` to a fresh file (overwriting a library that is already loaded crashes
    the process) and load its ``main`` (``load_kernel``)."""
    workdir = workdir or tempfile.mkdtemp(prefix="cuda_gemm_")
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".so", dir=workdir)
    os.close(fd)
    export_kernel(exe, path)
    return load_kernel(path)


class DynamicKernel:
    """A dynamic-M GEMM (``kernels.sm80.gemm.build_dynamic``, a ``DynamicGemm``) on the GPU: each M bucket's
    kernel is built (through the build cache), exported and loaded on its first launch, then reused
    for every M of the bucket. ``launch(a, b, c, *inputs)`` takes torch tensors (A, B, C, then the
    kernel's other inputs in its parameter order: the fused epilogue's in ``PARAM_ORDER``; a grouped
    GEMM's offsets first, ``kernels.sm80.gemm.build_grouped``, whose T is C's rows) and launches on torch's
    current CUDA stream (``Kernel.launch``)."""

    def __init__(self, dynamic, workdir=None, device="cuda"):
        self.dynamic, self.workdir, self.device = dynamic, workdir, device
        self._loaded: dict = {}

    def kernel(self, M: int) -> Kernel:
        """The loaded kernel of ``M``'s bucket (built and loaded on first use)."""
        bucket = self.dynamic.bucket(M)
        if bucket not in self._loaded:
            fn = load_build(self.dynamic.kernel_for(M), f"gemm_dynamic_{bucket.lo}_{bucket.hi}_", self.workdir)
            self._loaded[bucket] = Kernel(fn, self.dynamic.plan(M), self.device)
        return self._loaded[bucket]

    def launch(self, a, b, c, *inputs) -> None:
        """C = A @ B (+ the fused epilogue) for M = C's rows, on torch's current stream."""
        self.kernel(int(c.shape[0])).launch(a, b, c, *inputs)


def gpu_timer(M, N, K, dtype, layout, out_dtype, arch=None, rep_ms: int = 40):
    """``timer(config)`` for ``kernels.sm80.gemm.tune_config``: seconds of one launch of the kernel built with
    ``config`` on this machine's GPU (``bench_ms``, L2 flushed; random inputs made once), inf where
    its C does not match the f32 product."""
    data = _ProblemData((M, N, K, dtype, layout, out_dtype))

    def timer(config) -> float:
        fn = compile_and_load(M, N, K, dtype, layout, out_dtype, config, arch)
        s = data.time(fn, out_dtype, rep_ms)
        return float("inf") if s is None else s
    return timer


def _build_candidate(job):
    """Worker process of ``tune_problems``: build, export and precompile one candidate;
    (index, path or None, error or None, worker seconds)."""
    import time

    index, (M, N, K, dtype, layout, out_dtype), config, arch, workdir = job
    from ..kernels.sm80.gemm import build, config_from_dict

    t0 = time.perf_counter()
    try:
        exe = build(M, N, K, dtype, layout, out_dtype, config_from_dict(config), arch=arch)
        path = os.path.join(workdir, f"cand_{index}.so")
        exe.export_library(path)
        precompile(exe)
        return index, path, None, time.perf_counter() - t0
    except Exception as e:  # a candidate that fails to build is not timed
        return index, None, f"{type(e).__name__}: {e}", time.perf_counter() - t0


class _ProblemData:
    """One tuning problem's GPU inputs, C and f32 reference, made when its first candidate is built."""

    def __init__(self, prob):
        import torch

        from ..kernels.sm80 import gemm as cg

        M, N, K, dtype, layout, out_dtype = prob
        a_shape, b_shape = cg.operand_shapes(M, N, K, layout)
        self.a = torch.empty(a_shape, dtype=torch_dtype(dtype), device="cuda").uniform_(-1, 1)
        self.b = torch.empty(b_shape, dtype=torch_dtype(dtype), device="cuda").uniform_(-1, 1)
        self.c = torch.empty((M, N), dtype=torch_dtype(out_dtype), device="cuda")
        a32 = self.a.float() if layout[0] == "n" else self.a.float().T
        self.ref = a32 @ (self.b.float() if layout[1] == "n" else self.b.float().T)

    def time(self, fn, out_dtype, rep_ms) -> float | None:
        """Seconds of one launch of ``fn`` (``bench_ms``, L2 flushed), or None when its C (poisoned
        with NaN first) does not match the f32 product."""
        import torch

        launch = Launcher(fn, self.a, self.b, self.c)
        self.c.fill_(float("nan"))
        launch()
        err = float(torch.linalg.norm(self.c.float() - self.ref) / torch.linalg.norm(self.ref).clamp_min(1e-30))
        if not err <= tolerance(out_dtype):
            return None
        return bench_ms(launch, warmup_ms=max(2, rep_ms // 4), rep_ms=rep_ms) * 1e-3


def build_cost(config) -> float:
    """A relative build time of a candidate, to start the slowest builds first (``tune_problems``):
    the tile GEMM's unrolled k-loop grows with its warp tile and stages; a decode kernel is small."""
    if getattr(config, "kind", "tile") == "decode":
        return 1.0
    return 2.0 + config.warp_m * config.warp_n * config.stages / 1024


def tune_problems(problems, arch=None, top=None, jobs=None, sms=None, rep_ms: int = 10, stats=None) -> dict:
    """Tune several problems at once: ``kernels.sm80.gemm.tune_candidates`` of each ``(M, N, K, dtype,
    layout, out_dtype)``, built and their device code compiled in ``jobs`` worker processes (the
    slowest builds first, ``build_cost``), each loaded, checked against the f32 product and timed
    here (``bench_ms``, L2 flushed) as soon as it is built, so the GPU timing overlaps the builds;
    then the fastest is stored per problem through ``kernels.sm80.gemm.tune_config`` (the tuning cache that
    ``build`` reads). Returns ``{problem: {"config": GemmConfig | DecodeConfig, "seconds": {config:
    s}}}``; ``stats`` (a dict) receives the wall seconds (``seconds``), those until the last
    candidate was built and timed (``pool_s``), the workers' summed build seconds (``worker_s``),
    this process's seconds loading, checking and timing (``timing_s``), the candidates and the
    failed builds (``kernels``, ``failed``) and the worker count (``workers``)."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    from ..kernels.sm80 import gemm as cg

    t0 = time.perf_counter()
    arch = arch or device_arch()
    top, sms = top or cg.TUNE_TOP, sms or cg.H200_SMS
    problems = [tuple(p) for p in problems]
    owner = [(prob, cfg) for prob in problems for cfg in cg.tune_candidates(*prob, sms=sms, top=top)]
    workdir = tempfile.mkdtemp(prefix="cuda_tune_")
    jobs_list = sorted(((i, prob, cfg.as_dict(), arch, workdir) for i, (prob, cfg) in enumerate(owner)),
                       key=lambda j: -build_cost(owner[j[0]][1]))
    data, seconds = {}, {prob: {} for prob in problems}
    worker_s, timing_s, failed = 0.0, 0.0, 0
    workers = jobs or max(1, (os.cpu_count() or 2) - 2)  # a core for this process's timing
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        for fut in cf.as_completed([pool.submit(_build_candidate, job) for job in jobs_list]):
            index, path, _err, sec = fut.result()
            worker_s += sec
            if path is None:
                failed += 1
                continue
            t1 = time.perf_counter()
            prob, cfg = owner[index]
            M, N, K, dtype, layout, out_dtype = prob
            if prob not in data:
                data[prob] = _ProblemData(prob)
            fn = Kernel(load_kernel(path), cg.plan(M, N, K, dtype, layout, out_dtype, cfg, sms))
            s = data[prob].time(fn, out_dtype, rep_ms)
            if s is not None:  # a candidate is timed only once its C matches the f32 product
                seconds[prob][cfg] = s
            timing_s += time.perf_counter() - t1
    pool_s = time.perf_counter() - t0
    result = {}
    for prob in problems:
        best = cg.tune_config(*prob, arch=arch, sms=sms, top=top,
                              timer=lambda cfg, sec=seconds[prob]: sec.get(cfg, float("inf")))
        result[prob] = {"config": best, "seconds": seconds[prob]}
    if stats is not None:
        stats.update(seconds=time.perf_counter() - t0, pool_s=pool_s, worker_s=worker_s, timing_s=timing_s,
                     kernels=len(owner), failed=failed, workers=workers)
    return result


WORKSPACE = ("W", "S")
"""The split-K parameters (workspace, tickets) that :class:`Kernel` owns: they follow the caller's."""


class Kernel:
    """A loaded GEMM called with A, B, C and the fused epilogue's inputs (``GemmPlan.params`` up to the
    workspace: ``kernels.gemm.epilogue.PARAM_ORDER``; DLPack / tvm_ffi tensors); a split-K plan's
    workspace ``W`` and ticket counters ``S`` are allocated zeroed on the GPU once and passed after
    them (every launch leaves them zero again; launches that may overlap, on two streams, would
    share them)."""

    def __init__(self, fn, p, device="cuda"):
        self.fn, self.plan, self.device = fn, p, device
        self._extra = None

    @property
    def inputs(self) -> tuple[str, ...]:
        """The parameters the caller passes, in order: ``A, B, C`` and the epilogue's inputs."""
        return tuple(q.name for q in self.plan.params if q.name not in WORKSPACE)

    def workspace(self) -> tuple:
        """The workspace as torch tensors (none without a K split)."""
        self.extra()
        return tuple(self._extra[0])

    def extra(self) -> tuple:
        """The workspace tensors passed after the caller's (none without a K split), as tvm_ffi tensors."""
        if self._extra is None and not any(q.name in WORKSPACE for q in self.plan.params):
            self._extra = ((), ())
        if self._extra is None:
            import torch
            import tvm_ffi

            # uint32 counters: zeroed as int32, then viewed as uint32 (DLPack then says uint32, as main expects)
            bufs = [torch.zeros(q.shape, dtype=torch.float32, device=self.device) if q.dtype == "float32" else
                    torch.zeros(q.shape, dtype=torch.int32, device=self.device).view(torch.uint32)
                    for q in self.plan.params if q.name in WORKSPACE]
            self._extra = (bufs, tuple(tvm_ffi.from_dlpack(t) for t in bufs))
        return self._extra[1]

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f"the kernel takes {len(self.inputs)} tensors ({', '.join(self.inputs)}), got {len(args)}")
        self.fn(*args, *self.extra())

    def launch(self, *tensors) -> None:
        """Launch on torch tensors (``inputs``: A, B, C, the epilogue's; the workspace follows) on torch's
        current CUDA stream: tvm_ffi reads the stream of the first CUDA tensor argument from torch and
        sets it as the environment stream (``TVMFFIEnvSetStream``) for the call, which TIRx's launch
        uses, so a CUDA-graph capture records the launch. No host synchronization."""
        if len(tensors) != len(self.inputs):
            raise TypeError(f"the kernel takes {len(self.inputs)} tensors ({', '.join(self.inputs)}), got {len(tensors)}")
        self.fn(*tensors, *self.workspace())


def epilogue_args(fusion, inputs: dict) -> tuple:
    """The epilogue's inputs of ``fusion`` from ``inputs`` (by name), in ``PARAM_ORDER``; a missing one,
    or one the fusion does not read, is a ValueError naming it."""
    wanted = fusion.inputs() if fusion is not None else ()
    missing = [n for n in wanted if n not in inputs]
    extra = [n for n in inputs if n not in wanted]
    if missing or extra:
        raise ValueError(f"fused epilogue {fusion.describe() if fusion else 'none'!r} reads {list(wanted)}: "
                         f"missing {missing}, not read {extra}")
    return tuple(inputs[n] for n in wanted)


class Launcher:
    """Calls a loaded kernel on torch tensors (converted once through DLPack): A, B, C, then the
    fused epilogue's inputs in ``kernels.gemm.epilogue.PARAM_ORDER`` (``inputs``: by name)."""

    def __init__(self, fn, a, b, c, inputs: dict | None = None):
        import tvm_ffi

        plan = getattr(fn, "plan", None)
        fusion = getattr(plan, "fusion", None)
        tensors = (a, b, c, *epilogue_args(fusion, inputs or {}))
        self.fn = fn
        self.keep = tensors
        self.args = tuple(tvm_ffi.from_dlpack(t) for t in tensors)

    def __call__(self):
        self.fn(*self.args)


def to_torch(arr):
    """A numpy array (f16, bf16, f32) as a CUDA tensor of the same dtype and shape."""
    import torch

    arr = np.ascontiguousarray(arr)
    if arr.dtype.itemsize == 2:
        return torch.from_numpy(arr.view(np.int16)).view(torch_dtype_for(arr)).cuda()
    return torch.from_numpy(arr).cuda()


def torch_inputs(fusion, M, N, out_dtype, seed: int = 0) -> dict:
    """The fused epilogue's inputs (``fused_inputs``) as CUDA tensors, by name: what a timed launch of a
    fused kernel passes (``{}`` for no fusion)."""
    if fusion is None or fusion.empty:
        return {}
    return {k: to_torch(v) for k, v in fused_inputs(fusion, M, N, out_dtype, np.random.default_rng(seed)).items()}


def run_numpy(fn, a, b, M, N, out_dtype, inputs: dict | None = None):
    """Copy numpy inputs (A, B and the fused epilogue's ``inputs`` by name) to the GPU, poison C with
    NaN, launch once, return C as float32 numpy."""
    import torch

    tc = torch.full((M, N), float("nan"), dtype=torch_dtype(out_dtype), device="cuda")
    Launcher(fn, to_torch(a), to_torch(b), tc, {k: to_torch(v) for k, v in (inputs or {}).items()})()
    torch.cuda.synchronize()
    return tc.float().cpu().numpy()


def to_device(arr):
    """A numpy array of any kernel argument's dtype (16-bit floats, f32, int32, the uint32 ticket
    counters) as a CUDA tensor of the same dtype and shape."""
    import torch

    arr = np.ascontiguousarray(arr)
    if arr.dtype == np.uint32:  # torch reads no uint32 numpy array: its bits as int32, viewed back
        return torch.from_numpy(arr.view(np.int32)).cuda().view(torch.uint32)
    return to_torch(arr)


def to_host(t, dtype):
    """A CUDA tensor back as a numpy array of ``dtype`` (bf16 through its bits)."""
    import torch

    if np.dtype(dtype).itemsize == 2:
        return t.view(torch.int16).cpu().numpy().view(dtype)
    return t.cpu().numpy().astype(dtype, copy=False)


def plan_builder(plan):
    """The ``build_plan(plan, arch, cache=...)`` of the GEMM target whose planner made ``plan``: its row
    of ``kernels.gemm.TARGETS`` (``target_of``), so a new CUDA target needs no edit here."""
    from ..kernels.common import target_of
    from ..kernels.gemm import TARGETS

    return TARGETS[target_of(plan)].verb("build_plan")


def run_gemm(plan, arguments, arch=None, cache: bool = True) -> None:
    """Run a GEMM plan of a CUDA target (sm80, sm90) on the NVIDIA GPU: ``plan_builder(plan)(plan, arch)``
    (default ``device_arch()``; through the build cache unless ``cache`` is False), loaded, launched once on ``arguments``, the
    numpy arrays of ``plan.params`` in signature order (``kernels.gemm.GemmData.arguments``: A, B, C,
    the offsets, the fused inputs, a split-K workspace), copied to the GPU; C is copied back into its
    numpy array in place. The ``run`` of ``kernels.sm80.gemm_target.execute``: what
    ``kernels.gemm.validate(problem, "sm80", ..., run=run_gemm)`` runs on a GPU."""
    import torch
    import tvm_ffi

    fn = load_build(plan_builder(plan)(plan, arch or device_arch(), cache=cache))
    tensors = [to_device(x) for x in arguments]
    fn(*(tvm_ffi.from_dlpack(t) for t in tensors))
    torch.cuda.synchronize()
    for param, x, t in zip(plan.params, arguments, tensors):
        if param.name == "C":
            x[...] = to_host(t, x.dtype)


def bench_gemm(plan, rows: int, group_rows=None, arch=None) -> float:
    """Median ms of one launch of a GEMM plan of a CUDA target (``plan_builder``: built for ``arch``, default the GPU's)
    on random CUDA tensors of its parameters, ``rows`` rows where the plan's M is dynamic (a grouped
    plan's T; its offsets from ``group_rows``), the L2 flushed before each (``bench_ms``); the split-K
    workspace is the ``Kernel``'s."""
    import torch
    import tvm_ffi

    from ..kernels.gemm.grouped import OFFSETS, offsets_of

    kernel = Kernel(load_build(plan_builder(plan)(plan, arch or device_arch())), plan)
    tensors = []
    for param in plan.params:
        if param.name in WORKSPACE:
            continue
        if param.name == OFFSETS:
            tensors.append(torch.tensor(offsets_of(list(group_rows)), dtype=torch.int32, device="cuda"))
            continue
        shape = tuple(x if isinstance(x, int) else rows for x in param.shape)
        tensors.append(torch.empty(shape, dtype=getattr(torch, param.dtype), device="cuda").uniform_(-1, 1))
    packed = [tvm_ffi.from_dlpack(t) for t in tensors]
    return bench_ms(lambda: kernel(*packed))


def torch_dtype_for(arr):
    """The torch dtype of a numpy array's elements."""
    return torch_dtype(np.asarray(arr).dtype.name)


TIMING_METHODS = ("flush", "clean", "warm")


def estimate_ms(fn, calls: int = 5) -> float:
    """A rough time of one ``fn()`` call in ms (one call first, then ``calls`` event-timed ones)."""
    import torch

    fn()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(calls):
        fn()
    t1.record()
    torch.cuda.synchronize()
    return max(t0.elapsed_time(t1) / calls, 1e-3)


def bench_ms(fn, warmup_ms: int = 25, rep_ms: int = 200, method: str = "flush") -> float:
    """Median time of one ``fn()`` call in ms, by one of ``TIMING_METHODS``:

    * ``flush``: CUDA events around each call, the L2 flushed before every call (a 256 MB buffer
      zeroed; ``triton.testing.do_bench`` when Triton is installed). The flush leaves the L2 full
      of dirty lines that the timed kernel's first loads evict.
    * ``clean``: CUDA events around each call; before every call the L2 is filled with *clean*
      lines by reading a 256 MB buffer (a sum over it), so the timed call finds none of its inputs
      in the L2 and, unlike ``flush``, no dirty lines to write back while it streams. This is what
      a decode step sees (the previous layer's weights were read, not written); ``flush`` charges a
      memory-bound kernel for up to an L2 (60 MB on the H200) of write-backs.
    * ``warm``: CUDA events around each of many back-to-back calls after a warm-up, no flush (the
      method of the project's H200 baseline measurements: median of 50 event-timed runs after a
      warm-up): the L2 keeps what the previous call left.

    (CUDA-graph replay is not offered: a TIRx kernel launched through tvm_ffi is not captured on
    torch's capture stream, so the graph would time nothing.)
    """
    if method not in TIMING_METHODS:
        raise ValueError(f"timing method {method!r}: use one of {TIMING_METHODS}")
    import torch

    if method == "flush":  # do_bench zeroes its flush buffer: the dirty-L2 variant
        try:
            import triton

            return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
        except ImportError:
            pass
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda") if method == "flush" else None
    if method == "clean":
        src = torch.ones(64 << 20, dtype=torch.float32, device="cuda")  # 256 MB, read, never written
        dst = torch.empty((), dtype=torch.float32, device="cuda")
    est = estimate_ms(fn)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = max(10, int(rep_ms / est))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        elif method == "clean":
            torch.sum(src, dim=0, out=dst)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(np.median([s.elapsed_time(e) for s, e in zip(starts, ends)]))


def ptxas_usage(log: str) -> dict:
    """Registers and spill bytes from a ``ptxas -v`` log (None where the log does not say)."""
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return dict(registers=int(regs.group(1)) if regs else None,
                spill_stores=int(spill.group(1)) if spill else None,
                spill_loads=int(spill.group(2)) if spill else None)


def tflops(M, N, K, ms: float) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12
