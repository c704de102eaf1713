"""``tvm_cdna4.torch``: the CUDA GEMM and attention on torch tensors (runtime layer).

``gemm(a, b, *, layout="nt", out_dtype=None, bias=None, activation=None, residual=None,
row_scale=None, col_scale=None, out=None)`` computes ``out = epilogue(a @ op(b))`` on CUDA tensors:

* ``layout`` ``"nt"``: ``a`` [M, K], ``b`` [N, K] (``y = x W^T``, a linear layer); ``"nn"``: ``b``
  [K, N]. ``a`` and ``b`` are both float16 or both bfloat16, or both float8_e4m3fn (``FP8_DTYPES``: on
  sm_90 GPUs only, the Hopper kernel; layout ``"nt"``, ``K % 16 == 0``; the per-token x per-channel
  dequantization is ``row_scale`` x ``col_scale``; refused elsewhere: ``check_fp8_target``); ``out_dtype``
  (float32, float16 or bfloat16; default ``a``'s dtype, bfloat16 for fp8) is the output's. The epilogue keywords are those of
  ``kernels.gemm.epilogue.Fusion`` (f32 ``bias`` [N], ``row_scale`` [M], ``col_scale`` [N]; ``residual``
  of the output's shape and dtype; ``activation`` "relu", "silu" or "gelu"). ``row_scale`` and ``col_scale``
  take ``torch._scaled_mm``'s shapes too (``broadcast_scales``): one element (0-d, ``(1,)``, ``(1, 1)``: a
  per-tensor scale, copied to every row / column on the device in each call) and ``[M, 1]`` / ``[1, N]``. ``a`` may
  have leading dimensions, ``[..., K]`` (``torch.nn.functional.linear``'s input): viewed as ``[M, K]``, the output
  ``[..., N]``, ``residual`` and ``out`` ``[..., N]``, ``row_scale`` ``[...]`` or ``[..., 1]`` likewise (views, no
  copy: leading dimensions no view merges are refused, ``flatten_leading``); ``grouped_gemm``'s ``x`` too.
* The kernel is the dynamic-M GEMM of the shape class (N, K, dtypes, layout, epilogue, device:
  ``kernel_cache``), one per M bucket, built on first use and cached: a new M in a bucket already
  used launches the same kernel, with no build and no host synchronization (no ``.item()``, no
  copy to the host, no ``torch.cuda.synchronize``).
* Which kernels (``cuda_target``, chosen once per device and cached: no capability query per call): on
  an sm_90 GPU (H100, H200) the Hopper GEMM (``kernels.sm90``: TMA + wgmma, dynamic M; its bucket 1..16
  the weight-streaming decode kernel, ``kernels.sm90.gemm_dynamic``), built for ``sm_90a``; on sm_80,
  sm_86, sm_89 (and any other GPU) the sm80-class GEMM (``kernels.sm80``). The environment variable
  ``TVM_CDNA4_CUDA_TARGET=sm80`` (read once, when this module is imported; ``CUDA_TARGET`` holds it)
  keeps the sm80-class kernels on every GPU, sm_90 included; unset or ``auto``: the choice above. On
  sm_90 a problem the Hopper kernel does not run falls back to the sm80-class kernel on the same
  device: layout ``"nn"``, K not a multiple of 8 (TMA's 16-byte strides), an M with ``M N >= 2^31``
  (its 32-bit epilogue offsets). ``grouped_gemm`` takes the same choice (on sm_90 the Hopper
  grouped kernel, ``kernels.sm90.grouped_plan``, whose decode buckets of at most 16 rows per group keep the
  sm80 grouped kernel; layout ``"nn"`` or K not a multiple of 8: the sm80-class kernel); ``attention`` runs
  the device's target too (``attention_kernel``: on sm_90 ``kernels.sm90``'s TMA + wgmma forward).
* An eager call runs the launch prepared for its key (shapes, dtypes, device, options: ``_CALLS``) after
  its first call of that key, which takes the checked path and the custom op (docs/dynamic_m.md
  "Dispatch cost"); an M = 0 (T = 0) call's prepared launch allocates the empty output only (``_prepare_empty``);
  ``torch.compile``, dispatch modes and functorch transforms always take the op. The
  kernel caches key the values of the module switches their planner reads (each family's ``PLAN_FLAGS``, e.g.
  ``kernels.sm90.gemm_target``'s ``WEIGH_*`` / ``SHIFT_*`` / ``FINE_CUTS``: ``kernels.flags``), read where a call
  plans, so a flag set between two calls plans and builds for its new value (set back: the earlier kernels); the
  prepared launches do not read them: setting a listed flag through its module (``module.FLAG = value``,
  ``monkeypatch.setattr``) forgets every prepared launch (``kernels.flags.listen``), so each key's next call takes
  the checked path. A flag written past the module (``vars(module)[name] = ...``) is not seen until
  ``kernel_cache().clear()``. The
  outputs are new tensors every call, but for the LSE of ``attention`` and ``paged_attention`` where the call
  does not return it: the kernel writes that into a scratch kept beside the kernels (``empty_lse``), which
  nobody reads.
* It launches on torch's current CUDA stream, so it can be captured in a CUDA graph (build and load
  happen at a bucket's first call: run each bucket once before capturing).
* It is the custom op ``torch.ops.tvm_cdna4.gemm`` (``out=``: ``tvm_cdna4.gemm_out``) with a fake
  implementation, so ``torch.compile`` (``fullgraph=True`` included) traces through it.
* Arguments are checked before anything runs (``tvm_cdna4._torch_checks``), each error naming the argument, the
  rule, what was expected and what was found: a CUDA device (all on ``a``'s device), dtypes, ranks and shapes, and
  strides: **non-contiguous inputs are refused, not copied** (a copy would hide memory traffic and
  an allocation in every call; pass ``x.contiguous()``, or the ``layout`` that matches the storage:
  ``b = W.t()`` of a row-major ``W`` [N, K] is layout ``"nt"`` with ``b = W``), and so are data
  pointers not 16-byte aligned (the kernels copy 16-byte chunks).

``grouped_gemm(x, w, offsets, *, layout="nt", out_dtype=None, bias=None, activation=None, residual=None,
row_scale=None, col_scale=None, out=None)`` is the grouped GEMM of mixture-of-experts layers
(``kernels.gemm.grouped``): tokens sorted by expert, ``x`` [T, K], ``w`` [G, N, K] (``"nt"``) or [G, K, N]
(``"nn"``), ``offsets`` an int32 CUDA tensor [G + 1] (``offsets[0] = 0``, ``offsets[G] = T``,
non-decreasing, empty groups allowed: torch's ``_grouped_mm`` takes the ends ``offsets[1:]``), the
output [T, N] with rows ``offsets[g] .. offsets[g + 1] - 1`` = ``x[those rows] @ op(w[g])``; ``bias`` and
``col_scale`` per group ([G, N] f32), ``row_scale`` [T], ``residual`` [T, N]. One launch, the offsets read
on the device only (never copied to the host: the values are not checked, only the tensor's dtype,
shape and device; rows outside every group are left unwritten); the kernel is the grouped GEMM of the
shape class for the bucket of ``ceil(T / G)`` rows per group (``kernel_cache``), the custom op
``torch.ops.tvm_cdna4.grouped_gemm`` (``out=``: ``grouped_gemm_out``).

``attention(q, k, v, *, causal=False, scale=None, return_lse=False)`` is the attention forward
(``kernels.sm80.attention_plan``; on sm_90 ``kernels.sm90.attention_plan``): ``q`` [B, H, Sq, D], ``k`` and ``v`` [B, Hkv,
Skv, D] (GQA: ``Hkv`` divides ``H``; query head ``h`` reads kv head ``h // (H / Hkv)``), all float16 or
all bfloat16, D 64 or 128, contiguous, or all three ``transpose(1, 2)`` views of contiguous [B, S, H, D]
storage (a model's ``proj(x).view(B, S, H, D).transpose(1, 2)``: the sm80 and sm90 kernels of ``layout="bshd"`` read
that storage, no copy, and O comes back with q's strides, as SDPA returns it); ``causal``: row ``i`` sees keys ``j <= i`` (``is_causal`` of
``torch.nn.functional.scaled_dot_product_attention``); ``scale`` defaults to ``1 / sqrt(D)``. Returns
``O`` [B, H, Sq, D] in the inputs' dtype, or with ``return_lse=True`` the pair ``(O, LSE)``, LSE the
float32 [B, H, Sq] natural log-sum-exp of each row's scaled scores (what a backward pass reads). The
kernel bakes every extent in, so its cache key (``kernel_cache``: ``("attention", B, H, Hkv, Sq, Skv, D,
causal, scale, dtype, layout, arch, device, target)``) is the whole shape: a new shape builds once (a few seconds;
then the on-disk build cache). An empty batch, heads or query sequence (``scaled_dot_product_attention`` takes
them) returns the empty outputs, and no keys (Skv = 0) O zeros and LSE ``-inf`` (``empty_attention``): no build, no
launch, the other rules checked all the same. It is the custom op ``torch.ops.tvm_cdna4.attention`` (both outputs)
with a fake implementation; the argument checks are those of ``gemm`` (device, dtypes, shapes,
contiguous strides, 16-byte aligned data) plus the head rules above.

``paged_attention(q, k_cache, v_cache, block_table, context_lens, *, scale=None, k_scale=None, v_scale=None,
return_lse=False)`` is paged decode attention (``tvm_cdna4.torch_paged``, whose docstring tells it).
"""

