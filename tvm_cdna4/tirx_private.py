"""Every use of TIRx / tvm_ffi internals, in one place (pinned to apache-tvm-tirx 0.1.0a4).

1. ROCm thread scopes. ``ThreadScope`` is a C++-backed ``tvm_ffi`` enum with no public way to add
   entries; we add ``rocm.kernel/workgroup/wave/thread`` through the private enum helpers of
   ``tvm_ffi.dataclasses.enum``.
2. The wave lane / wave id layout axes get their thread classification through the enum attribute
   columns (``Axis.def_attr``), as TIRx's C++ does for CUDA axes.
3. The CUDA tile-pattern ``Context``/``Region`` (``tvm_tirx.backend.cuda.tile.patterns.common``)
   are subclassed by ``tvm_cdna4.patterns.common``; the members we rely on are listed in
   ``CUDA_COMMON_MEMBERS``.

4. ``lowered_device_modules`` intercepts the private codegen step of ``tvm_tirx.tirx.compile`` on
   the capturing thread only.
5. ``cuda_compile_log`` calls the private compiler drivers of ``tvm_tirx.support.nvcc``
   (``_compile_cuda_nvrtc`` / ``_compile_cuda_nvcc``), whose log the public ``compile_source`` drops.
6. ``wrap_global_func`` wraps ``target.build.rocm``, the global function TIRx's C++ ``codegen.Build``
   looks up for every ROCm device module (every route into ROCm codegen passes it), and the two
   callbacks the ROCm codegen calls, ``tvm_callback_rocm_bitcode_path`` / ``tvm_callback_rocm_link``
   (TIRx's own: ``tvm_tirx.support.rocm.callback_rocm_bitcode_path`` / ``callback_rocm_link``).

7. ``shared_cuda_lowering`` swaps the CUDA tile-pattern ``Context.__init__`` and the mma and
   ldmatrix patterns' ``lower`` for the duration of one of our CUDA builds (``CUDA_CONTEXT_INIT_SHA256``
   and ``CUDA_LOWER_SHA256`` pin the originals' sources).

9. ``decode_ptx_call`` splits a ``T.ptx`` call's arguments by TIRx's private encoding (the PTX
   engine's ``_emit``, ``PTX_EMIT_SHA256``) with the instruction table's ``mods`` / ``operand_layout``;
   the emulator (``tvm_cdna4.emulator.ptx``) reads calls only through it.
10. ``wrap_tile_dispatch`` replaces the ``FTileOpDispatch`` attribute of one tile op (TIRx's
    ``Instruction.register`` sets it to ``tvm_tirx.tirx.tile.dispatch.run_dispatch``, which wraps
    every error of ``lower()`` in a ``RuntimeError``; ``RUN_DISPATCH_SHA256`` pins its source).
11. ``cache_cuda_device_code`` wraps ``tvm_callback_cuda_compile`` (``CUDA_COMPILE_CALLBACK``), the
    global function TIRx's CUDA module loader calls with a device group's source and its backend
    config when a library holding CUDA C is loaded; ``cuda_device_group`` reads the same two strings
    from a built module (``inspect_source()`` / ``inspect_source("backend_config")``), so worker
    processes can compile what the timing process will load.
12. ``wrap_target_init`` wraps ``tvm_tirx.target.Target.__init__`` (``TARGET_INIT_SHA256``), where
    TIRx's C++ ROCm target parser prints its no-ROCm warning.

``tests/test_tirx_private.py`` fails loudly when any of these change.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import types
import typing

# 0. While this module's first import runs, it may be what imports TIRx first: TIRx's backend
#    autoload then registers this package, which needs sections 1-6 of this module. On the importing
#    thread ``rocm.build.register`` queues itself in ``WHEN_WHOLE`` instead; the queue runs at the
#    end of the module (every section exists) and is then None.
WHEN_WHOLE: tuple[int, list] | None = (threading.get_ident(), [])

from tvm_ffi.dataclasses import enum as _ffi_enum  # noqa: E402
from tvm_tirx.backend.cuda.tile.patterns import common as cuda_common  # noqa: E402
from tvm_tirx.backend.cuda.tile.patterns import ldmatrix as cuda_ldmatrix  # noqa: E402
from tvm_tirx.backend.cuda.tile.patterns import mma as cuda_mma  # noqa: E402
from tvm_tirx.tirx.layout import Axis  # noqa: E402
from tvm_tirx.tirx.thread_scope import ThreadScope  # noqa: E402

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


class _ProcessSwap:
    """A process-wide swap of TIRx functions, made while any thread needs it: installed when the
    first user enters, undone when the last one leaves. Users keep their own state thread-local,
    so builds on other threads that reach a swapped function get TIRx's behaviour from it
    (sections 4, 7 and 8)."""

    def __init__(self, install, uninstall):
        self.install, self.uninstall = install, uninstall
        self.lock = threading.Lock()
        self.users = 0

    @contextlib.contextmanager
    def held(self):
        with self.lock:
            if self.users == 0:
                self.install()
            self.users += 1
        try:
            yield
        finally:
            with self.lock:
                self.users -= 1
                if self.users == 0:
                    self.uninstall()


# 4. The device TIR that reaches codegen. ``tvm_tirx.tirx.compile`` runs the pipeline, splits host
#    and device modules, finalizes them and hands them to the private ``_codegen_host_and_device``;
#    we stop there and keep the finalized device modules (the emulator executes them; the host module
#    too, whose bindings give a dynamic-M kernel's scalar device parameters). While any
#    thread captures, that function is replaced by ``_capture_or_codegen``, which stops only the
#    compiles of the capturing threads (a thread-local) and hands every other thread's to TIRx's.
COMPILE_MODULE = "tvm_tirx.tirx._compile"
CODEGEN_HOOK = "_codegen_host_and_device"
_CAPTURING = threading.local()  # .modules: the dict this thread's compile fills; None when not capturing
_CODEGEN: dict = {}  # "original": TIRx's function while the swap is installed


class _Captured(Exception):
    pass


def _capture_or_codegen(host_mod, device_mod_dict, target_host):
    captured = getattr(_CAPTURING, "modules", None)
    if captured is None:  # another thread's compile: TIRx's codegen, unchanged
        return _CODEGEN["original"](host_mod, device_mod_dict, target_host)
    captured.update(device_mod_dict)
    _CAPTURING.host = host_mod
    raise _Captured


def _compile_module():
    import importlib

    return importlib.import_module(COMPILE_MODULE)


def _install_capture():
    _CODEGEN["original"] = getattr(_compile_module(), CODEGEN_HOOK)
    setattr(_compile_module(), CODEGEN_HOOK, _capture_or_codegen)


def _uninstall_capture():
    setattr(_compile_module(), CODEGEN_HOOK, _CODEGEN.pop("original"))


_CAPTURE_SWAP = _ProcessSwap(_install_capture, _uninstall_capture)


def lowered_device_modules(func, target) -> dict:
    """{target: device IRModule} exactly as ``tvm_tirx.tirx.compile(func, target, pipeline="tirx")``
    would pass them to LLVM/CUDA codegen. Only this thread's compile is stopped there."""
    return lowered_modules(func, target)[1]


