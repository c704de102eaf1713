"""``tvm_cdna4.torch.paged_attention``: paged decode attention on CUDA tensors (issue 37; the problem is
``kernels.attention.paged``, the kernels ``kernels.sm80.paged_decode_*`` on every NVIDIA GPU: ``PAGED_ROW``
maps the device's target (``tvm_cdna4.torch.cuda_target``) to the row the op runs, the sm80 row on sm_90 too
until the sm90 row, ``kernels.sm90.paged_decode_*``, times faster there).

``paged_attention(q, k_cache, v_cache, block_table, context_lens, *, scale=None, k_scale=None,
v_scale=None, return_lse=False)``: ``q`` [B, Q, H, D] (Q queries per sequence, 1..8) bfloat16 or
float16; ``k_cache``, ``v_cache`` [num_pages, page_size, Hkv, D] of q's dtype, or both
``torch.float8_e4m3fn`` with ``k_scale``, ``v_scale`` float32 [Hkv], or each one element (0-d, ``(1,)``, ``(1, 1)``
...: vLLM's ``layer._k_scale``) or a Python float (FlashInfer's) for every kv head (``per_head_scales``; the custom
op itself takes [Hkv]); ``block_table`` int32 [B,
max_pages]; ``context_lens`` int32 [B] (each sequence's keys, its Q new tokens included). Returns ``O``
[B, Q, H, D] in q's dtype, or ``(O, LSE)`` with LSE float32 [B, Q, H], natural; an empty batch (B, Q or H 0)
returns them empty, with no build and no launch (the other rules checked as for B = 1). Query ``i`` sees keys
``j <= L - Q + i``; lying lengths and page indices follow ``kernels.attention.paged``'s clamps (never
an access outside the buffers).

Two launches (partials, merge), or one where the plan merges in each sequence's last CTA
(``kernels.sm80.paged_decode_plan``, its ``merge``; a plan of one partition always does), on torch's current
stream, the workspace from torch's allocator; the contexts and the table are read on the device only: no host
synchronization, so the call is CUDA-graph capturable. The grid of fixed-size partitions is planned for
``max_pages x page_size`` keys (the host does not know the contexts; the CTAs past a sequence's length exit at
once). It is the custom op ``torch.ops.tvm_cdna4.paged_attention`` with a fake implementation
(``torch.compile``); eagerly, a call whose shape class ran before takes its prepared launch (one dict lookup:
``torch._lookup``, as the other ops; ``_prepare``): the workspace converted for tvm_ffi once, O allocated per
call, the LSE a scratch (``empty_lse``) where the call does not return it; a one-element scale copied on the device
into a buffer of the problem's, a float's [Hkv] filled once, its value in the key (``_feed``: no host
synchronization, nothing allocated: CUDA-graph capturable). Bad arguments: a ``ContractError`` naming
the tensor, the rule, what was expected and found (a prepared launch refuses what its key does not hold,
strides and alignment, and the call takes the checked path, which names it).
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from ._torch_checks import broadcast_one
from .errors import ContractError
from .kernels.sm80.paged_decode_rule import plan_flags

OP = "tvm_cdna4.torch.paged_attention"
SCALE_FORMS = "(or one element: 0-d, (1,), (1, 1) ..., or a float, for every kv head)"
"""The other forms ``paged_attention`` takes ``k_scale`` and ``v_scale`` in (``per_head_scales``), as errors say them."""
ONLY_FP8_SCALED = "only fp8 (float8_e4m3fn) caches take scales"
"""The rule a scale beside a 16-bit cache breaks, as errors say it (a tensor's and a float's)."""
Q_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
FP8 = torch.float8_e4m3fn


def _fail(name: str, rule: str, expected, found, check: str = "shape"):
    raise ContractError(f"{OP}: {rule}", operand=name, check=check, expected=expected, found=found)


def _tensor(name, t, device, dtypes, rank: int):
    if not isinstance(t, torch.Tensor):
        _fail(name, "a torch.Tensor", "a tensor", type(t).__name__, "operands")
    if t.device != device:
        _fail(name, "every tensor on q's device", device, t.device, "operands")
    if t.dtype not in dtypes:
        _fail(name, "dtype", " or ".join(map(str, dtypes)), t.dtype, "dtype")
    if t.dim() != rank:
        _fail(name, "rank", f"{rank} dimensions", f"shape {tuple(t.shape)}")
    if not t.is_contiguous():
        _fail(name, "contiguous strides (non-contiguous tensors are refused, not copied)", "contiguous",
              tuple(t.stride()), "layout")


def _same(name, t, shape):
    if tuple(t.shape) != tuple(shape):
        _fail(name, "shape", tuple(shape), tuple(t.shape))


def check_paged_arguments(q, k_cache, v_cache, block_table, context_lens, scale, k_scale, v_scale):
    """The ``PagedDecodeProblem`` of a call (its fake implementation runs this too), or None where O is empty (a
    batch, queries or heads of 0: nothing launches, every other rule checked); a ``ContractError`` naming the
    first tensor that breaks a rule."""
    from .kernels.attention.paged import PagedDecodeProblem

    if not isinstance(q, torch.Tensor):
        _fail("q", "a torch.Tensor", "a tensor", type(q).__name__, "operands")
    if q.device.type not in HOOKS["DEVICE_TYPES"]:
        _fail("q", "a CUDA tensor", "device cuda", q.device, "operands")
    _tensor("q", q, q.device, tuple(Q_DTYPES), 4)
    fp8 = isinstance(k_cache, torch.Tensor) and k_cache.dtype == FP8
    _tensor("k_cache", k_cache, q.device, (FP8,) if fp8 else (q.dtype, FP8), 4)
    _tensor("v_cache", v_cache, q.device, (k_cache.dtype,), 4)
    _same("v_cache", v_cache, k_cache.shape)
    B, nq, H, D = map(int, q.shape)  # ints: the plan bakes every extent in (torch.compile specializes them)
    pages, page_size, Hkv, Dk = map(int, k_cache.shape)
    if Dk != D:
        _fail("k_cache", "head dim (the last dimension) equal to q's", D, Dk)
    _tensor("block_table", block_table, q.device, (torch.int32,), 2)
    _tensor("context_lens", context_lens, q.device, (torch.int32,), 1)
    if block_table.shape[0] != B:
        _fail("block_table", "one row per sequence of q", f"[{B}, max_pages]", tuple(block_table.shape))
    _same("context_lens", context_lens, (B,))
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if fp8 and s is None:
            _fail(name, "fp8 caches take per-kv-head scales", f"float32 [{Hkv}] {SCALE_FORMS}", None, "operands")
        if not fp8 and s is not None:
            _fail(name, ONLY_FP8_SCALED, "None", "a tensor", "operands")
        if s is not None:
            _tensor(name, s, q.device, (torch.float32,), s.dim() if isinstance(s, torch.Tensor) else 1)
            if tuple(s.shape) != (Hkv,):
                _fail(name, "per-kv-head scales", f"[{Hkv}] {SCALE_FORMS}", f"shape {tuple(s.shape)}")
    try:  # an empty batch, queries or heads checked as one: the record still checks every other field
        problem = PagedDecodeProblem(max(B, 1), H or max(Hkv, 1), Hkv, D, max(nq, 1), page_size,
                                     int(block_table.shape[1]), pages, "fp8" if fp8 else Q_DTYPES[q.dtype],
                                     Q_DTYPES[q.dtype], scale)
        return None if 0 in (B, nq, H) else problem
    except ContractError as err:  # the record's field, said in the tensors' words
        where = {"batch": "q", "heads": "q", "queries": "q", "head_dim": "q", "kv_heads": "k_cache",
                 "page_size": "k_cache", "num_pages": "k_cache", "max_pages": "block_table", "scale": "scale"}
        _fail(where.get(err.operand, err.operand), f"{err.operand}: {err.rule.split(': ', 1)[-1]}", err.expected,
              err.found, err.check)


def check_paged_alignment(q, k_cache, v_cache) -> None:
    """A ``ContractError`` naming the first of ``q``, ``k_cache``, ``v_cache`` whose data pointer is not
    ``tvm_cdna4.torch.ALIGNMENT``-byte aligned (the kernels copy them in 16-byte ``cp.async`` chunks; a
    contiguous view one element into a buffer is not): run on real tensors before a launch (a fake tensor
    has no pointer)."""
    alignment = HOOKS["ALIGNMENT"]
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.data_ptr() % alignment:
            _fail(name, f"its data pointer must be {alignment}-byte aligned (a view into another tensor may not be)",
                  f"a multiple of {alignment}", hex(t.data_ptr()), "alignment")


_KERNELS: dict = {}
HOOKS: dict = {}
"""``tvm_cdna4.torch``'s dispatch helpers (``_lookup``, ``_store``, ``_ready``, ``_dense``, ``_arch``, ``on_device``,
``bound``, ``empty_lse``, ``cuda_target``) and its ``ALIGNMENT`` and ``DEVICE_TYPES``, set by it on import
(``bind``; this module sits below it: no import back)."""
_lookup = _store = None  # HOOKS' of the eager path, bound once (``bind``): no dict lookup per call
_compiling = torch.compiler.is_compiling  # bound once: no attribute lookups per eager call


def bind(**hooks) -> None:
    """Set ``HOOKS`` (``tvm_cdna4.torch`` calls it on import) and bind the eager path's."""
    global _lookup, _store
    HOOKS.update(hooks)
    _lookup, _store = hooks["_lookup"], hooks["_store"]


