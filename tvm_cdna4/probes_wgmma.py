"""One-warpgroup probe kernels for ``T.sm90.tile.apply(T.wgmma[...])``: one pattern application (with
``k_repeats`` K steps) per form. They drive ``python -m tvm_cdna4 selftest --target sm90`` and the
tests, and run on an sm_90a GPU: ``A`` (64 x K*k_repeats) and ``B`` (N x K*k_repeats) in global
memory, row-major, are copied into shared tiles of the requested canonical layout (RS: A straight into
the registers of the owner map), and ``D`` (64 x N, f32) receives ``A @ B.T``.

The fragment layouts (``acc_layout``, ``a_register_layout``) and the shared-tile layouts
(``shared_layout``) are the package's spelling of ``isa.hopper_layout``'s owner maps and canonical
layouts in TIRx ``TileLayout`` / ``ComposeLayout`` terms; kernels that use the pattern can take them.
"""

from __future__ import annotations

from tvm_tirx.backend.cuda.axis import laneid, wid_in_wg
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import ComposeLayout, S, TileLayout

from .errors import ContractError
from .isa import hopper_layout as L
from .isa import wgmma_table as W
from .rocm.build import register

SWIZZLE_LEN = {32: 1, 64: 2, 128: 3}
ACC = W.ACC_DTYPE


