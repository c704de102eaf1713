"""``tvm_cdna4.torch``'s argument checks and the tables they read (private: ``tvm_cdna4.torch`` re-exports the
public names, ``LAYOUTS``, ``ALIGNMENT``, ``check_arguments``, ``check_grouped_arguments``,
``check_attention_arguments``). Each check runs before anything launches, in the custom ops' real and fake
implementations (``torch.compile`` traces them), and names the argument, the rule, what was expected and what was
found (``tvm_cdna4.torch``'s docstring lists the rules); ``paged_attention``'s are ``tvm_cdna4.torch_paged``'s.
"""

from __future__ import annotations

import math

import torch

from .kernels.gemm.epilogue import ACTIVATIONS, INPUTS, PARAM_ORDER, Fusion

LAYOUTS = ("nt", "nn")
"""The layouts of the dynamic-M GEMM (A stored [M, K]: ``kernels.gemm.dynamic_m.check_layout``)."""

IN_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}
FP8_DTYPES = {torch.float8_e4m3fn: "fp8"}
"""``gemm``'s fp8 inputs (e4m3; the sm90 kernel only: ``check_fp8``), beside ``IN_DTYPES``."""
GEMM_DTYPES = {**IN_DTYPES, **FP8_DTYPES}
FP8_OUT = torch.bfloat16
"""``gemm``'s output dtype of fp8 inputs without ``out_dtype`` or ``out``."""
FP8_K_MULTIPLE = 16
"""fp8 rows of K one-byte elements: TMA's 16-byte global strides (``kernels.sm90.gemm_plan.check_problem``)."""
OUT_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
ALIGNMENT = 16
"""Bytes a tensor's data pointer must be aligned to (the kernels' 16-byte copies)."""
DEVICE_TYPES = ("cuda", "meta")
"""The device types the ops take (meta: ``torch.compile``'s tracing; a CPU harness adds ``"cpu"`` here,
``benchmarks/dispatch.py``: the checks read it from this module)."""


def _fail(argument: str, rule: str, expected, found, op: str = "gemm"):
    raise ValueError(f"tvm_cdna4.torch.{op}: argument '{argument}': {rule}; expected {expected}, found {found}")