from __future__ import annotations

import contextlib
import math

try:
    import torch
except ImportError as err:  # the runtime extra, not a hard dependency of the package
    raise ImportError("tvm_cdna4.torch needs PyTorch: pip install 'tvm_cdna4[cuda]'") from err

import os
import threading
from typing import Optional

from ._torch_checks import (ALIGNMENT, DEVICE_TYPES, FP8_DTYPES, GEMM_DTYPES, IN_DTYPES, LAYOUTS, OUT_DTYPES,
                            _check_alignment, _fail, _fusion, _out_dtype, broadcast_scales, check_arguments,
                            check_attention_arguments, check_fp8_target, check_grouped_arguments, flatten_leading)
from ._torch_checks import check_fp8  # noqa: F401 (re-exported)
from .errors import ContractError
from .kernels.flags import forget as _forget_flags, listen, sets as _flag_sets
from .kernels.gemm.epilogue import Fusion


class _KernelCache(dict):
    """``kernel_cache()``: clearing it forgets the eager calls' prepared launches too (``_CALLS``), their LSE
    scratches (``_SCRATCH``), the paged op's kernels, workspaces and scale buffers (``torch_paged.clear``) and the
    planners' kept flag values (``kernels.flags.forget``: a flag written past its module is read afresh), so
    their memory goes back to torch's allocator (drop CUDA graphs captured through them first); removing one kernel forgets every prepared launch (a launch holds its kernel, and
    its key does not name the kernel's), so the next call of that shape class builds afresh."""

    def clear(self) -> None:
        _CALLS.clear()
        _SCRATCH.clear()
        _paged.clear()
        _forget_flags()  # the planners' flags read afresh: one written past its module is seen (kernels.flags)
        super().clear()

    def __delitem__(self, key) -> None:
        _CALLS.clear()
        super().__delitem__(key)

    def pop(self, key, *default):
        _CALLS.clear()
        return super().pop(key, *default)

    def popitem(self):
        _CALLS.clear()
        return super().popitem()


