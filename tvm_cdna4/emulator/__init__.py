"""A CPU wavefront emulator for compiled TIRx kernels.

Targets: ``"gfx950"`` (64-lane waves, ``llvm.amdgcn.*`` semantics in :mod:`.amdgcn`), ``"sm80"``
(CUDA, 32-lane warps as the "waves", ``T.ptx`` / ``T.cuda`` semantics in :mod:`.ptx`) and ``"sm90"``
(the same, lowered for ``sm_90a``, plus TMA, wgmma, mbarrier transaction counts: :mod:`.ptx_tma`,
:mod:`.ptx_wgmma`, :mod:`.ptx_hopper`; docs/emulator.md, "Hopper (sm90)").

``emulate(kernel, *arrays)`` lowers ``kernel`` exactly as ``tvm_tirx.tirx.compile`` does for the
target, takes the device function that would reach LLVM codegen, and executes it on numpy:
workgroups x waves x lanes, lanes vectorized, per-workgroup LDS, the caller's arrays as global
memory (results are written back into them). Checks raise ``EmulationError``: out-of-bounds
global/LDS access, LDS read of never-written bytes, cross-wave LDS races without a barrier or across
a barrier that the writing wave reached with its LDS write still in flight (gfx950: no ``s_waitcnt
lgkmcnt``), a barrier not reached by all waves, a wave-collective instruction with inactive lanes,
two workgroups storing one global byte (:mod:`.globalmem`); sm80: a named-barrier or mbarrier wait
that can never complete (a deadlock), a named-barrier phase left incomplete at the end
(``machine.NamedBarrier``, :mod:`.mbarrier`). A construct it does not run is an
``EmulationUnsupported``.
Arguments are checked against the kernel's parameters before anything runs (:mod:`.arguments`).
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError, EmulationUnsupported

TARGETS = {"gfx950": 64, "sm80": 32, "sm90": 32}  # target -> wave (warp) size
CUDA_ARCH = {"sm80": "sm_80", "sm90": "sm_90a"}  # CUDA targets -> the TIRx arch they lower for
LDS_WAITS = {"gfx950"}  # targets whose LDS writes complete only at a wait (s_waitcnt lgkmcnt)


def _target(target: str):
    from tvm_tirx.target import Target

    if target == "gfx950":
        return Target({"kind": "rocm", "mcpu": "gfx950"})
    if target in CUDA_ARCH:
        return Target({"kind": "cuda", "arch": CUDA_ARCH[target]})
    raise ValueError(f"emulate: target {target!r} is not supported; expected one of {sorted(TARGETS)}")


def _calls(target: str) -> dict:
    """The call table (intrinsic/op name -> handler factory) of a target."""
    if target == "gfx950":
        from . import amdgcn

        return amdgcn.calls()
    from . import ptx

    return ptx.calls()


def device_function(kernel, target: str = "gfx950"):
    """The single device function of ``kernel`` as TIRx hands it to codegen."""
    return lowered_kernel(kernel, target)[0]


def check_backend(kernel, target: str) -> None:
    """A kernel written for another backend than ``target``'s is a ``ContractError`` (``analysis.check_backend``)."""
    from ..errors import presented
    from ..rocm import analysis
    from ..rocm.build import register

    register()
    with presented():  # the ROCm target's construction prints TIRx's warnings too
        analysis.check_backend(kernel, _target(target))


def lowered_kernel(kernel, target: str = "gfx950"):
    """(the single device function of ``kernel`` as TIRx hands it to codegen, the host IRModule)."""
    from ..errors import presented
    from ..rocm import analysis
    from ..rocm.build import register
    from ..tirx_private import lowered_modules, shared_cuda_lowering

    register()
    with presented():  # the ROCm target's construction prints TIRx's warnings too
        tirx_target = _target(target)
        analysis.check_backend(kernel, tirx_target)  # a gfx950 kernel for sm80 (or back): not TIRx's Check failed
        if target == "gfx950":  # the rules tvm_cdna4.build and tvm_tirx.tirx.compile run
            analysis.check_kernel(kernel, tirx_target)
        if target == "gfx950":
            host, modules = lowered_modules(kernel, tirx_target)
        else:  # the CUDA tile patterns' lowering as tvm_cdna4's CUDA builds run it (same output, faster)
            with shared_cuda_lowering():
                host, modules = lowered_modules(kernel, tirx_target)
    funcs = [f for mod in modules.values() for f in mod.functions.values()]
    if len(funcs) != 1:
        raise ValueError(f"emulate: expected one device kernel, found {len(funcs)}")
    if target == "gfx950":
        analysis.check_kernel(funcs[0], tirx_target)
    return funcs[0], host