PAGED_ROW = {"sm90": "sm80"}
"""The paged-decode row the op runs on a device of each CUDA target (``cuda_target``'s second value; a target
not here runs its own row). sm_90: the sm80 row, measured faster than the sm90 row (TMA into mbarrier rings)
on every shape of ``benchmarks/paged_decode.py --target`` (H100, 2026-12-06: 2-8 % at batch 8 and 64, bf16 and
fp8 KV; benchmarks/RESULTS.md "Paged decode attention"). ``run_paged_attention(..., target=)`` and
``paged_launch`` run a named row; setting ``PAGED_ROW["sm90"] = "sm90"`` makes the op take it (from the next
call on, shapes that ran before included: the prepared launches' keys hold the mapping)."""


def _kernels(q, problem, target: str | None = None):
    """The cached (main, merge, plan, workspace) of the problem on q's device (the workspace: see below), of
    ``target``, default the device's (``tvm_cdna4.torch.cuda_target``: sm90 on sm_90 GPUs unless
    ``TVM_CDNA4_CUDA_TARGET=sm80``)."""
    from .kernels.attention import paged_verb
    from .runtime.cuda import load_build

    arch, default = HOOKS["cuda_target"](q.device)
    target = target or PAGED_ROW.get(default, default)
    key = (problem, arch, target, q.device.index, plan_flags())  # a flag toggled: a new plan, new kernels
    if key not in _KERNELS:  # a plan of one partition: merge None (the last-CTA merge, one launch)
        with torch.cuda.device(q.device):
            main, merge = paged_verb(target, "build")(problem, arch=arch)
        p = paged_verb(target, "plan")(problem, arch=arch)  # the device's arch, as built (choose_cvt, choose_pdl)
        # the partials' workspace, allocated once per (problem, device) and reused by every call, as the GEMM's
        # split-K workspace is (runtime.cuda.Kernel.extra): calls of one problem on one stream run in order
        _KERNELS[key] = (load_build(main, "paged_"), merge and load_build(merge, "paged_merge_"), p,
                         workspace(p, q.device))
    return _KERNELS[key]