def _tensor(name: str, t, device, dtypes: tuple, shape: tuple, op: str = "gemm", first: str = "a",
            contiguous: bool = True) -> None:
    """``t`` must be a tensor on ``device`` (``first``'s) of one of ``dtypes``, of ``shape``, contiguous (unless
    ``contiguous`` is False: the caller checks its strides)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tvm_cdna4.torch.{op}: argument '{name}' must be a torch.Tensor, not {type(t).__name__}")
    if t.device != device:
        _fail(name, f"every tensor is on the device of '{first}'", device, t.device, op)
    if t.dtype not in dtypes:
        _fail(name, "dtype", " or ".join(str(d) for d in dtypes), t.dtype, op)
    if tuple(t.shape) != tuple(shape):
        _fail(name, "shape", tuple(shape), tuple(t.shape), op)
    if contiguous and not t.is_contiguous():
        _fail(name, "non-contiguous tensors are refused (pass .contiguous(), or the layout of its storage)",
              "contiguous strides", tuple(t.stride()), op)


def _bshd(t) -> bool:
    """``t`` [B, H, S, D] is ``transpose(1, 2)`` of contiguous [B, S, H, D] storage: strides ``(S H D, D, H D, 1)``
    (those of extent-1 dimensions address nothing: ``is_contiguous``'s rule)."""
    return t.transpose(1, 2).is_contiguous()


def attention_layout(q, k, v, bshd) -> str:
    """The ``AttentionProblem.layout`` of the call's q, k and v (shapes and dtypes checked): ``"bhsd"`` where all three
    are contiguous, ``"bshd"`` where all three are ``transpose(1, 2)`` views of contiguous [B, S, H, D] storage
    (``_bshd``) and ``bshd()`` says the device's kernel reads it (sm80's and sm90's); else a ValueError naming the first
    operand off q's layout (or q itself)."""
    tensors = {"q": q, "k": k, "v": v}
    if all(t.is_contiguous() for t in tensors.values()):
        return "bhsd"
    reads = bshd()
    if reads and all(map(_bshd, tensors.values())):
        return "bshd"
    if reads and _bshd(q) and not q.is_contiguous():
        for name, t in tensors.items():
            if not _bshd(t):
                _fail(name, "q is a transpose(1, 2) view of [B, S, H, D] storage: k and v must be too (or all three "
                      "contiguous)", "bshd strides (S*H*D, D, H*D, 1)", tuple(t.stride()), "attention")
    rule = ("non-contiguous tensors are refused (pass .contiguous(), or a transpose(1, 2) view of contiguous "
            "[B, S, H, D] storage for q, k and v alike)" if reads else
            "non-contiguous tensors are refused (pass .contiguous(); this kernel reads no [B, S, H, D] storage)")
    name = next(n for n, t in tensors.items() if not t.is_contiguous())
    _fail(name, rule, "contiguous strides", tuple(tensors[name].stride()), "attention")


def _out_dtype(a, out_dtype, out):
    if out_dtype is None:
        return out.dtype if out is not None else (FP8_OUT if a.dtype in FP8_DTYPES else a.dtype)
    if out_dtype not in OUT_DTYPES:
        _fail("out_dtype", "an output dtype of the kernels", " or ".join(map(str, OUT_DTYPES)), out_dtype)
    return out_dtype


def _first(op: str, name: str, a, layout, rule: str) -> None:
    """The first operand (``a`` of ``gemm``, ``x`` of ``grouped_gemm``): a CUDA (or meta) tensor of an
    input dtype, a matrix (``rule`` names it); the layout."""
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"tvm_cdna4.torch.{op}: argument '{name}' must be a torch.Tensor, not {type(a).__name__}")
    if a.device.type not in DEVICE_TYPES:
        _fail(name, "a CUDA tensor", "device cuda", a.device, op)
    if a.dtype not in (GEMM_DTYPES if op == "gemm" else IN_DTYPES):
        fp8 = " or torch.float8_e4m3fn (gemm only)" if op == "gemm" else " (fp8 inputs: gemm only, the sm90 kernel)"
        _fail(name, "dtype", "torch.float16 or torch.bfloat16" + fp8, a.dtype, op)
    if layout not in LAYOUTS:
        _fail("layout", "a layout with A stored [M, K]", " or ".join(map(repr, LAYOUTS)), repr(layout), op)
    if a.dim() != 2:
        _fail(name, rule, "2 dimensions", f"shape {tuple(a.shape)}", op)


def _epilogue(op: str, first: str, device, activation, inputs: dict) -> None:
    """The activation and the fused inputs and ``out``: ``{name: (tensor or None, shape, dtypes)}``."""
    if activation is not None and activation not in ACTIVATIONS:
        _fail("activation", "an activation of the fused epilogue", " or ".join(ACTIVATIONS) + " or None",
              repr(activation), op)
    for name, (t, shape, dtypes) in inputs.items():
        if t is not None:
            _tensor(name, t, device, dtypes, shape, op, first)


def _extents(op: str, sizes: dict) -> None:
    """Each of ``sizes`` (``{name: (argument, size)}``: N, K, G) at least 1: the kernels are built for them (M, T
    may be 0: nothing launches)."""
    for name, (argument, size) in sizes.items():
        if size < 1:
            _fail(argument, f"{name} of at least 1 (a kernel is built for it; only the rows may be 0)", f"{name} >= 1",
                  f"{name} = {size}", op)


def _fused(M, N: int, odt, values: dict, groups: int = 0) -> dict:
    """The fused epilogue's inputs for ``_epilogue``, ``{name: (tensor or None, shape, dtypes)}``, from
    ``kernels.gemm.epilogue.INPUTS`` (the shape by the input's broadcast, per group for the per-column
    ones of a grouped GEMM; float32 or the output's dtype ``odt``); ``values``: the keywords by name."""
    return {i.name: (values[i.name], i.shape(M, N, groups), (torch.float32,) if i.dtype == "f32" else (odt,))
            for i in INPUTS}


def _fusion(activation, values: dict) -> Fusion:
    """The ``Fusion`` of the keywords given (``values``: every input of ``PARAM_ORDER``, a tensor or None)."""
    return Fusion(activation=activation, **{name: values[name] is not None for name in PARAM_ORDER})