def host_scalars(host, known: dict[str, int]) -> dict[str, int]:
    """The scalars the host function computes before the launch from ``known`` ones (a dynamic-M
    kernel's ``M``): TIRx hoists expressions of M (``cse_v1 = M * 72``, the grid) into the host and
    passes them as the device function's scalar parameters. Bindings it cannot evaluate (the
    arguments' fields) are left out."""
    import tvm_ffi
    from tvm_tirx import ir

    from .interp import evaluate

    values = dict(known)
    if host is None or not known:
        return values

    def visit(node):
        if node.var.name in values:
            return
        try:
            values[node.var.name] = evaluate(node.value, values)
        except (ValueError, NotImplementedError, TypeError):
            pass

    for func in host.functions.values():
        tvm_ffi.structural_walk(func.body, [(ir.Bind, visit)])
    return values


def _entry_launch(kernel, shapes: dict[str, int]) -> tuple[dict, dict, dict]:
    """Grid, block and cluster (empty: none) of a kernel whose ``tirx.device_entry`` carries a CUDA launch
    configuration: the region's operands, named by its ``cuda.launch_fields`` attribute (``grid.x``,
    ``block.x``, ``cluster.x``, ...). The lowered device function keeps only the block extents, so they are
    read here; a symbolic extent (a dynamic-M grid) is evaluated with the bound ``shapes`` variables."""
    from .interp import evaluate

    grid, block, cluster = {}, {}, {}
    found = {"grid": grid, "block": block, "cluster": cluster}

    def visit(node):
        if type(node).__name__ == "RegionStmt" and node.op.name == "tirx.device_entry":
            fields = node.attrs.get("cuda.launch_fields") if node.attrs is not None else None
            for name, value in zip(fields or (), node.args):
                kind, _, dim = str(name).partition(".")
                if kind in found:
                    found[kind][dim] = evaluate(value, shapes)
        for child in _children(node):
            visit(child)

    visit(kernel.body)
    return grid, block, cluster


def _launch(func, kernel, shapes: dict[str, int]) -> tuple[dict, dict, dict]:
    """The launch of the device function (gfx950: its ``launch_thread`` regions; CUDA: the entry's
    launch configuration, with its cluster shape), symbolic extents evaluated with the bound shape variables."""
    from ..rocm.launch import launch_extents
    from .interp import evaluate

    extents = launch_extents(func.body)
    if not extents.block:  # CUDA: no launch_thread regions in the device function
        return _entry_launch(kernel, shapes)
    if not extents.expressions:
        return dict(extents.grid), dict(extents.block), {}
    # symbolic extents: the kernel's own, which name the shape variables (the lowered ones may name
    # variables the device function binds before its launch)
    source = launch_extents(kernel.body).expressions
    grid = {axis: value if value is not None else evaluate(source[f"blockIdx.{axis}"], shapes)
            for axis, value in extents.grid.items()}
    block = {axis: value if value is not None else evaluate(source[f"threadIdx.{axis}"], shapes)
             for axis, value in extents.block.items()}
    return grid, block, {}


def _children(node):
    if hasattr(node, "seq"):
        return list(node.seq)
    out = []
    for name in ("body", "then_case", "else_case"):
        child = getattr(node, name, None)
        if child is not None and hasattr(child, "same_as"):
            out.append(child)
    return out