def clear() -> None:
    """Forget the paged kernels, their workspaces (``_KERNELS``) and the prepared launches' scale buffers
    (``_SCALES``): ``tvm_cdna4.torch.kernel_cache().clear()`` calls it, so the memory goes back with the kernels'."""
    _KERNELS.clear()
    _SCALES.clear()


def workspace(p, device) -> tuple:
    """The workspace tensors of plan ``p`` on ``device``: its partials (the ``W*`` parameters, f32, never read
    before written) and, with the last-CTA merge, its ``TICKETS`` (uint32, zeroed here once: every call leaves
    them zeroed, CUDA-graph replays included)."""
    work = tuple(torch.empty(w.shape, dtype=torch.float32, device=device) for w in p.params if w.name[0] == "W")
    tickets = tuple(torch.zeros(w.shape, dtype=torch.int32, device=device).view(torch.uint32) for w in p.params
                    if w.name == "TICKETS")
    return work + tickets


def _outputs(q):
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)


def _run(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale, kernels):
    main, merge, _, work = kernels
    o, lse = _outputs(q)
    kv = (k_cache.view(torch.uint8), v_cache.view(torch.uint8)) if k_cache.dtype == FP8 else (k_cache, v_cache)
    scales = (k_scale, v_scale) if k_scale is not None else ()
    with HOOKS["on_device"](q.device):
        if merge is None:  # the last-CTA merge: main writes O and LSE (its parameters end TICKETS, O, LSE)
            main(q, *kv, block_table, context_lens, *scales, *work, o, lse)
        else:
            main(q, *kv, block_table, context_lens, *scales, *work)
            merge(context_lens, *work, o, lse)
    return o, lse


