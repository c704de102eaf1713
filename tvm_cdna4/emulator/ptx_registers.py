"""The register instructions: conversions (``cvt``), moves (``mov``, pack and unpack), byte permutes (``prmt``) and
warp shuffles (``shfl.sync``, CUDA's ``__shfl*_sync``).
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import EmulationError
from .interp import np_dtype, where_of
from .ptx_operands import PtxCall, _per_thread, _reader, _type_dtype, _writer


# ----------------------------------------------------------------------------------------------
# cvt / mov
# ----------------------------------------------------------------------------------------------


_CANONICAL_NAN = {np.dtype(np.float16): 0x7FFF, np.dtype(ml_dtypes.bfloat16): 0x7FFF}


def _round(x: np.ndarray, dtype: np.dtype, mods: dict) -> np.ndarray:
    """IEEE conversion of float values ``x`` to ``dtype`` with cvt's .rn/.rz, .relu, .satfinite."""
    rnd = mods.get("rnd") or "rn"
    with np.errstate(all="ignore"):
        y = x.astype(dtype)
        if rnd == "rz":
            over = np.abs(y.astype(np.float64)) > np.abs(x.astype(np.float64))
            y = np.where(over, _toward_zero(y, dtype), y)
        elif rnd != "rn":
            raise NotImplementedError(f"emulator: cvt rounding .{rnd}")
        bits = y.view(f"<u{dtype.itemsize}").copy()
        nan = np.isnan(x)
        if mods.get("satfinite") and dtype in _CANONICAL_NAN:
            big = np.asarray(ml_dtypes.finfo(dtype).max if dtype == ml_dtypes.bfloat16 else np.finfo(dtype).max, dtype)
            y = np.clip(y.astype(np.float32), -float(big), float(big)).astype(dtype)
            bits = y.view(f"<u{dtype.itemsize}").copy()
        if mods.get("relu"):
            bits[(y.astype(np.float32) < 0)] = 0
        if (mods.get("relu") or mods.get("satfinite")) and dtype in _CANONICAL_NAN:
            bits[nan] = _CANONICAL_NAN[dtype]
    return bits.view(dtype)