def emulate(kernel, *arrays, target: str = "gfx950", max_threads_per_batch: int = 8192,
            uninitialized: str = "error", stats: dict | None = None, workgroups=None,
            fp8_accumulation: int | None = None, after_wait: tuple = (), **scalars):
    """Run ``kernel`` on the CPU. ``arrays`` bind the kernel's tensor parameters in order (numpy,
    C-contiguous, of the parameter's shape and dtype: ``arguments.check_argument``; outputs are
    written in place and must be writable); ``scalars`` bind scalar parameters by name (a keyword
    may also name a shape variable, e.g. a dynamic-M kernel's ``M``: the arrays must agree with it).
    Every argument is checked before anything runs (``arguments``: a ``ValueError`` naming it).
    ``uninitialized="allow"`` lets LDS reads of never-written bytes through (they read zeros; on
    hardware they read stale values), for kernels that load and then ignore such data.
    ``stats``, a dict, receives access counts: for sm80, ``"ldmatrix phases"`` /
    ``"ldmatrix conflicts"`` and ``"cp.async phases"`` / ``"cp.async conflicts"`` (shared-memory
    bank conflicts as excess wavefronts, :mod:`tvm_cdna4.emulator.banks`). ``workgroups`` (linear
    indices, ``blockIdx.x`` fastest): run only those workgroups of the launch, each as the whole launch
    would (its ``blockIdx``, the grid's extents); with ``Window`` arguments (sm80), the part of each
    tensor they touch: a few workgroups of a problem too large to emulate whole. ``fp8_accumulation`` (sm90): fp8
    wgmma keeps that many bits of each addend of a k-step, as Hopper's tensor cores do (14:
    ``isa.wgmma_table.FP8_ACCUMULATION_BITS``; ``ptx_wgmma.fp8_accumulate``; every fp8 wgmma, ``S = Q K^T`` and ``O += P V`` alike); None: f32; on another
    target a ``ContractError`` (gfx950's MFMA and sm80's ``mma.sync`` accumulate in f32). ``after_wait`` (CUDA), names of
    tensor parameters another grid writes (a programmatic dependent launch: ``kernels.sm80.paged_decode_pdl``): a plain
    or ``ld`` read of one by a thread before its ``griddepcontrol.wait`` is an ``EmulationError`` (cp.async and TMA
    reads are not checked). A construct the emulator
    does not run is an ``EmulationUnsupported`` (a ``NotImplementedError``), one sentence."""
    from . import arguments

    arguments.check_options(kernel, target, max_threads_per_batch, uninitialized, stats, TARGETS)
    arguments.check_fp8_accumulation(fp8_accumulation, target)
    check_backend(kernel, target)  # a kernel for another backend: that, before its arguments
    values, fixed = arguments.bind_scalars(kernel, scalars)
    bound = arguments.bind_arrays(kernel, arrays)
    shapes = arguments.bind_shapes([p for p, _ in bound], [a for _, a in bound], fixed)  # a dynamic-M kernel's M
    globals_ = {p.name: _global_buffer(p.name, a, target) for p, a in bound}
    for name in after_wait:
        if name not in globals_:
            raise ValueError(f"emulate: after_wait names {name!r}, not a tensor parameter (the kernel's: {sorted(globals_)})")
        globals_[name].after_wait = True
    func, host = lowered_kernel(kernel, target)
    scalars = {**host_scalars(host, shapes), **values}
    handles = {}
    if target == "sm90":  # the tensor maps the host encodes, bound to the device function's parameters
        from .ptx_tma import tensor_maps

        handles = tensor_maps(host, func, globals_, scalars)
    grid, block, cluster = _launch(func, kernel, shapes)
    chosen = arguments.check_workgroups(workgroups, int(np.prod([grid.get(d, 1) for d in "xyz"])))
    if cluster:  # the CTAs of a cluster run in one batch (emulator.cluster)
        from .cluster import order

        chosen = order(chosen, grid, cluster)
    try:
        _run(func, target, grid, block, globals_, scalars, max_threads_per_batch, uninitialized, stats, chosen, handles,
             fp8_accumulation, cluster)
    except NotImplementedError as e:
        raise EmulationUnsupported(str(e) if isinstance(e, EmulationUnsupported)
                                   else str(e).replace("emulator: ", "emulate: ", 1)) from None
    return arrays