def lowered_modules(func, target) -> tuple:
    """(host IRModule, {target: device IRModule}) as ``tvm_tirx.tirx.compile`` would pass them to
    codegen (``lowered_device_modules``)."""
    import tvm_tirx

    captured: dict = {}
    with _CAPTURE_SWAP.held():
        outer = getattr(_CAPTURING, "modules", None)
        _CAPTURING.modules, _CAPTURING.host = captured, None
        try:
            tvm_tirx.tirx.compile(func, target=target, pipeline="tirx")
        except _Captured:
            pass
        finally:
            _CAPTURING.modules = outer
    return _CAPTURING.host, captured


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


def _run_when_whole() -> None:
    global WHEN_WHOLE
    queued, WHEN_WHOLE = WHEN_WHOLE[1], None
    for run in queued:
        run()



# 7. One analyzer for all CUDA tile-pattern contexts of a build. TIRx's ``Context.__init__`` gives
#    every ``T.cuda.tile.apply`` a fresh analyzer and adds the range of every variable in scope
#    (the launch axes, then ``sctx.var_range_map`` in order) with a synchronization after each,
#    then its group axes: quadratic in the variables in scope, and an unrolled GEMM main loop has
#    ~1000 of them at each of its ~500 applies. Inside ``shared_cuda_lowering()`` the
#    contexts share one analyzer and one growing list of the enclosing variables' premises: a
#    variable's premise (and static range) is computed once, when it first appears, in the order
#    TIRx adds it; each context's premises are a child of that list (its own prefix) followed by
#    its group axes, exactly the premises TIRx's own init gives it, so every query answers as
#    before (tests/kernels/sm80/test_cuda_gemm_golden.py: byte-identical CUDA).
CUDA_CONTEXT_INIT_SHA256 = "b3dd3eacb01095ea4740bab87f6cad11239f3f8e04fdf4521b8f5501dd999986"
_SHARED = threading.local()


