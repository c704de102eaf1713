"""``tvm_cdna4.torch``'s choice of CUDA kernels (``choose_target``, ``cuda_target``, ``_kernel``) with a faked
compute capability (no GPU: the kernels are made, not built), and on a Hopper GPU (``cuda(arch="sm_90a")``)
``gemm`` against ``torch.matmul`` on the sm90 kernel: several M of one shape class, a fused epilogue, ``out=``,
CUDA-graph capture of two M in different buckets."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from tvm_cdna4.kernels.gemm.dynamic_m import m_limit  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402


@pytest.mark.parametrize("capability, setting, target", [
    ((9, 0), "auto", "sm90"), ((8, 0), "auto", "sm80"), ((8, 6), "auto", "sm80"), ((8, 9), "auto", "sm80"),
    ((10, 0), "auto", "sm80"),   # sm_90a code runs on compute capability 9.0 only
    ((9, 0), "sm80", "sm80"),    # the sm80-class kernels stay selectable on Hopper
])
def test_the_target_of_a_capability(capability, setting, target):
    assert tt.choose_target(capability, setting) == target


def test_an_unknown_setting_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match="argument 'TVM_CDNA4_CUDA_TARGET'.*expected 'auto' or 'sm80', found 'sm70'"):
        tt.choose_target((9, 0), "sm70")


def test_the_environment_variable_is_read_at_import():
    code = "import tvm_cdna4.torch as t; print(t.CUDA_TARGET, t.choose_target((9, 0), t.CUDA_TARGET))"
    env = {**os.environ, "TVM_CDNA4_CUDA_TARGET": "sm80"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["sm80", "sm80"]


class FakeA:
    """What ``_kernel`` reads of ``a``: its device and dtype."""

    def __init__(self, index=0):
        self.device, self.dtype = torch.device("cuda", index), torch.bfloat16


@pytest.fixture
def hopper(monkeypatch):
    """Device 0 is a faked sm_90 GPU (its capability read once: the counter), the kernel cache empty."""
    reads = []

    def capability(index):
        reads.append(index)
        return (9, 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setattr(tt, "_DEVICES", {})
    monkeypatch.setattr(tt, "_SM90_REFUSED", set())
    monkeypatch.setattr(tt, "_KERNELS", {})
    return reads


def test_the_capability_is_read_once_per_device(hopper):
    assert tt.cuda_target(torch.device("cuda", 0)) == ("sm_90", "sm90")
    assert tt.cuda_target(torch.device("cuda", 0)) == ("sm_90", "sm90") and hopper == [0]


def test_sm90_runs_what_it_takes_and_sm80_the_rest(hopper):
    sm90 = tt._kernel(FakeA(), 200, 264, torch.bfloat16, "nt", Fusion(bias=True), M=77)
    assert " sm90 nt bf16->bf16 N=200 K=264" in sm90.dynamic.describe
    assert tt._kernel(FakeA(), 200, 264, torch.bfloat16, "nt", Fusion(bias=True), M=5) is sm90  # one per class
    for layout, K, M in (("nn", 264, 77), ("nt", 260, 77), ("nt", 264, m_limit(200) + 1)):
        k = tt._kernel(FakeA(), 200, K, torch.bfloat16, layout, Fusion(bias=True), M=M)
        assert " sm90 " not in k.dynamic.describe and M <= k.dynamic.limit, (layout, K, M)
    assert hopper == [0] and all(k.dynamic.built() == () for k in tt.kernel_cache().values())  # nothing built


def test_grouped_gemm_runs_the_sm90_grouped_kernel_on_hopper(hopper, monkeypatch):
    k = tt._grouped_kernel(FakeA(), 8, 200, 264, torch.bfloat16, "nt", Fusion(bias=True))
    assert " sm90 nt bf16->bf16 G=8 N=200 K=264" in k.dynamic.describe
    assert tt._grouped_kernel(FakeA(), 8, 200, 264, torch.bfloat16, "nt", Fusion(bias=True)) is k  # one per class
    for layout, K in (("nn", 264), ("nt", 260)):  # what the sm90 kernel refuses: the sm80 grouped kernel
        other = tt._grouped_kernel(FakeA(), 8, 200, K, torch.bfloat16, layout, Fusion())
        assert " sm90 " not in other.dynamic.describe and " G=8 " in f"{other.dynamic!r} ", (layout, K)
    monkeypatch.setattr(tt, "_DEVICES", {})
    monkeypatch.setattr(tt, "CUDA_TARGET", "sm80")
    assert " sm90 " not in tt._grouped_kernel(FakeA(), 8, 200, 392, torch.bfloat16, "nt", Fusion()).dynamic.describe
    assert all(k.dynamic.built() == () for k in tt.kernel_cache().values())  # nothing built


def test_the_setting_keeps_sm80_on_hopper(hopper, monkeypatch):
    monkeypatch.setattr(tt, "CUDA_TARGET", "sm80")
    k = tt._kernel(FakeA(), 200, 264, torch.bfloat16, "nt", Fusion(), M=77)
    assert " sm90 " not in k.dynamic.describe and tt.cuda_target(torch.device("cuda", 0))[1] == "sm80"


# ---------------------------------------------------------------------------------------- on a Hopper GPU


def _inputs(M, N, K, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    b = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    bias = torch.empty(N, device="cuda").uniform_(-1, 1, generator=gen)
    residual = torch.empty((M, N), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    return a, b, bias, residual


def _want(a, b, bias, residual):
    return torch.nn.functional.silu(a.float() @ b.float().T + bias) + residual.float()


def _err(got, want) -> float:
    return float(torch.linalg.norm(got.float() - want) / torch.linalg.norm(want))


@pytest.mark.cuda(arch="sm_90a")
def test_gemm_on_sm90_matches_torch_matmul_at_several_m():
    N, K = 392, 520  # odd multiples of 8
    assert tt.cuda_target(torch.device("cuda"))[1] == "sm90"
    for M in (1, 5, 77, 200, 333, 3000):
        a, b, bias, residual = _inputs(M, N, K, M)
        y = tt.gemm(a, b, bias=bias, activation="silu", residual=residual)
        assert y.shape == (M, N) and y.dtype == torch.bfloat16
        assert _err(y, _want(a, b, bias, residual)) < 1e-2, M
        (key,) = [k for k in tt.kernel_cache() if k[:2] == (N, K) and k[-1] == "sm90"]
        assert tt.kernel_cache()[key].dynamic.bucket(M) in tt.kernel_cache()[key].dynamic.built()
    out = torch.empty((77, N), dtype=torch.float32, device="cuda")
    a, b, _, _ = _inputs(77, N, K, 7)
    assert tt.gemm(a, b, out=out) is out
    assert _err(out, a.float() @ b.float().T) < 1e-4


@pytest.mark.cuda(arch="sm_90a")
def test_gemm_on_sm90_falls_back_to_sm80_for_layout_nn():
    a, b, _, _ = _inputs(40, 136, 264, 3)
    y = tt.gemm(a, b.T.contiguous(), layout="nn", out_dtype=torch.float32)
    assert _err(y, a.float() @ b.float().T) < 1e-4


@pytest.mark.cuda(arch="sm_90a")
def test_cuda_graph_capture_of_two_m_in_different_buckets_on_sm90():
    N, K = 392, 520
    runs = [_inputs(M, N, K, M) for M in (5, 200)]  # buckets 1..16 and 129..256
    outs = [torch.empty((r[0].shape[0], N), dtype=torch.bfloat16, device="cuda") for r in runs]
    for (a, b, bias, residual), out in zip(runs, outs):
        tt.gemm(a, b, bias=bias, activation="silu", residual=residual, out=out)  # build and load before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    for out in outs:
        out.zero_()
    with torch.cuda.graph(graph):
        for (a, b, bias, residual), out in zip(runs, outs):
            tt.gemm(a, b, bias=bias, activation="silu", residual=residual, out=out)
    assert all(float(out.float().abs().sum()) == 0.0 for out in outs)  # captured, not run
    graph.replay()
    torch.cuda.synchronize()
    for r, out in zip(runs, outs):
        assert _err(out, _want(*r)) < 1e-2
    runs[1][0].copy_(runs[1][0].flip(0))  # new data, same addresses
    graph.replay()
    torch.cuda.synchronize()
    assert _err(outs[1], _want(*runs[1])) < 1e-2


class FakeQ(FakeA):
    """What ``attention_kernel`` reads of ``q``: its device."""


@pytest.mark.parametrize("setting, target", [("auto", "sm90"), ("sm80", "sm80")])
def test_attention_runs_the_devices_target(hopper, monkeypatch, setting, target):
    """On sm_90 ``attention`` builds the sm90 kernel (TMA + wgmma), built for the device's arch; with
    ``TVM_CDNA4_CUDA_TARGET=sm80`` the sm80-class one; ``target=`` names one whatever the device (the
    builds faked: no GPU here)."""
    import importlib

    from tvm_cdna4.cuda.build import CudaBuild
    from tvm_cdna4.kernels.attention.problem import AttentionProblem
    from tvm_cdna4.runtime import cuda

    built = []
    for name in ("sm80", "sm90"):
        module = importlib.import_module(f"tvm_cdna4.kernels.{name}.attention_target")
        monkeypatch.setattr(module, "build", lambda problem, config=None, name=name, **options: built.append(
            (name, options["arch"])) or CudaBuild("", b"", module.choose(problem) if name == "sm90" else None))
    monkeypatch.setattr(cuda, "load_build", lambda exe, prefix: "fn")
    monkeypatch.setattr(tt, "CUDA_TARGET", setting)
    problem = AttentionProblem(1, 4, 2, 300, 300, 128, causal=True)
    kernel = tt.attention_kernel(FakeQ(), problem)
    assert built == [(target, "sm_90")] and type(kernel.plan).__module__.endswith(f"{target}.attention_plan")
    assert tt.attention_kernel(FakeQ(), problem) is kernel  # cached
    other = {"sm80": "sm90", "sm90": "sm80"}[target]
    assert type(tt.attention_kernel(FakeQ(), problem, other).plan).__module__.endswith(f"{other}.attention_plan")


def test_attention_kernel_builds_a_named_config(hopper, monkeypatch):
    """``attention_kernel(..., target, config)`` (``run_attention``'s, the GPU tests' runner) builds that config,
    cached apart from the cost model's (the builds faked: no GPU here)."""
    from tvm_cdna4.cuda.build import CudaBuild
    from tvm_cdna4.kernels.attention.problem import AttentionProblem
    from tvm_cdna4.kernels.sm90 import attention_target
    from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig
    from tvm_cdna4.runtime import cuda

    built = []
    monkeypatch.setattr(attention_target, "build", lambda problem, config=None, **options: built.append(config) or CudaBuild(
        "", b"", config or attention_target.choose(problem)))
    monkeypatch.setattr(cuda, "load_build", lambda exe, prefix: "fn")
    problem = AttentionProblem(1, 4, 2, 300, 300, 128, causal=True)
    named = Sm90AttentionConfig(128, 2, epilogue="tma", split_kv_barrier=True)
    kernel = tt.attention_kernel(FakeQ(), problem, "sm90", named)
    assert built == [named] and kernel.plan.config == named
    assert tt.attention_kernel(FakeQ(), problem, "sm90").plan.config == attention_target.choose(problem)
    assert tt.attention_kernel(FakeQ(), problem, "sm90", named) is kernel and len(built) == 2


def test_run_attention_refuses_a_config_without_a_target():
    """A config is one target's kernel: without ``target=`` the device's op would run and ignore it."""
    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.kernels.attention.problem import AttentionProblem
    from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig

    with pytest.raises(ContractError, match="run_attention config") as info:
        tt.run_attention(AttentionProblem(1, 1, 1, 8, 8, 64), {}, config=Sm90AttentionConfig())
    assert info.value.operand == "config"