@torch.library.custom_op("tvm_cdna4::paged_attention", mutates_args=())
def _paged_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
              context_lens: torch.Tensor, scale: Optional[float], k_scale: Optional[torch.Tensor],  # noqa: UP045
              v_scale: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: UP045
    problem = check_paged_arguments(q, k_cache, v_cache, block_table, context_lens, scale, k_scale, v_scale)
    if problem is None:  # an empty O: no build, no launch
        return _outputs(q)
    check_paged_alignment(q, k_cache, v_cache)
    return _run(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale, _kernels(q, problem))


@_paged_op.register_fake
def _paged_fake(q, k_cache, v_cache, block_table, context_lens, scale, k_scale, v_scale):
    check_paged_arguments(q, k_cache, v_cache, block_table, context_lens, scale, k_scale, v_scale)
    return _outputs(q)


def _prepare(key, kernels, q, scaled: bool, feed=None) -> None:
    """Store the launch of a call that passed its checks: ``launch(q, k_cache, v_cache, block_table,
    context_lens, k_scale, v_scale, return_lse)`` -> ``(O, LSE)``, or None (nothing run) where ``_ready``
    refuses a tensor (the checked path then names it). The workspace is converted to tvm_ffi tensors once (as
    ``runtime.cuda.Kernel.extra`` does the GEMM's); O is a new tensor every call; LSE a new one where the call
    returns it, else the shape's scratch (``empty_lse``: nobody reads it; calls on one stream run in order, and
    two streams' calls of one key both write garbage nobody reads). One launch where the plan merges in main's
    last CTA (``merge`` None: a plan of one partition always), else main then merge. ``feed``: where a scale is
    not a [Hkv] tensor, what gives the [Hkv] tensors the kernel reads (``_feed``)."""
    import tvm_ffi

    main, merge, _, work = kernels
    bound, ready, device = HOOKS["bound"], HOOKS["_ready"], q.device
    main, merge = bound(main, device), merge and bound(merge, device)
    work = tuple(tvm_ffi.from_dlpack(w) for w in work)
    scratch, contiguous = HOOKS["empty_lse"](q.shape[:3], device), torch.contiguous_format

    def launch(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale, return_lse):
        if scaled:  # fp8 caches (their bytes to the kernel) and their scales: the key holds which
            if feed is None:
                if not ready((q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale)):
                    return None
            elif not ready((q, k_cache, v_cache, block_table, context_lens)):
                return None
            else:  # a float's constant, a one-element tensor copied into the problem's buffer (``_feed``)
                k_scale, v_scale = feed(k_scale, v_scale)
                if k_scale is None:  # a [Hkv] tensor beside a broadcast one, not ``_ready``
                    return None
            tensors = (q, k_cache.view(torch.uint8), v_cache.view(torch.uint8), block_table, context_lens, k_scale,
                       v_scale)
        else:
            tensors = (q, k_cache, v_cache, block_table, context_lens)
            if not ready(tensors):
                return None
        o = torch.empty_like(q, memory_format=contiguous)
        lse = torch.empty_like(scratch) if return_lse else scratch
        if merge is None:  # the last-CTA merge: main writes O and LSE (its parameters end TICKETS, O, LSE)
            main(*tensors, *work, o, lse)
        else:
            main(*tensors, *work)
            merge(context_lens, *work, o, lse)
        return o, lse
    _store(key, launch)