def cuda_context_init_sha256() -> str:
    import hashlib
    import inspect

    return hashlib.sha256(inspect.getsource(_ORIGINAL_CONTEXT_INIT).encode()).hexdigest()


_ORIGINAL_CONTEXT_INIT = CudaContext.__init__


class _WithoutRanges:
    """``sctx`` seen without launch axes and enclosing variables (TIRx's init then adds only the
    group axes); everything else is read from the real dispatch context."""

    def __init__(self, sctx):
        self._sctx = sctx
        self.launch_params = {}
        self.var_range_map = {}

    def __getattr__(self, name):
        return getattr(self._sctx, name)


class _SharedRanges:
    """The premises of the launch axes and the enclosing variables seen so far in one build."""

    def __init__(self):
        from tvm_tirx.sym import Analyzer

        self.analyzer = Analyzer()
        self.launch_key = None
        self.keys: list[tuple[int, int]] = []  # (variable, range) handles, in TIRx's order
        self.entries: list[tuple] = []  # (variable, range, premise, static range or None)
        self.premises = None

    def _restart(self, sctx, launch_key, keep: int) -> None:
        from tvm_tirx.ir import Range
        from tvm_tirx.sym import ConstraintContext, RangeConstraint

        self.premises = ConstraintContext()
        for var, extent in sctx.launch_params.values():
            self.premises.append(RangeConstraint(var, Range(0, extent)))
        self.launch_key, self.keys, self.entries = launch_key, self.keys[:keep], self.entries[:keep]
        for entry in self.entries:
            self.premises.append(entry[2])

    def enter(self, ctx, sctx) -> dict:
        """Bring the premises up to ``sctx``'s variables; returns the context's static ranges."""
        from tvm_tirx.ir import IntImm, Range
        from tvm_tirx.sym import RangeConstraint

        launch_key = tuple((k, v.__chandle__(), e.__chandle__()) for k, (v, e) in sctx.launch_params.items())
        items = list(sctx.var_range_map.items())
        common = 0
        if launch_key == self.launch_key:
            while common < min(len(items), len(self.keys)) and self.keys[common] == (
                    items[common][0].__chandle__(), items[common][1].__chandle__()):
                common += 1
        if launch_key != self.launch_key or common < len(self.keys):
            self._restart(sctx, launch_key, common)
        for var, bound in items[common:]:
            premise = RangeConstraint(var, Range.from_min_extent(ctx.index_coordinates(bound.begin), bound.extent))
            self.premises.append(premise)
            self.analyzer.sync_constraint_context(self.premises)
            low, extent = (self.analyzer.simplify(x) for x in (bound.begin, bound.extent))
            static = None
            if isinstance(low, IntImm) and isinstance(extent, IntImm):
                static = range(int(low), int(low) + int(extent))
            self.entries.append((var, bound, premise, static))
            self.keys.append((var.__chandle__(), bound.__chandle__()))
        return {entry[0]: entry[3] for entry in self.entries[: len(items)] if entry[3] is not None}


def _shared_context_init(self, sctx, atom_scope="thread"):
    shared = getattr(_SHARED, "ranges", None)
    if shared is None or type(self) is not CudaContext or sctx.scope_kind == "cluster":
        return _ORIGINAL_CONTEXT_INIT(self, sctx, atom_scope)
    _ORIGINAL_CONTEXT_INIT(self, _WithoutRanges(sctx), atom_scope)
    from tvm_tirx.sym import ConstraintContext

    group_premises = list(self.constraints)
    self.sctx = sctx
    self.static_ranges = shared.enter(self, sctx)
    # this context's premises: the shared prefix up to its own variables, then its group axes
    self.constraints = ConstraintContext(shared.premises, len(sctx.launch_params) + len(sctx.var_range_map))
    for premise in group_premises:
        self.constraints.append(premise)
    self.analyzer = shared.analyzer
    self.analyzer.sync_constraint_context(self.constraints)


