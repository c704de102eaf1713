"""gfx950 kernels for the wave-reduction tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa.lanes import REDUCE_WIDTHS

MFMA_LANES = (("mfma_f32_32x32x16_bf16", "row"), ("mfma_f32_16x16x32_bf16", "row"), ("mfma_f32_4x4x4f16", "row"),
              ("mfma_f32_32x32x16_bf16", "col"), ("mfma_f32_16x16x32_bf16", "col"))
REDUCTIONS = tuple((c, w, "row") for c in ("max", "sum") for w in REDUCE_WIDTHS) + \
    tuple((c, op, axis) for c in ("max", "sum") for op, axis in MFMA_LANES)


def _reductions(items):
    """Macro ``run(X, Y, tx)``: ``Y[i, tx] = wave_reduce(combine, X[tx], lanes, axis)`` for each ``(i,
    (combine, lanes, axis))`` of ``items`` (static arguments: one macro each, chained)."""
    if not items:
        @T.macro
        def done(X, Y, tx):
            T.evaluate(0)
        return done
    (i, (combine, lanes, axis)), rest = items[0], _reductions(items[1:])

    @T.macro
    def run(X, Y, tx):
        Y[i, tx] = T.rocm.wave_reduce(combine, X[tx], lanes=lanes, axis=axis)
        rest(X, Y, tx)
    return run


def wave_reduce_all(waves: int = 2):
    """``Y[i, t] = T.rocm.wave_reduce(*REDUCTIONS[i], X[t])`` for every thread ``t`` of one workgroup."""
    n = 64 * waves
    run = _reductions(tuple(enumerate(REDUCTIONS)))

    @T.function
    def kernel(X: T.Tensor((n,), "float32"), Y: T.Tensor((len(REDUCTIONS), n), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", n)
            run(X, Y, tx)

    return kernel


def wave_reduce_in_lane_branch():
    """A row max under ``if tx % 64 < 32`` (lane-varying control)."""
    @T.function
    def kernel(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            Y[tx] = X[tx]
            if tx % 64 < 32:
                Y[tx] = T.rocm.wave_reduce("max", X[tx], lanes=32)

    return kernel


def wave_reduce_one(combine="max", lanes=32, dtype="float32", axis="row"):
    """``Y[t] = T.rocm.wave_reduce(combine, X[t], lanes, axis)`` (the compiled code; the contract errors)."""
    @T.function
    def kernel(X: T.Tensor((64,), dtype), Y: T.Tensor((64,), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            Y[tx] = T.rocm.wave_reduce(combine, X[tx], lanes=lanes, axis=axis)

    return kernel