def _forget_calls() -> None:
    """A planner's flag was set (``kernels.flags.listen``): no prepared launch may serve the kernel of the old value."""
    _CALLS.clear()


_KERNELS: dict = _KernelCache()
_SCRATCH: dict = {}
"""``{(LSE shape, device): tensor}``: ``empty_lse``'s scratches, kept as long as the kernels are."""
_CALLS: dict = {}
"""``{call key: launch}``: the prepared launch of each shape class an eager call has run (``_lookup``)."""
listen(_forget_calls)
_MISSED = threading.local()
"""``sets``: ``kernels.flags.sets()`` when this thread's call last missed ``_CALLS`` (``_lookup``; ``_store``)."""
CALL_CACHE_LIMIT = 4096
"""Prepared launches kept (``_CALLS``; a key holds M, so a server's every M is one): past it the oldest goes."""

TARGET_ENV = "TVM_CDNA4_CUDA_TARGET"
TARGET_SETTINGS = ("auto", "sm80")
CUDA_TARGET = os.environ.get(TARGET_ENV, "auto") or "auto"
"""``gemm``'s choice of CUDA kernels (the module docstring): ``"auto"`` (sm90 on sm_90 GPUs, else sm80) or
``"sm80"`` (the sm80-class kernels everywhere); read once from ``TVM_CDNA4_CUDA_TARGET`` at import."""

_DEVICES: dict = {}
"""``{device index: (arch, target)}``: each device's capability is read once (``cuda_target``)."""
_SM90_REFUSED: set = set()
"""The shape classes the sm90 kernel refuses (``_sm90_kernel``): they run the sm80-class kernel."""


def kernel_cache() -> dict:
    """The loaded kernels, ``{(N, K, dtype, out dtype, layout, Fusion, arch, device, flags): DynamicKernel}``
    (``gemm``; ``flags`` the target's ``plan_flags()``; the sm90 kernel's key ends with ``"sm90"``)
    and ``{("grouped", G, N, K, ...): DynamicKernel}`` (``grouped_gemm``) (``runtime.cuda.DynamicKernel``;
    its ``dynamic.built()`` lists the buckets built so far). Its ``clear()`` frees the attention and paged ops'
    memory too (``_KernelCache``)."""
    return _KERNELS


def choose_target(capability: tuple[int, int], setting: str = "auto") -> str:
    """The GEMM target of a GPU of compute ``capability`` under ``setting`` (``CUDA_TARGET``): ``"sm90"`` for
    (9, 0) unless ``setting`` is ``"sm80"``, else ``"sm80"``. A ValueError names a setting it does not know."""
    if setting not in TARGET_SETTINGS:
        _fail(TARGET_ENV, "the CUDA kernels tvm_cdna4.torch runs", " or ".join(map(repr, TARGET_SETTINGS)),
              repr(setting))
    return "sm90" if tuple(capability) == (9, 0) and setting == "auto" else "sm80"


def cuda_target(device) -> tuple[str, str]:
    """``(arch, target)`` of a CUDA ``device``: its capability read once and cached (``choose_target``)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _DEVICES:
        major, minor = torch.cuda.get_device_capability(index)
        _DEVICES[index] = (f"sm_{major}{minor}", choose_target((major, minor), CUDA_TARGET))
    return _DEVICES[index]


def _arch(t) -> str:
    return cuda_target(t.device)[0]


def _sm90_kernel(key: tuple, problem, device):
    """The cached sm90 dynamic-M kernel of the shape class, None where the sm90 kernel refuses it."""
    from .kernels.sm90.gemm_target import build
    from .runtime.cuda import DynamicKernel

    if key not in _KERNELS and key not in _SM90_REFUSED:
        try:
            _KERNELS[key] = DynamicKernel(build(problem), device=device)
        except ContractError:  # layout nn, K % 8 != 0, ...: the sm80-class kernel runs it
            _SM90_REFUSED.add(key)
    return _KERNELS.get(key)


def _kernel(a, N: int, K: int, odt, layout: str, fusion: Fusion, M: int = 1):
    """The cached dynamic-M kernel of the shape class (built lazily per bucket): the device's target's
    (``cuda_target``), sm80's where the sm90 kernel refuses the problem or M."""
    from .runtime.cuda import DynamicKernel
    from .kernels.sm80.gemm import build_dynamic, plan_flags

    arch, target = cuda_target(a.device)
    dt, ot = GEMM_DTYPES[a.dtype], OUT_DTYPES[odt]
    key = (N, K, dt, ot, layout, fusion, arch, a.device.index)
    if target == "sm90":
        from .kernels.gemm.problem import GemmProblem
        from .kernels.sm90.gemm_target import plan_flags as sm90_flags

        kernel = _sm90_kernel((*key, sm90_flags(), "sm90"), GemmProblem(None, N, K, dt, layout, ot, fusion), a.device)
        if kernel is not None and M <= kernel.dynamic.limit:
            return kernel
    check_fp8_target(a, arch, target, M, N)
    key = (*key, plan_flags())
    if key not in _KERNELS:
        _KERNELS[key] = DynamicKernel(build_dynamic(N, K, dt, layout, ot, arch, fusion=fusion), device=a.device)
    return _KERNELS[key]


