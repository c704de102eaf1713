"""Stop 55 (bshd): ``tvm_cdna4.torch.attention`` of q, k, v passed as a model holds them, ``transpose(1, 2)`` views of
contiguous [B, S, H, D] storage, without a GPU (launches stubbed: ``benchmarks/dispatch.py``'s ``stubbed``). On sm_90
the op plans the ``"bshd"`` kernel and hands it the storage, no copy, and returns O as
``scaled_dot_product_attention`` does (q's strides); any other non-contiguous operand is refused naming it. On sm_80
(and on sm_90 forced to the sm80 target) the sm80 kernel takes the views the same way (stop 56). The fake
implementation gives the same shapes and strides."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tvm_cdna4.torch")

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4.kernels.sm80 import attention_target as sm80_attention_target  # noqa: E402
from tvm_cdna4.kernels.sm90 import attention_target  # noqa: E402

dispatch = benchmark_module("dispatch")
SDPA = torch.nn.functional.scaled_dot_product_attention


def _bshd(B, H, Hkv, Sq, Skv, D=64, device="cpu"):
    """q, k, v as ``proj(x).view(B, S, H, D).transpose(1, 2)`` gives them."""
    def one(S, heads):
        return torch.randn(B, S, heads, D, dtype=torch.bfloat16).to(device).transpose(1, 2)
    return one(Sq, H), one(Skv, Hkv), one(Skv, Hkv)


def test_on_sm90_transposed_views_run_the_bshd_kernel_on_their_storage():
    q, k, v = _bshd(2, 8, 2, 40, 56)
    assert not q.is_contiguous()
    planned = []
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        build = attention_target.build  # stubbed's: records the problem each build plans

        def recording(problem, config=None, arch="sm_90a"):
            planned.append(problem)
            return build(problem, config, arch)
        attention_target.build = recording
        try:
            for _ in range(2):  # the checked path, then the prepared launch of its key
                o, lse = tt.attention(q, k, v, causal=True, return_lse=True)
                want = SDPA(q, k, v, is_causal=True, enable_gqa=True)
                assert o.shape == want.shape == (2, 8, 40, 64) and o.stride() == want.stride() == q.stride()
                assert lse.shape == (2, 8, 40) and lse.is_contiguous()
                args = calls[-1]
                assert [tuple(a.shape) for a in args[:4]] == [(2, 40, 8, 64), (2, 56, 2, 64), (2, 56, 2, 64),
                                                              (2, 40, 8, 64)]
                assert all(a.is_contiguous() for a in args[:4])
                assert [a.data_ptr() for a in args[:4]] == [t.data_ptr() for t in (q, k, v, o)]  # no copy
            assert len(calls) == 2 and [p.layout for p in planned] == ["bshd"]
            assert any("bshd" in key for key in tt.kernel_cache())
            # the contiguous call of the same shapes: its own key and kernel ("bhsd"), not the bshd launch
            tt.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
            assert [p.layout for p in planned] == ["bshd", "bhsd"]
            assert calls[-1][0].shape == (2, 8, 40, 64)
        finally:
            attention_target.build = build


@pytest.mark.parametrize("bad, operand", [
    ("k contiguous", "k"),  # q bshd, k not: all three must be
    ("q [B, H, D, S] transposed", "q"),  # a transpose of another pair of dimensions
    ("v sliced", "v"),  # every other key of bshd storage
])
def test_on_sm90_other_strides_are_refused_naming_the_operand(bad, operand):
    q, k, v = _bshd(1, 4, 2, 16, 32)
    if bad == "k contiguous":
        k = k.contiguous()
    elif bad == "q [B, H, D, S] transposed":
        q = torch.randn(1, 4, 64, 16, dtype=torch.bfloat16).transpose(2, 3)
    else:
        v = torch.randn(1, 64, 2, 64, dtype=torch.bfloat16).transpose(1, 2)[:, :, ::2]
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        with pytest.raises(ValueError, match=f"argument '{operand}': .*non-contiguous|argument '{operand}': q is a"):
            tt.attention(q, k, v)
        assert list(calls) == []


@pytest.mark.parametrize("device", ["sm_80", "sm_90 forced to sm80"])
def test_on_sm80_transposed_views_run_the_bshd_kernel_on_their_storage(device):
    # an A100 (sm_80), or an H100 with TVM_CDNA4_CUDA_TARGET=sm80 (cuda_target's (arch, target) then ("sm_90", "sm80"))
    arch = "sm_80" if device == "sm_80" else "sm_90"
    q, k, v = _bshd(2, 4, 2, 24, 40)
    planned = []
    with dispatch.stubbed(arch, "sm80") as calls:
        calls.record = True
        build = sm80_attention_target.build  # stubbed's: plans the sm80 kernel

        def recording(problem, config=None, arch="sm_80"):
            planned.append((problem, arch))
            return build(problem, config, arch)
        sm80_attention_target.build = recording
        try:
            for _ in range(2):  # the checked path, then the prepared launch of its key
                o, lse = tt.attention(q, k, v, causal=True, return_lse=True)
                assert o.shape == (2, 4, 24, 64) and o.stride() == q.stride() and lse.shape == (2, 4, 24)
                args = calls[-1]
                assert [tuple(a.shape) for a in args[:4]] == [(2, 24, 4, 64), (2, 40, 2, 64), (2, 40, 2, 64),
                                                              (2, 24, 4, 64)]
                assert [a.data_ptr() for a in args[:4]] == [t.data_ptr() for t in (q, k, v, o)]  # no copy
            assert len(calls) == 2 and [(p.layout, a) for p, a in planned] == [("bshd", arch)]
            tt.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)  # its own key and kernel
            assert [p.layout for p, _ in planned] == ["bshd", "bhsd"] and calls[-1][0].shape == (2, 4, 24, 64)
        finally:
            sm80_attention_target.build = build


def test_on_sm80_other_strides_are_refused_naming_the_operand():
    q, k, v = _bshd(1, 4, 2, 16, 32)
    with dispatch.stubbed("sm_80", "sm80") as calls:
        calls.record = True
        with pytest.raises(ValueError, match="argument 'v': q is a transpose"):
            tt.attention(q, k, v.contiguous())
        with pytest.raises(ValueError, match="argument 'q': non-contiguous"):
            tt.attention(torch.randn(1, 4, 64, 16, dtype=torch.bfloat16).transpose(2, 3), k, v)
        assert list(calls) == []


def test_the_fake_attention_gives_bshd_shapes_and_strides():
    q, k, v = _bshd(2, 8, 2, 40, 56, device="meta")
    o, lse = torch.ops.tvm_cdna4.attention(q, k, v, False, None)
    assert o.shape == (2, 8, 40, 64) and o.stride() == q.stride() and lse.shape == (2, 8, 40)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        o, _ = torch.ops.tvm_cdna4.attention(q, k, v, True, None)
    assert o.stride() == q.stride()


def test_a_decode_step_q_is_both_layouts_and_runs_with_its_bshd_cache():
    # Sq = 1: q's transpose(1, 2) view is contiguous too; k and v (bshd, not contiguous) choose the layout
    q, k, v = _bshd(2, 8, 2, 1, 300)
    assert q.is_contiguous() and not k.is_contiguous()
    with dispatch.stubbed("sm_90", "sm90") as calls:
        calls.record = True
        for _ in range(2):
            o = tt.attention(q, k, v)
            assert [tuple(a.shape) for a in calls[-1][:4]] == [(2, 1, 8, 64), (2, 300, 2, 64), (2, 300, 2, 64),
                                                                (2, 1, 8, 64)]
            assert o.shape == (2, 8, 1, 64) and calls[-1][3].data_ptr() == o.data_ptr()
        assert len(calls) == 2
