"""The wgmma register fence (patterns/wgmma_fence.py): TIRx's noop_barrier fences a copy; the
pattern fences the accumulator (and RS A) elements themselves, by reference, before the issue and
after ``wait=``; ``T.sm90.fence_operand`` after a kernel's own wait; nvcc accepts the source."""

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.selftest import nvcc, ptxas_check

F32 = "float32"


def _source(kernel):
    from tvm_cdna4.cuda.build import compile_blobs

    return compile_blobs(kernel, "sm_90a")["source"].decode()


def _probe(**kw):
    from tvm_cdna4.probes_wgmma import probe

    return probe(**kw)


def _body(source):
    return [line.strip() for line in source[source.index("__global__"):].splitlines()]


def test_tirx_noop_barrier_takes_the_register_by_value_and_does_not_compile_on_an_element():
    from tvm_tirx.backend.cuda.codegen.registry import CODEGEN_REGISTRY
    from tvm_tirx.ir import Var
    from tvm_tirx.script import tirx as T

    # its helper's parameter is a float, not a float&: the asm's "+f" ties up the callee's copy
    call = CODEGEN_REGISTRY["tirx.cuda.wgmma_noop_barrier_float32"]([Var("x", "float32")])[0]
    helper = call.args[-1].value
    assert "void ptx_wgmma_fence_float(float reg)" in helper and "&" not in helper

    @T.function
    def kernel(D: T.Tensor((128,), F32)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
        acc[0] = T.float32(1)
        T.cuda.wgmma.noop_barrier(acc[0])
        D[T.cuda.thread_in_warpgroup()] = acc[0]

    # and TIRx 0.1.0a4's dispatcher reads reg.dtype, which its expressions no longer have
    with pytest.raises(Exception, match="no attribute 'dtype'"):
        _source(kernel)


@pytest.mark.parametrize("form", ["ss", "rs"])
def test_pattern_fences_d_and_rs_a_by_reference_around_the_group(form):
    source = _source(_probe(atype="bf16", form=form, k_repeats=2, swizzle=64,
                            overrides={"params": {"scale_d": False, "wait": 0}}))
    assert "__device__ void tvm_cdna4_fence_operand_f32(float& reg) {" in source
    assert 'asm volatile("" : "+f"(reg) :: "memory");' in source
    body = _body(source)
    fence, wait = (next(i for i, x in enumerate(body) if name in x) for name in ("wgmma_fence_fence", "wait_group"))
    d = [f"tvm_cdna4_fence_operand_f32(Dr[{r}]);" for r in range(8)]  # n 16: 8 f32 registers
    assert body[fence - (16 if form == "rs" else 8):fence][:8] == d  # before wgmma.fence
    assert body[wait + 1:wait + 9] == d  # right after wait=0
    if form == "rs":  # the A words of both K repeats, before the issue and after the wait
        a = [f"tvm_cdna4_fence_operand_u32(tile_A_words[{j}]);" for j in range(8)]
        assert body[fence - 8:fence] == a and body[wait + 9:wait + 17] == a
    # the probe's own wait, then T.sm90.fence_operand on its accumulator array before reading it
    last = max(i for i, x in enumerate(body) if "wait_group" in x)
    assert body[last + 1:last + 9] == [f"tvm_cdna4_fence_operand_f32(acc_raw_ptr[{r}]);" for r in range(8)]


def test_without_wait_the_pattern_fences_only_before_the_issue():
    body = _body(_source(_probe(atype="e4m3", swizzle=32, k_repeats=1)))
    fence = next(i for i, x in enumerate(body) if "wgmma_fence_fence" in x)
    calls = [i for i, x in enumerate(body) if x.startswith("tvm_cdna4_fence_operand_f32(Dr[")]
    assert calls == list(range(fence - 8, fence))


@pytest.mark.skipif(nvcc() is None, reason="no nvcc")
def test_nvcc_compiles_the_fenced_rs_kernel_for_sm_90a():
    source = _source(_probe(atype="f16", form="rs", k_repeats=2, swizzle=64,
                            overrides={"params": {"scale_d": False, "wait": 0}}))
    assert ptxas_check(source, nvcc()) == ""


def test_fence_operand_refuses_what_is_not_a_32_bit_register_element():
    from tvm_tirx.ir import Var

    from tvm_cdna4.patterns.wgmma_fence import fence_operand

    with pytest.raises(ContractError) as info:
        fence_operand(Var("h", "float16"))
    assert info.value.check == "dtype" and info.value.operand == "reg"
    with pytest.raises(ContractError) as info:
        fence_operand(Var("x", "float32"))  # a scalar, not an element it can take by reference
    assert info.value.check == "operands"