def _launch(a, b, out, layout, bias, activation, residual, row_scale, col_scale) -> None:
    M, N, K, odt = check_arguments(a, b, layout, out.dtype, bias, activation, residual, row_scale, col_scale, out)
    if M == 0:
        return
    inputs = dict(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
    fusion = _fusion(activation, inputs)
    _check_alignment(a=a, b=b, out=out, **inputs)
    with on_device(a.device):  # the loaded kernels launch on the current CUDA device
        _kernel(a, N, K, odt, layout, fusion, M).launch(a, b, out, *(inputs[name] for name in fusion.inputs()))


# ------------------------------------------------------------------------------------ eager calls

FUSED_KEYWORDS = ("bias", "residual", "row_scale", "col_scale")
"""The GEMMs' epilogue keywords in the order the eager path passes them (``_prepare``)."""
_UNCACHED = object()
"""What ``_sig`` gives for an argument no prepared launch may serve: no key holds it."""
_PLAIN = (torch.Tensor, torch.nn.Parameter)
"""The tensor classes a key may hold (``_sig``)."""


def _eager() -> bool:
    """Whether a call may skip the custom op: not while ``torch.compile`` traces (it needs the op), a
    torch dispatch mode is on (``FakeTensorMode``, ``make_fx``, ``torch.export``), a functorch transform
    (``vmap``, ``grad``) is active, or the profiler records (the op names the call in its trace)."""
    return not (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack()
                or torch._C._are_functorch_transforms_active() or torch.autograd._profiler_enabled())


def _sig(t):
    """What a call's key holds of a tensor argument: None, or its (shape, dtype, device); ``_UNCACHED``
    for a non-tensor, a tensor subclass (``FakeTensor``; ``nn.Parameter`` is served) or a tensor that
    requires grad while grad is enabled (the custom op's autograd answer stays the op's)."""
    if t is None:
        return None
    if t.__class__ not in _PLAIN or (t.requires_grad and torch.is_grad_enabled()):
        return _UNCACHED
    return t.shape, t.dtype, t.device


def _lookup(op: str, options: tuple, *tensors):
    """``(key, launch)``: the call's key in ``_CALLS`` (the op, its non-tensor ``options``, each tensor's
    ``_sig``) and its prepared launch (None where none is prepared yet), the key hashed once; ``(None, None)``
    where the call must take the custom op (``_eager``) or no launch may be prepared for it."""
    if not _eager():
        return None, None
    key = (op, options, *map(_sig, tensors))
    try:
        launch = _CALLS.get(key)
    except TypeError:  # an unhashable option (a list for a layout ...): the checks name it
        return None, None
    if launch is None:
        if _UNCACHED in key:  # never stored: such a key finds nothing
            return None, None
        _MISSED.sets = _flag_sets()  # what _store compares
    return key, launch


def _key(op: str, options: tuple, *tensors):
    """The call's key in ``_CALLS`` (``_lookup``'s), or None where no launch may be prepared for it."""
    return _lookup(op, options, *tensors)[0]


def _store(key, launch) -> None:
    """Keep ``launch`` for ``key``, but where a flag was set (or the caches cleared) since this thread's call missed
    (``_MISSED``): another thread's set while the call planned may have left it the kernel of the old value."""
    if getattr(_MISSED, "sets", None) != _flag_sets():
        return
    if len(_CALLS) >= CALL_CACHE_LIMIT:  # the oldest key goes (dicts keep insertion order)
        del _CALLS[next(iter(_CALLS))]
    _CALLS[key] = launch


def _ready(tensors, strided=torch.strided) -> bool:
    """What the key does not hold: every tensor contiguous, its data pointer ``ALIGNMENT``-byte aligned
    (where not, the call takes the checked path, which names the argument)."""
    for t in tensors:
        if t.layout is not strided or not t.is_contiguous() or t.data_ptr() % ALIGNMENT:
            return False
    return True


def _prepare(key, kernel, shape: tuple, odt, device, fusion: Fusion, leading: int = 0) -> None:
    """Store the launch of a GEMM call that passed its checks: ``launch(a, b, out, more)`` with ``more``
    the ``leading`` tensors before the epilogue keywords (a grouped GEMM's offsets) then those in
    ``FUSED_KEYWORDS`` order; it runs the bucket's loaded ``kernel`` (``runtime.cuda.Kernel``: its
    workspace converted once) on torch's current stream, with the tensors' device current (``bound``), and
    returns the output, or None (nothing run) where ``_ready`` refuses a tensor."""
    fn, extra = bound(kernel.fn, device), kernel.extra()
    picks = (*range(leading), *(leading + FUSED_KEYWORDS.index(n) for n in fusion.inputs()))

    def launch(a, b, out, more):
        given_out = out is not None
        args = (a, b, out, *(more[i] for i in picks)) if given_out else (a, b, *(more[i] for i in picks))
        if not _ready(args):
            return None
        if out is None:
            out = torch.empty(shape, dtype=odt, device=device)
            args = (a, b, out, *args[2:])
        fn(*args, *extra)
        if given_out:  # what the custom op's mutates_args does: autograd sees out was written
            torch.autograd.graph.increment_version(out)
        return out
    _store(key, launch)


def _prepare_empty(key, shape: tuple, odt, device) -> None:
    """Store the launch of a GEMM call with no rows (M or T 0: nothing launches, ``_launch``): ``launch(a, b, out,
    more)`` returns ``out`` as it is, or a new empty output; None (the checked path, which names it) where a
    tensor is not a dense contiguous one (the checks refuse it; they read no data pointer where nothing launches)."""
    def launch(a, b, out, more):
        if not _dense((a, b, out, *more)):
            return None
        return torch.empty(shape, dtype=odt, device=device) if out is None else out
    _store(key, launch)


def _dense(tensors, strided=torch.strided) -> bool:
    """What the key of a call that launches nothing (an empty M, T, batch) does not hold: every tensor (None
    skipped) dense and contiguous, as the checks ask (they read no data pointer where nothing launches); where not,
    the call takes the checked path, which names it."""
    for t in tensors:
        if t is not None and (t.layout is not strided or not t.is_contiguous()):
            return False
    return True


def _prepare_empty_attention(key) -> None:
    """Store the launch of an attention call no kernel runs (``empty_attention``): the outputs, or None (the checked
    path) where ``_dense`` refuses a tensor (no query head: k and v still hold elements)."""
    def launch(q, k, v, return_lse):
        return empty_attention(q) if _dense((q, k, v)) else None
    _store(key, launch)


_SAME_DEVICE = contextlib.nullcontext()
_CONTIGUOUS = torch.contiguous_format


def on_device(device):
    """A context that makes ``device`` the current CUDA device for a launch (the loaded kernels launch on the
    current one): nothing where it already is (the common case, one ``current_device`` read), else
    ``torch.cuda.device(device)``."""
    index = device.index
    if index is None or index == torch.cuda.current_device():
        return _SAME_DEVICE
    return torch.cuda.device(device)


def bound(fn, device):
    """``fn`` launching with ``device`` current (the loaded kernels launch on the current CUDA device): ``fn``
    itself where no other device can be current (a process of one GPU, or a device that is not CUDA: the
    count read once, here), else ``fn`` under ``on_device`` (one ``current_device`` read per call)."""
    if device.type != "cuda" or torch.cuda.device_count() <= 1:
        return fn

    def switched(*args):
        with on_device(device):
            return fn(*args)
    return switched


def empty_lse(shape: tuple, device):
    """The LSE scratch of prepared launches of this LSE shape on ``device``: where a call does not return the
    LSE, the kernel writes it here (``_prepare_attention``, ``torch_paged``) and nobody reads it; also the
    template of a fresh LSE (``torch.empty_like`` of it: contiguous, cheaper than ``torch.empty``). It is kept in
    ``_SCRATCH`` as long as the kernels are, not with a prepared launch: a launch evicted from the call cache, or
    prepared again, must not free memory that a CUDA graph captured through it, or a kernel on another stream,
    still writes; ``kernel_cache().clear()`` frees it with the kernels and workspaces (drop graphs captured
    before, as for those)."""
    key = (tuple(shape), device)
    scratch = _SCRATCH.get(key)
    if scratch is None:
        scratch = _SCRATCH[key] = torch.empty(shape, dtype=torch.float32, device=device)
    return scratch


def _prepare_attention(key, kernel, q, layout: str = "bhsd") -> None:
    """Store the launch of an attention call that passed its checks: ``launch(q, k, v, return_lse)`` ->
    ``(O, LSE)``, or None (nothing run) where ``_ready`` refuses a tensor. O is a new tensor every call; LSE
    is a new tensor where the call returns it, else the shape's scratch (``empty_lse``: its values are
    nobody's; two streams' calls of one key may write it at once, garbage over garbage, never read).
    ``layout`` ``"bshd"``: q, k, v and O are ``transpose(1, 2)`` views of [B, S, H, D] storage, which the kernel
    takes as stored (``_ready`` checks the storage views)."""
    fn, extra, scratch = bound(kernel.fn, q.device), kernel.extra(), empty_lse(q.shape[:3], q.device)

    def launch(q, k, v, return_lse):
        if not _ready((q, k, v)):
            return None
        o = torch.empty_like(q, memory_format=_CONTIGUOUS)
        lse = torch.empty_like(scratch) if return_lse else scratch
        fn(q, k, v, o, lse, *extra)
        return o, lse

    def launch_bshd(q, k, v, return_lse):  # ``launch`` on the storage views; O back as q's view
        ran = launch(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), return_lse)
        return None if ran is None else (ran[0].transpose(1, 2), ran[1])
    _store(key, launch_bshd if layout == "bshd" else launch)


