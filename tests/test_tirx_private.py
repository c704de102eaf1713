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
    from tvm_tirx.script import tirx as T

    seen = []
    current = tvm_ffi.get_global_func(tirx_private.ROCM_BUILD_FUNC)

    @T.function
    def kernel(A: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            A[tx] = T.float32(0)

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
    macro called again with same-typed arguments is transpiled once and builds the same IR (its
    environment read when the builder runs), each block starts afresh, and the swap is undone on
    leaving."""
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

    @T.macro
    def fill(buf, i):
        buf[i] = T.float32(i * scale["k"])

    def kernel():
        @T.function
        def main(A: T.Tensor((4,), "float32")):
            for i in T.unroll(2):
                fill(A, i)
            fill(A, 2)
            fill(A, 3)

        return main

    plain = kernel()
    try:
        tirx_private._compiled_macro = counting
        with tirx_private.macro_transpile_memo():
            assert entry._run_statements is not original
            memo = kernel()
        assert compiled == ["fill", "fill"]  # a T.unroll variable, then an int: two argument types
        assert tvm_ffi.structural_equal(plain, memo, map_free_vars=True)
        with tirx_private.macro_transpile_memo():
            kernel()
            scale["k"] = 3  # the same dict: the builder reads it when it runs, no new transpile
            changed = kernel()
        assert compiled == ["fill"] * 4
        assert not tvm_ffi.structural_equal(plain, changed, map_free_vars=True)
    finally:
        tirx_private._compiled_macro = real
    assert entry._run_statements is original


def test_tile_dispatch_attribute_is_the_pinned_run_dispatch():
    # unwrapped_dispatch relies on run_dispatch wrapping lower()'s error as `RuntimeError(...) from error`
    from tvm_tirx.tirx.tile import instruction

    assert tirx_private.run_dispatch_sha256() == tirx_private.RUN_DISPATCH_SHA256
    assert f'register_op_attr(self.name, "{tirx_private.TILE_DISPATCH_ATTR}", run_dispatch)' in inspect.getsource(
        instruction.Instruction.register)
    from tvm_tirx.ir.op import register_op_attr

    assert "override" in inspect.signature(register_op_attr).parameters
