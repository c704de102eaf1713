"""bf16 / fp8 / bf8 element dtypes in register fragments and LDS tiles (issue 14 finding 1, issue 23).

TIRx stores a ``bfloat16`` / ``float8_*`` allocation on ROCm as one float32 per element;
``tvm_cdna4.rocm.storage`` keeps such tensors as 16/8-bit storage, so every kernel declaring them
computes bit-exactly what ``isa.reference`` says, and so does the integer bit-storage spelling.
Outside the pipelines that run that pass, the patterns refuse those dtypes naming the storage.
"""

import ml_dtypes
import numpy as np
import pytest
import tvm_tirx
from tvm_tirx.target import Target
from tvm_tirx.tirx.compilation_pipeline import tirx_pipeline

import rocm_kernels
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, MFMA_OPS, reference
from tvm_cdna4.probes import STORAGE, mfma_probe, tr_probe

OWN_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3fn", "bf8": "float8_e5m2"}
NARROW_MFMA = [op for op in MFMA_OPS if op.kind == "mfma" and {op.a_format, op.b_format} & set(OWN_DTYPE)]


def _np(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name))


def _exact(run):
    """``run()`` emulates the kernel and returns (got, want)."""
    got, want = run()
    assert np.abs(want.astype(np.float64)).sum() > 0
    np.testing.assert_array_equal(got, want)


def test_every_narrow_float_mfma_is_covered():
    assert len(NARROW_MFMA) == 15 and {op.a_format for op in NARROW_MFMA} == {"bf16", "fp8", "bf8"}


@pytest.mark.parametrize("op", NARROW_MFMA, ids=lambda op: op.name)
def test_mfma_with_bf16_or_fp8_fragments_is_exact(op, rng):
    fmt = {"A": op.a_format, "B": op.b_format}
    dtypes = {k: OWN_DTYPE[f] for k, f in fmt.items() if f in OWN_DTYPE}

    def run():
        a, b = (rng.normal(size=(64, n)).astype(_np(OWN_DTYPE[fmt[k]]))
                for k, n in (("A", op.a_elems), ("B", op.b_elems)))
        c = rng.normal(size=(64, op.acc_elems)).astype(np.float32)
        d = np.zeros_like(c)
        emulate(mfma_probe(op, dtypes=dtypes), a, b, c, d)
        return d, reference.mfma(op, a, b, c)

    _exact(run)


@pytest.mark.parametrize("name, dtype", [("ds_read_tr16_b64_v4bf16", "bfloat16"),
                                         ("ds_read_tr8_b64_v2i32", "float8_e4m3fn"),
                                         ("ds_read_tr8_b64_v2i32", "float8_e5m2")])
def test_ds_read_tr_of_a_bf16_or_fp8_lds_tile_is_exact(name, dtype, rng):
    op = CATALOG[name]

    def run():
        tile = rng.normal(size=(4, op.elements, 16)).astype(_np(dtype))
        d = np.zeros((64, op.elements), tile.dtype)
        emulate(tr_probe(op, dtype=dtype), tile.reshape(-1).copy(), d)
        bits = np.uint8 if op.element_bits == 8 else np.uint16  # compare bit patterns
        return d.view(bits), np.ascontiguousarray(tile.transpose(0, 2, 1)).reshape(64, op.elements).view(bits)

    _exact(run)


def test_ds_read_tr_operand_form_with_bf16_tiles_is_exact(rng):
    mfma = CATALOG["mfma_f32_32x32x16_bf16"]

    def run():
        b = rng.normal(size=(mfma.k, mfma.n)).astype(ml_dtypes.bfloat16)
        d = np.zeros((64, mfma.acc_elems), np.float32)
        emulate(rocm_kernels.tr_operand_then_mfma("ds_read_tr16_b64_v4bf16", mfma.name, "bfloat16"), b, d)
        want = np.zeros_like(d)
        emulate(rocm_kernels.tr_operand_then_mfma("ds_read_tr16_b64_v4bf16", mfma.name, "int16"), b.view(np.int16), want)
        return d, want

    _exact(run)


@pytest.mark.parametrize("op", [NARROW_MFMA[0], CATALOG["mfma_f32_16x16x32_fp8_bf8"]], ids=lambda op: op.name)
def test_integer_storage_of_the_same_bits_is_exact(op, rng):
    """The integer spelling: bf16/fp8 data viewed as int16/uint8."""
    a, b = (rng.normal(size=(64, n)).astype(_np(OWN_DTYPE[f]))
            for f, n in ((op.a_format, op.a_elems), (op.b_format, op.b_elems)))
    c = rng.normal(size=(64, op.acc_elems)).astype(np.float32)
    d = np.zeros_like(c)
    emulate(mfma_probe(op), a.view(STORAGE[op.a_format]), b.view(STORAGE[op.b_format]), c, d)
    np.testing.assert_array_equal(d, reference.mfma(op, a, b, c))


def test_outside_the_storage_pass_the_patterns_refuse_bf16_naming_the_storage():
    """A pipeline that does not run ``rocm.storage`` (here TIRx's own, unwrapped) gets the refusal."""
    kernel = mfma_probe(NARROW_MFMA[0], dtypes={"A": "bfloat16", "B": "bfloat16"})
    lowering = tirx_pipeline(target=Target({"kind": "rocm", "mcpu": "gfx950"}))[0]
    with pytest.raises(ContractError, match="operand A: dtype bfloat16 is supported only through") as err:  # one type on every route
        lowering(tvm_tirx.IRModule.from_expr(kernel))
    assert "declare the tensor and its allocation as int16 holding the bfloat16 bit patterns" in str(err.value)
