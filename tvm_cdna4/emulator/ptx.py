"""Semantics of the CUDA device ops (``tirx.cuda.*``) and table-driven PTX instructions (``tirx.ptx.*``)
that TIRx's CUDA tile patterns emit, for 32-lane warps (the emulator's "waves").

Section numbers are those of the PTX ISA 9.4, the edition ``tvm_tirx.backend.cuda.ptx.table`` cites
(other editions number the chapters differently: the warp-level matrix chapter, 9.7.16 here, is
9.7.13/9.7.14 in 8.x editions; the data-movement chapter, 9.7.10 here, is 9.7.8/9.7.9 there).

A ``T.ptx`` call is ``tirx.ptx.<entry>(operands..., [pred], slot tokens..., marker)``; it is decoded
with the instruction table itself (:class:`PtxCall`, through ``tirx_private.decode_ptx_call``), so
operand groups are found by their PTX names (``d``, ``a``, ``addr``...). Destination operands are register references (``tile_dst[0]``):
the instruction writes into them.

Numerics. ``mma`` multiplies f16/bf16 fragments exactly in float64, sums in float64 and rounds the
result to f32 once. Hardware tensor cores use their own (non-IEEE, truncating) accumulation, so the
emulated result is bit-identical to the GPU's when every product and partial sum is exactly
representable, e.g. for small-integer-valued inputs; for arbitrary data expect agreement to f32
rounding, not bit identity. ``cvt`` rounds as IEEE (numpy / ml_dtypes round to nearest even).

Asynchronous copies (``cp.async``) read global memory when issued and land in shared memory when
the issuing thread's ``cp.async.wait_group``/``wait_all`` retires their group; until then their
destination bytes are *in flight* and any shared access to them is reported, so a missing wait or a
wait for the wrong group count is an ``EmulationError``, not a silently stale value.

Barriers: ``__syncthreads`` / ``bar.sync a`` (the whole block), named barriers ``bar.sync a, b`` /
``bar.arrive a, b`` (:class:`~.machine.NamedBarrier`) and ``mbarrier`` objects (:mod:`.mbarrier`); the
shared-memory race checks follow the order they create (``Machine.unordered``).

The instructions live in modules by section, and this one holds the CUDA device calls and the call
table (``calls``): ``ptx_operands`` (the decoded call, operand readers and writers, pointers),
``ptx_mma`` (``ldmatrix``, ``mma``), ``ptx_async`` (``cp.async``), ``ptx_memory`` (``ld``, ``st``,
atomics and the global-memory race check), ``ptx_registers`` (``cvt``, ``mov``, ``shfl``) and
``ptx_sync`` (barriers and mbarriers); their names are re-exported here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..isa.ptx_math import TANH_APPROX_ERROR
from ..tirx_private import ptx_entry
from .interp import where_of
from .memory import Pointer
from .ptx_async import (  # noqa: F401 (re-exported: importable from ptx as before)
    AsyncCopies, _async_copies, _cp_async, _cp_async_commit, _cp_async_wait, _cp_async_wait_all,
)
from .ptx_memory import _ATOMIC_OPS, _atomic, _fence, _griddepcontrol, _ld_st, _memory_view, _prefetch, global_writes  # noqa: F401
from .ptx_mma import _MMA_INPUTS, _ldmatrix, _mma, mma_fragments  # noqa: F401 (re-exported)
from .ptx_operands import (  # noqa: F401 (re-exported)
    _LANE, WARP, PtxCall, _check_span, _per_thread, _pointer, _predicated, _reader, _type_dtype, _warps, _writer,
)
from .ptx_registers import (  # noqa: F401 (re-exported)
    _CANONICAL_NAN, _FLOATS, _cvt, _cvt_f16x2_f8x2, _cvt_x2, _gather_lanes, _mov, _prmt, _round, _shfl_cuda, _shfl_ptx, _toward_zero,
)
from .ptx_sync import (  # noqa: F401 (re-exported)
    _bar_sync, _barrier, _mbarrier_op, _mbarrier_wait_cuda, _mbarrier_wait_ptx, _mbarriers, _named_barrier, _waiters,
    unfinished_barriers,
)


# ----------------------------------------------------------------------------------------------
# CUDA device calls
# ----------------------------------------------------------------------------------------------


def _cvta_to_shared(compiler, node, args):
    """``__cvta_generic_to_shared``: sm80 keeps shared addresses as (buffer, offset); sm90 gives the
    32-bit address in the workgroup's shared window (``Machine.shared_address``), an integer that
    descriptors and address arithmetic can take, turned back into (buffer, offset) where used."""
    machine = compiler.machine
    ptr = compiler.expr(args[0])
    where = where_of(node)

    def run(env, mask):
        p = _pointer(ptr(env, mask), "shared", "cvta_generic_to_shared", where, machine)
        return machine.shared_address(p) if machine.integer_shared else p
    return run


def _addr(compiler, node, args):
    """``tirx.ptx.addr(base, byte_offset)``: an address operand ``[base + imm]``."""
    machine = compiler.machine
    base, off = compiler.expr(args[0]), compiler.expr(args[1])
    where = where_of(node)

    def run(env, mask):
        p = _pointer(base(env, mask), "", "ptx.addr", where, machine)
        return Pointer(p.buffer, p.offset + np.asarray(off(env, mask), np.int64))
    return run


def _f32_map(compiler, args, fn, **errstate):
    """The run function of a one-argument f32 math call: numpy's ``fn`` on the f32 operand, under
    ``np.errstate(**errstate)`` (the IEEE cases the call's hardware instruction meets silently)."""
    (x,) = (compiler.expr(a) for a in args)

    def run(env, mask):
        with np.errstate(**errstate):
            return fn(np.asarray(x(env, mask), np.float32))
    return run


def _exp2f(compiler, node, args):
    """``exp2f(x)`` on f32, what TIRx writes for ``T.exp2`` (NVRTC, with TIRx's ``--use_fast_math``,
    compiles it to ``ex2.approx.ftz.f32``, PTX ISA 9.7.3.21, relative error about 2^-22): numpy's
    ``exp2`` rounded to f32 (overflow to inf, as the hardware), within that error of the GPU's value."""
    return _f32_map(compiler, args, np.exp2, over="ignore", under="ignore")


def _tanhf(compiler, node, args):
    """``tanhf(x)`` on f32, what TIRx writes for ``T.tanh`` (NVRTC, with TIRx's ``--use_fast_math``, compiles it
    to ``tanh.approx.f32``, PTX ISA 9.7.3.22): the worst case of that instruction, numpy's ``tanh`` moved toward
    zero by its largest relative error (``isa.ptx_math.TANH_APPROX_ERROR``) and rounded to f32, so that a
    kernel's validation in the emulator holds its error bound to the instruction's documented error (toward
    zero: where ``1 + tanh`` cancels, the error grows the result most)."""
    return _f32_map(compiler, args, lambda x: (np.tanh(x.astype(np.float64)) * (1.0 - TANH_APPROX_ERROR)).astype(np.float32))


def _log2f(compiler, node, args):
    """``log2f(x)`` on f32, what TIRx writes for ``T.log2`` (NVRTC, with TIRx's ``--use_fast_math``,
    compiles it to ``lg2.approx.ftz.f32``, PTX ISA 9.7.3.20, maximum relative error about 2^-22 away
    from 1): numpy's ``log2`` rounded to f32 (``-inf`` at 0, NaN below), within that error of the GPU's
    value."""
    return _f32_map(compiler, args, np.log2, divide="ignore", invalid="ignore")


def _any_sync(compiler, node, args):
    """CUDA ``__any_sync(mask, pred)`` (CUDA C++ Programming Guide, Warp Vote Functions): non-zero on
    every lane of ``mask`` if ``pred`` is non-zero on one of them; the membermask rules as shuffles'."""
    machine = compiler.machine
    m, pred = (compiler.expr(a) for a in args)
    where = where_of(node)

    def run(env, mask):
        lane = machine.lane_of.astype(np.int64)
        _gather_lanes(machine, mask, lane, lane, m(env, mask), "__any_sync", where)
        vote = machine.active(mask) & (_per_thread(np.asarray(pred(env, mask)), machine.nthreads) != 0)
        warps = np.zeros((len(machine.groups), machine.waves_per_group), bool)
        np.logical_or.at(warps, (machine.wg_of, machine.wave_of), vote)
        return warps[machine.wg_of, machine.wave_of].astype(np.int32)
    return run


def _fmaxf(compiler, node, args):
    """``fmaxf(x, y)`` on f32 (CUDA's ``FMNMX``): the larger, the other operand where one is NaN."""
    x, y = (compiler.expr(a) for a in args)

    def run(env, mask):
        return np.fmax(np.asarray(x(env, mask), np.float32), np.asarray(y(env, mask), np.float32))
    return run


def _index(kind: str):
    def factory(compiler, node, args):
        machine, tag = compiler.machine, f"{kind}.{args[0].value}"
        return lambda env, mask: machine.thread_index(tag)
    return factory


def _extent(attr: str):
    def factory(compiler, node, args):
        value = np.int32(getattr(compiler.machine, attr).get(str(args[0].value), 1))
        return lambda env, mask: value
    return factory


# ----------------------------------------------------------------------------------------------
# the call table
# ----------------------------------------------------------------------------------------------


def _ptx(name: str, semantics):
    """Factory for ``tirx.ptx.<name>``: decode the call, then build its (predicated) closure."""
    entry = ptx_entry(name)

    def factory(compiler, node, args):
        call = PtxCall(entry, node)
        return _predicated(compiler, call, semantics(compiler, call))
    return entry.op_name, factory


def calls() -> dict:
    from .ptx_hopper import _func_call

    machine_ops = {
        "tirx.cuda.thread_idx": _index("threadIdx"),
        "tirx.cuda.block_idx": _index("blockIdx"),
        "tirx.cuda.block_dim": _extent("block"),
        "tirx.cuda.grid_dim": _extent("grid"),
        "tirx.cuda.lane_id": lambda c, n, a: (lambda env, mask: c.machine.lane_of.astype(np.int32)),
        "tirx.cuda.warp_id": lambda c, n, a: (lambda env, mask: c.machine.wave_of.astype(np.int32)),
        "tirx.cuda.cta_sync": lambda c, n, a: _barrier(c, where_of(n)),
        "tirx.cuda.warp_sync": lambda c, n, a: (lambda env, mask: None),
        "tirx.cuda.thread_fence": lambda c, n, a: (lambda env, mask: None),
        "tirx.cuda.cvta_generic_to_shared": _cvta_to_shared,
        "tirx.cuda.__shfl_sync": _shfl_cuda("idx"),
        "tirx.cuda.__shfl_up_sync": _shfl_cuda("up"),
        "tirx.cuda.__shfl_down_sync": _shfl_cuda("down"),
        "tirx.cuda.__shfl_xor_sync": _shfl_cuda("xor"),
        "tirx.cuda.any_sync": _any_sync,
        "tirx.ptx.addr": _addr,
        "tirx.cuda.mbarrier_wait": _mbarrier_wait_cuda,
        "exp2f": _exp2f,
        "log2f": _log2f,
        "tanhf": _tanhf,
        "fmaxf": _fmaxf,
    }
    ptx_ops = dict(_ptx(name, sem) for name, sem in (
        ("ldmatrix", _ldmatrix),
        ("mma", _mma),
        *((f"cp_async_{cop}{form}", _cp_async) for cop in ("ca", "cg") for form in ("", "_src_size", "_ignore_src")),
        ("cp_async_commit_group", _cp_async_commit),
        ("cp_async_wait_group", _cp_async_wait),
        ("cp_async_wait_all", _cp_async_wait_all),
        ("ld", _ld_st(True)), ("ld_vec", _ld_st(True)),
        ("st", _ld_st(False)), ("st_vec", _ld_st(False)),
        ("cvt_f16x2_f32", _cvt_x2(np.dtype(np.float16))), ("cvt_f16x2_f8x2", _cvt_f16x2_f8x2),
        ("cvt_bf16x2_f32", _cvt_x2(np.dtype(ml_dtypes.bfloat16))),
        ("cvt", _cvt), ("prmt", _prmt),
        ("mov", _mov), *((f"mov_{d}_{w}", _mov) for d in ("pack", "unpack")
                         for w in ("b16x2", "b32x2", "b16x4", "b64x2", "b32x4")),
        ("shfl_sync", _shfl_ptx), ("shfl_sync_p", _shfl_ptx),
        ("bar_sync", _bar_sync), ("barrier_sync", _bar_sync),
        ("bar_sync_count", _named_barrier(True)), ("barrier_sync_count", _named_barrier(True)),
        ("bar_arrive", _named_barrier(False)), ("barrier_arrive", _named_barrier(False)),
        ("mbarrier_init", _mbarrier_op("init")), ("mbarrier_arrive", _mbarrier_op("arrive")),
        ("mbarrier_arrive_nocount", _mbarrier_op("arrive")), ("cp_async_mbarrier_arrive", _mbarrier_op("cp_arrive")),
        *((n, _mbarrier_wait_ptx) for n in ("mbarrier_test_wait_parity", "mbarrier_try_wait_parity",
                                             "mbarrier_try_wait_parity_no_hint")),
        ("atom", _atomic(True)), ("red", _atomic(False)), ("fence", _fence), ("prefetch", _prefetch),
        ("griddepcontrol", _griddepcontrol),
    ))
    return {**machine_ops, **ptx_ops, **hopper_calls(), "tirx.cuda.func_call": _func_call}


def hopper_calls() -> dict:
    """The sm90 instructions (TMA, wgmma, mbarrier transaction counts, elect.sync, setmaxnreg,
    fence.proxy; clusters: mapa, barrier.cluster): modules ``ptx_tma``, ``ptx_wgmma``, ``ptx_hopper``, ``cluster``."""
    from .cluster import barrier_cluster, mapa
    from .ptx_hopper import _elect_sync, _fence_proxy, _mbarrier_tx, _setmaxnreg
    from .ptx_tma import _bulk_group, _tma_load, _tma_prefetch, _tma_store
    from .ptx_wgmma import _wgmma, _wgmma_commit, _wgmma_fence, _wgmma_wait

    return dict(_ptx(name, sem) for name, sem in (
        *((f"wgmma_{t}_{form}", _wgmma) for t in ("f16", "bf16", "fp8") for form in ("ss", "rs")),
        ("wgmma_fence", _wgmma_fence), ("wgmma_commit_group", _wgmma_commit), ("wgmma_wait_group", _wgmma_wait),
        ("cp_async_bulk_tensor_g2s_cluster", _tma_load), ("cp_async_bulk_tensor_g2s_cta", _tma_load),
        ("cp_async_bulk_tensor_s2g", _tma_store), ("cp_async_bulk_tensor_prefetch", _tma_prefetch),
        ("cp_async_bulk_commit_group", _bulk_group), ("cp_async_bulk_wait_group", _bulk_group),
        ("mbarrier_arrive_expect_tx", _mbarrier_tx("arrive_expect_tx")),
        ("mbarrier_expect_tx", _mbarrier_tx("expect_tx")), ("mbarrier_complete_tx", _mbarrier_tx("complete_tx")),
        ("elect_sync", _elect_sync), ("setmaxnreg", _setmaxnreg), ("fence_proxy", _fence_proxy),
        ("fence_mbarrier_init", _fence_proxy),
        ("mapa_u32", mapa), ("barrier_cluster_arrive", barrier_cluster(False)),
        ("barrier_cluster_wait", barrier_cluster(True)),
    ))


__all__ = ["AsyncCopies", "PtxCall", "calls", "mma_fragments", "unfinished_barriers"]