def _toward_zero(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The neighbour of ``y`` one unit in the last place toward zero (same sign)."""
    bits = y.view(f"<u{dtype.itemsize}")
    step = np.where((bits & ((1 << (8 * dtype.itemsize - 1)) - 1)) != 0, 1, 0).astype(bits.dtype)
    return (bits - step).view(dtype)


def _cvt_x2(dtype):
    def factory(compiler, call: PtxCall):
        """``cvt{.rn,.rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` (PTX ISA 9.7.10.24): ``a``
        converted goes to the upper half of ``d``, ``b`` to the lower half."""
        machine = compiler.machine
        (d,), (a,), (b,) = (call.operands[k] for k in ("d", "a", "b"))
        write, ra, rb = _writer(compiler, d), _reader(compiler, a, 4, "f32"), _reader(compiler, b, 4, "f32")

        def run(env, mask):
            T = machine.nthreads
            hi = _round(ra(env, mask).view(np.float32)[:, 0], dtype, call.mods)
            lo = _round(rb(env, mask).view(np.float32)[:, 0], dtype, call.mods)
            raw = np.stack([lo.view(np.uint16), hi.view(np.uint16)], axis=1).view(np.uint8).reshape(T, 4)
            write(env, mask, raw)
        return run
    return factory


def _cvt_f16x2_f8x2(compiler, call: PtxCall):
    """``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a`` (PTX ISA 9.7.10.24, sm_89+): the two fp8 values of the 16-bit
    ``a`` widened to f16, ``a``'s upper byte to the upper half of ``d`` (exact: f16 holds every e4m3 / e5m2
    value; ``.relu`` clamps negatives to 0)."""
    import ml_dtypes

    machine = compiler.machine
    src = {"e4m3x2": ml_dtypes.float8_e4m3fn, "e5m2x2": ml_dtypes.float8_e5m2}[call.mods["atype"]]
    read = _reader(compiler, call.operands["a"][0], 2, "b16")
    write = _writer(compiler, call.operands["d"][0])

    def run(env, mask):
        wide = read(env, mask).view(src).astype(np.float16)  # (T, 2): byte 0 low, byte 1 high
        if call.mods.get("relu"):
            wide = np.where(wide < 0, np.float16(0), wide)
        write(env, mask, np.ascontiguousarray(wide).view(np.uint8).reshape(machine.nthreads, 4))
    return run


_FLOATS = ("f16", "bf16", "f32", "f64")


def _cvt(compiler, call: PtxCall):
    """``cvt{.rnd}.dtype.atype d, a`` (PTX ISA 9.7.10.24) between floating-point types (.rn/.rz, or
    no rounding modifier for exact widening); other forms are not emulated."""
    mods = call.mods
    if mods["dtype"] not in _FLOATS or mods["atype"] not in _FLOATS or mods["ftz"] or mods["sat"]:
        raise NotImplementedError(f"emulator: cvt .{'.'.join(v for v in mods.values() if v)}")
    machine = compiler.machine
    src_t, dst_t = _type_dtype(mods["atype"]), _type_dtype(mods["dtype"])
    read = _reader(compiler, call.operands["a"][0], src_t.itemsize, mods["atype"])
    write = _writer(compiler, call.operands["d"][0])

    def run(env, mask):
        x = read(env, mask).view(src_t)[:, 0]
        exact = dst_t.itemsize > src_t.itemsize  # widening (f16/bf16 -> f32 -> f64) needs no rounding
        y = x.astype(dst_t) if exact else _round(x, dst_t, mods)
        write(env, mask, np.ascontiguousarray(y).view(np.uint8).reshape(machine.nthreads, -1))
    return run


def _mov(compiler, call: PtxCall):
    """``mov.type d, a`` and the pack/unpack forms ``mov.b32 d, {a, b}`` / ``mov.b32 {a, b}, d``
    (PTX ISA 9.7.10.4): a bit copy; the first element of a brace vector is the least significant."""
    machine = compiler.machine
    if call.mods["type"] == "pred":
        raise NotImplementedError("emulator: mov.pred")
    total = int(call.mods["type"][1:]) // 8
    srcs, dsts = call.operands["a"], call.operands["d"]
    reads = [_reader(compiler, n, total // len(srcs), "b" + str(8 * total // len(srcs))) for n in srcs]
    writes = [_writer(compiler, n) for n in dsts]

    def run(env, mask):
        raw = np.concatenate([r(env, mask) for r in reads], axis=1).reshape(machine.nthreads, len(writes), -1)
        for i, write in enumerate(writes):
            write(env, mask, raw[:, i])
    return run


def _prmt(compiler, call: PtxCall):
    """``prmt.b32 d, a, b, c`` (PTX ISA 9.7.10.7, the default mode): byte ``i`` of ``d`` is byte ``c[4i + 2 ..
    4i]`` of ``{b, a}`` (``a``'s bytes 0-3, ``b``'s 4-7), or that byte's sign replicated where ``c[4i + 3]``."""
    if call.mods.get("mode"):
        raise NotImplementedError(f"emulator: prmt.b32.{call.mods['mode']}")
    machine = compiler.machine
    (d,), (a,), (b,), (c,) = (call.operands[k] for k in ("d", "a", "b", "c"))
    write = _writer(compiler, d)
    ra, rb, rc = (_reader(compiler, x, 4, "b32") for x in (a, b, c))

    def run(env, mask):
        src = np.concatenate([ra(env, mask), rb(env, mask)], axis=1)
        sel = rc(env, mask).view(np.uint32)[:, 0]
        rows = np.arange(machine.nthreads)
        out = np.empty((machine.nthreads, 4), np.uint8)
        for i in range(4):
            nib = (sel >> np.uint32(4 * i)) & np.uint32(0xF)
            byte = src[rows, (nib & np.uint32(7)).astype(np.intp)]
            out[:, i] = np.where(nib & np.uint32(8), np.where(byte & 0x80, 0xFF, 0), byte)
        write(env, mask, out)
    return run


# ----------------------------------------------------------------------------------------------
# shfl
# ----------------------------------------------------------------------------------------------


def _shfl_ptx(compiler, call: PtxCall):
    """``shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask`` (PTX ISA 9.7.10.6)::

        maxLane = (lane & segmask) | (cval & ~segmask);  minLane = lane & segmask   (c = segmask<<8 | cval)
        up: j = lane - b, p = j >= maxLane;  down: j = lane + b, p = j <= maxLane
        bfly: j = lane ^ b, p = j <= maxLane;  idx: j = minLane | (b & ~segmask), p = j <= maxLane
        if !p: j = lane;  d = a of lane j
    """
    machine = compiler.machine
    mode = call.mods["mode"]
    a = _reader(compiler, call.operands["a"][0], 4, "b32")
    b, c, member = (compiler.expr(call.operands[k][0]) for k in ("b", "c", "membermask"))
    write = _writer(compiler, call.operands["d"][0])
    write_p = _writer(compiler, call.operands["p"][0]) if "p" in call.operands else None
    where = call.where

    def run(env, mask):
        T = machine.nthreads
        lane = machine.lane_of.astype(np.int64)
        bv = _per_thread(np.asarray(b(env, mask)).astype(np.int64), T) & 31
        cv = _per_thread(np.asarray(c(env, mask)).astype(np.int64), T)
        seg, cval = (cv >> 8) & 31, cv & 31
        max_lane, min_lane = (lane & seg) | (cval & ~seg), lane & seg
        j = {"up": lane - bv, "down": lane + bv, "bfly": lane ^ bv, "idx": min_lane | (bv & ~seg)}[mode]
        ok = j >= max_lane if mode == "up" else j <= max_lane
        j = np.where(ok, j, lane)
        out = _gather_lanes(machine, mask, a(env, mask), j, member(env, mask), "shfl.sync", where)
        write(env, mask, out)
        if write_p is not None:
            write_p(env, mask, ok.astype(np.uint32).view(np.uint8).reshape(T, 4))
    return run


def _gather_lanes(machine, mask, values, src_lane, membermask, what: str, where: str):
    """``values`` of lane ``src_lane`` of each thread's warp, after the membermask rules: every
    executing thread is in the mask, every lane of the mask executes, and sources are active."""
    T = machine.nthreads
    active = machine.active(mask)
    lane = machine.lane_of.astype(np.int64)
    members = _per_thread(np.asarray(membermask).astype(np.int64) & 0xFFFFFFFF, T)
    warp_bits = np.zeros((len(machine.groups), machine.waves_per_group), np.int64)
    np.add.at(warp_bits, (machine.wg_of, machine.wave_of), np.where(active, np.int64(1) << lane, 0))
    present = warp_bits[machine.wg_of, machine.wave_of]
    for bad, why in ((active & ((members >> lane) & 1 == 0), "executed by a lane that is not in its membermask"),
                     (active & (members & ~present != 0), "membermask names a lane that does not execute it")):
        if bad.any():
            raise EmulationError(f"{what}: {why}", where, *machine.coords(int(np.argmax(bad))))
    src = np.arange(T) - lane + np.asarray(src_lane, np.int64)
    if (active & ~active[src]).any():
        t = int(np.argmax(active & ~active[src]))
        raise EmulationError(f"{what}: source lane {int(src_lane[t])} is inactive", where, *machine.coords(t))
    return np.asarray(values)[src]


def _shfl_cuda(mode: str):
    def factory(compiler, node, args):
        """CUDA ``__shfl{,_up,_down,_xor}_sync(mask, var, lane|delta|laneMask, width)`` (CUDA C++
        Programming Guide, Warp Shuffle Functions): lanes form segments of ``width`` (a power of two);
        idx reads lane ``srcLane % width`` of the segment, up/down keep their own value when the source
        is outside the segment, xor may read earlier segments but not later ones."""
        machine = compiler.machine
        m, var, b, w = (compiler.expr(a) for a in args)
        dtype, _ = np_dtype(node.ty.dtype)
        where = where_of(node)

        def run(env, mask):
            T = machine.nthreads
            lane = machine.lane_of.astype(np.int64)
            bv = _per_thread(np.asarray(b(env, mask)).astype(np.int64), T)
            width = _per_thread(np.asarray(w(env, mask)).astype(np.int64), T)
            base = lane & ~(width - 1)
            if mode == "idx":
                j = base + (bv & (width - 1))
            elif mode == "up":
                j = np.where(lane - base >= bv, lane - bv, lane)
            elif mode == "down":
                j = np.where(lane - base + bv < width, lane + bv, lane)
            else:
                j = lane ^ bv
                j = np.where(j < base + width, j, lane)
            v = _per_thread(var(env, mask), T)
            return _gather_lanes(machine, mask, v, j, m(env, mask), f"__shfl_{mode}_sync", where).astype(dtype)
        return run
    return factory