_SCALES: dict = {}
"""The [Hkv] scale tensors of prepared launches whose scales are not [Hkv] tensors (``_feed``): ``{(value, Hkv,
device): tensor}`` a float's constant, ``{(problem, device, name): tensor}`` the buffer a one-element scale is copied
into; kept as long as the workspaces (``_KERNELS``): a CUDA graph captured through a launch reads them (both
freed by ``clear``)."""
_SCALE_CLASSES = (type(None), torch.Tensor, torch.nn.Parameter)
"""The scale classes the eager path passes on as they are (one class test a call); another is a number or refused
(``_numbers``)."""


def _numbers(k_scale, v_scale) -> tuple | None:
    """``(k, v)``, each scale that is a Python number (``int``, ``float``, a numpy scalar; not a bool) as a finite
    float, None where it is a tensor or None; None where neither is a number. A ``ContractError`` names another."""
    if k_scale.__class__ is float and v_scale.__class__ is float and math.isfinite(k_scale + v_scale):
        return k_scale, v_scale  # the usual case (FlashInfer's): one test
    values = []
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if s is None or isinstance(s, torch.Tensor):
            values.append(None)
        elif isinstance(s, numbers.Real) and not isinstance(s, bool) and math.isfinite(s):
            values.append(float(s))
        else:
            _fail(name, "a torch.Tensor, a float or None", "a float32 tensor or a finite float",
                  repr(s) if isinstance(s, numbers.Real) else type(s).__name__, "operands")
    return None if values == [None, None] else tuple(values)


def per_head_scales(q, k_cache, k_scale, v_scale, values: tuple | None) -> tuple:
    """The op's ``(k_scale, v_scale)``, float32 [Hkv] (``Hkv``: ``k_cache``'s third dimension) on q's device: a float
    of ``values`` (``_numbers``) filled in (``torch.full``), a one-element tensor broadcast on the device
    (``broadcast_one``: no host synchronization); anything else as it is (a [Hkv] tensor, None, what the checks name)."""
    if not (isinstance(k_cache, torch.Tensor) and k_cache.dim() == 4):
        return k_scale, v_scale
    Hkv, scales = int(k_cache.shape[2]), []
    for name, s, value in zip(("k_scale", "v_scale"), (k_scale, v_scale), values or (None, None)):
        if value is not None:
            if k_cache.dtype != FP8:  # named as passed, not as the tensor it would be filled into
                _fail(name, ONLY_FP8_SCALED, "None", repr(value), "operands")
            s = torch.full((Hkv,), value, dtype=torch.float32, device=q.device)
        elif isinstance(s, torch.Tensor) and tuple(s.shape) != (Hkv,):
            s = broadcast_one(s, Hkv)
        scales.append(s)
    return tuple(scales)


