"""Cross-check the CPU emulator against a real NVIDIA GPU, bit for bit.

For each case the same TIRx kernel is emulated on the CPU (``tvm_cdna4.emulator.emulate(...,
target="sm80")``) and, unless ``--cpu-only``, compiled for the GPU's architecture, exported, loaded
(``exe.export_library`` + ``tvm_ffi.load_module``; no ORC JIT) and run on GPU 0 with the same
inputs. Each output is compared bit for bit; a case prints ``BIT-IDENTICAL`` or its first differing
element, and the run ends with a ``SUMMARY`` line (exit status 1 when anything differs or fails).

Cases: the ldmatrix example of TIRx's "ldmatrix / stmatrix" documentation page, raw
``ldmatrix`` x1/x2/x4 with and without ``.trans`` (random bits: pure data movement), one
``mma.sync.m16n8k16`` per input type, and the CUDA GEMM (tvm_cdna4.kernels.sm80.gemm: cp.async,
ldmatrix, mma.sync, st.global) on several layouts and shapes, including ones that are not a
multiple of the block tile. Floating-point inputs are small integers, so every tensor-core product
and partial sum is exact and the GPU's accumulation order cannot change a bit; the emulated result
is also checked against numpy.

On the GPU machine (Python 3.12, no registry access), from the repository root::

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site && python3 benchmarks/cuda_crosscheck.py

``--cpu-only`` emulates and checks against numpy without touching a GPU; ``--quick`` runs a subset;
``--only TEXT`` the cases whose name contains TEXT.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (ROOT, os.path.join(ROOT, "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

EMULATED_ARCH = "sm_80"  # emulate(target="sm80") lowers for this architecture


# ----------------------------------------------------------------------------------------------
# small kernels (also used by tests/emulator/test_emulator_cuda.py)
# ----------------------------------------------------------------------------------------------


def ldmatrix_kernel(num: int = 4, trans: bool = False):
    """One warp: shared rows ``S[8*i + r, :]`` (8 halves each) of matrix ``i`` are loaded with
    ``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``; lane ``l`` supplies row ``l``'s address
    (rows ``8*num..31`` wrap, as the pattern's "repeat valid rows" rule asks) and writes its ``num``
    registers to ``Out[l, :num]``."""
    from tvm_tirx.script import ir as I
    from tvm_tirx.script import tirx as T

    op = f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"
    rows = 8 * num

    @T.function
    def kernel(A: T.Tensor((32, 8), "uint16"), Out: T.Tensor((32, 4), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((32, 8), "uint16", scope="shared", layout="default", align=16)])
        for j in range(8):
            SM[lane, j] = A[lane, j]
        T.cuda.cta_sync()
        r = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
        for i in T.unroll(4):
            r[i] = T.uint32(0xDEADBEEF)
        if I.constexpr(num == 1):
            T.ptx[op](r[0], SM.ptr_to([lane % rows, 0]))
        elif I.constexpr(num == 2):
            T.ptx[op](r[0], r[1], SM.ptr_to([lane % rows, 0]))
        else:
            T.ptx[op](r[0], r[1], r[2], r[3], SM.ptr_to([lane, 0]))
        for i in T.unroll(4):
            Out[lane, i] = r[i]

    return kernel


def ldmatrix_expected(a: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """PTX ISA 9.7.16.5.15, restated with loops: lane ``l`` gets, per matrix ``i``, the b16 elements
    ``(l//4, 2*(l%4))`` and ``(l//4, 2*(l%4)+1)`` (``.trans``: ``(2*(l%4), l//4)``, ``(2*(l%4)+1, l//4)``)."""
    out = np.full((32, 4), 0xDEADBEEF, np.uint32)
    for lane in range(32):
        for i in range(num):
            m = a[8 * i : 8 * i + 8].astype(np.uint32)
            r, c = lane // 4, 2 * (lane % 4)
            lo, hi = (m[c, r], m[c + 1, r]) if trans else (m[r, c], m[r, c + 1])
            out[lane, i] = lo | (hi << 16)
    return out


def mma_kernel(atype: str = "f16", k: int = 16):
    """One warp, one ``mma.sync.aligned.m16n8k{k}.row.col.f32.{atype}.{atype}.f32``: registers are
    loaded straight from global with the fragment layout of PTX ISA 9.7.16.5 (A [16, k] row-major
    as b32 pairs, B stored as [8, k] = B^T, C and D [16, 8] f32)."""
    from tvm_tirx.script import ir as I
    from tvm_tirx.script import tirx as T

    op = f"mma.sync.aligned.m16n8k{k}.row.col.f32.{atype}.{atype}.f32"
    kw = k // 2  # b32 words per row of A / of B^T

    @T.function
    def kernel(A: T.Tensor((16, kw), "uint32"), B: T.Tensor((8, kw), "uint32"), C: T.Tensor((16, 8), "float32"),
               D: T.Tensor((16, 8), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.thread_idx("x")
        g = lane // 4
        t = lane % 4
        ra = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
        rb = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint32", scope="local", layout="default")])
        acc = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local", layout="default")])
        ra[0] = A[g, t]
        ra[1] = A[g + 8, t]
        rb[0] = B[g, t]
        acc[0] = C[g, 2 * t]
        acc[1] = C[g, 2 * t + 1]
        acc[2] = C[g + 8, 2 * t]
        acc[3] = C[g + 8, 2 * t + 1]
        if I.constexpr(k == 16):
            ra[2] = A[g, t + 4]
            ra[3] = A[g + 8, t + 4]
            rb[1] = B[g, t + 4]
            T.ptx[op](acc[0], acc[1], acc[2], acc[3], ra[0], ra[1], ra[2], ra[3], rb[0], rb[1],
                      acc[0], acc[1], acc[2], acc[3])
        else:
            T.ptx[op](acc[0], acc[1], acc[2], acc[3], ra[0], ra[1], rb[0], acc[0], acc[1], acc[2], acc[3])
        D[g, 2 * t] = acc[0]
        D[g, 2 * t + 1] = acc[1]
        D[g + 8, 2 * t] = acc[2]
        D[g + 8, 2 * t + 1] = acc[3]

    return kernel


def shfl_kernel():
    """Two warps; each row of ``Out`` is one CUDA warp shuffle of ``X`` (idx, xor within 8-lane
    segments, down within 16-lane segments, up)."""
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(X: T.Tensor((64,), "int32"), Out: T.Tensor((4, 64), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        v = X[tid]
        Out[0, tid] = T.cuda.__shfl_sync(T.uint32(0xFFFFFFFF), v, 5, 32)
        Out[1, tid] = T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), v, 3, 8)
        Out[2, tid] = T.cuda.__shfl_down_sync(T.uint32(0xFFFFFFFF), v, 2, 16)
        Out[3, tid] = T.cuda.__shfl_up_sync(T.uint32(0xFFFFFFFF), v, 1, 32)

    return kernel


def shfl_expected(x: np.ndarray) -> np.ndarray:
    t = np.arange(64)
    lane = t % 32
    return np.stack([x[t - lane + 5], x[t - lane + (lane ^ 3)], x[np.where(lane % 16 + 2 < 16, t + 2, t)],
                     x[np.where(lane >= 1, t - 1, t)]])


def prmt_kernel():
    """One warp: ``prmt.b32 d, a, b, c`` (default mode) of each lane's ``A``, ``B`` and selector ``C``."""
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32"), C: T.Tensor((32,), "uint32"),
               Out: T.Tensor((32,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        d = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        T.ptx["prmt.b32"](d[0], A[tid], B[tid], C[tid])
        Out[tid] = d[0]

    return kernel


def prmt_expected(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """PTX ISA 9.7.10.7: byte i of d is byte c[4i+2..4i] of {b, a}, or its sign replicated where c[4i+3]."""
    src = np.concatenate([a.view(np.uint8).reshape(-1, 4), b.view(np.uint8).reshape(-1, 4)], axis=1)
    out = np.zeros((len(a), 4), np.uint8)
    for lane in range(len(a)):
        for i in range(4):
            nib = (int(c[lane]) >> (4 * i)) & 0xF
            byte = int(src[lane, nib & 7])
            out[lane, i] = (0xFF if byte & 0x80 else 0) if nib & 8 else byte
    return out.view(np.uint32)[:, 0]


def ldst_kernel():
    """Two warps: ``ld.global.v4.b32`` -> ``st.shared.v4.b32``, barrier, then ``ld.shared.v2.f32`` and
    ``ld.shared.b32`` of the mirrored row (the other warp's) -> ``st.global.v4.f32``."""
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(A: T.Tensor((64, 4), "uint32"), Out: T.Tensor((64, 4), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((64, 4), "uint32", scope="shared", layout="default", align=16)])
        r = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
        f = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local", layout="default")])
        T.ptx["ld.global.v4.b32"](r[0], r[1], r[2], r[3], A.ptr_to([tid, 0]))
        T.ptx["st.shared.v4.b32"](SM.ptr_to([tid, 0]), r[0], r[1], r[2], r[3])
        T.cuda.cta_sync()
        T.ptx["ld.shared.v2.f32"](f[0], f[1], SM.ptr_to([63 - tid, 2]))
        T.ptx["ld.shared.b32"](f[2], SM.ptr_to([63 - tid, 0]))
        f[3] = T.float32(0)
        T.ptx["st.global.v4.f32"](Out.ptr_to([tid, 0]), f[0], f[1], f[2], f[3])

    return kernel


def ldst_expected(a: np.ndarray) -> np.ndarray:
    f = a.view(np.float32)[::-1]
    return np.stack([f[:, 2], f[:, 3], f[:, 0], np.zeros(64, np.float32)], axis=1)


# ----------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    make: object  # () -> TIRx PrimFunc
    arrays: list  # kernel arguments in order (numpy)
    outputs: list  # indices of the output arguments
    expected: list | None = None  # numpy reference per output (None: not checked)
    notes: list = field(default_factory=list)


def _ints(rng, shape, dtype, lo=-3, hi=3):
    return rng.integers(lo, hi + 1, size=shape).astype(np.float32).astype(dtype)


def build_cases(quick: bool = False) -> list[Case]:
    import ml_dtypes

    from cuda_seed_example import matrix_kernel
    from tvm_cdna4.runtime import cuda as runner
    from tvm_cdna4.kernels.sm80.gemm import GemmConfig, cuda_gemm, default_config, operand_shapes

    rng = np.random.default_rng(2026)
    cases = []

    x = np.arange(128, dtype=np.uint32).reshape(16, 4, 2)
    seed_expected = np.full((32, 12), 4294966519, dtype=np.uint32)
    for lane in range(32):
        for k in range(2):
            for matrix in range(2):
                seed_expected[lane, 8 * k + 2 * matrix] = x[2 * (lane // 4) + matrix, lane % 4, k]
    cases.append(Case("seed ldmatrix example (x2, interleaved rows)", matrix_kernel,
                      [x, np.zeros((32, 12), np.uint32)], [1], [seed_expected]))

    for num, trans in ((4, False), (4, True)) if quick else ((1, False), (2, True), (4, False), (4, True)):
        a = rng.integers(0, 1 << 16, size=(32, 8)).astype(np.uint16)
        cases.append(Case(f"ldmatrix.x{num}{'.trans' if trans else ''}", lambda n=num, t=trans: ldmatrix_kernel(n, t),
                          [a, np.zeros((32, 4), np.uint32)], [1], [ldmatrix_expected(a, num, trans)]))

    xs = rng.integers(-(1 << 31), 1 << 31, size=64).astype(np.int32)
    cases.append(Case("__shfl_sync / xor / down / up", shfl_kernel, [xs, np.zeros((4, 64), np.int32)], [1],
                      [shfl_expected(xs)]))

    pa, pb, pc = (rng.integers(0, 1 << 32, size=32, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    pc[:4] = (0x1000, 0x3020, 0x7610, 0x5410)  # the paged decode kernel's selectors
    cases.append(Case("prmt.b32", prmt_kernel, [pa, pb, pc, np.zeros(32, np.uint32)], [3],
                      [prmt_expected(pa, pb, pc)]))

    words = rng.integers(-64, 64, size=(64, 4)).astype(np.float32).view(np.uint32)
    cases.append(Case("ld/st .global/.shared vector", ldst_kernel, [words, np.zeros((64, 4), np.float32)], [1],
                      [ldst_expected(words)]))

    for atype, k in (("f16", 16),) if quick else (("f16", 16), ("bf16", 16), ("f16", 8)):
        dt = np.float16 if atype == "f16" else ml_dtypes.bfloat16
        a, bt = _ints(rng, (16, k), dt, -8, 8), _ints(rng, (8, k), dt, -8, 8)
        c = _ints(rng, (16, 8), np.float32, -100, 100)
        want = (a.astype(np.float64) @ bt.astype(np.float64).T + c).astype(np.float32)
        cases.append(Case(f"mma.m16n8k{k}.{atype}", lambda at=atype, kk=k: mma_kernel(at, kk),
                          [a.view(np.uint32), bt.view(np.uint32), c, np.zeros((16, 8), np.float32)], [3], [want]))

    small = GemmConfig(block_m=128, block_n=128, block_k=32, warps_m=2, warps_n=2, stages=3)
    gemms = [  # (layout, M, N, K, in, out, config)
        ("nt", 256, 256, 128, "f16", "f32", None),  # default_config: 128x128 tile, 4 stages
        ("tn", 200, 136, 72, "f16", "f32", None),  # edges in M, N; K tail; 3 k-tiles < 4 stages
        ("nn", 100, 70, 40, "f16", "f32", small),  # N % 8 != 0: cp.async.ca 4-byte chunks
        ("tt", 130, 72, 96, "f16", "f16", small),  # f16 output (cvt.rn.f16x2.f32 + st.global.b32)
        ("nt", 256, 256, 128, "f16", "f32", GemmConfig()),  # the large-problem tile 128x256, 8 warps
        ("nt", 128, 128, 64, "bf16", "f32", small),
        ("tt", 72, 64, 250, "f16", "f32", small),  # k-loop unrolled by the stages, static tail
        ("tt", 200, 136, 192, "f16", "f32", replace(small, ctas=3)),  # persistent: 4 tiles, 3 CTAs
    ]
    if quick:
        gemms = [("tn", 100, 70, 96, "f16", "f32", small)]
    for layout, M, N, K, dt, ot, cfg in gemms:
        cfg = cfg or default_config(dt, M, N)
        sa, sb = operand_shapes(M, N, K, layout)
        a, b = _ints(rng, sa, runner.np_dtype(dt)), _ints(rng, sb, runner.np_dtype(dt))
        want = runner.reference(a, b, layout).astype(runner.np_dtype(ot))
        c = np.full((M, N), np.nan, runner.np_dtype(ot))
        tile = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}/{cfg.warps_m}x{cfg.warps_n}w/{cfg.stages}st"
        cases.append(Case(f"gemm {layout} {M}x{N}x{K} {dt}->{ot} [{tile}]",
                          lambda M=M, N=N, K=K, dt=dt, lay=layout, ot=ot, cfg=cfg: cuda_gemm(M, N, K, dt, lay, ot, cfg),
                          [a, b, c], [2], [want]))
    return cases


# ----------------------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------------------


def emulate_case(case: Case, kernel) -> list[np.ndarray]:
    """Emulated outputs. A kernel that reads never-written shared memory (and, if it is correct,
    ignores what it read) is reported with a note and emulated again with those reads allowed."""
    from tvm_cdna4.emulator import EmulationError, emulate

    arrays = [np.array(a, copy=True) for a in case.arrays]
    try:
        emulate(kernel, *arrays, target="sm80")
    except EmulationError as e:
        if "never written" not in e.message:
            raise
        case.notes.append(f"emulator: {e.message} ({e.where[:90]}...); re-run with uninitialized='allow'")
        arrays = [np.array(a, copy=True) for a in case.arrays]
        emulate(kernel, *arrays, target="sm80", uninitialized="allow")
    return [arrays[i] for i in case.outputs]


def gpu_arch() -> str:
    import tvm_tirx.runtime as rt

    dev = rt.cuda(0)
    if not dev.exist:
        raise RuntimeError("no CUDA device visible to TVM (use --cpu-only to skip the GPU part)")
    return "sm_" + str(dev.compute_version).replace(".", "")


def same_device_tir(kernel, arch: str) -> bool:
    """Whether the device function for ``arch`` is the one emulated (lowered for sm_80)."""
    from tvm_tirx.target import Target

    from tvm_cdna4.tirx_private import lowered_device_modules

    def body(a):
        mods = lowered_device_modules(kernel, Target({"kind": "cuda", "arch": a}))
        return [str(f.body) for m in mods.values() for f in m.functions.values()]
    return arch == EMULATED_ARCH or body(arch) == body(EMULATED_ARCH)


def run_gpu(case: Case, kernel, arch: str, workdir: str) -> list[np.ndarray]:
    import tvm_ffi
    import tvm_tirx
    import tvm_tirx.runtime as rt
    from tvm_tirx.target import Target

    exe = tvm_tirx.tirx.compile(kernel, target=Target({"kind": "cuda", "arch": arch}), pipeline="tirx")
    path = os.path.join(workdir, f"case{abs(hash(case.name)) % 10**8}.so")
    exe.export_library(path)
    fn = tvm_ffi.load_module(path)[str(kernel.attrs["global_symbol"])]
    dev = rt.cuda(0)
    tensors = [rt.tensor(np.ascontiguousarray(a), dev) for a in case.arrays]
    fn(*tensors)
    dev.sync()
    return [tensors[i].numpy() for i in case.outputs]


def first_difference(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when ``got`` and ``want`` have the same shape, dtype and bytes; else the first mismatch."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    gb = np.ascontiguousarray(got).view(f"u{got.dtype.itemsize}")
    wb = np.ascontiguousarray(want).view(f"u{want.dtype.itemsize}")
    bad = gb != wb
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    w = 2 * got.dtype.itemsize
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {list(idx)}: "
            f"{got[idx]!r} (0x{int(gb[idx]):0{w}x}) vs {want[idx]!r} (0x{int(wb[idx]):0{w}x})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-only", action="store_true", help="emulate and check against numpy only; no GPU")
    parser.add_argument("--quick", action="store_true", help="a small subset of the cases")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this text")
    parser.add_argument("--no-tir-check", action="store_true",
                        help="skip checking that the GPU architecture's device TIR is the emulated sm_80 one")
    args = parser.parse_args(argv)

    from tvm_cdna4.emulator import EmulationError

    arch = None
    if not args.cpu_only:
        arch = gpu_arch()
        print(f"GPU 0: {arch}; emulating the {EMULATED_ARCH} lowering of the same kernels")
    workdir = tempfile.mkdtemp(prefix="cuda_crosscheck_")
    cases = [c for c in build_cases(args.quick) if args.only in c.name]
    if not cases:
        print(f"no case name contains {args.only!r}")
        return 2
    passed, failed = 0, []
    for case in cases:
        t0 = time.time()
        kernel = case.make()
        status = []
        try:
            emulated = emulate_case(case, kernel)
        except (EmulationError, NotImplementedError) as e:
            failed.append(case.name)
            print(f"[FAIL] {case.name}: emulation failed: {e}")
            continue
        ok = True
        for i, (got, want) in enumerate(zip(emulated, case.expected or [None] * len(emulated))):
            if want is not None:
                diff = first_difference(got, np.asarray(want))
                status.append("emulated == numpy" if diff is None else f"emulated != numpy: {diff}")
                ok &= diff is None
        if arch is not None:
            try:
                if not args.no_tir_check and not same_device_tir(kernel, arch):
                    case.notes.append(f"device TIR for {arch} differs from the emulated {EMULATED_ARCH} lowering")
                hardware = run_gpu(case, kernel, arch, workdir)
            except Exception as e:  # noqa: BLE001 - report and go on with the next case
                failed.append(case.name)
                print(f"[FAIL] {case.name}: GPU run failed: {type(e).__name__}: {e}")
                continue
            for got, hw in zip(emulated, hardware):
                diff = first_difference(got, hw)
                status.append("BIT-IDENTICAL" if diff is None else f"GPU vs emulated: {diff}")
                ok &= diff is None
        if ok:
            passed += 1
        else:
            failed.append(case.name)
        print(f"[{'ok' if ok else 'FAIL'}] {case.name}: {'; '.join(status)} ({time.time() - t0:.1f} s)")
        for note in case.notes:
            print(f"       note: {note}")
    what = "bit-identical on the GPU (and emulated == numpy)" if arch else \
        "emulated == numpy (CPU only; GPU part skipped)"
    print(f"SUMMARY: {passed}/{len(cases)} cases {what}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
