"""``tvm_cdna4.torch.paged_attention`` without a GPU: its argument errors (a ContractError naming the tensor)
and its fake implementation (meta tensors: the shapes ``torch.compile`` traces with)."""

import pytest

torch = pytest.importorskip("torch")

from tvm_cdna4.errors import ContractError  # noqa: E402
from tvm_cdna4.torch import check_paged_arguments, paged_attention  # noqa: E402


def _args(B=2, nq=4, H=8, Hkv=2, D=128, pages=10, P=16, max_pages=3, kv=torch.bfloat16, device="meta"):
    q = torch.empty(B, nq, H, D, dtype=torch.bfloat16, device=device)
    k = torch.empty(pages, P, Hkv, D, dtype=kv, device=device)
    v = torch.empty(pages, P, Hkv, D, dtype=kv, device=device)
    table = torch.empty(B, max_pages, dtype=torch.int32, device=device)
    lens = torch.empty(B, dtype=torch.int32, device=device)
    return q, k, v, table, lens


def test_the_fake_implementation_gives_o_and_lse_shapes():
    q, k, v, table, lens = _args()
    o, lse = torch.ops.tvm_cdna4.paged_attention(q, k, v, table, lens, None, None, None)
    assert o.shape == (2, 4, 8, 128) and o.dtype == torch.bfloat16 and lse.shape == (2, 4, 8)
    assert lse.dtype == torch.float32 and o.device.type == "meta"
    o = paged_attention(q, k, v, table, lens)
    assert o.shape == q.shape
    problem = check_paged_arguments(*_args(kv=torch.float8_e4m3fn), None, torch.empty(2, device="meta"),
                                    torch.empty(2, device="meta"))
    assert problem.kv_dtype == "fp8" and problem.page_size == 16 and problem.max_pages == 3 and problem.num_pages == 10


@pytest.mark.parametrize("change, operand, match", [
    (lambda a: (a[0].float(), *a[1:]), "q", "dtype"),
    (lambda a: (a[0], a[1], a[2][:, :, :1].contiguous(), *a[3:]), "v_cache", "shape"),
    (lambda a: (a[0], a[1], a[2], a[3].long(), a[4]), "block_table", "dtype"),
    (lambda a: (*a[:4], a[4][:1]), "context_lens", "shape"),
    (lambda a: (a[0][:, :, :, :64].contiguous(), *a[1:]), "k_cache", "head dim"),
    (lambda a: (a[0].transpose(1, 2), *a[1:]), "q", "contiguous"),
])
def test_each_bad_tensor_is_named(change, operand, match):
    with pytest.raises(ContractError, match=match) as info:
        paged_attention(*change(_args()))
    assert info.value.operand == operand


def test_fields_of_the_problem_and_the_fp8_scales_are_named():
    with pytest.raises(ContractError, match="page_size") as info:
        paged_attention(*_args(P=24))
    assert info.value.operand == "k_cache"
    with pytest.raises(ContractError, match="queries") as info:
        paged_attention(*_args(nq=9))
    assert info.value.operand == "q"
    with pytest.raises(ContractError, match="fp8 caches take per-kv-head scales") as info:
        paged_attention(*_args(kv=torch.float8_e4m3fn))
    assert info.value.operand == "k_scale"
    with pytest.raises(ContractError, match="only fp8") as info:
        paged_attention(*_args(), k_scale=torch.empty(2, device="meta"), v_scale=torch.empty(2, device="meta"))
    with pytest.raises(ContractError, match="CUDA tensor"):
        paged_attention(*_args(device="cpu"))


def test_a_misaligned_tensor_is_named_before_any_launch():
    """The kernels copy Q, K and V in 16-byte cp.async chunks: a contiguous view whose data pointer is not
    16-byte aligned (one element into a buffer) is refused by name, not run into a misaligned-address fault."""
    from tvm_cdna4.torch_paged import check_paged_alignment

    q, k, v, _, _ = _args(device="cpu")
    check_paged_alignment(q, k, v)  # fresh tensors: aligned
    for operand in ("q", "k_cache", "v_cache"):
        t = {"q": q, "k_cache": k, "v_cache": v}[operand]
        shifted = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape)
        assert shifted.is_contiguous() and shifted.data_ptr() % 16
        tensors = {"q": q, "k_cache": k, "v_cache": v, operand: shifted}
        with pytest.raises(ContractError, match="16-byte aligned") as info:
            check_paged_alignment(**tensors)
        assert info.value.operand == operand and info.value.check == "alignment"