# 7b. One lowering per distinct mma / ldmatrix apply. An unrolled k-loop repeats the same apply
#    (same opcode, scope and operand regions, over fresh views of the same registers and shared
#    tiles) once per k-step; TIRx lowers and proves each from scratch. Both lowerings read only the
#    operand regions and their tensor types (never the enclosing variables' ranges), so when an
#    apply's operands mention no variable but their own tensors, the statement lowered for the
#    first structurally equal apply is reused with the tensors renamed and every variable it
#    defines renewed under the same name (codegen names them as before).
CUDA_LOWER_SHA256 = {
    "mma": "0f659a272454411096eabe21365d40590a6be9365b62f91e59a0bae4f977f492",
    "ldmatrix": "1627b6c138bd957dea3f4bb06e7db92ad7b84bdde472f338a3f73c82f553a951",
}
CUDA_MEMOIZED_PATTERNS = {"mma": cuda_mma, "ldmatrix": cuda_ldmatrix}
_ORIGINAL_LOWER = {name: module.lower for name, module in CUDA_MEMOIZED_PATTERNS.items()}


def cuda_lower_sha256(name: str) -> str:
    import hashlib
    import inspect

    return hashlib.sha256(inspect.getsource(_ORIGINAL_LOWER[name]).encode()).hexdigest()


def _free_vars(obj) -> list:
    from tvm_ffi import structural_map
    from tvm_tirx.ir import Var

    found: dict[int, object] = {}
    structural_map(obj, (Var, lambda v: found.setdefault(v.__chandle__(), v)))
    return list(found.values())


def _defined_vars(stmt) -> list:
    from tvm_ffi import structural_map
    from tvm_tirx.ir import Var

    found: dict[int, object] = {}

    def visit(var, def_region_kind):
        if def_region_kind:
            found.setdefault(var.__chandle__(), var)
        return var

    structural_map(stmt, with_def_region_kind=(Var, visit))
    return list(found.values())


def _memoized(name: str):
    original = _ORIGINAL_LOWER[name]

    def lower(opcode, entry, modifiers, args, params, sctx):
        import tvm_ffi
        from tvm_tirx.ir import TensorRegion, Var

        memo = getattr(_SHARED, "lowered", None)
        sources = [arg.source for arg in args if isinstance(arg, TensorRegion)]
        handles = {s.__chandle__() for s in sources}
        if memo is None or params or any(v.__chandle__() not in handles for v in _free_vars(list(args))):
            return original(opcode, entry, modifiers, args, params, sctx)
        shape = (list(args), [s.ty for s in sources])
        launch = tuple((axis, str(extent)) for axis, (_, extent) in sctx.launch_params.items())
        key = (name, opcode, sctx.scope_kind, str(dict(sctx.intra)), str(dict(sctx.inter)), launch,
               tvm_ffi.structural_hash(shape, map_free_vars=True))
        seen = memo.get(key)
        if seen is not None and tvm_ffi.structural_equal(seen[0], shape, map_free_vars=True):
            _, old_sources, stmt, defined = seen
            rename = {old.__chandle__(): new for old, new in zip(old_sources, sources)}
            rename.update((var.__chandle__(), Var(var.name, var.ty)) for var in defined)
            return tvm_ffi.structural_map(stmt, (Var, lambda v: rename.get(v.__chandle__(), v)))
        stmt = original(opcode, entry, modifiers, args, params, sctx)
        memo[key] = (shape, sources, stmt, _defined_vars(stmt))
        return stmt

    return lower


_MEMOIZED_LOWER = {name: _memoized(name) for name in CUDA_MEMOIZED_PATTERNS}


def _install_shared_cuda():
    CudaContext.__init__ = _shared_context_init
    for name, module in CUDA_MEMOIZED_PATTERNS.items():
        module.lower = _MEMOIZED_LOWER[name]


def _uninstall_shared_cuda():
    CudaContext.__init__ = _ORIGINAL_CONTEXT_INIT
    for name, module in CUDA_MEMOIZED_PATTERNS.items():
        module.lower = _ORIGINAL_LOWER[name]


