"""T.rocm.wave_reduce: max / sum over the lanes of an MFMA accumulator row or column (issue 26 stage 1):
the exchange steps reduce every lane group of a mask, the rows' and columns' lanes come from isa.lanes, the compiled
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


def _group_reduce(x, mask, fn):
    """numpy: every lane gets ``fn`` over the lanes of its wave that differ from it only in ``mask``'s bits."""
    lane = np.arange(x.size)
    return np.array([fn(x[(lane & ~mask) == (t & ~mask)]) for t in lane])


def _mask(how, axis):
    return how - 1 if isinstance(how, int) else lanes.acc_lane_mask(CATALOG[how], axis)


@pytest.mark.parametrize("mask", lanes.REDUCE_MASKS)
def test_the_exchange_steps_combine_exactly_the_lanes_of_the_mask_and_pair_lanes_symmetrically(mask):
    reach = [{int(l)} for l in LANE]  # the lanes each lane's value has combined so far
    for step in lanes.reduce_steps(mask):
        partner = lanes.exchange_partner(step, LANE)
        assert (lanes.exchange_partner(step, partner) == LANE).all() and (partner != LANE).all()
        assert ((partner ^ LANE) & ~mask == 0).all()  # never leaves the group
        reach = [reach[l] | reach[int(partner[l])] for l in LANE]
    assert all(r == {m for m in range(64) if m & ~mask == l & ~mask} for l, r in zip(LANE, reach))
    assert len(lanes.reduce_steps(mask)) == bin(mask).count("1")


def test_masks_the_steps_cannot_combine_are_refused():
    for mask in (0, 2, 4, 8, 5, 6, 0x22, 64):
        with pytest.raises(ValueError, match="combines the lanes of a mask in"):
            lanes.reduce_steps(mask)


@pytest.mark.parametrize("name", ["mfma_f32_32x32x16_bf16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x2f32",
                                  "mfma_f32_4x4x4f16", "mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64"])
def test_accumulator_rows_and_columns_are_the_lane_groups_of_acc_lane_mask(name):
    op = CATALOG[name]
    lane, reg = np.meshgrid(LANE, np.arange(op.acc_elems), indexing="ij")
    block, row, col = (np.broadcast_to(x, lane.shape).ravel() for x in lanes.acc_owner(op, lane, reg))
    for axis, line, along in (("row", row, col), ("col", col, row)):
        mask = lanes.acc_lane_mask(op, axis)
        groups = {}
        for l, r, b, at, other in zip(lane.ravel(), reg.ravel(), block, line, along):
            groups.setdefault((int(b), int(at)), set()).add((int(l), int(r), int(other)))
        for members in groups.values():  # the lanes differing only in the mask's bits, all the line's elements
            ls = {l for l, _, _ in members}
            first = min(ls)
            assert ls == {m for m in range(64) if m & ~mask == first & ~mask}, (axis, sorted(ls))
            assert len({o for _, _, o in members}) == (op.n if axis == "row" else op.m)
            if axis == "row":
                assert len({r for _, r, _ in members}) == 1  # one register
    assert {hex(lanes.acc_lane_mask(o, a)) for o in MFMA_OPS for a in ("row", "col")} == \
        {"0x3", "0xf", "0x1f", "0x0", "0x20", "0x30"}


@pytest.fixture(scope="module")
def kernel():
    return K.wave_reduce_all(waves=2)


def test_each_lane_gets_its_groups_max_and_sum_in_the_emulator(kernel):
    rng = np.random.default_rng(26)
    x = (rng.permutation(128) - 64).astype(np.float32) * 0.25  # sums of up to 64 exact in f32
    x[5] = -np.inf  # a masked score: max ignores it
    y = np.full((len(K.REDUCTIONS), 128), np.nan, np.float32)
    emulate(kernel, x, y)
    for i, (combine, how, axis) in enumerate(K.REDUCTIONS):
        mask = _mask(how, axis)
        want = np.concatenate([_group_reduce(w, mask, np.max if combine == "max" else np.sum) for w in
                               x.astype(np.float64).reshape(2, 64)])
        np.testing.assert_array_equal(y[i], want.astype(np.float32), err_msg=f"{combine} over {how} {axis}")


def test_sum_rounds_in_f32_step_by_step_and_every_lane_of_a_group_gets_the_same_bits(kernel):
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    y = np.zeros((len(K.REDUCTIONS), 128), np.float32)
    emulate(kernel, x, y)
    for i, (combine, how, axis) in enumerate(K.REDUCTIONS):
        mask = _mask(how, axis)
        same = np.concatenate([_group_reduce(w, mask, lambda g: len(set(g.tolist()))) for w in y[i].reshape(2, 64)])
        assert (same == 1).all()
        want = np.concatenate([_group_reduce(w, mask, np.max if combine == "max" else np.sum) for w in
                               x.astype(np.float64).reshape(2, 64)])
        np.testing.assert_allclose(y[i], want, rtol=0, atol=1e-5 * (mask + 1))


