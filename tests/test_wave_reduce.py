"""T.rocm.wave_reduce: row max / row sum over the lanes of an MFMA accumulator row (issue 26 stage 1):
the exchange steps reduce every aligned lane group, the rows' lanes come from isa.lanes, the compiled
DPP / permlane-swap code, the emulator's results, and the contract errors."""

import re
import subprocess

import numpy as np
import pytest

from tvm_cdna4 import ContractError, build, register
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, MFMA_OPS, lanes
from tvm_cdna4.isa.llvm_helpers import wave_reduce_helper, wave_reduce_helpers
from tvm_cdna4.rocm.build import llvm_tool

import wave_kernels as K

register()
LANE = np.arange(64)


def _groups(x, width, fn):
    """numpy: every lane gets ``fn`` over its aligned group of ``width`` lanes (per wave of 64)."""
    g = x.reshape(-1, width)
    return np.repeat(fn(g, axis=1), width).reshape(x.shape)


@pytest.mark.parametrize("width", lanes.REDUCE_WIDTHS)
def test_the_exchange_steps_reduce_each_aligned_group_and_pair_lanes_symmetrically(width):
    steps = lanes.reduce_steps(width)
    assert len(steps) == int(np.log2(width))
    reach = [{int(l)} for l in LANE]  # the lanes each lane's value has combined so far
    for step in steps:
        partner = lanes.exchange_partner(step, LANE)
        assert (lanes.exchange_partner(step, partner) == LANE).all() and (partner != LANE).all()
        assert (partner // width == LANE // width).all()  # never leaves the group
        reach = [reach[l] | reach[int(partner[l])] for l in LANE]
    assert all(r == set(range(l // width * width, l // width * width + width)) for l, r in zip(LANE, reach))
    with pytest.raises(ValueError, match="aligned groups of"):
        lanes.reduce_steps(width + 1)


@pytest.mark.parametrize("name", ["mfma_f32_32x32x16_bf16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x2f32",
                                  "mfma_f32_4x4x4f16", "mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64"])
def test_accumulator_rows_are_the_aligned_lane_groups_of_acc_row_lanes(name):
    op = CATALOG[name]
    width = lanes.acc_row_lanes(op)
    lane, reg = np.meshgrid(LANE, np.arange(op.acc_elems), indexing="ij")
    owner = lanes.acc_owner(op, lane, reg)
    rows = {}
    for l, r, b, row in zip(lane.ravel(), reg.ravel(), *(np.broadcast_to(x, lane.shape).ravel() for x in owner[:2])):
        rows.setdefault((int(b), int(row)), set()).add((int(l), int(r)))
    for members in rows.values():  # one register of one aligned group of `width` lanes
        ls = sorted(l for l, _ in members)
        assert len({r for _, r in members}) == 1 and len(ls) == width == op.n
        assert ls == list(range(ls[0], ls[0] + width)) and ls[0] % width == 0
    assert {lanes.acc_row_lanes(o) for o in MFMA_OPS} == {4, 16, 32}


@pytest.fixture(scope="module")
def kernel():
    return K.wave_reduce_all(waves=2)


def test_each_lane_gets_its_groups_max_and_sum_in_the_emulator(kernel):
    rng = np.random.default_rng(26)
    x = (rng.permutation(128) - 64).astype(np.float32) * 0.25  # sums of up to 64 exact in f32
    x[5] = -np.inf  # a masked score: max ignores it
    y = np.full((len(K.REDUCTIONS), 128), np.nan, np.float32)
    emulate(kernel, x, y)
    for i, (combine, how) in enumerate(K.REDUCTIONS):
        width = how if isinstance(how, int) else lanes.acc_row_lanes(CATALOG[how])
        want = _groups(x.astype(np.float64), width, np.max if combine == "max" else np.sum)
        np.testing.assert_array_equal(y[i], want.astype(np.float32), err_msg=f"{combine} over {how}")


def test_sum_rounds_in_f32_step_by_step_and_every_lane_of_a_group_gets_the_same_bits(kernel):
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    y = np.zeros((len(K.REDUCTIONS), 128), np.float32)
    emulate(kernel, x, y)
    for i, (combine, how) in enumerate(K.REDUCTIONS):
        width = how if isinstance(how, int) else lanes.acc_row_lanes(CATALOG[how])
        g = y[i].reshape(-1, width)
        assert (g == g[:, :1]).all()
        want = _groups(x.astype(np.float64), width, np.max if combine == "max" else np.sum)
        np.testing.assert_allclose(y[i], want, rtol=0, atol=1e-5 * width)


def _vector_ops(body: str) -> list[str]:
    """The VALU instructions of an assembly body: a DPP one with its control, others by mnemonic."""
    ops = [ln.split(None, 1) for ln in body.splitlines() if re.match(r"\s+v_", ln)]
    return [f"{m} {a.split()[3]}" if m.endswith("_dpp") else m.removesuffix("_e32").removesuffix("_e64") for m, a in ops]


def _expected(combine: str, width: int) -> list[str]:
    v = {"max": "v_max_f32", "sum": "v_add_f32"}[combine]
    want = []
    for step in lanes.reduce_steps(width):
        want += [f"{v}_dpp {step.asm}"] if step.dpp_ctrl is not None else ["v_mov_b32", step.asm, v]
    return want


@pytest.mark.parametrize("combine, width", [("max", 32), ("sum", 16)])
def test_a_kernels_reduction_compiles_to_fused_dpp_combines_and_the_lane_swap(combine, width):
    body = build(K.wave_reduce_one(combine, width)).asm.split("s_endpgm")[0]
    ops = [op for op in _vector_ops(body) if "_dpp" in op or "permlane" in op or op in ("v_max_f32", "v_add_f32")]
    assert ops == [op for op in _expected(combine, width) if op != "v_mov_b32"]
    assert not re.search(r"ds_swizzle|ds_bpermute|scratch|v_readlane", body)


@pytest.mark.llvm("llc")
def test_llc22_compiles_each_helper_to_its_steps_in_order(tmp_path):
    src = tmp_path / "reduce.ll"
    src.write_text('target triple = "amdgcn-amd-amdhsa"\n' + "\n".join(wave_reduce_helpers()) + "\n")
    asm = subprocess.run([llvm_tool("llc"), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", str(src), "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    for combine in ("max", "sum"):
        for width in lanes.REDUCE_WIDTHS:
            body = asm.split(f"{wave_reduce_helper(combine, width)}:", 1)[1].split("s_setpc_b64", 1)[0]
            assert _vector_ops(body) == _expected(combine, width), (combine, width, body)


def _first_line(make):
    with pytest.raises(ContractError) as err:
        build(make())
    return str(err.value).splitlines()[0], err.value.check


def test_contract_errors():
    assert _first_line(lambda: K.wave_reduce_one(combine="min")) == (
        "T.rocm.wave_reduce: operand combine: the combine of a wave reduction; expected ['max', 'sum'], found min", None)
    assert _first_line(lambda: K.wave_reduce_one(lanes=12))[0] == (
        "T.rocm.wave_reduce: operand lanes: a wave reduction combines aligned groups of a power of two of lanes; "
        "expected one of (2, 4, 8, 16, 32, 64) or an MFMA opcode, found 12")
    assert _first_line(lambda: K.wave_reduce_one(lanes="ds_read_tr16_b64_v4bf16"))[0].startswith(
        "T.rocm.wave_reduce: operand lanes: lanes names an instruction without an accumulator")
    assert _first_line(lambda: K.wave_reduce_one(dtype="float16"))[0] == (
        "T.rocm.wave_reduce: operand value: a wave reduction combines float32 values; expected a float32 expression, "
        "found float16. Suggestion: cast the value to float32 (T.float32(...), T.cast(x, 'float32'))")
    line, check = _first_line(K.wave_reduce_in_lane_branch)
    assert check == "wave-uniform control" and line.startswith(f"{wave_reduce_helper('max', 32)}: a wave-collective "), line
