"""``emulate``'s arguments, checked against the kernel before anything runs: each bad one is one
``ValueError`` sentence naming it, the rule, and what was expected and found.

- the options: ``kernel`` a TIRx function, ``target`` a name, ``max_threads_per_batch`` a positive
  int, ``uninitialized`` ``"error"`` or ``"allow"``, ``stats`` a dict or None (``check_options``);
- the arrays bind the tensor parameters in order (``check_argument``: C-contiguous, the shape, the
  dtype); a symbolic extent (a dynamic-M kernel's ``M``) is bound from the first array that has
  it, or from a keyword of that name, and every array must agree (``bind_shapes``);
- an argument may be a ``Window`` instead of an array: a tensor of the parameter's shape of which only
  a contiguous run of elements is held (what one workgroup of a launch too large to emulate touches);
- ``workgroups`` restricts the launch to some of its workgroups (``check_workgroups``);
- the keywords bind the scalar parameters (an int for an integer parameter, in its range; a real
  number for a float one) or name a shape variable; an unknown keyword, a tensor parameter given
  by keyword and a scalar parameter without a value are refused (``bind_scalars``).
"""

from __future__ import annotations

import numbers

import numpy as np

from .interp import np_dtype
from .window import Window


def check_workgroups(workgroups, count: int) -> np.ndarray:
    """The workgroups of a launch of ``count`` to run (``emulate``'s ``workgroups``): all (None), or the
    given linear indices (``blockIdx.x`` fastest), each in ``0 .. count - 1``, in increasing order."""
    if workgroups is None:
        return np.arange(count)
    chosen = list(workgroups) if not _is_int(workgroups) else [workgroups]
    if not chosen or any(not _is_int(w) or not 0 <= w < count for w in chosen):
        raise ValueError(f"emulate: workgroups: expected linear workgroup indices in 0..{count - 1}; found {workgroups!r}")
    return np.unique(np.asarray(chosen, np.int64))


def check_options(kernel, target, max_threads_per_batch, uninitialized, stats, targets) -> None:
    """The options of ``emulate`` (``targets``: the target names it knows)."""
    from tvm_tirx.tirx import Function

    if not isinstance(kernel, Function):
        raise ValueError(f"emulate: kernel: expected a TIRx function (@T.function); found {type(kernel).__name__}")
    if not isinstance(target, str) or target not in targets:
        raise ValueError(f"emulate: target {target!r} is not supported; expected one of {sorted(targets)}")
    if not _is_int(max_threads_per_batch) or max_threads_per_batch < 1:
        raise ValueError(f"emulate: max_threads_per_batch: expected a positive int; found {max_threads_per_batch!r}")
    if not isinstance(uninitialized, str) or uninitialized not in ("error", "allow"):
        raise ValueError(f"emulate: uninitialized: expected 'error' or 'allow'; found {uninitialized!r}")
    if stats is not None and not isinstance(stats, dict):
        raise ValueError(f"emulate: stats: expected a dict (it receives the access counts) or None; found "
                         f"{type(stats).__name__}")


def check_fp8_accumulation(bits, target: str) -> None:
    """``emulate``'s ``fp8_accumulation``: None, or the significant bits (an int in 1..24) Hopper's fp8 wgmma keeps
    of each addend of a k-step, on the sm90 target only (gfx950's MFMA and sm80's ``mma.sync`` accumulate in f32:
    a mode they would ignore is refused, so that a caller does not believe it emulated the truncation)."""
    from ..errors import ContractError

    if bits is None:
        return
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 24:
        raise ContractError("the significant bits an fp8 wgmma keeps of each addend", opcode="emulate",
                            operand="fp8_accumulation", expected="None or an int in 1..24", found=repr(bits),
                            check="parameters")
    if target != "sm90":
        raise ContractError("models Hopper's fp8 wgmma accumulation, which only the sm90 target has",
                            opcode="emulate", operand="fp8_accumulation", expected="target 'sm90' (or None)",
                            found=f"target {target!r}", check="target")


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def tensor_params(kernel) -> list:
    return [p for p in kernel.params if hasattr(p.ty, "shape")]


def shape_variables(params) -> list[str]:
    """The names of the variables in the tensor parameters' shapes, in order of appearance."""
    names = []
    for param in params:
        for extent in getattr(param.ty, "shape", ()):
            if not hasattr(extent, "value") and hasattr(extent, "name") and extent.name not in names:
                names.append(extent.name)
    return names


def bind_arrays(kernel, arrays) -> list:
    """``[(parameter, array)]`` of the tensor parameters, each array checked (``check_argument``)."""
    tensors = tensor_params(kernel)
    names = ", ".join(p.name for p in tensors)
    if len(arrays) > len(tensors):
        raise ValueError(f"emulate: {len(arrays)} arrays for the {len(tensors)} tensor parameters {names}")
    if len(arrays) < len(tensors):
        raise ValueError(f"emulate: no array for parameter {tensors[len(arrays)].name} ({len(arrays)} "
                         f"array{'' if len(arrays) == 1 else 's'} for the {len(tensors)} tensor parameters {names})")
    for param, arr in zip(tensors, arrays):
        check_argument(param.name, param.ty, arr)
    return list(zip(tensors, arrays))