def _vector_ops(body: str) -> list[str]:
    """The VALU instructions of an assembly body: a DPP one with its control, others by mnemonic."""
    ops = [ln.split(None, 1) for ln in body.splitlines() if re.match(r"\s+v_", ln)]
    return [f"{m} {a.split()[3]}" if m.endswith("_dpp") else m.removesuffix("_e32").removesuffix("_e64") for m, a in ops]


def _expected(combine: str, mask: int) -> list[str]:
    v = {"max": "v_max_f32", "sum": "v_add_f32"}[combine]
    want = []
    for step in lanes.reduce_steps(mask):
        want += [f"{v}_dpp {step.asm}"] if step.dpp_ctrl is not None else ["v_mov_b32", step.asm, v]
    return want


@pytest.mark.parametrize("combine, lanes_, axis, mask", [("max", 32, "row", 0x1f), ("sum", 16, "row", 0xf),
                                                        ("max", "mfma_f32_32x32x16_bf16", "col", 0x20)])
def test_a_kernels_reduction_compiles_to_fused_dpp_combines_and_the_lane_swap(combine, lanes_, axis, mask):
    body = build(K.wave_reduce_one(combine, lanes_, axis=axis)).asm.split("s_endpgm")[0]
    ops = [op for op in _vector_ops(body) if "_dpp" in op or "permlane" in op or op in ("v_max_f32", "v_add_f32")]
    assert ops == [op for op in _expected(combine, mask) if op != "v_mov_b32"]
    assert not re.search(r"ds_swizzle|ds_bpermute|scratch|v_readlane", body)


@pytest.mark.llvm("llc")
def test_llc22_compiles_each_helper_to_its_steps_in_order(tmp_path):
    src = tmp_path / "reduce.ll"
    src.write_text('target triple = "amdgcn-amd-amdhsa"\n' + "\n".join(wave_reduce_helpers()) + "\n")
    asm = subprocess.run([llvm_tool("llc"), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", str(src), "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    for combine in ("max", "sum"):
        for mask in lanes.REDUCE_MASKS:
            body = asm.split(f"{wave_reduce_helper(combine, mask)}:", 1)[1].split("s_setpc_b64", 1)[0]
            assert _vector_ops(body) == _expected(combine, mask), (combine, mask, body)


def _first_line(make):
    with pytest.raises(ContractError) as err:
        build(make())
    return str(err.value).splitlines()[0], err.value.check


def test_contract_errors():
    assert _first_line(lambda: K.wave_reduce_one(combine="min")) == (
        "T.rocm.wave_reduce: operand combine: the combine of a wave reduction; expected ['max', 'sum'], found min", "parameters")
    assert _first_line(lambda: K.wave_reduce_one(lanes=12))[0] == (
        "T.rocm.wave_reduce: operand lanes: a wave reduction combines aligned groups of a power of two of lanes; "
        "expected one of (2, 4, 8, 16, 32, 64) or an MFMA opcode, found 12")
    assert _first_line(lambda: K.wave_reduce_one(lanes="ds_read_tr16_b64_v4bf16"))[0].startswith(
        "T.rocm.wave_reduce: operand lanes: lanes names an instruction without an accumulator")
    assert _first_line(lambda: K.wave_reduce_one(dtype="float16"))[0] == (
        "T.rocm.wave_reduce: operand value: a wave reduction combines float32 values; expected a float32 expression, "
        "found float16. Suggestion: cast the value to float32 (T.float32(...), T.cast(x, 'float32'))")
    assert _first_line(lambda: K.wave_reduce_one(lanes="mfma_f32_4x4x4f16", axis="col"))[0] == (
        "T.rocm.wave_reduce: operand lanes: one lane holds a whole accumulator col of mfma_f32_4x4x4f16: there is "
        "nothing to combine across lanes; expected lanes sharing a col, found mfma_f32_4x4x4f16. Suggestion: combine "
        "the col in registers")
    assert _first_line(lambda: K.wave_reduce_one(lanes="mfma_f32_32x32x16_bf16", axis="column"))[0] == (
        "T.rocm.wave_reduce: operand axis: the accumulator axis whose lanes a wave reduction combines; expected "
        "'row' or 'col', found column")
    line, check = _first_line(K.wave_reduce_in_lane_branch)
    assert check == "wave-uniform control" and line.startswith(f"{wave_reduce_helper('max', 31)}: a wave-collective "), line
