"""Fails loudly when the pinned TIRx / tvm_ffi internals used by tvm_cdna4.tirx_private change."""

import inspect

import tvm_ffi
from tvm_ffi.dataclasses import enum as E

from tvm_cdna4 import tirx_private


def test_pinned_distribution():
    from importlib.metadata import version

    assert version("apache-tvm-tirx") == "0.1.0a4", "tvm_cdna4.tirx_private is written against 0.1.0a4"


def test_enum_private_helpers_exist_with_their_signatures():
    for name in tirx_private.ENUM_PRIVATE_NAMES:
        assert hasattr(E, name), f"tvm_ffi.dataclasses.enum.{name} is gone"
    assert E.ENUM_STATE_ATTR == "__ffi_enum__"
    assert list(inspect.signature(E._create).parameters) == ["cls", "int_index", "str_index", "declaration", "cxx_backed"]
    assert list(inspect.signature(E._register).parameters) == ["entries", "indexes", "instance"]
    assert list(inspect.signature(E._state).parameters) == ["cls", "create"]


def test_attribute_columns_exist():
    from tvm_tirx.tirx.layout import Axis
    from tvm_tirx.tirx.thread_scope import ThreadScope

    assert {"backend", "rank"} <= set(E._state(ThreadScope).attrs.keys())
    assert {"thread", "backend", "scope", "subscope"} <= set(E._state(Axis).attrs.keys())


def test_cuda_common_members_we_subclass():
    for cls, members in ((tirx_private.CudaContext, tirx_private.CUDA_COMMON_MEMBERS["Context"]),
                         (tirx_private.CudaRegion, tirx_private.CUDA_COMMON_MEMBERS["Region"])):
        missing = [m for m in members if m not in vars(cls)]
        assert not missing, f"{cls.__qualname__} lost {missing}"
    params = list(inspect.signature(tirx_private.CudaRegion.__init__).parameters)
    assert params == ["self", "ctx", "name", "region", "atom_shape", "scopes", "repeat_axes", "bounds"]


def test_registration_is_idempotent_and_visible_to_cpp():
    from tvm_tirx.tirx.layout import Axis
    from tvm_tirx.tirx.thread_scope import ThreadScope

    first = tirx_private.register_rocm_scopes()
    second = tirx_private.register_rocm_scopes()
    assert all(first[k].same_as(second[k]) for k in first)
    wave = ThreadScope("rocm.wave")
    assert (wave.backend, wave.local_name, wave.rank) == ("rocm", "wave", 1)
    assert tvm_ffi.get_global_func("tirx.ThreadScopeGet")("rocm.wave").same_as(wave)
    lane, _ = tirx_private.register_rocm_axes()
    assert lane.is_thread() and Axis.get("wave_lane").get_scope().same_as(wave)


def test_codegen_hook_signature():
    import importlib

    module = importlib.import_module(tirx_private.COMPILE_MODULE)
    hook = getattr(module, tirx_private.CODEGEN_HOOK)
    assert list(inspect.signature(hook).parameters) == ["host_mod", "device_mod_dict", "target_host"]


def test_cuda_compiler_drivers_and_config():
    from tvm_tirx.backend.cuda.backend_config import compiler_options, resolve_backend_config
    from tvm_tirx.support import nvcc
    from tvm_tirx.target import Target

    for compiler in ("nvrtc", "nvcc"):
        driver = getattr(nvcc, tirx_private.CUDA_DRIVER_PREFIX + compiler)
        assert list(inspect.signature(driver).parameters) == tirx_private.CUDA_DRIVER_PARAMS
    config = resolve_backend_config(None, Target({"kind": "cuda", "arch": "sm_80"}))
    assert config["compiler"] in ("nvrtc", "nvcc") and config["arch"] == "sm_80"
    assert any("-v" in option for option in compiler_options(config))  # ptxas -v: the log has registers


def test_rocm_codegen_entry_and_callbacks():
    import tvm_tirx.support.rocm as rocm_support

    for name in (tirx_private.ROCM_BUILD_FUNC, *tirx_private.ROCM_CALLBACKS):
        assert tvm_ffi.get_global_func(name, allow_missing=True) is not None, f"global function {name} is gone"
    for function in tirx_private.ROCM_CALLBACKS.values():  # what ours delegate to (rocdl_dir=None / obj_bin)
        assert callable(getattr(rocm_support, function)), f"tvm_tirx.support.rocm.{function} is gone"