_SHARED_SWAP = _ProcessSwap(_install_shared_cuda, _uninstall_shared_cuda)


@contextlib.contextmanager
def shared_cuda_lowering():
    """Within the block (one thread's CUDA build), CUDA tile-pattern contexts share their premises
    and structurally equal mma / ldmatrix applies share one lowering (``_ProcessSwap``)."""
    with _SHARED_SWAP.held():
        outer = (getattr(_SHARED, "ranges", None), getattr(_SHARED, "lowered", None))
        _SHARED.ranges, _SHARED.lowered = _SharedRanges(), {}
        try:
            yield
        finally:
            _SHARED.ranges, _SHARED.lowered = outer


# 8. One transpilation per TVMScript macro. TIRx re-reads, re-transpiles and re-compiles a macro's
#    source at every call (``parser.entry._run_statements``): the emission of one GEMM calls its
#    macros hundreds of times, and that is a third of a build. Within ``macro_transpile_memo()``
#    (our schedules' emission only), the compiled builder of a macro is reused for a later call of
#    the same function object with the same builder, the same argument names and types and an
#    environment (globals, captured bindings) whose every value is the same object; the arguments
#    themselves are the builder's parameters, passed afresh at each call.
#    Across emissions (each makes its macros afresh, closures over its own plan), the transpiled
#    program is shared by the macro's code object (``_SHAPES``): TIRx's translation reads the source,
#    the names of the environment and, of its values, only which are modules, registered script
#    namespaces, ``typing.Optional`` or rebind ``range``/``int`` (prescan, namespace resolution); every
#    other value is read by the generated code from its globals when it runs. So a later emission
#    whose environment has the same names and the same such values (and the same annotation scope)
#    runs the same compiled ``_builder`` over a fresh globals dict holding its own
#    values; a translation that injected a value of its environment into the program (a lexical
#    alias) is never shared. Anything else goes through TIRx's own function. The generated code is
#    unchanged (tests/kernels/sm80/test_cuda_gemm_golden.py, tests/kernels/gfx950/test_gfx950_gemm_golden.py,
#    tests/test_tirx_private.py).
RUN_STATEMENTS = "_run_statements"
RUN_STATEMENTS_SHA256 = "077d3751f3f2bc2882e5ba3e6a036a13a452d18c1b0a205bf417b3f86784ebf9"
_MACROS = threading.local()
_SHAPES: dict = {}  # translation key (_shape_key) -> _Translation, process-wide (entries never change)


def _parser_entry():
    from tvm_tirx.script.parser import entry  # not at import: TIRx's backend autoload imports this package

    return entry


def _original_run_statements():
    entry = _parser_entry()
    return getattr(entry, "_tvm_cdna4_original_run_statements", getattr(entry, RUN_STATEMENTS))


def run_statements_sha256() -> str:
    import hashlib
    import inspect

    return hashlib.sha256(inspect.getsource(_original_run_statements()).encode()).hexdigest()


class _Translation(typing.NamedTuple):
    """A macro's compiled program: ``make`` (TIRx's ``_builder``: run, it returns the macro's builder
    function), the names of its parameters and the globals the translation added to the
    environment's (``injected``: builtins, namespaces, the location table); None when it added a
    value of the environment's (a lexical alias), which another environment would get wrong."""

    make: types.FunctionType
    params: list
    injected: dict | None


