"""sm90 test kernels for the CUDA emulator's Hopper instructions (tests/emulator/test_emulator_hopper*.py):
TMA loads and stores through TIRx's tile pattern, mbarrier transaction counts, wgmma with raw
``T.ptx`` calls, elect.sync and setmaxnreg; and ``dropping``, a kernel with one synchronization removed (the
sm90 GEMM's and attention's dropped-wait tests)."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


def swizzled(rows: int, cols: int, width: int, elem_bytes: int = 2):
    """The shared layout of a ``rows`` x ``cols`` box a ``width``-byte-swizzled TMA writes
    (``Swizzle<B,4,3>`` in elements: B = log2(width/16) bits of the 16-byte chunk XOR the row's)."""
    tile = T.TileLayout(T.S[rows, cols])
    if width == 0:
        return tile
    per = {1: 4, 2: 3, 4: 2}[elem_bytes]
    return T.ComposeLayout(per, {32: 1, 64: 2, 128: 3}[width], 3, tile)


def tma_copy_kernel(shape=(64, 64), box=(64, 64), coords=(0, 0), width=128, dtype="bfloat16", wait=True,
                    expect=True, store=False, rewrite=None):
    """One TMA load of a ``box`` of ``A`` (``shape``) at ``coords`` into shared memory, swizzled by
    ``width``, onto an mbarrier (expect-tx of the box's bytes by thread 0); then each of 128 threads
    copies the shared box to ``Out`` (``box``) element by element through the logical layout, or
    (``store``) a TMA store writes the box back to ``Out`` (``shape``) at ``coords``. ``rewrite``: after the
    store a CTA barrier, then thread 64 (warp 2) rewrites the box's first element: the storing thread's
    ``wait_group.read 0`` before the barrier (``"ordered"``), after it (``"wait_after_barrier"``), or none
    before the write (``"no_wait"``)."""
    rows, cols = box
    esize = 1 if "float8" in dtype else (4 if dtype == "float32" else 2)
    nbytes = rows * cols * esize
    sw = {0: 0, 32: 1, 64: 2, 128: 3}[width]
    out_shape = shape if store else box

    @T.function
    def kernel(A: T.Tensor(shape, dtype), Out: T.Tensor(out_shape, dtype)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor(box, dtype, scope="shared", layout=swizzled(rows, cols, width, esize),
                                              align=1024)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        T.cuda.cta_sync()
        if tid == 0:
            if I.constexpr(expect):
                T.ptx["mbarrier.arrive.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(nbytes))
            else:
                T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([0]), T.uint32(1))
            T.cuda.tile.apply(T.ptx[TMA_LOAD], SM[0:rows, 0:cols], A[0:shape[0], 0:shape[1]], box=box, coords=coords,
                              mbar=BAR.ptr_to([0]), swizzle=sw)
        if I.constexpr(wait):
            T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
        if I.constexpr(store):
            T.ptx["fence.proxy.async.shared::cta"]()
            T.cuda.cta_sync()
            if tid == 0:
                T.cuda.tile.apply(T.ptx[TMA_STORE], Out[0:shape[0], 0:shape[1]], SM[0:rows, 0:cols], box=box,
                                  coords=coords, swizzle=sw)
                T.ptx["cp.async.bulk.commit_group"]()
                if I.constexpr(rewrite is None):
                    T.ptx["cp.async.bulk.wait_group"](0)
                elif I.constexpr(rewrite == "ordered"):
                    T.ptx["cp.async.bulk.wait_group.read"](0)
            if I.constexpr(rewrite is not None):
                T.cuda.cta_sync()
                if I.constexpr(rewrite == "wait_after_barrier"):
                    if tid == 0:
                        T.ptx["cp.async.bulk.wait_group.read"](0)
                if tid == 64:
                    SM[0, 0] = T.Cast(dtype, T.float32(0))
                if I.constexpr(rewrite == "no_wait"):
                    if tid == 0:
                        T.ptx["cp.async.bulk.wait_group"](0)
        else:
            for i in range(rows * cols // 128):
                Out[(i * 128 + tid) // cols, (i * 128 + tid) % cols] = SM[(i * 128 + tid) // cols, (i * 128 + tid) % cols]

    return kernel


PTX_TYPE = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
NO_SWIZZLE_LBO, NO_SWIZZLE_SBO = 128, 256  # K-major core matrices: next 8 K elements 128 B on, next 8 rows 256 B


def operand_tile(rows: int, cols: int, width: int, esize: int, mn_major: bool = False):
    """The shared layout of a wgmma operand tile (``rows`` x ``cols``, the inner one contiguous) that a
    descriptor of swizzle ``width`` reads: the TMA swizzle (:func:`swizzled`), or without swizzle the core
    matrices of 8 rows x 16 bytes, K-major ``((8,m),(T,2)):((1T,SBO),(1,LBO))``, MN-major
    ``((T,n),(8,2)):((1,SBO),(T,LBO))`` (CUTLASS's canonical layouts; LBO and SBO swapped for MN-major
    here so each is checked)."""
    if width:
        return swizzled(rows, cols, width, esize)
    t = 16 // esize
    if mn_major:  # rows = K (16), cols = n: (k1, k0, n1, n0)
        return T.TileLayout(T.S[(rows // 8, 8, cols // t, t):(NO_SWIZZLE_SBO // esize, t, NO_SWIZZLE_LBO // esize, 1)])
    return T.TileLayout(T.S[(rows // 8, 8, cols // t, t):(NO_SWIZZLE_SBO // esize, t, NO_SWIZZLE_LBO // esize, 1)])


def descriptor_bits(width: int, mn_major: bool = False) -> int:
    """The wgmma descriptor of an operand tile of :func:`operand_tile` but its start address."""
    from tvm_cdna4.isa.hopper_layout import encode_descriptor

    if width == 0:
        lbo, sbo = (NO_SWIZZLE_SBO, NO_SWIZZLE_LBO) if mn_major else (NO_SWIZZLE_LBO, NO_SWIZZLE_SBO)
        return encode_descriptor(0, lbo, sbo, 0)
    return encode_descriptor(0, 16, 8 * width, width)


def wgmma_gemm_kernel(n=64, dtype="bfloat16", form="ss", trans_b=False, wait_group=True, wait_bar=True,
                      producer=True, negate=False, tma=True, width=128, overwrite=False):
    """C (64 x n, f32) = A (64 x K) @ B on one warpgroup, K = ``width`` bytes of ``dtype`` (32 bytes: one
    k step, for ``width`` 0), A K-major, B K-major (``Bt``, n x K) or, ``trans_b``, MN-major (``B``, K x n,
    n = ``width`` bytes, 16 for ``width`` 0).

    A and B are loaded by TMA with the ``width`` swizzle onto one mbarrier (expect-tx of both boxes'
    bytes) by one lane of a producer warp (warp 4, ``elect.sync``; ``producer=False``: thread 0 of the
    warpgroup). ``tma=False``: the warpgroup stores A and B into the shared tiles element by element
    instead (then ``fence.proxy.async`` and a CTA barrier): TIRx's TMA pattern checks every box element
    when it lowers, seconds of CPU. The warpgroup waits on the mbarrier, runs ``wgmma.mma_async``
    m64nNk(32 bytes) steps (SS: descriptors advanced 32 bytes, or 16 rows of an MN-major B, per step;
    RS: A's fragment loaded from global into its own registers per step: registers an in-flight wgmma
    reads are not rewritten before the wait), commits, waits for the group and stores D by the
    accumulator fragment map. ``negate``: imm-scale-a = -1. ``overwrite``: the warpgroup stores to A's
    shared tile between the commit and the wait (a race with the wgmmas reading it)."""
    esize = 1 if "float8" in dtype else 2
    K = (width or 32) // esize
    steps = (width or 32) // 32
    kstep = 32 // esize
    if trans_b:
        n = (width or 16 * esize) // esize
    half = n // 2
    t = PTX_TYPE[dtype]
    op = f"wgmma.mma_async.sync.aligned.m64n{n}k{kstep}.f32.{t}.{t}"
    b_shape = (K, n) if trans_b else (n, K)
    b_bytes = n * K * esize
    block = 160 if producer and tma else 128
    sa = -1 if negate else 1
    a_desc_hi, b_desc_hi = descriptor_bits(width), descriptor_bits(width, trans_b)
    b_step = 16 * (width or 16) if trans_b else 32  # bytes the B descriptor's start advances per k step
    p = 4 // esize  # A fragment elements per 32-bit register (RS)
    tail_ss = (0, int(trans_b)) if esize == 2 else ()  # imm-trans-a, imm-trans-b (f16/bf16 lines only)
    tail_rs = (int(trans_b),) if esize == 2 else ()
    sw = {0: 0, 32: 1, 64: 2, 128: 3}[width]

    @T.function
    def kernel(A: T.Tensor((64, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((64, n), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        tid = T.cuda.thread_idx("x")
        SA = T.alloc_tensor(ty_args=[T.Tensor((64, K), dtype, scope="shared", layout=operand_tile(64, K, width, esize),
                                              align=1024)])
        SB = T.alloc_tensor(ty_args=[T.Tensor(b_shape, dtype, scope="shared", align=1024,
                                              layout=operand_tile(b_shape[0], b_shape[1], width, esize, trans_b))])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        acc = T.alloc_tensor(ty_args=[T.Tensor((half,), "float32", scope="local")])
        af = T.alloc_tensor(ty_args=[T.Tensor((4, 16 // esize), dtype, scope="local")])  # one fragment per k step
        a32 = T.decl_tensor(af.ptr_to([0, 0]), ty_args=[T.Tensor((4, 4), "uint32", scope="local")])
        lead = T.local_scalar("uint32")
        is_lead = T.local_scalar("uint32")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        T.cuda.cta_sync()
        if I.constexpr(not tma):
            for i in range(64 * K // 128):
                SA[(i * 128 + tid) // K, (i * 128 + tid) % K] = A[(i * 128 + tid) // K, (i * 128 + tid) % K]
            for i in range(b_shape[0] * b_shape[1] // 128):
                SB[(i * 128 + tid) // b_shape[1], (i * 128 + tid) % b_shape[1]] = B[(i * 128 + tid) // b_shape[1],
                                                                                    (i * 128 + tid) % b_shape[1]]
            T.ptx["fence.proxy.async.shared::cta"]()
            T.cuda.cta_sync()
        elif tid >= 128 or not I.constexpr(producer):
            if I.constexpr(producer):
                T.ptx.elect_sync(lead, is_lead, T.uint32(0xFFFFFFFF))
            else:
                is_lead = T.Cast("uint32", tid == 0)
            if is_lead != 0:
                T.ptx["mbarrier.arrive.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(64 * K * esize + b_bytes))
                T.cuda.tile.apply(T.ptx[TMA_LOAD], SA[0:64, 0:K], A[0:64, 0:K], box=(64, K), coords=(0, 0),
                                  mbar=BAR.ptr_to([0]), swizzle=sw)
                T.cuda.tile.apply(T.ptx[TMA_LOAD], SB[0:b_shape[0], 0:b_shape[1]], B[0:b_shape[0], 0:b_shape[1]],
                                  box=b_shape, coords=(0, 0), mbar=BAR.ptr_to([0]), swizzle=sw)
        if tid < 128:
            w = tid // 32
            g = (tid % 32) // 4
            q = tid % 4
            if I.constexpr(wait_bar and tma):
                T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
            for r in range(half):
                acc[r] = T.float32(0)
            T.ptx["wgmma.fence.sync.aligned"]()
            a_base = T.Cast("uint64", T.cuda.cvta_generic_to_shared(SA.ptr_to([0, 0])))
            b_base = T.Cast("uint64", T.cuda.cvta_generic_to_shared(SB.ptr_to([0, 0])))
            for k in range(steps):
                desc_b = T.uint64(b_desc_hi) | (((b_base + T.uint64(b_step) * T.Cast("uint64", k)) >> T.uint64(4))
                                                 & T.uint64(0x3FFF))
                if I.constexpr(form == "ss"):
                    desc_a = T.uint64(a_desc_hi) | (((a_base + T.uint64(32) * T.Cast("uint64", k)) >> T.uint64(4))
                                                    & T.uint64(0x3FFF))
                    T.ptx[op](*[acc[r] for r in range(half)], desc_a, desc_b, k > 0, sa, 1, *tail_ss)
                else:
                    for e in range(16 // esize):
                        af[k, e] = A[16 * w + g + 8 * ((e // p) % 2), k * kstep + p * q + e % p + 4 * p * (e // (2 * p))]
                    T.ptx[op](*[acc[r] for r in range(half)], a32[k, 0], a32[k, 1], a32[k, 2], a32[k, 3], desc_b, k > 0,
                              sa, 1, *tail_rs)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            if I.constexpr(overwrite):
                SA[tid // K, tid % K] = A[0, 0]
            if I.constexpr(wait_group):
                T.ptx["wgmma.wait_group.sync.aligned"](0)
            for r in range(half):
                C[16 * w + g + 8 * ((r // 2) % 2), 8 * (r // 4) + 2 * q + r % 2] = acc[r]

    return kernel


def tx_kernel(expect=64, complete=(32, 32), nreg=40, partial_setmaxnreg=False):
    """Transaction counts without TMA, elect.sync and setmaxnreg on 64 threads: warp 1's elected lane
    expects ``expect`` bytes on an mbarrier (count 1) with ``mbarrier.expect_tx``, arrives, and makes the
    ``complete`` complete-tx steps; warp 0 polls ``try_wait.parity`` until the phase completes, then
    writes ``Out[tid]`` = the elected lane (from elect.sync's ``d``) and whether it was elected (``p``) of
    warp 1's lanes. Warp 1 runs ``setmaxnreg.dec`` to ``nreg`` (``partial_setmaxnreg``: its lanes 0-15
    only)."""
    c1, c2 = (*complete, 0)[:2]

    @T.function
    def kernel(Out: T.Tensor((2, 32), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        lead = T.local_scalar("uint32")
        is_lead = T.local_scalar("uint32")
        ok = T.local_scalar("uint32")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        T.cuda.cta_sync()
        if tid >= 32:
            if I.constexpr(partial_setmaxnreg):
                if tid < 48:
                    T.ptx.setmaxnreg.dec.sync.aligned.u32(nreg)
            else:
                T.ptx.setmaxnreg.dec.sync.aligned.u32(nreg)
            T.ptx.elect_sync(lead, is_lead, T.uint32(0xFFFFFFF0))
            Out[1, tid - 32] = lead * T.uint32(2) + is_lead
            if is_lead != 0:
                T.ptx["mbarrier.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(expect))
                T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([0]), T.uint32(1))
                T.ptx["mbarrier.complete_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(c1))
                if I.constexpr(c2):
                    T.ptx["mbarrier.complete_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(c2))
        else:
            ok = T.uint32(0)
            while ok == 0:
                T.ptx.mbarrier.try_wait.parity.shared.b64(ok, BAR.ptr_to([0]), T.uint32(0))
            Out[0, tid] = ok

    return kernel


def tma_3d_kernel(coords=(3, 0, 0)):
    """A 3D TMA load (no swizzle): a (2, 4, 16) box of ``A`` (4, 4, 16, f32) at ``coords`` (outermost
    first) onto an mbarrier; 128 threads copy it to ``Out`` (2, 4, 16)."""
    c0, c1, c2 = coords

    @T.function
    def kernel(A: T.Tensor((4, 4, 16), "float32"), Out: T.Tensor((2, 4, 16), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((2, 4, 16), "float32", scope="shared", layout="default", align=128)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(2 * 4 * 16 * 4))
            T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"],
                              SM[0:2, 0:4, 0:16], A[0:4, 0:4, 0:16], box=(2, 4, 16), coords=(c0, c1, c2),
                              mbar=BAR.ptr_to([0]))
        T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
        Out[tid // 64, (tid // 16) % 4, tid % 16] = SM[tid // 64, (tid // 16) % 4, tid % 16]

    return kernel


def dropping(func, op: str, nth: int):
    """``func`` with the ``nth`` (1-based, in program order) statement calling ``op`` removed (there must be one)."""
    import tvm_ffi
    from tvm_tirx.ir import Call, Evaluate

    seen = []

    def drop(ev):
        if isinstance(ev.value, Call) and getattr(ev.value.op, "name", "") == op:
            seen.append(ev)
            if len(seen) == nth:
                return Evaluate(0)
        return ev
    out = tvm_ffi.structural_map(func, (Evaluate, drop), order="post")
    assert len(seen) >= nth
    return out