def test_rocm_codegen_looks_the_entry_up_at_each_build():
    """codegen.Build must call whatever target.build.rocm is now (our wrapper), with (mod, target)."""
    import tvm_tirx

    import tvm_cdna4

    tvm_cdna4.register()  # our callbacks (a gfx950 build needs no ROCm install), whatever ran before
    seen = []
    current = tvm_ffi.get_global_func(tirx_private.ROCM_BUILD_FUNC)
    kernel = _gfx950_store_kernel()

    def spy(original):
        return lambda mod, target: seen.append(str(target.attrs["mcpu"])) or original(mod, target)

    try:
        tirx_private.wrap_global_func(tirx_private.ROCM_BUILD_FUNC, spy)
        tvm_tirx.tirx.compile(kernel, target={"kind": "rocm", "mcpu": "gfx950"})
    finally:
        tvm_ffi.register_global_func(tirx_private.ROCM_BUILD_FUNC, current, override=True)
    assert seen == ["gfx950"]


def test_default_pipeline_selector_receives_module_and_target():
    from tvm_tirx.tirx import compilation_pipeline as pipeline

    assert list(inspect.signature(pipeline.register_default_tir_pipeline_selector).parameters) == ["selector"]
    assert "target_to_bind" in inspect.signature(pipeline.get_default_tir_pipeline).parameters


def test_cuda_context_init_is_the_pinned_one():
    # shared_cuda_lowering replays what this exact __init__ does (launch axes, then the
    # enclosing variables in order, then the group axes); any change to it must be re-read
    assert tirx_private.cuda_context_init_sha256() == tirx_private.CUDA_CONTEXT_INIT_SHA256
    assert list(inspect.signature(tirx_private.CudaContext.__init__).parameters) == ["self", "sctx", "atom_scope"]
    from tvm_tirx.sym import Analyzer, ConstraintContext

    assert list(inspect.signature(ConstraintContext.__init__).parameters) == ["self", "parent", "parent_local_prefix"]
    assert hasattr(Analyzer, "sync_constraint_context")


def test_shared_cuda_lowering_is_scoped():
    original = tirx_private.CudaContext.__init__, tirx_private.cuda_ldmatrix.lower
    with tirx_private.shared_cuda_lowering():
        assert (tirx_private.CudaContext.__init__, tirx_private.cuda_ldmatrix.lower) != original
        ranges = tirx_private._SHARED.ranges
        with tirx_private.shared_cuda_lowering():
            assert tirx_private._SHARED.ranges is not ranges
        assert tirx_private._SHARED.ranges is ranges
        assert (tirx_private.CudaContext.__init__, tirx_private.cuda_ldmatrix.lower) != original
    assert (tirx_private.CudaContext.__init__, tirx_private.cuda_ldmatrix.lower) == original


def test_memoized_cuda_lowerings_are_the_pinned_ones():
    # the memo reuses these exact lowerings for structurally equal applies; the dispatcher must look
    # ``<pattern>.lower`` up at each call for the scoped swap to take effect
    import tvm_ffi
    from tvm_tirx.backend.cuda.tile import patterns

    for name, module in tirx_private.CUDA_MEMOIZED_PATTERNS.items():
        assert tirx_private.cuda_lower_sha256(name) == tirx_private.CUDA_LOWER_SHA256[name], name
        assert list(inspect.signature(module.lower).parameters) == ["opcode", "entry", "modifiers", "args", "params", "sctx"]
        assert f"lower = {name}.lower" in inspect.getsource(patterns._lower)
    assert "with_def_region_kind" in inspect.signature(tvm_ffi.structural_map).parameters


def test_macro_transpile_memo_is_pinned_and_scoped():
    """Section 8: TIRx's ``_run_statements`` is the pinned one; inside ``macro_transpile_memo()`` a
    macro is transpiled once per code object and environment names, whatever its arguments' types
    (a ``T.unroll`` variable, then an int) and its closure's values (each emission makes its macros
    afresh): every block, and every closure value, builds the IR TIRx builds without the memo (the
    environment read when the builder runs); the swap is undone on leaving."""
    from tvm_tirx.script import tirx as T
    from tvm_tirx.script.parser import entry

    assert tirx_private.run_statements_sha256() == tirx_private.RUN_STATEMENTS_SHA256
    original = entry._run_statements
    compiled = []
    real = tirx_private._compiled_macro

    def counting(*args):
        compiled.append(args[0].__name__)
        return real(*args)

    scale = {"k": 2}

    def kernel(offset=0.0):
        @T.macro
        def fill(buf, i):
            buf[i] = T.float32(i * scale["k"] + offset)

        @T.function
        def main(A: T.Tensor((4,), "float32")):
            for i in T.unroll(2):
                fill(A, i)
            fill(A, 2)
            fill(A, 3)

        return main

    plain, plain_offset = kernel(), kernel(0.5)
    try:
        tirx_private._compiled_macro = counting
        with tirx_private.macro_transpile_memo():
            assert entry._run_statements is not original
            memo = kernel()
        assert compiled == ["fill"]  # a T.unroll variable, then an int: one program
        assert tvm_ffi.structural_equal(plain, memo, map_free_vars=True)
        with tirx_private.macro_transpile_memo():
            offset = kernel(0.5)  # another closure value: the same program over its own globals
            scale["k"] = 3  # the same dict: the builder reads it when it runs
            changed = kernel()
        assert compiled == ["fill"]
        assert tvm_ffi.structural_equal(plain_offset, offset, map_free_vars=True)
        assert not tvm_ffi.structural_equal(plain, offset, map_free_vars=True)
        assert not tvm_ffi.structural_equal(plain, changed, map_free_vars=True)
    finally:
        tirx_private._compiled_macro = real
    assert entry._run_statements is original