def _feed(problem, device, k_scale, v_scale, values: tuple | None):
    """``feed(k_scale, v_scale) -> (k, v)``, the [Hkv] tensors the kernel reads, of a prepared launch whose scales
    are not both [Hkv] tensors: a float's constant (filled once: the key holds the value), a one-element tensor
    copied into the problem's buffer each call (a small device copy, stream-ordered: calls of one problem on one
    stream run in order, as its workspace's), a [Hkv] tensor itself. None (no prepared launch) while a CUDA graph
    is captured and a constant is new (its fill would be captured, not run)."""
    Hkv, pair = problem.kv_heads, []
    for name, s, value in zip(("k", "v"), (k_scale, v_scale), values or (None, None)):
        if value is None and tuple(s.shape) == (Hkv,):
            pair.append(None)  # the tensor itself
            continue
        key = (value, Hkv, device) if value is not None else (problem, device, name)
        if key not in _SCALES:
            if value is not None and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                return None
            with torch.inference_mode(False):  # a tensor every later call may write, inference mode or not
                _SCALES[key] = torch.full((Hkv,), 0.0 if value is None else value, dtype=torch.float32,
                                          device=device)
        t = _SCALES[key]  # a one-element tensor is copied through a view of its rank, (1, ..., Hkv): copy_ broadcasts
        pair.append((t, None) if value is not None else (t, t.view(*(1,) * (s.dim() - 1), Hkv) if s.dim() > 1 else t))
    (k, kview), (v, vview) = ((None, None) if p is None else p for p in pair)
    if kview is not None and vview is not None:  # the usual case (vLLM's layer._k_scale, _v_scale): one dispatch
        views, tensors, copy = (kview, vview), (k, v), torch._foreach_copy_

        def feed(k_scale, v_scale):
            copy(views, (k_scale, v_scale))
            return tensors
    elif None not in (k, v) and kview is vview is None:  # two floats (FlashInfer's): nothing to do a call
        def feed(k_scale, v_scale):
            return k, v
    else:  # one of each
        def feed(k_scale, v_scale):
            k_scale, v_scale = _fed(k, kview, k_scale), _fed(v, vview, v_scale)
            return (k_scale, v_scale) if HOOKS["_ready"]((k_scale, v_scale)) else (None, None)
    return feed


def _fed(t, view, s):
    """What ``_feed``'s launch passes for scale ``s``: ``s`` itself (``t`` None), ``t`` (a constant), ``t`` with
    ``s`` copied through ``view``."""
    if t is None:
        return s
    if view is not None:
        view.copy_(s)
    return t


def _tensors(**arguments) -> None:
    """Each argument a tensor (the scales: or None, numbers taken before: ``_numbers``), named before the op's
    schema would refuse it in torch's words ("Expected a value of type 'Optional[Tensor]'");
    ``check_paged_arguments`` checks the rest."""
    for name, t in arguments.items():
        if not isinstance(t, torch.Tensor) and not (t is None and name.endswith("_scale")):
            _fail(name, "a torch.Tensor" + (" or None" if name.endswith("_scale") else ""), "a tensor",
                  type(t).__name__, "operands")


