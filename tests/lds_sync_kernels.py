"""gfx950 kernels for the compile-time LDS synchronization check (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG, lanes
from tvm_cdna4.patterns.layouts import mfma_fragment, tr_fragment

MFMAS = {"f16": ("mfma_f32_16x16x32_f16", "float16"), "bf16": ("mfma_f32_16x16x32_bf16", "bfloat16")}


def double_buffered_gemm(k_tiles: int = 4, prologue_barrier: bool = True, step_barrier: bool = True,
                         stages: int = 2, dtype: str = "f16"):
    """D (64 x 16) = A (64 x K) @ B (K x 16), K = 32 * ``k_tiles``, by 4 waves (wave w: rows 16w ..
    16w + 15) over ``stages`` LDS stages (2: double, 3: triple buffering). The prologue stores K tile
    0 (``stages - 1`` tiles), a barrier (``prologue_barrier``); K step ``kt`` stores tile
    ``kt + stages - 1`` into the stage that step ``kt - 1`` read, reads the fragments of tile ``kt``,
    runs the MFMA, then a barrier (``step_barrier``). Every wave stores a column block of every row of
    A's tile and two elements of B's, so every wave reads what other waves stored. ``dtype``: f16 or
    bf16 (``MFMAS``)."""
    name, st = MFMAS[dtype]
    op = CATALOG[name]
    la, _ = mfma_fragment(op, "A", (1, 1))
    lb, _ = mfma_fragment(op, "B", (1, 1))
    ld, _ = mfma_fragment(op, "D", (1, 1))
    a_row, a_k = (lambda lane: lanes.a_owner(op, lane, 0).row), (lambda lane: lanes.a_owner(op, lane, 0).k)
    b_col, b_k = (lambda lane: lanes.b_owner(op, lane, 0).col), (lambda lane: lanes.b_owner(op, lane, 0).k)
    acc_row, acc_col = (lambda lane, r: lanes.acc_owner(op, lane, r).row), (lambda lane, r: lanes.acc_owner(op, lane, r).col)
    K, SA_N, SB_N = 32 * k_tiles, 64 * 32, 32 * 16

    @T.macro
    def store(SA, SB, A, B, tx, kt):
        for e in T.unroll(8):
            SA[kt % stages * SA_N + tx % 64 * 32 + tx // 64 * 8 + e] = A[tx % 64, kt * 32 + tx // 64 * 8 + e]
        for e in T.unroll(2):
            SB[kt % stages * SB_N + tx * 2 + e] = B[kt * 32 + (tx * 2 + e) // 16, (tx * 2 + e) % 16]

    @T.function
    def kernel(A: T.Tensor((64, K), st), B: T.Tensor((K, 16), st), D: T.Tensor((64, 16), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 256)
            SA = T.alloc_tensor(ty_args=[T.Tensor((stages * SA_N,), st, scope="shared", align=16)])
            SB = T.alloc_tensor(ty_args=[T.Tensor((stages * SB_N,), st, scope="shared", align=16)])
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), st, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((8,), st, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), st, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), st, scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            lane = tx % 64
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            for p in T.unroll(stages - 1):
                store(SA, SB, A, B, tx, p)
            if prologue_barrier:
                T.rocm.workgroup_barrier()
            for kt in T.serial(k_tiles):
                if kt + stages - 1 < k_tiles:
                    store(SA, SB, A, B, tx, kt + stages - 1)
                for e in T.unroll(8):
                    ra[e] = SA[kt % stages * SA_N + (tx // 64 * 16 + a_row(lane)) * 32 + a_k(lane) + e]
                    rb[e] = SB[kt % stages * SB_N + (b_k(lane) + e) * 16 + b_col(lane)]
                T.rocm.tile.apply(T.amdgcn[name], Df, Af, Bf, Df, scope="wave")
                if step_barrier:
                    T.rocm.workgroup_barrier()
            for r in T.unroll(4):
                D[tx // 64 * 16 + acc_row(lane, r), acc_col(lane, r)] = rd[r]

    return kernel


def undecidable_index():
    """An LDS index read from memory: the check cannot evaluate it and leaves the kernel to the emulator."""

    @T.function
    def kernel(A: T.Tensor((128,), "float32"), P: T.Tensor((128,), "int32"), B: T.Tensor((128,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            S[P[tx]] = A[tx]
            B[tx] = S[(tx + 64) % 128]

    return kernel


# ---- ds_read_tr, direct-to-LDS, wave_id(), blockIdx-dependent loops (issue 35) ----------------

TR_OPERAND = {"f16": ("ds_read_tr16_b64_v4f16", "mfma_f32_16x16x32_f16", "float16"),
              "bf16": ("ds_read_tr16_b64_v4bf16", "mfma_f32_16x16x32_bf16", "bfloat16")}


SYNCS = ("workgroup_barrier", "s_barrier", "none")


def tr_operand_exchange(dtype: str = "bf16", sync: str = "workgroup_barrier", dma: bool = False, wait: bool = True):
    """Two waves; each stores half of a 32 x 16 LDS tile (K x N, rows 16w .. 16w + 15; ``dma``: by two
    4-byte direct-to-LDS loads per wave, then ``s_waitcnt vmcnt(0)`` when ``wait``); ``sync``
    ("workgroup_barrier", "s_barrier" or "none"); then each wave reads the whole tile into its MFMA B
    fragment with the ds_read_tr operand form (``TR_OPERAND[dtype]``) and stores it to D."""
    tr, mfma_name, st = TR_OPERAND[dtype]
    mfma = CATALOG[mfma_name]
    lb, nb = mfma_fragment(mfma, "B")
    K, N = mfma.k, mfma.n
    workgroup_barrier, s_barrier = sync == "workgroup_barrier", sync == "s_barrier"

    @T.function
    def kernel(B: T.Tensor((K * N,), st), D: T.Tensor((128, nb), st)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            SB = T.alloc_tensor(ty_args=[T.Tensor((K, N), st, scope="shared", align=16,
                                                  layout=T.TileLayout(T.S[(K, N) : (N, 1)]))])
            if dma:
                for j in T.unroll(2):  # wave w: bytes [512w + 256j, +256), lane l 4 bytes of them
                    T.rocm.buffer_load_lds(B.data, K * N * 2, (tx // 64 * 256 + j * 128 + tx % 64 * 2) * 2, 0,
                                           SB[tx // 64 * 16 + j * 8, 0], 4)
                if wait:
                    T.rocm.s_waitcnt_vmcnt(0)
            else:
                for e in T.unroll(4):
                    SB[(tx * 4 + e) // N, (tx * 4 + e) % N] = B[tx * 4 + e]
            if workgroup_barrier:
                T.rocm.workgroup_barrier()
            if s_barrier:
                T.rocm.s_barrier()
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), st, scope="local")])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((N, K), st, scope="local", layout=lb)])
            T.rocm.tile.apply(T.amdgcn[tr], Bf, SB, scope="wave", mfma=mfma_name, operand="B")
            for r in T.unroll(nb):
                D[tx, r] = rb[r]

    return kernel


TILE_DTYPES = {"f16": "float16", "bf16": "bfloat16", "i16": "int16"}  # 8-bit and sub-byte: uint8 bytes


def tr_tile_exchange(opcode: str, sync: str = "workgroup_barrier"):
    """The tile form of ``opcode`` (any ds_read_tr): two waves store the canonical src tile
    (``(1, 4, n, 16)``; sub-byte: ``(1, 4, 16, bytes)`` in 16-byte rows), thread ``t`` elements ``t,
    t + 128, ...`` (so each wave half of it); ``sync``; then each wave reads all of it."""
    op = CATALOG[opcode]
    sub_byte = op.element_bits < 8
    src_atom = (4, 16, op.load_bits // 8) if sub_byte else (4, op.elements, 16)
    dst_atom = (4, 16, op.load_bits // 32) if sub_byte else (4, op.elements, 16)
    src_dt = "uint8" if op.element_bits <= 8 else TILE_DTYPES[op.result_format]
    dst_dt = "uint32" if sub_byte else src_dt
    ld, nd = tr_fragment(op, (1,))
    row = 16 if sub_byte else src_atom[-1]
    src_shape, dst_shape = (1, *src_atom), (1, *dst_atom)
    n_src = 4 * src_atom[1] * src_atom[2]
    layout = T.TileLayout(T.S[src_shape : (4 * src_atom[1] * row, src_atom[1] * row, row, 1)])
    workgroup_barrier, s_barrier = sync == "workgroup_barrier", sync == "s_barrier"

    @T.function
    def kernel(SRC: T.Tensor((n_src,), src_dt), D: T.Tensor((128, nd), dst_dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor(src_shape, src_dt, scope="shared", align=16, layout=layout)])
            for q in T.serial(n_src // 128):
                S[0, (q * 128 + tx) // (src_atom[1] * src_atom[2]), (q * 128 + tx) // src_atom[2] % src_atom[1],
                  (q * 128 + tx) % src_atom[2]] = SRC[q * 128 + tx]
            if workgroup_barrier:
                T.rocm.workgroup_barrier()
            if s_barrier:
                T.rocm.s_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dst_dt, scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(dst_shape, dst_dt, scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, S, scope="wave")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def dma_by_wave(spelling: str = "wave_id", wait: bool = True):
    """Two waves; wave ``w`` (``spelling``: ``T.rocm.wave_id()`` or ``tx // 64 % 2``) loads 64 words
    straight into LDS block ``w``, waits (``s_waitcnt vmcnt(0)`` when ``wait``), barriers; then each
    thread copies a word of the other wave's block to D."""
    by_wave_id = spelling == "wave_id"

    @T.function
    def kernel(X: T.Tensor((128,), "int32"), D: T.Tensor((128,), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "int32", scope="shared", align=16)])
            w = T.rocm.wave_id() if by_wave_id else tx // 64 % 2
            T.rocm.buffer_load_lds(X.data, 512, tx * 4, 0, S[w * 64], 4)
            if wait:
                T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            D[tx] = S[(tx + 64) % 128]

    return kernel