def broadcast_scales(a, b, layout, row_scale, col_scale) -> tuple:
    """``(row_scale, col_scale)`` as the kernels read them, ``[M]`` and ``[N]``, from the shapes
    ``torch._scaled_mm`` takes too: a per-tensor scale (one element: 0-d, ``(1,)``, ``(1, 1)``, ...) broadcast to
    every row / column (a new [M] / [N] filled from it on the device, one small launch: no host synchronization), the
    row-wise ``[M, 1]`` / ``[1, N]`` viewed as ``[M]`` / ``[N]`` (no copy). Anything else is passed as it is, for
    ``check_arguments`` to name (a non-tensor, another shape; ``a`` or ``b`` not a matrix)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2):
        return row_scale, col_scale
    M, N = a.shape[0], b.shape[0] if layout == "nt" else b.shape[1]
    return _scale(row_scale, M, (M, 1)), _scale(col_scale, N, (1, N))


def _scale(t, size: int, rowwise: tuple):
    if not isinstance(t, torch.Tensor) or t.shape == (size,):
        return t
    if t.shape == rowwise:
        return t.view(size)
    return broadcast_one(t, size)


def broadcast_one(t, size: int):
    """A one-element tensor ``t`` (any shape: 0-d, ``(1,)``, ``(1, 1)``, ...) as a new ``[size]`` tensor of its
    dtype and device, filled from it on the device (one small launch: no host synchronization); anything else
    (another shape, a non-tensor) as it is, for the checks to name."""
    if not isinstance(t, torch.Tensor) or t.numel() != 1:
        return t
    return t.new_empty(size).copy_(t if t.dim() == 0 else t.view(()))


def flatten_leading(op: str, name: str, a, residual, row_scale, out) -> tuple:
    """``(lead, a, residual, row_scale, out)`` of an activation ``a`` of leading dims ``[..., K]`` (more than two
    dimensions; A stored [M, K] in every layout of ``LAYOUTS``): ``a`` viewed as the ``[M, K]`` the kernels take
    (``M`` the product of ``lead``, ``a.shape[:-1]``), as ``torch.nn.functional.linear`` takes it, ``residual`` and
    ``out`` ``[..., N]`` as ``[M, N]``, ``row_scale`` ``[...]`` or ``[..., 1]`` as ``[M]``: views, never copies.
    Another shape of those three is passed as it is (the checks of the ``[M, K]`` call name it); a tensor whose
    leading dimensions no view merges (a transposed batch) is refused naming it (``name`` is ``a``'s)."""
    lead = tuple(a.shape[:-1])
    M = math.prod(lead)
    if residual is None and row_scale is None and out is None:  # the usual call (a projection): one view
        return lead, _view(op, name, a, (M, a.shape[-1])), None, None, None
    views = []
    for argument, t, merged in ((name, a, True), ("residual", residual, True), ("row_scale", row_scale, False),
                                ("out", out, True)):
        if not isinstance(t, torch.Tensor) or t.dim() <= 1:
            views.append(t)
        elif merged and t.dim() > 2 and tuple(t.shape[:-1]) == lead:
            views.append(_view(op, argument, t, (M, t.shape[-1])))
        elif not merged and tuple(t.shape) in (lead, (*lead, 1)):
            views.append(_view(op, argument, t, (M,)))
        else:
            views.append(t)
    return (lead, *views)


def _view(op: str, argument: str, t, shape: tuple):
    try:
        return t.view(shape)
    except RuntimeError:  # leading dimensions no view merges: a copy would hide an allocation in every call
        _fail(argument, "leading dimensions that one view merges (contiguous ones, as torch.nn.functional.linear's;"
              " no copy is made)", f"a view of shape {shape}", f"shape {tuple(t.shape)}, strides {tuple(t.stride())}",
              op)


def check_arguments(a, b, layout, out_dtype, bias, activation, residual, row_scale, col_scale, out):
    """Check everything a launch needs but the data pointers (the fake implementation runs it too, and
    ``torch.compile`` traces it): ``(M, N, K, output dtype)``."""
    _first("gemm", "a", a, layout, "a matrix [M, K]")
    M, K = a.shape
    if not isinstance(b, torch.Tensor) or b.dim() != 2:
        _fail("b", "a matrix ([N, K] for layout 'nt', [K, N] for 'nn')", "2 dimensions",
              f"shape {tuple(b.shape)}" if isinstance(b, torch.Tensor) else type(b).__name__)
    N = b.shape[0] if layout == "nt" else b.shape[1]
    _extents("gemm", {"K": ("a", K), "N": ("b", N)})
    check_fp8(a, layout, K)
    _tensor("a", a, a.device, (a.dtype,), (M, K))
    _tensor("b", b, a.device, (a.dtype,), (N, K) if layout == "nt" else (K, N))
    odt = _out_dtype(a, out_dtype, out)
    values = dict(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
    _epilogue("gemm", "a", a.device, activation, {**_fused(M, N, odt, values), "out": (out, (M, N), (odt,))})
    return M, N, K, odt


# ------------------------------------------------------------------------------------ fp8 (gemm on sm_90 only)


def check_fp8(a, layout, K: int) -> None:
    """fp8 ``a`` (``FP8_DTYPES``; ``b`` must match it): layout ``"nt"`` and ``K % FP8_K_MULTIPLE == 0``, the
    rules of the sm90 fp8 kernel, the only one (``check_fp8_target``)."""
    if a.dtype not in FP8_DTYPES:
        return
    if layout != "nt":
        _fail("layout", "fp8 inputs are both K-major (a [M, K], b [N, K]: the sm90 fp8 kernel)", "'nt'", repr(layout))
    if K % FP8_K_MULTIPLE:
        _fail("a", f"fp8 rows of K one-byte elements are whole 16-byte chunks (TMA): K % {FP8_K_MULTIPLE} == 0",
              f"K a multiple of {FP8_K_MULTIPLE}", f"K = {K}")


def check_fp8_target(a, arch: str, target: str, M: int, N: int) -> None:
    """fp8 ``a`` where the sm90 kernel does not run it (another GPU, ``TVM_CDNA4_CUDA_TARGET=sm80``, or an M
    with ``M N >= 2^31``): a ValueError, not the sm80-class kernels (they have no fp8)."""
    if a.dtype in FP8_DTYPES:
        _fail("a", "fp8 (torch.float8_e4m3fn) runs on sm_90 GPUs (H100, H200) with the sm90 kernel only; the "
              "sm80-class kernels have no fp8", "an sm_90 device, TVM_CDNA4_CUDA_TARGET auto, M N < 2^31",
              f"{arch} ({a.device}), target {target}, M N = {M * N}")


def _check_alignment(op: str = "gemm", **tensors) -> None:
    for name, t in tensors.items():
        if t is not None and t.data_ptr() % ALIGNMENT:
            _fail(name, f"its data pointer must be {ALIGNMENT}-byte aligned (a view into another tensor may not be)",
                  f"a multiple of {ALIGNMENT}", hex(t.data_ptr()), op)


def check_grouped_arguments(x, w, offsets, layout, out_dtype, bias, activation, residual, row_scale, col_scale, out):
    """``check_arguments`` of ``grouped_gemm`` (its fake implementation runs it too): ``(T, G, N, K,
    output dtype)``. The offsets' values stay on the device (no host synchronization): only their
    dtype, shape and device are checked."""
    op = "grouped_gemm"
    _first(op, "x", x, layout, "the tokens sorted by group [T, K]")
    T, K = x.shape
    if not isinstance(w, torch.Tensor) or w.dim() != 3:
        _fail("w", "the groups' weights ([G, N, K] for layout 'nt', [G, K, N] for 'nn')", "3 dimensions",
              f"shape {tuple(w.shape)}" if isinstance(w, torch.Tensor) else type(w).__name__, op)
    G, N = w.shape[0], (w.shape[1] if layout == "nt" else w.shape[2])
    _extents(op, {"K": ("x", K), "G": ("w", G), "N": ("w", N)})
    _tensor("x", x, x.device, (x.dtype,), (T, K), op, "x")
    _tensor("w", w, x.device, (x.dtype,), (G, N, K) if layout == "nt" else (G, K, N), op, "x")
    if isinstance(offsets, torch.Tensor) and offsets.dtype != torch.int32:
        _fail("offsets", "dtype (group starts then T: offsets[g] .. offsets[g + 1] - 1 are group g's rows)",
              torch.int32, offsets.dtype, op)
    _tensor("offsets", offsets, x.device, (torch.int32,), (G + 1,), op, "x")
    odt = _out_dtype(x, out_dtype, out)
    values = dict(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
    _epilogue(op, "x", x.device, activation, {**_fused(T, N, odt, values, G), "out": (out, (T, N), (odt,))})
    return T, G, N, K, odt


def check_attention_arguments(q, k, v, causal, scale, bshd=lambda: False):
    """``check_arguments`` of ``attention`` (its fake implementation runs it too): the
    ``kernels.attention.problem.AttentionProblem`` of the call, or None where no kernel runs: an empty batch,
    heads, query or key sequence (``scaled_dot_product_attention`` takes them: ``tvm_cdna4.torch.empty_attention``),
    every other rule checked as for a kernel's shape. ``bshd()``: whether the device's kernel reads q, k, v passed as
    ``transpose(1, 2)`` views of [B, S, H, D] storage (``attention_layout``; asked only where one is not
    contiguous)."""
    from .kernels.attention.problem import HEAD_DIMS, AttentionProblem

    op = "attention"
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"tvm_cdna4.torch.{op}: argument 'q' must be a torch.Tensor, not {type(q).__name__}")
    if q.device.type not in DEVICE_TYPES:
        _fail("q", "a CUDA tensor", "device cuda", q.device, op)
    if q.dtype not in IN_DTYPES:
        _fail("q", "dtype", "torch.float16 or torch.bfloat16", q.dtype, op)
    if q.dim() != 4:
        _fail("q", "the queries [batch, heads, seq_q, head_dim]", "4 dimensions", f"shape {tuple(q.shape)}", op)
    B, H, Sq, D = map(int, q.shape)  # ints: the kernel bakes every extent in (torch.compile specializes them)
    if not isinstance(k, torch.Tensor) or k.dim() != 4:
        _fail("k", "the keys [batch, kv_heads, seq_kv, head_dim]", "4 dimensions",
              f"shape {tuple(k.shape)}" if isinstance(k, torch.Tensor) else type(k).__name__, op)
    Hkv, Skv = int(k.shape[1]), int(k.shape[2])
    _tensor("q", q, q.device, (q.dtype,), (B, H, Sq, D), op, "q", False)
    _tensor("k", k, q.device, (q.dtype,), (B, Hkv, Skv, D), op, "q", False)
    _tensor("v", v, q.device, (q.dtype,), (B, Hkv, Skv, D), op, "q", False)
    layout = attention_layout(q, k, v, bshd)
    if D not in HEAD_DIMS:
        _fail("q", "head dim (the last dimension)", " or ".join(map(str, HEAD_DIMS)), D, op)
    if H and (Hkv < 1 or H % Hkv):  # no query head: no kv head is read (SDPA takes it)
        _fail("k", "kv heads (dimension 1): at least one, dividing the query heads (GQA)", f"a divisor of {H}",
              Hkv, op)
    if not isinstance(causal, bool):
        _fail("causal", "a bool", "True or False", repr(causal), op)
    try:  # an empty extent checked as 1: the record still checks the scale (and every other field)
        problem = AttentionProblem(max(B, 1), *((H, Hkv) if H else (1, 1)), max(Sq, 1), max(Skv, 1), D, causal,
                                   IN_DTYPES[q.dtype], scale, layout)
    except ValueError:  # the fields above are checked: the scale is what the record refuses
        _fail("scale", "the softmax scale", "a positive finite float or None", repr(scale), op)
    return None if 0 in (B, H, Sq, Skv) else problem


__all__ = ["ALIGNMENT", "DEVICE_TYPES", "FP8_DTYPES", "GEMM_DTYPES", "IN_DTYPES", "LAYOUTS", "OUT_DTYPES", "broadcast_one",
           "broadcast_scales", "check_arguments", "flatten_leading",
           "attention_layout", "check_attention_arguments", "check_fp8", "check_fp8_target", "check_grouped_arguments"]