def _compiled_macro(source, builder, environment, bound_names, preserve_return, definition_scope) -> _Translation:
    """TIRx's ``_run_statements`` up to the call: the translated macro (``_Translation``)."""
    import ast

    E = _parser_entry()
    tree, filename, flags = E.acquire_source(source)
    definition_scope = {} if definition_scope is None else definition_scope
    transformer, namespace = E._prepare_transpiler(tree, source, environment, definition_scope, filename,
                                                   preserve_return=preserve_return, current_scope=tree.body[-1])
    namespace[transformer.function.dialect_prefix] = builder
    node = tree.body[-1]
    captures = transformer.module.make_fresh_name("_definition")
    transformer.function.definition_captures = captures
    body = transformer.transform_statements(node.body)
    statements = transformer._create_definition_bindings(node, transformer.function.capture_names, captures=captures)
    names = sorted(name for name in bound_names if name in namespace)
    helper_name = transformer.module.make_fresh_name("_macro")
    helper = ast.copy_location(
        ast.FunctionDef(helper_name, ast.arguments(posonlyargs=[], args=[ast.arg(name) for name in names],
                                                   kwonlyargs=[], kw_defaults=[], defaults=[]),
                        body or [ast.Pass()], [], None), node)
    if "type_params" in ast.FunctionDef._fields:
        helper.type_params = []
    transformer.module.generated_builders.append(
        E.GeneratedBuilder(helper, node.name, set(names) | transformer.module.prescan_ctx.namespaces.keys()))
    make = E._recompose_builder(
        ast.Module([*statements, helper], []), source_fn=source, definition_scope=transformer.module.definition_scope,
        generated_builders=transformer.module.generated_builders, filename=filename, flags=flags,
        name=transformer.module.make_fresh_name("_builder"), make_fresh_name=transformer.module.make_fresh_name,
        environment=namespace, result=helper_name)
    aliased = make.__globals__.keys() - namespace.keys()  # _recompose_builder's lexical aliases
    injected = None if aliased else {k: v for k, v in namespace.items() if k not in environment}
    return _Translation(make, names, injected)


@functools.cache
def _fixed_kinds() -> dict:
    """id -> value of the objects whose identity TIRx's translation reads (registered namespaces,
    ``typing.Optional``, ``range``, ``int``); modules are matched by type."""
    import builtins

    from tvm_tirx.script.parser import _NAMESPACES

    return {id(v): v for v in (*_NAMESPACES.values(), typing.Optional, builtins.range, builtins.int)}


def _shape_key(source, builder, environment, names, preserve_return, definition_scope):
    """What a macro's translation depends on (section 8), or None when it cannot be shared."""
    if definition_scope is environment:  # T.macro(hygienic=False): the caller's whole scope
        return None
    fixed = _fixed_kinds()
    read = tuple((k, v) for k, v in environment.items() if id(v) in fixed or isinstance(v, types.ModuleType))
    scope = tuple((k, id(v)) for k, v in (definition_scope or {}).items())
    return source.__code__, builder, names, preserve_return, tuple(environment), read, scope


def _translation(source, builder, environment, bound_names, preserve_return, definition_scope) -> _Translation:
    """The macro's program for this environment: ``_SHAPES``' when it has one, else translated."""
    key = _shape_key(source, builder, environment, tuple(sorted(bound_names)), preserve_return, definition_scope)
    shared = _SHAPES.get(key) if key is not None else None
    if shared is not None:
        make = types.FunctionType(shared.make.__code__, {**shared.injected, **environment}, shared.make.__name__,
                                  shared.make.__defaults__, shared.make.__closure__)
        make.__kwdefaults__ = shared.make.__kwdefaults__  # the annotation scope: the same objects (key)
        return shared._replace(make=make)
    made = _compiled_macro(source, builder, environment, set(bound_names), preserve_return, definition_scope)
    if key is not None and made.injected is not None:
        _SHAPES[key] = made
    return made


def _memoized_run_statements(source, builder, environment, bound_names, *, preserve_return=False,
                             definition_scope=None):
    table = getattr(_MACROS, "table", None)
    if table is None or not isinstance(source, types.FunctionType):
        return _original_run_statements()(source, builder, environment, bound_names, preserve_return=preserve_return,
                                        definition_scope=definition_scope)
    names = tuple(sorted(bound_names))
    key = (source, builder, names, tuple(type(environment[n]) for n in names), preserve_return,
           id(definition_scope))
    seen = table.get(key)
    if seen is None or not all(environment.get(k, seen) is v for k, v in seen[0].items()):
        made = _translation(source, builder, environment, bound_names, preserve_return, definition_scope)
        fixed = {k: v for k, v in environment.items() if k not in bound_names}
        seen = table[key] = (fixed, made.make(), made.params)
    _, runnable, params = seen
    return runnable(*(environment[name] for name in params))


def _install_macro_memo():
    entry = _parser_entry()
    entry._tvm_cdna4_original_run_statements = getattr(entry, RUN_STATEMENTS)
    setattr(entry, RUN_STATEMENTS, _memoized_run_statements)


def _uninstall_macro_memo():
    entry = _parser_entry()
    setattr(entry, RUN_STATEMENTS, entry._tvm_cdna4_original_run_statements)
    del entry._tvm_cdna4_original_run_statements