def acc_layout(n: int, repeats: tuple[int, int] = (1, 1)) -> TileLayout:
    """The f32 accumulator ``(M_rep, N_rep, 64, n)`` by ``hopper_layout.accumulator_coords``: register ``r = 4c + 2h + j``
    of thread ``32 w + l`` holds row ``16 w + 8 h + l // 4``, column ``8 c + 2 (l % 4) + j``."""
    mr, nr = repeats
    per = n // 2
    return TileLayout(S[(mr, nr, 4, 2, 8, n // 8, 4, 2):
                        (nr * per, per, 1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


def a_register_layout(kind: W.WgmmaKind, repeats: tuple[int, int] = (1, 1)) -> TileLayout:
    """RS A ``(M_rep, K_rep, 64, k)`` by ``hopper_layout.a_fragment_coords``: element ``e = e % p + p h + 2 p q`` of thread
    ``32 w + l`` at row ``16 w + 8 h + l // 4``, k ``(k/2) q + p (l % 4) + e % p``."""
    mr, kr = repeats
    p = kind.elems_per_register
    per = 4 * p
    return TileLayout(S[(mr, kr, 4, 2, 8, 2, 4, p):
                        (kr * per, per, 1 @ wid_in_wg, p, 4 @ laneid, 2 * p, 1 @ laneid, 1)])


def shared_layout(rows: int, k: int, k_repeats: int, bits: int, swizzle: int = 128, major: str = "k"):
    """A shared tile ``(1, k_repeats, rows, k)`` of one operand (``rows`` M or N) in the canonical
    layout of ``swizzle`` bytes: K-major rows of ``swizzle`` bytes along K (none: 8 x 16-byte core
    matrices, K chunks after the rows), or M/N-major rows along M/N."""
    per16 = 128 // bits
    kk = k * k_repeats
    if major == "k":
        if swizzle == 0:  # core matrices: (rows/8, kk/per16) of 8 x 16 bytes, K chunks outermost
            tile = TileLayout(S[(1, k_repeats, rows // 8, 8, k // per16, per16):
                                (1, (k // per16) * rows * per16, 8 * per16, per16, rows * per16, 1)])
        else:  # rows of `swizzle` bytes along K: kk must fill whole rows
            width = swizzle * 8 // bits
            tile = TileLayout(S[(1, k_repeats, rows, k): (1, k, width, 1)]) if kk == width else None
            if tile is None:
                raise ContractError(f"a K-major {swizzle}-byte swizzled row is {width} {bits}-bit elements along K",
                                    opcode="probes_wgmma.shared_layout", operand="k * k_repeats", check="shape",
                                    expected=width, found=f"{k} * {k_repeats} = {kk}",
                                    suggestion=f"k_repeats={width // k}" if width % k == 0 else "a wider swizzle")
    else:  # M/N-major: rows along M/N of `swizzle` (or 16) bytes, 8 K rows per group
        width = (swizzle or 16) * 8 // bits
        if rows % width:
            raise ContractError(f"an M/N-major {swizzle or 16}-byte row is {width} {bits}-bit elements along M/N",
                                opcode="probes_wgmma.shared_layout", operand="rows", check="shape",
                                expected=f"a multiple of {width}", found=rows)
        # rows of `swizzle` (none: 16) bytes along M/N, 8 K rows each; the M/N chunks (none: SBO; swizzled:
        # LBO) before the next 8 K rows (none: LBO; swizzled: SBO), so no two elements share an address
        tile = TileLayout(S[(1, k_repeats, rows // width, width, k // 8, 8):
                            (1, k * rows, 8 * width, 1, rows * 8, width)])
    if not swizzle:
        return tile
    return ComposeLayout({8: 4, 16: 3}[bits], SWIZZLE_LEN[swizzle], 3, tile)


def _setup(atype, form, n, k_repeats, swizzle, a_major, b_major, btype, overrides):
    """The probe's operands: the defaults, replaced by ``overrides``."""
    o = dict(overrides or {})
    shape = W.WgmmaShape(n, atype, btype or atype)
    ka, kb = W.KIND[shape.atype], W.KIND[shape.btype]
    k, kk = shape.k, shape.k * k_repeats
    a_dt = o.get("A.dtype", "bfloat16" if atype == "bf16" else ka.tir_dtypes[0])
    b_dt = o.get("B.dtype", "bfloat16" if shape.btype == "bf16" else kb.tir_dtypes[0])
    g_a = "uint16" if ka.bits == 16 else "uint8"
    threads = o.get("threads", L.WARPGROUP_THREADS)
    d_layout = o.get("D.layout", acc_layout(n))
    d_dt = o.get("D.dtype", "float32")
    b_sh = o.get("B.layout", shared_layout(n, k, k_repeats, kb.bits, swizzle, b_major))
    b_align = o.get("B.align", 1024)
    params = o.get("params", {"scale_d": False, **({"a_major": a_major} if a_major != "k" else {}),
                              **({"b_major": b_major} if b_major != "k" else {})})
    scope = o.get("scope", "warpgroup")
    rs = form == "rs"
    a_sh = o.get("A.layout", a_register_layout(ka, (1, k_repeats)) if rs else
                 shared_layout(L.M, k, k_repeats, ka.bits, swizzle, a_major))
    a_align = o.get("A.align", 1024)
    a_scope = o.get("A.scope", "local" if rs else "shared")
    a_elems = L.M * kk
    final_wait = o.get("final_wait", 0)
    b_start = o.get("B.start")

    return locals()


def probe(atype: str, form: str = "ss", n: int = 16, k_repeats: int = 4, swizzle: int = 128, *,
          a_major: str = "k", b_major: str = "k", btype: str | None = None, overrides=None):
    """The probe kernel ``(A, B, D)`` for one form. ``overrides`` (tests): replace an operand's
    ``"dtype"``/``"layout"``/``"align"``/``"scope"`` (keys ``"A.layout"``, ...), the call's
    ``"params"``, ``"scope"``, ``"threads"``, the count of the wait before D is read (``"final_wait"``) or, SS,
    ``"B.start"``: a function of a local ``uint32`` counter (0) giving B's region start on its outer axis."""
    register()
    v = _setup(atype, form, n, k_repeats, swizzle, a_major, b_major, btype, overrides)
    shape, ka, k, kk, a_dt, b_dt, g_a = (v[x] for x in ("shape", "ka", "k", "kk", "a_dt", "b_dt", "g_a"))
    threads, d_layout, d_dt, b_sh, b_align, params = (v[x] for x in ("threads", "d_layout", "d_dt", "b_sh",
                                                                     "b_align", "params"))
    scope, rs, a_sh, a_align, a_scope, a_elems, final_wait = (v[x] for x in ("scope", "rs", "a_sh", "a_align",
                                                                             "a_scope", "a_elems", "final_wait"))
    b_start = v["b_start"]

    @T.macro
    def stage(S, G, rows, t, dt):  # G [rows, kk] (global) into S's shared tile, k-element rows per repeat
        for q in range(rows * kk // threads):
            e = t + threads * q
            S[0, (e % kk) // k, e // kk, e % k] = T.reinterpret(G[e // kk, e % kk], ty=dt)

    @T.macro
    def finish(Aop, SB, D, t):  # the wgmma, its wait, the accumulator's fences, then D read
        acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), d_dt, scope="local", layout="default")])
        Dr = T.decl_tensor(acc_raw.ptr_to([0]), ty_args=[T.Tensor((1, 1, L.M, n), d_dt, scope="local",
                                                                  layout=d_layout)])
        T.ptx[PROXY_FENCE]()
        T.cuda.cta_sync()
        T.sm90.tile.apply(T.wgmma[shape.ptx], Dr, Aop, SB, scope=scope, **params)
        T.ptx[WAIT](final_wait)
        for r in T.unroll(n // 2):
            _fence(acc_raw[r])  # no read of D above the wait (patterns.wgmma_fence)
        for r in T.unroll(n // 2):
            D[_acc_row(t, r), _acc_col(t, r)] = acc_raw[r]

    @T.function
    def kernel_ss(A: T.Tensor((L.M, kk), g_a), B: T.Tensor((n, kk), g_a), D: T.Tensor((L.M, n), ACC)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=threads))
        t = T.cuda.thread_in_warpgroup()
        SB = T.alloc_tensor(ty_args=[T.Tensor((1, k_repeats, n, k), b_dt, scope="shared", layout=b_sh,
                                              align=b_align)])
        stage(SB, B, n, t, b_dt)
        SA = T.alloc_tensor(ty_args=[T.Tensor((1, k_repeats, L.M, k), a_dt, scope=a_scope, layout=a_sh,
                                              align=a_align)])
        stage(SA, A, L.M, t, a_dt)
        if I.constexpr(b_start is None):
            finish(SA, SB, D, t)
        else:  # B's region from a counter the analyzer knows nothing of (a ring's carried stage)
            counter = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
            counter[0] = T.uint32(0)
            finish(SA, SB[b_start(counter[0]):b_start(counter[0]) + 1, :, :, :], D, t)

    @T.function
    def kernel_rs(A: T.Tensor((L.M, kk), g_a), B: T.Tensor((n, kk), g_a), D: T.Tensor((L.M, n), ACC)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=threads))
        t = T.cuda.thread_in_warpgroup()
        SB = T.alloc_tensor(ty_args=[T.Tensor((1, k_repeats, n, k), b_dt, scope="shared", layout=b_sh,
                                              align=b_align)])
        stage(SB, B, n, t, b_dt)
        a_raw = T.alloc_tensor(ty_args=[T.Tensor((a_elems // L.WARPGROUP_THREADS,), a_dt, scope=a_scope,
                                                 layout="default")])
        Ar = T.decl_tensor(a_raw.ptr_to([0]), ty_args=[T.Tensor((1, k_repeats, L.M, k), a_dt, scope=a_scope,
                                                                layout=a_sh)])
        for kr in T.unroll(k_repeats):
            for e in T.unroll(ka.k * L.M // L.WARPGROUP_THREADS):
                a_raw[kr * (ka.k * L.M // L.WARPGROUP_THREADS) + e] = T.reinterpret(
                    A[_a_row(ka, t, e), kr * k + _a_col(ka, t, e)], ty=a_dt)
        finish(Ar, SB, D, t)

    kernel = kernel_rs if rs else kernel_ss
    return kernel


WAIT = "wgmma.wait_group.sync.aligned"
PROXY_FENCE = "fence.proxy.async.shared::cta"


def _fence(reg):
    """``T.sm90.fence_operand(reg)`` on an f32 accumulator (a test's wrong-dtype D is the pattern's to refuse)."""
    if str(reg.ty.dtype) == ACC:
        T.sm90.fence_operand(reg)


def _acc_row(t, r):
    return L.accumulator_coords(t, r)[0]


def _acc_col(t, r):
    return L.accumulator_coords(t, r)[1]


def _a_row(kind, t, e):
    return L.a_fragment_coords(t, e, kind.bits)[0]


def _a_col(kind, t, e):
    return L.a_fragment_coords(t, e, kind.bits)[1]