def _global_buffer(name: str, arr, target: str):
    """The emulated global buffer of an argument: the caller's array (written in place), or the part of
    a tensor a ``Window`` holds."""
    from .memory import Buffer

    if not isinstance(arr, Window):
        return Buffer(name, "global", arr.reshape(-1).view(np.uint8).reshape(1, -1))
    if target not in CUDA_ARCH:
        raise ValueError(f"emulate: parameter {name}: a Window (a tensor held in part) is emulated for the CUDA targets only; "
                         f"pass the whole array for {target}")
    origin, nbytes = arr.byte_range()
    return Buffer(name, "global", arr.data.reshape(-1).view(np.uint8).reshape(1, -1), origin=origin, nbytes=nbytes)


def _run(func, target, grid, block, globals_, scalars, max_threads_per_batch, uninitialized, stats, chosen,
         handles=None, fp8_accumulation=None, cluster=None) -> None:
    """The launch, batch after batch of the ``chosen`` workgroups (``max_threads_per_batch`` threads at most,
    whole clusters: ``cluster``, the launch's cluster shape, or empty); ``handles``: values of parameters by index
    (sm90: tensor maps, ``ptx_tma.TensorMap``)."""
    from .interp import Compiler, Env, np_dtype
    from .machine import Machine
    from .memory import Pointer

    wave = TARGETS[target]
    per_group = int(np.prod([block.get(d, 1) for d in "xyz"]))
    batch = max(1, max_threads_per_batch // max(per_group, 1))
    size = int(np.prod([cluster.get(d, 1) for d in "xyz"])) if cluster else 1
    batch = max(size, batch - batch % size)
    table = _calls(target)
    for start in range(0, len(chosen), batch):
        machine = Machine(grid, block, wave, chosen[start:start + batch], globals_, lds_waits=target in LDS_WAITS)
        machine.allow_uninitialized = uninitialized == "allow"
        machine.stats = stats
        machine.integer_shared = target == "sm90"
        machine.fp8_accumulation = fp8_accumulation
        if cluster:
            from .cluster import Cluster

            machine.cluster = Cluster(machine, grid, cluster)
        compiler = Compiler(machine, table)
        compiler.tasks = target in CUDA_ARCH
        params = []
        for i, p in enumerate(func.params):
            base = p.name[:-4] if p.name.endswith("_ptr") else p.name
            if handles and i in handles:
                params.append((compiler.slot(p), handles[i]))
            elif base in globals_:
                params.append((compiler.slot(p), Pointer(globals_[base], 0)))
            elif base in scalars:
                dtype, _ = np_dtype(p.ty.dtype)
                params.append((compiler.slot(p), dtype.type(scalars[base])))
            else:
                raise ValueError(f"emulate: no value for kernel parameter {base}")
        body = compiler.stmt(func.body)
        env = Env(len(compiler.slots))
        for slot, value in params:
            env.values[slot] = value
        body(env, None)
        if target in CUDA_ARCH:
            from .cluster import unfinished
            from .ptx import unfinished_barriers
            unfinished_barriers(machine)
            unfinished(machine)


from .window import Window  # noqa: E402 (a tensor held in part: emulate's arguments)

__all__ = ["EmulationError", "EmulationUnsupported", "Window", "device_function", "emulate"]


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float = 0.0, atol=0.0) -> str:
    """Compare an emulated result with numpy; raise AssertionError naming the first wrong element,
    how many are wrong and the largest error; return a one-line summary when all agree. ``atol``
    may be an array (a per-element bound, e.g. proportional to ``|A| @ |B|``)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(g - w)
    bad = ~(err <= atol + rtol * np.abs(w)) | (np.isnan(g) != np.isnan(w))
    worst = float(np.nanmax(err)) if err.size else 0.0
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements wrong; first {name}{list(idx)} = {got[idx]!r}, "
            f"expected {want[idx]!r}; max |error| {worst:.3g} (rtol {rtol}, atol "
            f"{f'{atol:g}' if np.ndim(atol) == 0 else f'{float(np.asarray(atol)[idx]):.3g} for this element'})")
    return f"{name}: {bad.size} elements match (max |error| {worst:.3g})"


__all__ += ["compare"]