def _out_shape(a, b, layout):
    return (a.shape[0], b.shape[0] if layout == "nt" else b.shape[1])


@torch.library.custom_op("tvm_cdna4::gemm", mutates_args=())
def _gemm_op(a: torch.Tensor, b: torch.Tensor, layout: str, out_dtype: Optional[torch.dtype],  # noqa: UP045
             bias: Optional[torch.Tensor], activation: Optional[str], residual: Optional[torch.Tensor],  # noqa: UP045
             row_scale: Optional[torch.Tensor], col_scale: Optional[torch.Tensor]) -> torch.Tensor:  # noqa: UP045
    out = torch.empty(_out_shape(a, b, layout), dtype=_out_dtype(a, out_dtype, None), device=a.device)
    _launch(a, b, out, layout, bias, activation, residual, row_scale, col_scale)
    return out


@_gemm_op.register_fake
def _gemm_fake(a, b, layout, out_dtype, bias, activation, residual, row_scale, col_scale):
    _, _, _, odt = check_arguments(a, b, layout, out_dtype, bias, activation, residual, row_scale, col_scale, None)
    return a.new_empty(_out_shape(a, b, layout), dtype=odt)


@torch.library.custom_op("tvm_cdna4::gemm_out", mutates_args=("out",))
def _gemm_out_op(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, layout: str,
                 bias: Optional[torch.Tensor], activation: Optional[str], residual: Optional[torch.Tensor],  # noqa: UP045
                 row_scale: Optional[torch.Tensor], col_scale: Optional[torch.Tensor]) -> None:  # noqa: UP045
    _launch(a, b, out, layout, bias, activation, residual, row_scale, col_scale)


@_gemm_out_op.register_fake
def _gemm_out_fake(a, b, out, layout, bias, activation, residual, row_scale, col_scale):
    check_arguments(a, b, layout, out.dtype, bias, activation, residual, row_scale, col_scale, out)