@pytest.mark.parametrize("keywords, operand", [
    (dict(k_scale=[0.5, 0.5], v_scale=[0.5, 0.5]), "k_scale"),  # a list (a float scale is taken: stop 55)
    (dict(context_lens=[5, 7]), "context_lens"),
    (dict(block_table=[[0, 1, 2], [3, 4, 5]]), "block_table"),
])
def test_a_non_tensor_is_named_before_the_ops_schema(keywords, operand):
    """Stop 54 (mistakes): a list reached the op, whose schema refused it in torch's words (a RuntimeError:
    "Expected a value of type 'Optional[Tensor]'"); a float k_scale did too until stop 55 took it (test_torch_edges)."""
    q, k, v, table, lens = _args(kv=torch.float8_e4m3fn if "k_scale" in keywords else torch.bfloat16)
    tensors = dict(block_table=table, context_lens=lens)
    tensors.update((n, keywords.pop(n)) for n in list(keywords) if n in tensors)
    with pytest.raises(ContractError, match="a torch.Tensor") as info:
        paged_attention(q, k, v, tensors["block_table"], tensors["context_lens"], **keywords)
    assert info.value.operand == operand and info.value.found in ("float", "list")


@pytest.mark.parametrize("scale", [True, "0.1"])
def test_a_bool_or_string_scale_is_refused(scale):
    """Stop 54 (mistakes): float() read True as 1.0 and "0.1" as 0.1."""
    with pytest.raises(ContractError, match="the softmax scale") as info:
        paged_attention(*_args(), scale=scale)
    assert info.value.operand == "scale" and info.value.found == repr(scale)


def _fake_device(monkeypatch, arch: str, row: str):
    """``torch_paged._kernels`` on a CPU tensor as on a GPU of ``arch``: the builds recorded (their plan and arch),
    nothing compiled or loaded, an empty kernel cache."""
    import contextlib

    from tvm_cdna4 import torch_paged
    from tvm_cdna4.kernels.sm80 import gemm
    from tvm_cdna4.runtime import cuda

    monkeypatch.setitem(torch_paged.HOOKS, "cuda_target", lambda device: (arch, row))
    monkeypatch.setitem(torch_paged.HOOKS, "DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(torch_paged, "_KERNELS", {})
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(gemm, "cached_build", lambda kind, key, p, arch, *rest: (kind, p, arch))
    monkeypatch.setattr(cuda, "load_build", lambda build, prefix="": build)
    return torch_paged


def _problem(kv=torch.float8_e4m3fn):
    q, k, v, table, lens = _args(kv=kv, device="cpu")
    scales = (torch.ones(2), torch.ones(2)) if kv == torch.float8_e4m3fn else (None, None)
    return q, check_paged_arguments(q, k, v, table, lens, None, *scales)


def test_the_op_plans_for_the_devices_arch_as_it_builds(monkeypatch):
    """An sm_80 GPU (no ``cvt.rn.f16x2.e4m3x2``, no PDL) where the planner's default device (no GPU here: the
    H200) has both: the cached plan is the sm_80 one, the one the kernels were built from."""
    from tvm_cdna4.kernels.sm80 import paged_decode_pdl

    torch_paged = _fake_device(monkeypatch, "sm_80", "sm80")
    monkeypatch.setattr(paged_decode_pdl, "PDL", True)
    q, problem = _problem()
    main, merge, p, _ = torch_paged._kernels(q, problem)
    assert main[1:] == (p, "sm_80") and not p.cvt and not p.pdl


def test_toggling_a_plan_flag_between_calls_builds_for_the_new_value(monkeypatch):
    """``paged_decode_pdl.PDL`` (and every ``paged_decode_rule.PLAN_FLAGS`` flag) in the kernel cache's key and the
    prepared launches' key: no kernel built for the other value is reused."""
    from tvm_cdna4.kernels.sm80 import paged_decode_pdl

    torch_paged = _fake_device(monkeypatch, "sm_90", "sm90")
    q, problem = _problem(torch.bfloat16)
    first = torch_paged._kernels(q, problem)
    monkeypatch.setattr(paged_decode_pdl, "PDL", True)
    second = torch_paged._kernels(q, problem)
    assert not first[2].pdl and second[2].pdl and second[0][1].pdl
    monkeypatch.setattr(paged_decode_pdl, "PDL", False)
    assert torch_paged._kernels(q, problem) is first

    keys = []

    def lookup(op, options, *tensors):
        keys.append(options)
        raise LookupError(op)  # the call's key is all this asks about
    monkeypatch.setattr(torch_paged, "_lookup", lookup)
    for pdl in (False, True):
        monkeypatch.setattr(paged_decode_pdl, "PDL", pdl)
        with pytest.raises(LookupError):
            paged_attention(*_args(device="cpu"))
    assert keys[0] != keys[1]
