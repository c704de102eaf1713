"""The warp-level matrix instructions (PTX ISA 9.7.16): ``ldmatrix`` and ``mma`` (``mma_fragments``: the
fragment lane maps).
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import banks
from .memory import check_lds_read
from .ptx_operands import _LANE, WARP, PtxCall, _check_span, _per_thread, _pointer, _reader, _warps, _writer


def _ldmatrix(compiler, call: PtxCall):
    """``ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{.trans}.shared{::cta}.b16 r, [p]`` (PTX ISA 9.7.16.5.15).

    Matrix ``i`` (of 1/2/4) has eight 16-byte rows of eight b16 elements; lane ``8*i + row`` supplies
    the shared address of that row (for .x1/.x2 the other lanes' addresses are ignored). Lane ``l``
    receives in register ``r[i]`` the elements ``(l/4, 2*(l%4))`` and ``(l/4, 2*(l%4)+1)`` of matrix
    ``i`` (lower column in the low half); with ``.trans`` the elements ``(2*(l%4), l/4)`` and
    ``(2*(l%4)+1, l/4)``. Row addresses must be 16-byte aligned; all 32 lanes execute it."""
    machine = compiler.machine
    mods = call.mods
    if mods["shape"] != "m8n8" or mods["type"] != "b16":
        raise NotImplementedError(f"emulator: ldmatrix .{mods['shape']}.{mods['type']}")
    count = int(mods["num"][1:])
    trans = mods["trans"] == "trans"
    regs = [_writer(compiler, n) for n in call.operands["r"]]
    ptr = compiler.expr(call.operands["p"][0])
    row, col = _LANE // 4, 2 * (_LANE % 4)
    where = call.where

    def run(env, mask):
        warps = _warps(machine, mask, "ldmatrix", where)
        if not len(warps):
            return
        p = _pointer(ptr(env, mask), "shared", "ldmatrix", where, machine)
        buf, T = p.buffer, machine.nthreads
        addr = _per_thread(np.asarray(p.offset, np.int64), T)
        providers = warps[:, : 8 * count]
        a = addr[providers]
        _check_span(machine, buf, providers, a, 16, 16, "ldmatrix", where)
        reading = np.zeros(T, bool)
        reading[providers.ravel()] = True
        inst = machine.instance(buf)
        check_lds_read(machine, buf, inst, addr, 16, reading, where)
        if machine.stats is not None:  # one phase per matrix: its 8 row-address lanes
            phase = np.arange(providers.size) // 8
            banks.record(machine.stats, "ldmatrix", phase, a, 16)
        rows = buf.data[inst[providers][..., None], a[..., None] + np.arange(16)]  # (W, 8*count, 16)
        M = np.ascontiguousarray(rows).view("<u2").reshape(len(warps), count, 8, 8)  # [w, matrix, row, col]
        lo, hi = (M[:, :, col, row], M[:, :, col + 1, row]) if trans else (M[:, :, row, col], M[:, :, row, col + 1])
        words = lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)  # (W, count, 32)
        out = np.zeros((T, count), np.uint32)
        out[warps] = words.transpose(0, 2, 1)
        raw = out.view(np.uint8).reshape(T, count, 4)
        active = np.zeros(T, bool)
        active[warps.ravel()] = True
        for i, write in enumerate(regs):
            write(env, active, raw[:, i])
    return run


def mma_fragments(k: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(row, col) of each fragment element per lane for ``mma.m16n8k{16,8}`` with 16-bit A/B and f32
    C/D, from the "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8" (floating point) tables of PTX
    ISA 9.7.16.5. ``groupID = lane / 4``, ``tid = lane % 4``; element ``i`` of a fragment is half
    ``i % 2`` of register ``i / 2`` (A, B) or register ``i`` (C, D). Arrays are (32, elements):

    * A (16 x k, row): row ``groupID + 8*((i/2)%2)``, col ``2*tid + i%2 + 8*(i/4)``;
    * B (k x 8, col): row ``2*tid + i%2 + 8*(i/2)``, col ``groupID``;
    * C/D (16 x 8): row ``groupID + 8*(i/2)``, col ``2*tid + i%2``.
    """
    g, t = (_LANE // 4)[:, None], (_LANE % 4)[:, None]
    ia, ib, ic = np.arange(k // 2)[None], np.arange(k // 4)[None], np.arange(4)[None]
    maps = {
        "a": (g + 8 * ((ia // 2) % 2), 2 * t + ia % 2 + 8 * (ia // 4)),
        "b": (2 * t + ib % 2 + 8 * (ib // 2), g),
        "c": (g + 8 * (ic // 2), 2 * t + ic % 2),
    }
    n = {"a": k // 2, "b": k // 4, "c": 4}
    return {key: tuple(np.broadcast_to(x, (WARP, n[key])) for x in rc) for key, rc in maps.items()}


_MMA_INPUTS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


def _mma(compiler, call: PtxCall):
    """``mma.sync.aligned.m16n8k{16,8}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, c``
    (PTX ISA 9.7.16.5.14): ``D = A * B + C`` per warp, fragments per :func:`mma_fragments`.
    Products are exact in float64, the sum is taken in float64 and rounded to f32 once (see the
    module docstring for when that is bit-identical to tensor cores)."""
    machine = compiler.machine
    mods = call.mods
    k = {"m16n8k16": 16, "m16n8k8": 8}.get(mods["shape"])
    if (k is None or mods["atype"] not in _MMA_INPUTS or mods["btype"] != mods["atype"]
            or (mods["alayout"], mods["blayout"]) != ("row", "col") or (mods["dtype"], mods["ctype"]) != ("f32", "f32")):
        raise NotImplementedError(f"emulator: mma .{'.'.join(v for v in mods.values() if v)}")
    elem = _MMA_INPUTS[mods["atype"]]
    frag = mma_fragments(k)
    a_regs = [_reader(compiler, n, 4) for n in call.operands["a"]]
    b_regs = [_reader(compiler, n, 4) for n in call.operands["b"]]
    c_regs = [_reader(compiler, n, 4) for n in call.operands["c"]]
    d_regs = [_writer(compiler, n) for n in call.operands["d"]]
    where = call.where

    def fragment(regs, env, mask, warps, dtype):
        raw = np.stack([r(env, mask) for r in regs], axis=1)[warps]  # (W, 32, regs, 4)
        return np.ascontiguousarray(raw).view(dtype).reshape(len(warps), WARP, -1).astype(np.float64)

    def run(env, mask):
        warps = _warps(machine, mask, "mma.sync", where)
        W = len(warps)
        if not W:
            return
        A, B, C = np.zeros((W, 16, k)), np.zeros((W, k, 8)), np.zeros((W, 16, 8))
        A[(slice(None), *frag["a"])] = fragment(a_regs, env, mask, warps, elem)
        B[(slice(None), *frag["b"])] = fragment(b_regs, env, mask, warps, elem)
        C[(slice(None), *frag["c"])] = fragment(c_regs, env, mask, warps, np.float32)
        D = (np.matmul(A, B) + C).astype(np.float32)
        T = machine.nthreads
        out = np.zeros((T, 4), np.float32)
        out[warps] = D[(slice(None), *frag["c"])]
        raw = out.view(np.uint8).reshape(T, 4, 4)
        active = np.zeros(T, bool)
        active[warps.ravel()] = True
        for i, write in enumerate(d_regs):
            write(env, active, raw[:, i])
    return run