_MACRO_SWAP = _ProcessSwap(_install_macro_memo, _uninstall_macro_memo)


@contextlib.contextmanager
def macro_transpile_memo():
    """Within the block (one thread's schedule emission), macros are transpiled once per function,
    argument names and types and environment (section 8; ``_ProcessSwap``)."""
    with _MACRO_SWAP.held():
        outer = getattr(_MACROS, "table", None)
        _MACROS.table = {} if outer is None else outer
        try:
            yield
        finally:
            _MACROS.table = outer


def transpile_once(emit):
    """Decorator: the schedule emission ``emit`` runs inside ``macro_transpile_memo()``."""
    import functools

    @functools.wraps(emit)
    def run(*args, **kwargs):
        with macro_transpile_memo():
            return emit(*args, **kwargs)

    return run


# 9. The encoding of a ``T.ptx`` call. ``tvm_tirx.backend.cuda.ptx.engine._emit`` writes
#    ``tirx.ptx.<entry>(operands..., [pred], one token per modifier slot ("" = omitted), marker)``,
#    the marker a comma-joined flag set ("pred" when a predicate operand is present, "keep",
#    "p<i>" for .pred-class operands, "s<i>" for sunk lanes); the instruction table
#    (``tvm_tirx.backend.cuda.ptx.table``: ``TABLE``, ``mods``, ``operand_layout``) turns the tokens
#    into modifiers and the modifiers into operand groups. The emulator decodes calls with
#    ``decode_ptx_call`` (``PTX_EMIT_SHA256`` pins the encoder's source).
PTX_TABLE_MODULE = "tvm_tirx.backend.cuda.ptx.table"
PTX_TABLE_NAMES = ("TABLE", "mods", "operand_layout")
PTX_EMIT_SHA256 = "7cd659b396a5920f1834b7e567d716bb2efb7118ebfa654ef9209ff272bb0e18"


def ptx_emit_sha256() -> str:
    import hashlib
    import inspect

    from tvm_tirx.backend.cuda.ptx import engine

    return hashlib.sha256(inspect.getsource(engine._emit).encode()).hexdigest()


def ptx_entry(name: str):
    """The instruction-table entry of ``T.ptx`` entry ``name`` (``entry.op_name``: the call's op)."""
    from tvm_tirx.backend.cuda.ptx.table import TABLE

    return TABLE[name]


class PtxCallArgs(typing.NamedTuple):
    """The parts of one ``tirx.ptx.<entry>`` call's argument list."""

    mods: dict
    """Modifier slot name -> token (``""`` = omitted)."""
    operands: dict
    """Operand slot name -> its argument nodes (a register group: several)."""
    pred: object
    """The ``@p`` guard, or None."""
    flags: tuple
    """The marker's flags."""

    @property
    def sunk(self) -> bool:
        """Whether some destination lanes were sunk (``T.ptx.SINK``: no argument left for them)."""
        return any(f[0] == "s" and f[1:].isdigit() for f in self.flags)


def decode_ptx_call(entry, args) -> PtxCallArgs:
    """Split a ``tirx.ptx.<entry>`` call's arguments (``args``: the call's ``args``) by the encoding
    above. With sunk lanes the operand positions do not line up: check ``sunk`` first."""
    from tvm_tirx.backend.cuda.ptx.table import mods, operand_layout

    args = list(args)
    n = len(entry.slots)
    flags = tuple(f for f in str(args[-1].value).split(",") if f)
    tokens = [str(a.value) for a in args[len(args) - 1 - n : -1]]
    rest = args[: len(args) - 1 - n]
    pred = rest.pop() if "pred" in flags else None
    mod_map = mods(entry, tokens)
    operands = {slot.name: rest[i : i + lanes] for slot, i, lanes in operand_layout(entry, mod_map)}
    return PtxCallArgs(mod_map, operands, pred, flags)


# 10. The dispatch of one tile op. TileDispatch calls the op attribute ``FTileOpDispatch``;
#    ``Instruction.register`` sets it to ``run_dispatch`` for every tile op. Replacing it for our
#    op alone leaves every other op's lowering (and its errors) as TIRx has them.
TILE_DISPATCH_ATTR = "FTileOpDispatch"
RUN_DISPATCH_SHA256 = "92e15d7f25672ad8ca38ba3673dd25dc5df57fa31967cba56052b91d28d330c2"