def gemm(a, b, *, layout: str = "nt", out_dtype=None, bias=None, activation=None, residual=None, row_scale=None,
         col_scale=None, out=None):
    """``epilogue(a @ op(b))`` on CUDA tensors (the module docstring): a new tensor, or ``out`` filled."""
    given = lead = None
    if isinstance(a, torch.Tensor) and a.dim() > 2:  # [..., K]: viewed as [M, K] (torch.nn.functional.linear's)
        given, (lead, a, residual, row_scale, out) = out, flatten_leading("gemm", "a", a, residual, row_scale, out)
    if row_scale is not None or col_scale is not None:  # torch._scaled_mm's per-tensor and row-wise shapes
        row_scale, col_scale = broadcast_scales(a, b, layout, row_scale, col_scale)
    fused = (bias, residual, row_scale, col_scale)
    key, launch = _lookup("gemm", (layout, out_dtype, activation), a, b, out, *fused)
    if launch is not None:
        y = launch(a, b, out, fused)
        if y is not None:
            return y if lead is None else _leading(y, lead, given)
    M, N, K, odt = check_arguments(a, b, layout, out_dtype, bias, activation, residual, row_scale, col_scale, out)
    if out is None:
        out = torch.ops.tvm_cdna4.gemm(a, b, layout, out_dtype, bias, activation, residual, row_scale, col_scale)
    else:
        torch.ops.tvm_cdna4.gemm_out(a, b, out, layout, bias, activation, residual, row_scale, col_scale)
    if key is not None and a.device.type != "meta":  # meta: a trace, nothing launched
        if M == 0:  # nothing launches: the key's next call allocates the output only
            _prepare_empty(key, (M, N), odt, a.device)
        else:
            fusion = _fusion(activation, dict(zip(FUSED_KEYWORDS, fused)))
            _prepare(key, _kernel(a, N, K, odt, layout, fusion, M).kernel(M), (M, N), odt, a.device, fusion)
    return out if lead is None else _leading(out, lead, given)


def _leading(y, lead: tuple, given):
    """The output of an activation of leading dims ``lead`` (``flatten_leading``): ``given`` (the caller's
    ``out``) where there is one, else ``y`` [M, N] viewed as ``[*lead, N]``."""
    return given if given is not None else y.view(*lead, y.shape[-1])


# ------------------------------------------------------------------------------------ grouped GEMM


def _grouped_kernel(x, G: int, N: int, K: int, odt, layout: str, fusion: Fusion):
    """The cached grouped GEMM of the shape class (one kernel per bucket of rows per group, built lazily): the
    device's target's (``cuda_target``: on sm_90 ``kernels.sm90``'s, its decode buckets the sm80 grouped
    kernel's, ``kernels.sm90.grouped_plan``), sm80's where the sm90 kernel refuses the problem (layout ``nn``,
    K % 8 != 0)."""
    from .runtime.cuda import DynamicKernel
    from .kernels.sm80.gemm import build_grouped, plan_flags

    arch, target = cuda_target(x.device)
    key = ("grouped", G, N, K, IN_DTYPES[x.dtype], OUT_DTYPES[odt], layout, fusion, arch, x.device.index)
    if target == "sm90":
        from .kernels.gemm.problem import GemmProblem
        from .kernels.sm90.gemm_target import plan_flags as sm90_flags

        problem = GemmProblem(None, N, K, IN_DTYPES[x.dtype], layout, OUT_DTYPES[odt], fusion, groups=G)
        kernel = _sm90_kernel((*key, sm90_flags(), "sm90"), problem, x.device)
        if kernel is not None:
            return kernel
    key = (*key, plan_flags())
    if key not in _KERNELS:
        _KERNELS[key] = DynamicKernel(build_grouped(G, N, K, IN_DTYPES[x.dtype], layout, OUT_DTYPES[odt], arch,
                                                    fusion=fusion), device=x.device)
    return _KERNELS[key]