def causal_loop(groups: int = 4, step_barrier: bool = True, last_group_barrier: bool = True):
    """Workgroup ``bx`` of ``groups`` runs ``bx + 1`` steps (a causal trip count): each step the two
    waves store their half of S, barrier, read the other half and (``step_barrier``) barrier again.
    Without the second barrier, step ``kv + 1``'s stores race with step ``kv``'s reads: only workgroups
    1 and later run two steps. Without ``last_group_barrier`` the last workgroup skips the first barrier."""
    last = groups - 1

    @T.function
    def kernel(A: T.Tensor((groups, 128), "float32"), B: T.Tensor((groups, 128), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            acc = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local")])
            acc[0] = T.float32(0)
            for kv in T.serial(bx + 1):
                S[tx] = A[kv, tx]
                if last_group_barrier or bx != last:
                    T.rocm.workgroup_barrier()
                acc[0] = acc[0] + S[(tx + 64) % 128]
                if step_barrier:
                    T.rocm.workgroup_barrier()
            B[bx, tx] = acc[0]

    return kernel


def lds_pointer_call():
    """An LDS atomic the check does not model (``ds_append``: it takes an LDS pointer and writes there)."""

    @T.function
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            S[tx] = A[tx]
            T.rocm.workgroup_barrier()
            counter = T.call_llvm_intrin("llvm.amdgcn.ds.append", T.address_of(S[0]), T.bool(False), ty="int32")
            B[tx] = S[(tx + 64) % 128] + T.cast(counter, "float32")

    return kernel


def uniform_branch(barrier: bool = True, flag: str = "lds", steps: int = 1):
    """Thread 0 copies a flag from memory into LDS, a barrier, then ``if F[0] == 1:`` (one value for the
    whole workgroup, unknown at build time) each thread reads the other wave's half of S, (``barrier``)
    a barrier, and overwrites its own; the branch and a barrier ``steps`` times (a loop). ``flag``:
    "lds" (``F[0]``), "global" (``P[0]``: one address, the same), "register" (``f[0]``, which every
    thread set to ``P[0]``: the same), "register per thread" (``f[0]``, which threads with ``P[tx] ==
    2`` then set to 0: not the same), "thread" (``P[tx]``: not the same)."""
    in_lds, per_thread, in_register = flag == "lds", flag == "thread", flag.startswith("register")
    register_per_thread = flag == "register per thread"

    @T.function
    def kernel(A: T.Tensor((128,), "float32"), P: T.Tensor((128,), "int32"), B: T.Tensor((128,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            F = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="shared", align=16)])
            r = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local")])
            f = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local")])
            f[0] = P[0]
            if register_per_thread:
                if P[tx] == 2:
                    f[0] = 0
            if tx == 0:
                F[0] = P[0]
            S[tx] = A[tx]
            T.rocm.workgroup_barrier()
            for i in T.serial(steps):
                if (F[0] if in_lds else f[0] if in_register else P[tx] if per_thread else P[0]) == 1:
                    r[0] = S[(tx + 64) % 128]
                    if barrier:
                        T.rocm.workgroup_barrier()
                    S[tx] = r[0]
                T.rocm.workgroup_barrier()
            B[tx] = S[(tx + 64) % 128]

    return kernel