def paged_attention(q, k_cache, v_cache, block_table, context_lens, *, scale=None, k_scale=None, v_scale=None,
                    return_lse: bool = False):
    """Paged decode attention (the module docstring): ``O``, or ``(O, LSE)`` with ``return_lse``."""
    if scale is not None:
        try:
            # float() would read True as 1.0, "0.1" as 0.1, and a CUDA tensor by a host synchronization
            if isinstance(scale, bool | str | torch.Tensor):
                raise TypeError(scale)
            scale = float(scale)
        except (TypeError, ValueError):
            _fail("scale", "the softmax scale", "a positive finite float or None", repr(scale), "parameters")
    values = None  # float scales: the key's option, their slots None (``_numbers``)
    if k_scale.__class__ not in _SCALE_CLASSES or v_scale.__class__ not in _SCALE_CLASSES:
        values = _numbers(k_scale, v_scale)
        if values is not None:
            k_scale, v_scale = (None if values[0] is not None else k_scale), (None if values[1] is not None else v_scale)
    # PAGED_ROW and the plan's flags in the key: a row or flag changed by the user is taken by the shapes that ran
    # before, too; not while torch.compile traces (no prepared launch then, and the flags' first read imports their
    # modules, which dynamo refuses to trace)
    key = launch = None
    if not _compiling():
        key, launch = _lookup("paged_attention", (scale, tuple(PAGED_ROW.items()), plan_flags(), values), q, k_cache,
                              v_cache, block_table, context_lens, k_scale, v_scale)
    if launch is not None:
        pair = launch(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale, return_lse)
        if pair is not None:
            return pair if return_lse else pair[0]
    _tensors(q=q, k_cache=k_cache, v_cache=v_cache, block_table=block_table, context_lens=context_lens,
             k_scale=k_scale, v_scale=v_scale)
    ks, vs = per_head_scales(q, k_cache, k_scale, v_scale, values)
    o, lse = torch.ops.tvm_cdna4.paged_attention(q, k_cache, v_cache, block_table, context_lens, scale, ks, vs)
    if key is not None and q.device.type != "meta":  # meta: a trace, nothing launched
        problem = check_paged_arguments(q, k_cache, v_cache, block_table, context_lens, scale, ks, vs)
        if problem is None:  # an empty O: the key's next call allocates the outputs only (contiguous tensors)
            _store(key, _empty_launch)
        elif ks is k_scale and vs is v_scale:
            _prepare(key, _kernels(q, problem), q, problem.scaled)
        else:  # a float or one-element scale: broadcast by the launch (``_feed``)
            feed = _feed(problem, q.device, k_scale, v_scale, values)
            if feed is not None:
                _prepare(key, _kernels(q, problem), q, True, feed)
    return (o, lse) if return_lse else o


def _empty_launch(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale, return_lse):
    """The prepared launch of an empty O: the outputs, or None (the checked path, which names it) where a tensor is
    not dense and contiguous (``_dense``: the caches hold elements where the batch is empty)."""
    if not HOOKS["_dense"]((q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale)):
        return None
    return _outputs(q)


def paged_launch(problem, q, target: str | None = None):
    """``launch(q, k_cache, v_cache, block_table, context_lens, k_scale, v_scale) -> (O, LSE)``: the kernels of
    ``problem`` on q's device of ``target`` (default the device's row), launched as the op launches them (no
    argument checks: the caller's tensors are the problem's; the CLI's ``--bench`` and ``--validate`` of a row)."""
    kernels = _kernels(q, problem, target)
    return lambda *tensors: _run(*tensors, kernels)


def run_paged_attention(problem, arrays, target: str | None = None):
    """``(o, lse)`` numpy of ``paged_attention`` on the GPU from ``kernels.attention.paged.random_inputs``'
    arrays: the ``run`` of ``kernels.attention.validate_paged`` (the CLI passes it where a GPU is present);
    ``target`` (``"sm80"``, ``"sm90"``): that row's kernels, launched as the op launches them, whatever the
    device's default row."""
    import numpy as np

    dtype = {v: k for k, v in Q_DTYPES.items()}[problem.q_dtype]

    def cache(name):
        a = arrays[name]
        if problem.scaled:
            return torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).to("cuda").view(FP8)
        return torch.from_numpy(a.astype(np.float32)).to("cuda", dtype)

    q = torch.from_numpy(arrays["Q"].astype(np.float32)).to("cuda", dtype)
    scales = {n.lower(): torch.from_numpy(arrays[n]).cuda() for n in ("K_SCALE", "V_SCALE") if n in arrays}
    tensors = (q, cache("K_CACHE"), cache("V_CACHE"), torch.from_numpy(arrays["BLOCK_TABLE"]).cuda(),
               torch.from_numpy(arrays["CONTEXT_LENS"]).cuda())
    if target is None:
        o, lse = paged_attention(*tensors, scale=problem.scale, return_lse=True, **scales)
    else:
        check_paged_alignment(*tensors[:3])
        o, lse = paged_launch(problem, q, target)(*tensors, scales.get("k_scale"), scales.get("v_scale"))
    return o.float().cpu().numpy(), lse.cpu().numpy()


__all__ = ["check_paged_alignment", "check_paged_arguments", "paged_attention", "paged_launch", "run_paged_attention"]