def _grouped_launch(x, w, offsets, out, layout, bias, activation, residual, row_scale, col_scale) -> None:
    T, G, N, K, odt = check_grouped_arguments(x, w, offsets, layout, out.dtype, bias, activation, residual, row_scale,
                                              col_scale, out)
    if T == 0:
        return
    inputs = dict(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
    fusion = _fusion(activation, inputs)
    _check_alignment("grouped_gemm", x=x, w=w, offsets=offsets, out=out, **inputs)
    with on_device(x.device):
        _grouped_kernel(x, G, N, K, odt, layout, fusion).launch(x, w, out, offsets,
                                                                *(inputs[name] for name in fusion.inputs()))


def _grouped_shape(x, w, layout):
    return (x.shape[0], w.shape[1] if layout == "nt" else w.shape[2])


@torch.library.custom_op("tvm_cdna4::grouped_gemm", mutates_args=())
def _grouped_op(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor, layout: str,
                out_dtype: Optional[torch.dtype], bias: Optional[torch.Tensor], activation: Optional[str],  # noqa: UP045
                residual: Optional[torch.Tensor], row_scale: Optional[torch.Tensor],  # noqa: UP045
                col_scale: Optional[torch.Tensor]) -> torch.Tensor:  # noqa: UP045
    out = torch.empty(_grouped_shape(x, w, layout), dtype=_out_dtype(x, out_dtype, None), device=x.device)
    _grouped_launch(x, w, offsets, out, layout, bias, activation, residual, row_scale, col_scale)
    return out


@_grouped_op.register_fake
def _grouped_fake(x, w, offsets, layout, out_dtype, bias, activation, residual, row_scale, col_scale):
    odt = check_grouped_arguments(x, w, offsets, layout, out_dtype, bias, activation, residual, row_scale, col_scale,
                                  None)[4]
    return x.new_empty(_grouped_shape(x, w, layout), dtype=odt)


@torch.library.custom_op("tvm_cdna4::grouped_gemm_out", mutates_args=("out",))
def _grouped_out_op(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor, out: torch.Tensor, layout: str,
                    bias: Optional[torch.Tensor], activation: Optional[str],  # noqa: UP045
                    residual: Optional[torch.Tensor], row_scale: Optional[torch.Tensor],  # noqa: UP045
                    col_scale: Optional[torch.Tensor]) -> None:  # noqa: UP045
    _grouped_launch(x, w, offsets, out, layout, bias, activation, residual, row_scale, col_scale)


@_grouped_out_op.register_fake
def _grouped_out_fake(x, w, offsets, out, layout, bias, activation, residual, row_scale, col_scale):
    check_grouped_arguments(x, w, offsets, layout, out.dtype, bias, activation, residual, row_scale, col_scale, out)


def grouped_gemm(x, w, offsets, *, layout: str = "nt", out_dtype=None, bias=None, activation=None, residual=None,
                 row_scale=None, col_scale=None, out=None):
    """The grouped GEMM on CUDA tensors (the module docstring): a new [T, N] tensor, or ``out`` filled."""
    given = lead = None
    if isinstance(x, torch.Tensor) and x.dim() > 2:  # [..., K]: viewed as [T, K], as gemm's a
        given, (lead, x, residual, row_scale, out) = out, flatten_leading("grouped_gemm", "x", x, residual, row_scale,
                                                                          out)
    fused = (bias, residual, row_scale, col_scale)
    key, launch = _lookup("grouped_gemm", (layout, out_dtype, activation), x, w, out, offsets, *fused)
    if launch is not None:
        y = launch(x, w, out, (offsets, *fused))
        if y is not None:
            return y if lead is None else _leading(y, lead, given)
    T, G, N, K, odt = check_grouped_arguments(x, w, offsets, layout, out_dtype, bias, activation, residual, row_scale,
                                              col_scale, out)
    if out is None:
        out = torch.ops.tvm_cdna4.grouped_gemm(x, w, offsets, layout, out_dtype, bias, activation, residual, row_scale,
                                               col_scale)
    else:
        torch.ops.tvm_cdna4.grouped_gemm_out(x, w, offsets, out, layout, bias, activation, residual, row_scale,
                                             col_scale)
    if key is not None and x.device.type != "meta":
        if T == 0:  # nothing launches: the key's next call allocates the output only
            _prepare_empty(key, (T, N), odt, x.device)
        else:
            fusion = _fusion(activation, dict(zip(FUSED_KEYWORDS, fused)))
            _prepare(key, _grouped_kernel(x, G, N, K, odt, layout, fusion).kernel(T), (T, N), odt, x.device, fusion,
                     1)
    return out if lead is None else _leading(out, lead, given)


# ------------------------------------------------------------------------------------ attention


def attention_kernel(q, problem, target: str | None = None, config=None):
    """The cached kernel of the call's shape on ``target`` (None: the device's, ``cuda_target``: sm90 on sm_90,
    else sm80) with ``config`` (the target's config record; None: its cost model's), built on first use
    (``kernel_cache``: the key holds the target's ``plan_flags()``)."""
    from .kernels.attention import TARGETS
    from .runtime.cuda import Kernel, load_build

    arch, chosen = cuda_target(q.device)
    target = target or chosen
    verbs = TARGETS[target]
    key = ("attention", *attrs_tuple(problem), arch, q.device.index, verbs.verb("plan_flags")(), target) + (
        () if config is None else (config,))
    if key not in _KERNELS:
        exe = verbs.verb("build")(problem, config, arch=arch)
        _KERNELS[key] = Kernel(load_build(exe, "attention_"), verbs.verb("plan")(problem, exe.config))
    return _KERNELS[key]


def attrs_tuple(problem) -> tuple:
    """The problem's fields in order (a hashable key)."""
    import attrs

    return attrs.astuple(problem)


def _attention_outputs(q, problem):
    """``(O, LSE)`` of the call, new: O [B, H, Sq, D] stored as q (``problem.layout``; ``"bshd"``: a
    ``transpose(1, 2)`` view of [B, Sq, H, D], as ``scaled_dot_product_attention`` returns it), LSE [B, H, Sq]."""
    B, H, Sq, D = q.shape
    lse = q.new_empty((B, H, Sq), dtype=torch.float32)
    if problem is not None and problem.layout == "bshd":
        return q.new_empty((B, Sq, H, D)).transpose(1, 2), lse
    return q.new_empty((B, H, Sq, D)), lse


def _reads_bshd(q):
    """``check_attention_arguments``' ``bshd``: whether q's device's kernel (``cuda_target``) reads [B, S, H, D]
    storage (``kernels.attention.problem.READS_BSHD``: sm80's and sm90's); a meta tensor's (no device to ask:
    ``torch.compile``'s tracing) is taken as it."""
    from .kernels.attention.problem import READS_BSHD

    return lambda: q.device.type == "meta" or cuda_target(q.device)[1] in READS_BSHD


def _stored(problem, *tensors):
    """The kernel's arguments of [B, H, S, D] tensors as stored (``AttentionProblem.shapes``): ``"bshd"``, each
    ``transpose(1, 2)`` (``attention_layout`` checked that it is contiguous [B, S, H, D]); else as they are."""
    return tuple(t.transpose(1, 2) for t in tensors) if problem.layout == "bshd" else tensors


def empty_attention(q):
    """``(O, LSE)`` of a call no kernel runs (``check_attention_arguments`` None): O zeros, LSE ``-inf`` (the
    softmax of no keys: ``scaled_dot_product_attention``'s zeros, the paged kernels' empty rows), both empty
    where the batch, heads or queries are (no launch, no build, no host synchronization)."""
    return torch.zeros_like(q, memory_format=_CONTIGUOUS), q.new_full(q.shape[:3], -math.inf, dtype=torch.float32)


@torch.library.custom_op("tvm_cdna4::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: Optional[float]) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: UP045
    problem = check_attention_arguments(q, k, v, causal, scale, _reads_bshd(q))
    if problem is None:
        return empty_attention(q)
    _check_alignment("attention", q=q, k=k, v=v)
    o, lse = _attention_outputs(q, problem)
    with torch.cuda.device(q.device):
        attention_kernel(q, problem).launch(*_stored(problem, q, k, v, o), lse)
    return o, lse


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale):
    return _attention_outputs(q, check_attention_arguments(q, k, v, causal, scale, _reads_bshd(q)))


def attention(q, k, v, *, causal: bool = False, scale=None, return_lse: bool = False):
    """The attention forward on CUDA tensors (the module docstring): ``O``, or ``(O, LSE)`` with
    ``return_lse``. The op checks the arguments (``check_attention_arguments``, in its real and fake
    implementations: the checks build the ``AttentionProblem``, an attrs record that ``torch.compile``
    does not trace)."""
    if not isinstance(causal, bool):
        _fail("causal", "a bool", "True or False", repr(causal), "attention")
    if scale is not None:
        try:
            # float() would read True as 1.0, "0.1" as 0.1, and a CUDA tensor by a host synchronization
            if isinstance(scale, bool | str | torch.Tensor):
                raise TypeError(scale)
            scale = float(scale)
        except (TypeError, ValueError):
            _fail("scale", "the softmax scale", "a positive finite float or None", repr(scale), "attention")
    # (q's contiguity in the key: a "bshd" call's launch and a contiguous one's are two)
    key, launch = _lookup("attention", (causal, scale, isinstance(q, torch.Tensor) and q.is_contiguous()), q, k, v)
    if launch is not None:
        pair = launch(q, k, v, return_lse)
        if pair is not None:
            return pair if return_lse else pair[0]
    for name, t in (("q", q), ("k", k), ("v", v)):  # named before the op's schema refuses it in torch's words
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tvm_cdna4.torch.attention: argument '{name}' must be a torch.Tensor, not "
                            f"{type(t).__name__}")
    o, lse = torch.ops.tvm_cdna4.attention(q, k, v, causal, scale)
    if key is not None and q.device.type != "meta":
        problem = check_attention_arguments(q, k, v, causal, scale, _reads_bshd(q))
        if problem is None:  # nothing to launch: the key's next call allocates the outputs only
            _prepare_empty_attention(key)
        else:
            _prepare_attention(key, attention_kernel(q, problem), q, problem.layout)
    return (o, lse) if return_lse else o


