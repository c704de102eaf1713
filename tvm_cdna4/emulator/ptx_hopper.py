"""sm90 synchronization and warp instructions of the CUDA emulator (PTX ISA 9.4 numbering): mbarrier
transaction counts (``mbarrier.arrive.expect_tx``, ``mbarrier.expect_tx`` / ``complete_tx``, §9.7.15.16),
``elect.sync`` (§9.7.15.15), ``setmaxnreg`` (§9.7.21.5) and ``fence.proxy.async`` (§9.7.15.4, :mod:`.proxy`); the
wgmma register fences of ``patterns.wgmma_fence`` (``T.cuda.func_call`` of an empty asm).
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import numpy as np

from ..isa.hopper_layout import SETMAXNREG
from .errors import EmulationError
from .ptx_operands import PtxCall, _active_address, _per_thread, _pointer, _writer
from .ptx_sync import _mbarriers


def _mbarrier_tx(action: str):
    def factory(compiler, call: PtxCall):
        """``mbarrier.arrive.expect_tx{..}.b64 _, [a], tx`` (expect ``tx`` bytes, then arrive once),
        ``mbarrier.expect_tx{..}.b64 [a], tx``, ``mbarrier.complete_tx{..}.b64 [a], tx``: the phase
        completes when its pending arrivals and its transaction count both reach zero."""
        machine, where = compiler.machine, call.where
        addr, tx = compiler.expr(call.operands["addr"][0]), compiler.expr(call.operands["tx_count"][0])

        def run(env, mask):
            threads = np.flatnonzero(machine.active(mask))
            if not threads.size:
                return
            ptr = _pointer(_active_address(addr(env, mask), threads), "shared", f"mbarrier {action}", where, machine)
            bars = _mbarriers(machine)
            n = _per_thread(np.asarray(tx(env, mask), np.int64), machine.nthreads)[threads]
            snaps, _ = bars.snapshot(threads) if action == "complete_tx" else (None, None)
            for g, bar, pos in bars.by_barrier(ptr, threads):
                for k in pos:
                    sign = -1 if action == "complete_tx" else 1
                    bar.transact(g, sign * int(n[k]), None if snaps is None else snaps[k], where)
            if action == "arrive_expect_tx":
                bars.arrive(ptr, threads, np.ones(len(threads), np.int64), where)
        return run
    return factory


def _elect_sync(compiler, call: PtxCall):
    """``elect.sync d|p, membermask``: of each warp's active lanes in ``membermask``, the lowest is the
    leader: ``p`` true there and false elsewhere, ``d`` the leader's lane id in every participating lane."""
    machine = compiler.machine
    member = compiler.expr(call.operands["membermask"][0])
    out_d = _writer(compiler, call.operands["d"][0]) if "d" in call.operands else None
    out_p = _writer(compiler, call.operands["p"][0])
    pred_bytes = np.dtype(_carrier(call.operands["p"][0])).itemsize

    def run(env, mask):
        T = machine.nthreads
        lane = machine.lane_of
        m = _per_thread(np.asarray(member(env, mask)).astype(np.uint32), T)
        on = machine.active(mask) & (((m >> lane.astype(np.uint32)) & 1) == 1)
        warp = machine.wg_of * machine.waves_per_group + machine.wave_of
        leader = np.full(warp.max() + 1, 32, np.int64)
        np.minimum.at(leader, warp[on], lane[on])
        lead = leader[warp]
        p = (on & (lane == lead)).astype(f"<u{pred_bytes}")
        out_p(env, machine.active(mask), p.view(np.uint8).reshape(T, pred_bytes))
        if out_d is not None:
            out_d(env, on, np.where(on, lead, 0).astype(np.uint32).view(np.uint8).reshape(T, 4))
    return run


def _carrier(node):
    from .interp import np_dtype

    dtype, _ = np_dtype(node.ty.dtype)
    return dtype


def _setmaxnreg(compiler, call: PtxCall):
    """``setmaxnreg.{inc,dec}.sync.aligned.u32 n``: accepted (the emulator has no register file limit);
    ``n`` must be a multiple of 8 in [24, 256] and the whole warp must execute it."""
    machine, where = compiler.machine, call.where
    n = call.imm("nreg")
    if n not in SETMAXNREG:
        raise EmulationError(f"setmaxnreg: register count {n} is not a multiple of 8 in [24, 256]", where)

    def run(env, mask):
        machine.require_full_waves(mask, "setmaxnreg", where)
    return run


def _fence_proxy(compiler, call: PtxCall):
    """``fence.proxy.async{.space}``: where the space covers shared::cta, the executing threads' generic shared
    writes so far become visible to the async proxy (:mod:`.proxy`); ``fence.proxy.alias``, ``.async.global``
    and ``fence.mbarrier_init``: accepted, no emulated effect."""
    from .proxy import COVERS_SHARED, ProxyFences

    machine, mods = compiler.machine, call.mods
    shared = mods.get("proxykind") == "async" and (mods.get("space") or None) in COVERS_SHARED
    if call.entry.name != "fence_proxy" or not shared:
        return lambda env, mask: None
    return lambda env, mask: machine.state_of("proxy", ProxyFences).fence(mask)


def _func_call(compiler, node, args):
    """``T.cuda.func_call``: the wgmma register fences (``patterns.wgmma_fence.FENCE_NAMES``) are no
    instruction (an empty asm that orders the compiler; the emulator runs statements in order); any
    other C helper is not emulated."""
    from ..patterns.wgmma_fence import FENCE_NAMES

    name = getattr(node.args[0], "value", node.args[0])
    if name not in FENCE_NAMES:
        raise NotImplementedError(f"emulator: T.cuda.func_call of the C helper {name!r} (known: {list(FENCE_NAMES)})")
    return lambda env, mask: None