def test_ptx_call_encoding_is_the_pinned_one():
    """Section 9: the PTX engine's encoder is the pinned one, the table helpers keep their signatures,
    and a predicated cp.async (an immediate and an optional operand) and a vector store decode back
    into their modifiers, operands and guard."""
    from tvm_ffi import structural_map
    from tvm_tirx.backend.cuda.ptx import table
    from tvm_tirx.ir import Call
    from tvm_tirx.script import tirx as T

    assert tirx_private.ptx_emit_sha256() == tirx_private.PTX_EMIT_SHA256
    assert all(hasattr(table, name) for name in tirx_private.PTX_TABLE_NAMES)
    assert list(inspect.signature(table.mods).parameters) == ["entry", "tokens"]
    assert list(inspect.signature(table.operand_layout).parameters) == ["entry", "mod_map"]

    @T.function
    def kernel(A: T.Tensor((32, 8), "float16"), Out: T.Tensor((32, 4), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((32, 8), "float16", scope="shared", layout="default", align=16)])
        T.ptx["cp.async.cg.shared.global"](SM.ptr_to([tid, 0]), A.ptr_to([tid, 0]), 16, T.uint32(6), pred=tid < 7)
        r = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
        T.ptx["st.global.v4.b32"](Out.ptr_to([tid, 0]), r[0], r[1], r[2], r[3])

    calls = []
    structural_map(kernel, (Call, lambda c: calls.append(c) or c))
    decoded = {}
    for call in calls:
        for name in ("cp_async_cg_src_size", "st_vec"):
            entry = tirx_private.ptx_entry(name)
            if str(call.op.name) == entry.op_name:
                decoded[name] = tirx_private.decode_ptx_call(entry, call.args)
    cp, st = decoded["cp_async_cg_src_size"], decoded["st_vec"]
    assert sorted(k for k, v in cp.operands.items() if v) == ["cp_size", "dst_mem", "src_mem", "src_size"]
    assert cp.flags == ("pred",) and cp.mods["cop"] == "cg"
    assert int(cp.operands["cp_size"][0].value) == 16 and int(cp.operands["src_size"][0].value) == 6
    assert "tid" in str(cp.pred) and "7" in str(cp.pred) and not cp.sunk
    assert st.pred is None and st.flags == () and len(st.operands["value"]) == 4
    assert (st.mods["vec"], st.mods["type"]) == ("v4", "b32")