def attention_dtype(problem):
    """The torch dtype of an ``AttentionProblem``'s 16-bit inputs (``IN_DTYPES``, inverted)."""
    return {name: dtype for dtype, name in IN_DTYPES.items()}[problem.dtype]


def run_attention(problem, arrays, target: str | None = None, config=None):
    """``(o, lse)`` of ``attention(..., return_lse=True)`` on the GPU, numpy in and out: the ``run`` of
    ``kernels.attention.validate`` for sm80 and sm90 (the CLI passes it where an NVIDIA GPU is present; the
    GEMM's is ``runtime.cuda.run_gemm``); ``target``: that target's kernel (``attention_kernel``, with ``config``:
    None the cost model's), not the device's;
    fp8 (``target`` only: ``attention`` takes 16-bit tensors) the e4m3 bytes as they are, ``SCALES`` after LSE."""
    if config is not None and target is None:
        raise ContractError("run_attention config: a config is one target's", operand="config", check="parameters",
                            expected="target= beside config=", found=f"config={config!r}, target=None")
    if problem.dtype in FP8_DTYPES.values():
        q, k, v = (torch.from_numpy(arrays[n].view("uint8")).cuda().view(torch.float8_e4m3fn) for n in ("Q", "K", "V"))
        o, lse = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda"), empty_lse(problem.shapes()["LSE"], "cuda")
        attention_kernel(q, problem, target, config).launch(q, k, v, o, lse, torch.from_numpy(arrays["SCALES"]).cuda())
        return o.float().cpu().numpy(), lse.float().cpu().numpy()
    # the arrays as stored ("bshd": [B, S, H, D]), passed as the op takes them: [B, H, S, D] (views)
    q, k, v = (torch.from_numpy(arrays[n].astype("float32")).to("cuda", attention_dtype(problem)) for n in ("Q", "K", "V"))
    if problem.layout == "bshd":
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if target is None:
        o, lse = attention(q, k, v, causal=problem.causal, scale=problem.scale, return_lse=True)
    else:
        o, lse = _attention_outputs(q, problem)
        attention_kernel(q, problem, target, config).launch(*_stored(problem, q, k, v, o), lse)
    return problem.heads_major(o.float().cpu().numpy()), lse.float().cpu().numpy()


from . import torch_paged as _paged  # noqa: E402  (handed the dispatch helpers above)
from .torch_paged import check_paged_arguments, paged_attention, run_paged_attention  # noqa: E402

_paged.bind(_lookup=_lookup, _store=_store, _ready=_ready, _dense=_dense, _arch=_arch, ALIGNMENT=ALIGNMENT, on_device=on_device,
            bound=bound, empty_lse=empty_lse, DEVICE_TYPES=DEVICE_TYPES, cuda_target=cuda_target)

__all__ = ["ALIGNMENT", "CUDA_TARGET", "LAYOUTS", "TARGET_ENV", "attention", "attention_kernel", "empty_attention", "check_paged_arguments", "paged_attention",
           "run_paged_attention", "choose_target", "cuda_target", "attention_dtype", "check_arguments", "check_attention_arguments",
           "check_grouped_arguments", "gemm", "grouped_gemm", "kernel_cache", "run_attention"]