def bind_scalars(kernel, scalars: dict) -> tuple[dict, dict]:
    """(the scalar parameters' values, the shape variables given by keyword), each checked."""
    params = {p.name: p for p in kernel.params if not hasattr(p.ty, "shape")}
    tensors = {p.name for p in tensor_params(kernel)}
    variables = shape_variables(kernel.params)
    given = [name for name in scalars if name in tensors]
    if given:
        raise ValueError(f"emulate: parameter {given[0]} is a tensor; pass its array positionally, in parameter order")
    unknown = sorted(name for name in scalars if name not in params and name not in variables)
    if unknown:
        known = f"the kernel's scalar parameters: {', '.join(params) or 'none'}"
        known += f"; shape variables: {', '.join(variables)}" if variables else ""
        raise ValueError(f"emulate: unknown keyword argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                         f"({known})")
    values = {}
    for name, param in params.items():
        if name not in scalars:
            raise ValueError(f"emulate: no value for scalar parameter {name}; pass it by keyword, {name}=value")
        values[name] = scalar_value(f"scalar parameter {name}", str(param.ty.dtype), scalars[name])
    fixed = {name: scalar_value(f"shape variable {name}", "int64", scalars[name])
             for name in variables if name in scalars}
    return values, fixed


def scalar_value(what: str, dtype: str, value):
    """``value`` as a scalar of ``dtype``: an int in range for an integer dtype, a real number for a
    float one, a bool for ``bool``."""
    want, _ = np_dtype(dtype)
    if want.kind == "b":
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"emulate: {what}: expected a bool; found {value!r}")
        return want.type(value)
    if want.kind in "iu":
        if not _is_int(value):
            raise ValueError(f"emulate: {what}: expected an int ({dtype}); found {value!r}")
        info = np.iinfo(want)
        if not info.min <= int(value) <= info.max:
            raise ValueError(f"emulate: {what}: expected an {dtype} value; found {value}")
        return want.type(int(value))
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise ValueError(f"emulate: {what}: expected a real number ({dtype}); found {value!r}")
    return want.type(value)


def _spelled(shape) -> str:
    return "(" + ", ".join("?" if w is None else str(w) for w in shape) + ("," if len(shape) == 1 else "") + ")"


def bind_shapes(params, arrays, fixed: dict | None = None) -> dict[str, int]:
    """``{name: value}`` of the variables in the tensor parameters' shapes (a dynamic-M kernel's
    ``M``): ``fixed`` (given by keyword), else bound from the arrays' shapes in parameter order;
    ValueError naming the parameter whose array disagrees with a value given or bound before."""
    bound, first = dict(fixed or {}), {name: None for name in fixed or {}}
    for param, arr in zip(params, arrays):
        dims = tuple(getattr(param.ty, "shape", ()))
        for axis, extent in enumerate(dims):
            if hasattr(extent, "value") or not hasattr(extent, "name") or axis >= arr.ndim:
                continue  # check_argument named a rank mismatch
            value = int(arr.shape[axis])
            if extent.name in bound and bound[extent.name] != value:
                name = extent.name
                if first[name] is None:
                    want = tuple(int(d) if hasattr(d, "value") else bound.get(getattr(d, "name", None)) for d in dims)
                    raise ValueError(f"emulate: parameter {param.name}: expected an array of shape {_spelled(want)} "
                                     f"for {name} = {bound[name]} (given by keyword); found shape {arr.shape}")
                raise ValueError(f"emulate: parameter {param.name}: dimension {axis} is {name} = "
                                 f"{bound[name]} (from {first[name]}); found {value}")
            bound.setdefault(extent.name, value)
            first.setdefault(extent.name, param.name)
    return bound


def _bit_dtypes(dtype: str) -> set:
    """The float element dtypes whose bit patterns an integer parameter of ``dtype`` stores
    (``isa.formats``: bf16 / f16 data in int16 or uint16, fp8 / bf8 / e8m0 in uint8)."""
    from ..isa.formats import FORMATS

    return {np.dtype(f.dtype) for f in FORMATS.values() if dtype in f.bit_dtypes}


def check_argument(name: str, ty, arr) -> None:
    """``arr`` must be a C-contiguous numpy array of the tensor parameter's shape and dtype. An
    integer parameter holds bit patterns, so it takes an integer array of its element size, or the
    float format stored in it (``ml_dtypes.bfloat16`` / ``float16`` data for ``int16`` storage,
    ``float8_*`` for ``uint8``); a float parameter takes its own dtype (``ml_dtypes.bfloat16`` /
    ``float8_e4m3fn`` / ``float8_e5m2`` for bf16 / fp8 / bf8)."""
    if not isinstance(arr, np.ndarray | Window):
        raise ValueError(f"emulate: parameter {name} needs a numpy array (or an emulator.Window); found "
                         f"{type(arr).__name__}")
    want, lanes = np_dtype(ty.dtype)
    shape = tuple(int(d) if hasattr(d, "value") else None for d in ty.shape) + ((lanes,) if lanes > 1 else ())
    if arr.ndim != len(shape) or any(w is not None and w != g for w, g in zip(shape, arr.shape)):
        raise ValueError(f"emulate: parameter {name}: expected an array of shape {_spelled(shape)}; found shape "
                         f"{arr.shape}")
    bits = want.kind in "iub" and arr.dtype.itemsize == want.itemsize and (
        arr.dtype.kind in "iub" or arr.dtype in _bit_dtypes(str(ty.dtype).split("x")[0]))
    if arr.dtype != want and not bits:
        hint = f" (numpy: ml_dtypes.{ty.dtype})" if want.type.__module__.startswith("ml_dtypes") else ""
        raise ValueError(f"emulate: parameter {name}: expected dtype {ty.dtype}{hint}; found {arr.dtype}")
    if isinstance(arr, np.ndarray) and not arr.flags.c_contiguous:
        raise ValueError(f"emulate: parameter {name} needs a C-contiguous array (np.ascontiguousarray)")