def run_dispatch_sha256() -> str:
    import hashlib
    import inspect

    from tvm_tirx.tirx.tile.dispatch import run_dispatch

    return hashlib.sha256(inspect.getsource(run_dispatch).encode()).hexdigest()


def wrap_tile_dispatch(op_name: str, make_wrapper) -> None:
    """Make the dispatch of the registered tile op ``op_name`` ``make_wrapper(run_dispatch)``
    (idempotent: the wrapper is built over TIRx's ``run_dispatch``, never over itself)."""
    from tvm_tirx.ir.op import register_op_attr
    from tvm_tirx.tirx.tile.dispatch import run_dispatch

    register_op_attr(op_name, TILE_DISPATCH_ATTR, make_wrapper(run_dispatch), override=True)


# 11. The device-code compile at load. A library that holds CUDA C (TIRx's exported modules do)
#    is compiled when it is loaded: the C++ loader calls the global function
#    ``tvm_callback_cuda_compile(code, config_json) -> [binary, format]``. Wrapping it with a cache
#    lets the compile run once per source, in whichever process gets there first.
CUDA_COMPILE_CALLBACK = "tvm_callback_cuda_compile"
_DEVICE_CODE_ORIGINAL: dict = {}


def cuda_device_group(module) -> tuple[str, str]:
    """(code, backend config JSON) of a built TIRx CUDA executable's device module: the two
    arguments its loader passes to ``CUDA_COMPILE_CALLBACK``."""
    dev = module.mod.imports[0] if hasattr(module, "mod") else module.imports[0]
    return str(dev.inspect_source()), str(dev.inspect_source("backend_config") or "{}")


def cache_cuda_device_code(load, store, name: str = CUDA_COMPILE_CALLBACK) -> typing.Callable:
    """Wrap the global compile callback ``name`` so that ``load(code, config) -> (binary, fmt) | None``
    is asked first and ``store(code, config, binary, fmt)`` keeps what the original compiled.
    Idempotent per name (the wrapper always sits over TIRx's own function). Returns
    ``compile(code, config) -> (binary, fmt)``, the cached compile (for callers that compile ahead)."""
    import tvm_ffi

    if name not in _DEVICE_CODE_ORIGINAL:
        if name == CUDA_COMPILE_CALLBACK:
            import tvm_tirx.support.nvcc  # noqa: F401  (registers TIRx's callback)
        _DEVICE_CODE_ORIGINAL[name] = tvm_ffi.get_global_func(name)
    original = _DEVICE_CODE_ORIGINAL[name]

    def compile_cached(code, config):
        code, config = str(code), str(config)
        hit = load(code, config)
        if hit is not None:
            return hit
        binary, fmt = original(code, config)
        binary, fmt = bytes(binary), str(fmt)
        store(code, config, binary, fmt)
        return binary, fmt

    def callback(code, config):
        binary, fmt = compile_cached(code, config)
        return [bytearray(binary), fmt]

    tvm_ffi.register_global_func(name, callback, override=True)
    return compile_cached



# 12. Target construction. TIRx's C++ parser of a rocm target (every ``Target`` made from a dict or
#    string) prints "Unable to detect ROCm version" where no ROCm runtime exists, with no hook; in
#    ``tvm_tirx.tirx.compile`` before any pass runs. ``wrap_target_init`` wraps ``Target.__init__``.
TARGET_INIT_SHA256 = "12dd7a221c0a2e88fdd99a9305c4eb4b21e98038ddd7ec20cace5483f6a46f6f"
_TARGET_INIT: dict = {}


def target_init_sha256() -> str:
    import hashlib
    import inspect

    from tvm_tirx.target import Target

    return hashlib.sha256(inspect.getsource(_TARGET_INIT.get("init", Target.__init__)).encode()).hexdigest()


def wrap_target_init(make_wrapper) -> None:
    """Make ``Target.__init__`` ``make_wrapper(TIRx's own)`` (idempotent: never over itself)."""
    from tvm_tirx.target import Target

    original = _TARGET_INIT.setdefault("init", Target.__init__)
    Target.__init__ = functools.wraps(original)(make_wrapper(original))

_run_when_whole()  # section 0: every section exists (keep this the module's last line)