def _gfx950_store_kernel():
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(A: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            A[tx] = T.float32(1)

    return kernel


def test_capture_returns_the_device_module_and_restores_the_codegen():
    import importlib

    from tvm_tirx.target import Target

    module = importlib.import_module(tirx_private.COMPILE_MODULE)
    original = getattr(module, tirx_private.CODEGEN_HOOK)
    modules = tirx_private.lowered_device_modules(_gfx950_store_kernel(), Target({"kind": "rocm", "mcpu": "gfx950"}))
    [((target, _), mod)] = modules.items()  # keyed (target, TIRx's module tag)
    assert target.attrs["mcpu"] == "gfx950" and [gv.name_hint for gv in mod.functions] == ["kernel_kernel"]
    assert getattr(module, tirx_private.CODEGEN_HOOK) is original


def test_capture_leaves_another_threads_compile_untouched():
    """Thread 1 captures a gfx950 kernel and, inside that capture (paused in the lowering of its
    ``T.rocm.tile.apply``), thread 2 runs a plain ``tvm_tirx.tirx.compile`` of a CUDA kernel: it
    must get its CUDA source, not our capture's private exception."""
    import threading

    import cuda_seed_example
    import tvm_tirx
    from tvm_tirx.target import Target

    import tvm_cdna4
    from tvm_cdna4 import patterns

    tvm_cdna4.register()
    inside, other_done = threading.Event(), threading.Event()
    family = patterns._family
    results = {}

    def paused_family(record):  # runs on thread 1 inside its compile (TileDispatch), i.e. inside the capture
        if threading.current_thread().name == "capturing":
            inside.set()
            assert other_done.wait(120), "the other thread's compile did not finish"
        return family(record)

    def capture():
        try:
            results["captured"] = tirx_private.lowered_device_modules(
                rocm_mfma_kernel(), Target({"kind": "rocm", "mcpu": "gfx950"}))
        except BaseException as err:  # reported by the main thread
            results["capture error"] = err

    def compile_cuda():
        try:
            assert inside.wait(120), "the capturing thread never reached its compile"
            exe = tvm_tirx.tirx.compile(cuda_seed_example.matrix_kernel(), target=Target({"kind": "cuda", "arch": "sm_80"}),
                                        pipeline="tirx")
            results["cuda"] = exe.mod.imports[0].inspect_source("cuda")
        except BaseException as err:
            results["cuda error"] = err
        finally:
            other_done.set()

    patterns._family = paused_family
    try:
        threads = [threading.Thread(target=capture, name="capturing"), threading.Thread(target=compile_cuda)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        patterns._family = family
    assert "cuda error" not in results, repr(results["cuda error"])
    assert "capture error" not in results, repr(results["capture error"])
    assert cuda_seed_example.LDMATRIX in results["cuda"]
    assert len(results["captured"]) == 1


def rocm_mfma_kernel():
    """A kernel that applies a pattern (lowered by ``patterns._lower`` inside the compile)."""
    from tvm_cdna4.isa import CATALOG
    from tvm_cdna4.probes import mfma_probe

    return mfma_probe(CATALOG["mfma_f32_16x16x32_f16"])


def test_tile_dispatch_attribute_is_the_pinned_run_dispatch():
    # unwrapped_dispatch relies on run_dispatch wrapping lower()'s error as `RuntimeError(...) from error`
    from tvm_tirx.tirx.tile import instruction

    assert tirx_private.run_dispatch_sha256() == tirx_private.RUN_DISPATCH_SHA256
    assert f'register_op_attr(self.name, "{tirx_private.TILE_DISPATCH_ATTR}", run_dispatch)' in inspect.getsource(
        instruction.Instruction.register)
    from tvm_tirx.ir.op import register_op_attr

    assert "override" in inspect.signature(register_op_attr).parameters


def test_cuda_compile_callback_is_the_pinned_one_and_the_cache_wraps_it():
    # section 11: TIRx's loader calls tvm_callback_cuda_compile(code, config_json) -> [binary, format]
    from tvm_tirx.support import nvcc

    assert "def tvm_callback_cuda_compile(code, config_json):" in inspect.getsource(nvcc)
    assert "return [bytearray(result.binary), result.target_format]" in inspect.getsource(nvcc)
    assert tvm_ffi.get_global_func(tirx_private.CUDA_COMPILE_CALLBACK) is not None
    # the cache over a stand-in callback: the original runs once per (code, config), a hit after
    name, calls, store = "tvm_cdna4.test.fake_cuda_compile", [], {}
    tvm_ffi.register_global_func(name, lambda code, cfg: calls.append(code) or [bytearray(b"BIN" + code.encode()), "cubin"],
                                 override=True)
    compile_cached = tirx_private.cache_cuda_device_code(
        lambda code, cfg: store.get((code, cfg)), lambda code, cfg, b, f: store.__setitem__((code, cfg), (b, f)), name)
    wrapped = tvm_ffi.get_global_func(name)
    first = wrapped("k1", "{}")
    assert bytes(first[0]) == b"BINk1" and first[1] == "cubin" and calls == ["k1"]
    assert bytes(wrapped("k1", "{}")[0]) == b"BINk1" and calls == ["k1"]  # cached
    assert compile_cached("k2", "{}") == (b"BINk2", "cubin") and calls == ["k1", "k2"]
    assert store[("k1", "{}")] == (b"BINk1", "cubin")


def test_target_init_is_the_pinned_one_and_rocm_targets_warn_into_the_log(capfd, caplog):
    """TIRx's rocm target parser prints its no-ROCm warning (C++) at each construction from a dict:
    the wrapped ``Target.__init__`` sends it to the DEBUG log; other targets are built untouched."""
    import logging

    from tvm_tirx.target import Target

    from tvm_cdna4 import register

    register()
    assert tirx_private.target_init_sha256() == tirx_private.TARGET_INIT_SHA256
    assert Target.__init__.__wrapped__ is tirx_private._TARGET_INIT["init"]
    caplog.set_level(logging.DEBUG, logger="tvm_cdna4")
    assert Target({"kind": "rocm", "mcpu": "gfx950"}).attrs["mcpu"] == "gfx950"
    assert Target({"kind": "cuda", "arch": "sm_80"}).attrs["arch"] == "sm_80"
    assert capfd.readouterr().err == ""
    assert [r.getMessage().split(": ", 1)[0] for r in caplog.records if "Unable to detect ROCm" in r.getMessage()] \
        == ["TIRx"]
