"""Contract checks: each violation is refused at compile time with an error naming operand and rule."""

import re

import ml_dtypes
import numpy as np
import pytest
import tvm_ffi
from tvm_tirx.ir import Call
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import S, TileLayout

import tvm_cdna4
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import compare, emulate
from tvm_cdna4.isa import CATALOG, formats, lanes
from tvm_cdna4.patterns.layouts import mfma_fragment
from tvm_cdna4.probes import mfma_probe, tr_probe
from tvm_cdna4.tirx_private import register_rocm_axes

import rocm_kernels

F16 = CATALOG["mfma_f32_16x16x32_f16"]
WL = register_rocm_axes()[0]


def frag(name, operand):
    return mfma_fragment(CATALOG[name], operand, (1, 1))[0]


def layout(shape, strides):
    return TileLayout(S[shape:strides])


SCALED = CATALOG["mfma_scale_f32_16x16x128_f8f6f4"]


def scaled_byte_tile_probe(cbsz=0, blgp=1):
    """One scaled MFMA whose A is a uint8 element tile ``(16, 128)`` (patterns.mfma) and B packed
    words; ``D[lane]`` gets the lane's accumulators, A and B read from ``X`` (bytes) and ``Y`` (words)."""
    la, na = mfma_fragment(SCALED, "A", (1, 1), byte_tiles=True)
    lb, nb = mfma_fragment(SCALED, "B", (1, 1))
    ld, nd = mfma_fragment(SCALED, "D", (1, 1))
    ls, _ = mfma_fragment(SCALED, "scale_a", (1, 1))

    @T.function
    def kernel(X: T.Tensor((64, na), "uint8"), Y: T.Tensor((64, nb), "uint32"), D: T.Tensor((64, nd), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint8", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            rs = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint32", scope="local")])
            for r in T.unroll(na):
                ra[r] = X[tx, r]
            for r in T.unroll(nb):
                rb[r] = Y[tx, r]
            rs[0] = T.uint32(0x7F7F7F7F)
            rs[1] = T.uint32(0x7F7F7F7F)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 128), "uint8", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 4, 8), "uint32", scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 4), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([1]), ty_args=[T.Tensor((1, 1, 16, 4), "uint32", scope="local", layout=ls)])
            T.rocm.tile.apply(T.amdgcn[SCALED.name], Df, Af, Bf, T.float32(0), Sa, Sb, scope="wave",
                              cbsz=cbsz, blgp=blgp, op_sel_a=0, op_sel_b=0)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def scaled_scale_bytes_probe(rm=5, rn=2, dtype="uint8", align=64, in_loop=False, **params):
    """Scaled fp8 MFMAs over ``rm x rn`` repeats whose scales are uint8 byte tiles (patterns.mfma):
    repeat ``i``'s scale of a lane in byte ``i`` of its registers (op_sel ``i % 4`` of register
    ``i // 4``). ``D[lane]`` gets the accumulators; A, B words from ``X``, ``Y``, scale bytes from
    ``SX``, ``SY`` (one row per lane). ``in_loop``: the MFMAs inside a loop over two repeat ranges
    of A's scales, so that the scale byte is not known at compile time."""
    la, na = mfma_fragment(SCALED, "A", (rm, 1))
    lb, nb = mfma_fragment(SCALED, "B", (rn, 1))
    ld, nd = mfma_fragment(SCALED, "D", (rm, rn))
    ls, _ = mfma_fragment(SCALED, "scale_a", (2 * rm if in_loop else rm, 1))
    lsb, _ = mfma_fragment(SCALED, "scale_b", (rn, 1))
    wa, wb = -(-rm // 4), -(-rn // 4)  # scale registers of A and B

    @T.function
    def kernel(X: T.Tensor((64, na), "uint32"), Y: T.Tensor((64, nb), "uint32"), SX: T.Tensor((64, rm), "uint8"),
               SY: T.Tensor((64, rn), "uint8"), D: T.Tensor((64, nd), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            rs = T.alloc_tensor(ty_args=[T.Tensor((wa + wb,), "uint32", scope="local")])
            bs = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((4 * (wa + wb),), "uint8", scope="local")])
            for r in T.unroll(na):
                ra[r] = X[tx, r]
            for r in T.unroll(nb):
                rb[r] = Y[tx, r]
            for i in T.unroll(4 * (wa + wb)):
                bs[i] = T.uint8(127)
            for i in T.unroll(rm):
                bs[i] = SX[tx, i]
            for i in T.unroll(rn):
                bs[4 * wa + i] = SY[tx, i]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((rm, 1, 16, 4, 8), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((rn, 1, 16, 4, 8), "uint32", scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((rm, rn, 16, 16), "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((rm * (1 + in_loop), 1, 16, 4), dtype, scope="local", layout=ls,
                                                                  align=align)])
            Sb = T.decl_tensor(rs.ptr_to([wa]), ty_args=[T.Tensor((rn, 1, 16, 4), "uint8", scope="local", layout=lsb)])
            for h in T.unroll(1 + in_loop):
                T.rocm.tile.apply(T.amdgcn[SCALED.name], Df, Af, Bf, T.float32(0), Sa[h * rm : h * rm + rm], Sb, scope="wave",
                                  cbsz=0, blgp=0, **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


TR16, TR8, TR6 = (CATALOG[n] for n in ("ds_read_tr16_b64_v4f16", "ds_read_tr8_b64_v2i32", "ds_read_tr6_b96_v3i32"))

CASES = {
    # --- opcode and operands
    "unknown opcode": (lambda: mfma_probe(F16, opcode="f32_16x16x32_f17"), r"unknown CDNA4 opcode 'f32_16x16x32_f17'; did you mean"),
    "ambiguous mnemonic": (lambda: mfma_probe(F16, opcode="ds_read_b64_tr_b16"), r"mnemonic 'ds_read_b64_tr_b16' is ambiguous"),
    "operand count": (rocm_kernels.three_operand_mfma, r"mfma_f32_16x16x32_f16: expects operands D, A, B, C; found 3"),
    "unknown parameter": (lambda: mfma_probe(F16, params={"neg": 1}), r"unknown parameter\(s\) \['neg'\]; expected parameters from \['cbsz', 'abid', 'blgp'\]"),
    # --- modifiers
    "cbsz on a single-block MFMA": (lambda: mfma_probe(F16, cbsz=1), r"modifier cbsz=1 is illegal; expected an integer in \[0, 0\]"),
    "abid range": (lambda: mfma_probe(CATALOG["mfma_f32_4x4x4f16"], cbsz=4, abid=16), r"abid=16 is illegal; expected an integer in \[0, 15\]"),
    "cbsz range": (lambda: mfma_probe(CATALOG["mfma_f32_16x16x4f16"], cbsz=3), r"cbsz=3 is illegal; expected an integer in \[0, 2\]"),
    "abid outside the broadcast group": (lambda: mfma_probe(CATALOG["mfma_f32_4x4x4f16"], cbsz=1, abid=3), r"abid=3 needs cbsz >= 2"),
    "blgp range": (lambda: mfma_probe(F16, blgp=8), r"blgp=8 is illegal; expected an integer in \[0, 7\]"),
    "blgp must be 0 for fp8": (lambda: mfma_probe(CATALOG["mfma_f32_16x16x32_fp8_bf8"], blgp=1), r"blgp=1 is illegal; expected an integer in \[0, 0\] \(must be 0"),
    "fp64 negation bits range": (lambda: mfma_probe(CATALOG["mfma_f64_16x16x4f64"], blgp=9), r"blgp=9 is illegal.*negat"),
    "scaled op_sel": (lambda: mfma_probe(CATALOG["mfma_scale_f32_16x16x128_f8f6f4"], op_sel_a=4), r"op_sel_a=4 is illegal; expected an integer in \[0, 3\]"),
    "scaled format code": (lambda: mfma_probe(CATALOG["mfma_scale_f32_16x16x128_f8f6f4"], cbsz=5), r"cbsz=5 is illegal; expected an integer in \[0, 4\] \(A format code"),
    "scaled words vs format": (lambda: mfma_probe(CATALOG["mfma_scale_f32_16x16x128_f8f6f4"], cbsz=2, atoms={"A": (16, 4, 8)}),
                               r"operand A: cbsz=2 selects fp6, which takes 6 32-bit words per lane; expected a last axis of 6, found 8"),
    "scaled byte tile of a sub-byte format": (lambda: scaled_byte_tile_probe(cbsz=2), r"operand A: cbsz=2 selects fp6, whose elements are not whole bytes: pass packed 32-bit words"),
    "ds_read_tr16 into a scaled MFMA": (lambda: tr_probe(TR16, params={"mfma": "mfma_scale_f32_16x16x128_f8f6f4", "operand": "B"}),
                                        r"mfma_scale_f32_16x16x128_f8f6f4 takes element tiles only for its 8-bit formats"),
    "scaled op_sel with scale bytes": (lambda: scaled_scale_bytes_probe(op_sel_a=1), r"operand scale_a: op_sel_a comes from the byte position of the uint8 scale tile"),
    "scaled scale bytes as int8": (lambda: scaled_scale_bytes_probe(dtype="int8"), r"operand scale_a: dtype int8 does not fit E8M0 scale bytes"),
    "scaled scale bytes not register aligned": (lambda: scaled_scale_bytes_probe(align=2), r"operand scale_a: a uint8 scale tile must start a 32-bit register .*found align=2"),
    "scaled scale byte not static": (lambda: scaled_scale_bytes_probe(1, 1, in_loop=True),
                                     r"operand scale_a: the scale byte of each repeat must be known at compile time"),
    "scaled scale dtype": (lambda: mfma_probe(CATALOG["mfma_scale_f32_32x32x64_f8f6f4"], dtypes={"scale": "float32"}), r"operand scale_a: dtype float32 does not fit a 32-bit E8M0 scale"),
    # --- types
    "A element width": (lambda: mfma_probe(F16, dtypes={"A": "float32"}, layouts={"A": frag("mfma_f32_16x16x32_f16", "A")}), r"operand A: dtype float32 does not fit f16 elements"),
    "bf16 MFMA given f16": (lambda: mfma_probe(CATALOG["mfma_f32_16x16x32_bf16"], dtypes={"B": "float16"}), r"operand B: dtype float16 does not fit bf16 elements"),
    "i8 MFMA given uint8": (lambda: mfma_probe(CATALOG["mfma_i32_16x16x64_i8"], dtypes={"A": "uint8"}), r"operand A: dtype uint8 does not fit i8 elements"),
    "accumulator dtype": (lambda: mfma_probe(F16, dtypes={"D": "float16"}), r"operand D: dtype float16 does not fit the f32 accumulator"),
    "C dtype": (lambda: mfma_probe(CATALOG["mfma_i32_16x16x64_i8"], dtypes={"C": "float32"}), r"operand C: dtype float32 does not fit the i32 accumulator"),
    # --- storage scopes and shapes
    "A in shared memory": (lambda: mfma_probe(F16, scopes={"A": "shared"}), r"operand A: must be a register fragment; expected storage scope 'local', found a shared tensor"),
    "D in shared memory": (lambda: mfma_probe(F16, scopes={"D": "shared"}), r"operand D: must be a register fragment; expected storage scope 'local', found a shared tensor"),
    "atom shape": (lambda: mfma_probe(F16, atoms={"B": (16, 16)}, layouts={"B": frag("mfma_f32_16x16x16f16", "B")}), r"operand B: the region must end in the instruction's atom \(16, 32\); expected \(\*repeats, 16, 32\), found \(1, 1, 16, 16\)"),
    "thread scope": (lambda: mfma_probe(F16, scope="thread"), r"scope='thread' is not allowed: the instruction is wave-collective"),
    # --- owner maps
    "A owner map": (lambda: mfma_probe(F16, layouts={"A": frag("mfma_f32_32x32x16_f16", "A")}), r"operand A: owner map violated: atom element \(1, 0\) must live in lane 1; found lane 2"),
    "B owner map": (lambda: mfma_probe(F16, layouts={"B": layout((1, 1, 16, 4, 8), (0, 0, 4 @ WL, 1 @ WL, 1))}), r"operand B: owner map violated"),
    "D owner map (transposed)": (lambda: mfma_probe(F16, layouts={"D": frag("mfma_f32_16x16x16f16", "B")}), r"operand D: owner map violated"),
    "C owner map": (lambda: mfma_probe(F16, layouts={"C": frag("mfma_f32_16x16x16f16", "B")}), r"operand C: owner map violated"),
    "multi-block A owner map": (lambda: mfma_probe(CATALOG["mfma_f32_4x4x4f16"], layouts={"A": layout((1, 1, 16, 4, 4), (0, 0, 1 @ WL, 16 @ WL, 1))}), r"operand A: owner map violated"),
    "registers not consecutive": (lambda: mfma_probe(F16, layouts={"A": layout((1, 1, 16, 4, 8), (0, 0, 1 @ WL, 16 @ WL, 2))}), r"operand A: a lane's 8 elements must occupy consecutive registers \(element 1, atom \(0, 1\), of lane 0\); expected register 1, found register 2"),
    "overlapping destination registers": (lambda: mfma_probe(F16, layouts={"D": layout((1, 1, 4, 4, 16), (0, 0, 16 @ WL, 0, 1 @ WL))}), r"operand D: register layout must have nonoverlapping storage strides"),
    # --- ds_read_tr
    "ds_read_tr src in registers": (lambda: tr_probe(TR16, src_scope="local"), r"operand src: must be an LDS tile; expected storage scope 'shared' or 'shared.dyn', found a local tensor"),
    "ds_read_tr dst in LDS": (lambda: tr_probe(TR16, dst_scope="shared"), r"operand dst: must be a register fragment; expected storage scope 'local'"),
    "ds_read_tr unaligned base": (lambda: tr_probe(TR16, align=4), r"operand src: the tile's base address must be 8-byte aligned .*; found align=4\. Suggestion: allocate it with align=8"),
    "ds_read_tr unaligned row": (lambda: tr_probe(TR16, row_pitch=18), r"operand src: the chunk that lane 4 reads must start 8-byte aligned; found byte offset 36 .*Suggestion: make the row pitch"),
    "ds_read_tr6 16-byte alignment": (lambda: tr_probe(TR6, row_pitch=12), r"operand src: the chunk that lane 1 reads must start 16-byte aligned; found byte offset 12"),
    "ds_read_tr chunk not contiguous": (lambda: tr_probe(TR8, src_layout=layout((1, 4, 8, 2, 4, 2), (0, 128, 16, 8, 1, 4))), r"operand src: the 8 elements of the chunk lane 0 reads must be consecutive in LDS \(element 1\); expected offset 1, found offset 4"),
    "ds_read_tr dst owner map": (lambda: tr_probe(TR16, dst_layout=layout((1, 4, 4, 16), (0, 16 @ WL, 1 @ WL, 4))), r"operand dst: owner map violated"),
    "ds_read_tr element width": (lambda: tr_probe(TR8, dtype="float16"), r"operand dst: dtype float16 does not fit 8-bit elements"),
    # --- execution scope: operands laid out for the other scope
    "workgroup operands at wave scope": (lambda: mfma_probe(F16, waves=2, scope="wave"),
                                         r"operand A: laid out for scope='workgroup' \(its layout puts an axis on the "
                                         r"wave axis 'wave_id'\), applied at scope='wave'.*Suggestion: apply it with "
                                         r"scope=\"workgroup\""),
    "ds_read_tr workgroup destination at wave scope": (lambda: tr_probe(TR16, waves=2, scope="wave"),
                                                       r"operand dst: laid out for scope='workgroup'.*Suggestion: apply "
                                                       r"it with scope=\"workgroup\""),
    "wave operands at workgroup scope": (lambda: mfma_probe(F16, scope="workgroup"),
                                         r"operand D: laid out for scope='wave' \(no register operand's layout has the "
                                         r"wave axis 'wave_id'\), applied at scope='workgroup'.*Suggestion: apply it "
                                         r"with scope=\"wave\""),
    "wave operands over two waves at workgroup scope": (
        lambda: mfma_probe(F16, scope="workgroup", threads=128, operand_repeats=dict.fromkeys("ABCD", (2, 1, 1))),
        r"operand A: laid out for scope='wave'.*Suggestion: apply it with scope=\"wave\""),
    "wave operands with a wave axis of 2 at workgroup scope": (
        lambda: mfma_probe(F16, scope="workgroup", repeats=(2, 1, 1)),
        r"operand Df\[0:2, 0, 0:16, 0:16\]: scope='workgroup' launches 64 threads \(1 waves\).*Suggestion: launch 128 "
        r"threads .* its register operands are laid out for scope='wave' \(no wave axis 'wave_id'\): apply it with "
        r"scope=\"wave\" \(each wave runs its own instance\)$"),
    # --- whole-kernel rules (tvm_cdna4.build)
    "partially active wave (branch)": (rocm_kernels.divergent_mfma, r"runs under `if tx < 32:`.*all 64 lanes of a wave must execute it"),
    "workgroup not whole waves": (lambda: mfma_probe(F16, threads=96), r"workgroup of 96 threads is not a whole number of 64-lane waves"),
    "workgroup above 256 threads": (lambda: mfma_probe(F16, threads=512), r"workgroup of 512 threads: .*amdgpu-flat-work-group-size"),
    "LDS view lowered to a global pointer": (rocm_kernels.lds_view_read, r"accesses `v`, a view of shared memory \(LDS\).*lowers such a view to a global-memory pointer"),
}


OPCODE_LOOKUP = {"unknown opcode", "ambiguous mnemonic"}  # KeyError at T.amdgcn[...]
# ``ContractError.check`` of every case (a name of ``tvm_cdna4.errors.CHECKS``)
CHECK = {
    "operand count": "operands", "unknown parameter": "parameters",
    **dict.fromkeys(["cbsz on a single-block MFMA", "abid range", "cbsz range", "abid outside the broadcast group",
                     "blgp range", "blgp must be 0 for fp8", "fp64 negation bits range", "scaled op_sel",
                     "scaled format code"], "modifier range"),
    "scaled words vs format": "shape", "scaled byte tile of a sub-byte format": "dtype",
    "ds_read_tr16 into a scaled MFMA": "operand form", "scaled op_sel with scale bytes": "parameters",
    "scaled scale bytes as int8": "dtype", "scaled scale bytes not register aligned": "alignment",
    "scaled scale byte not static": "compile-time value", "scaled scale dtype": "dtype",
    **dict.fromkeys(["A element width", "bf16 MFMA given f16", "i8 MFMA given uint8", "accumulator dtype", "C dtype",
                     "ds_read_tr element width"], "dtype"),
    **dict.fromkeys(["A in shared memory", "D in shared memory", "ds_read_tr src in registers", "ds_read_tr dst in LDS"],
                    "storage scope"),
    "atom shape": "shape", "thread scope": "scope",
    **dict.fromkeys(["A owner map", "B owner map", "D owner map (transposed)", "C owner map", "multi-block A owner map",
                     "ds_read_tr dst owner map"], "owner map"),
    "registers not consecutive": "registers", "overlapping destination registers": "registers",
    **dict.fromkeys(["ds_read_tr unaligned base", "ds_read_tr unaligned row", "ds_read_tr6 16-byte alignment"],
                    "alignment"),
    "ds_read_tr chunk not contiguous": "provider map",
    **dict.fromkeys(["workgroup operands at wave scope", "ds_read_tr workgroup destination at wave scope",
                     "wave operands at workgroup scope", "wave operands over two waves at workgroup scope"], "scope"),
    "partially active wave (branch)": "wave-uniform control", "workgroup not whole waves": "whole waves",
    "workgroup above 256 threads": "workgroup size",
    "wave operands with a wave axis of 2 at workgroup scope": "wave count",
    "LDS view lowered to a global pointer": "LDS view",
}
WHOLE_KERNEL = {"partially active wave (branch)", "workgroup not whole waves", "workgroup above 256 threads",
                "LDS view lowered to a global pointer"}  # tvm_cdna4.build's whole-kernel rules


@pytest.mark.parametrize("case", list(CASES))
def test_contract_violation_is_refused(case):
    make, rule = CASES[case]
    if case in OPCODE_LOOKUP:  # T.amdgcn[...] while the kernel is written: no kernel to build
        with pytest.raises(KeyError, match=rule):
            make()
        return
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(make())
    first = _first_line(info.value)
    if case in WHOLE_KERNEL:  # a rule of the whole kernel may name no opcode
        assert re.search(rule, first), first
        return
    assert first.startswith(f"{info.value.opcode}: ") and re.search(rule, first), first


@pytest.mark.parametrize("case", [c for c in CASES if c not in OPCODE_LOOKUP])
def test_each_violation_names_its_rule_in_check(case):
    with pytest.raises(ContractError) as info:
        tvm_cdna4.build(CASES[case][0]())
    assert info.value.check == CHECK[case]
    assert info.value.check in tvm_cdna4.errors.CHECKS


def test_every_case_has_its_check():
    assert set(CHECK) == set(CASES) - OPCODE_LOOKUP


def _first_line(err) -> str:
    return str(err).splitlines()[0]  # the rule is the first line, not TIRx's wrapper


def test_at_least_thirty_distinct_violations():
    """Every case is refused with a message of its own: no two violations end in the same error."""
    messages = {}
    for case, (make, _) in CASES.items():
        try:
            tvm_cdna4.build(make())
        except (ContractError, KeyError) as err:
            messages[case] = _first_line(err) if isinstance(err, ContractError) else str(err.args[0])
    assert set(messages) == set(CASES), f"accepted: {sorted(set(CASES) - set(messages))}"
    same = {m: [c for c in CASES if messages[c] == m] for m in set(messages.values())}
    assert {m: cs for m, cs in same.items() if len(cs) > 1} == {}
    assert len(set(messages.values())) >= 30


@pytest.mark.parametrize("name", ["mfma_f32_16x16x32_f16", "mfma_f32_4x4x4f16", "mfma_f64_4x4x4f64", "mfma_scale_f32_16x16x128_f8f6f4"])
def test_the_canonical_probe_is_accepted(name):
    result = tvm_cdna4.build(mfma_probe(CATALOG[name]))
    assert CATALOG[name].mnemonic in result.asm


def test_scaled_mfma_takes_scale_bytes_one_op_sel_per_repeat(rng):
    """5 x 2 repeats, the scales uint8 byte tiles: repeat i's scale in byte i % 4 of register i // 4
    (A's fifth scale in a second register). The emulated product equals numpy's with each repeat's
    own scales, so every MFMA took its register and op_sel (an immediate per emitted MFMA)."""
    from tvm_cdna4.emulator import device_function

    rm, rn = 5, 2
    kernel = scaled_scale_bytes_probe(rm, rn)
    calls = []
    tvm_ffi.structural_walk(device_function(kernel).body, (Call, calls.append))
    mfma = [c for c in calls if c.op.name == "tirx.call_llvm_pure_intrin" and len(c.args) == 10]  # the scaled MFMAs
    assert sorted((int(c.args[6].value), int(c.args[8].value)) for c in mfma) == sorted(
        (mi % 4, ni % 4) for mi in range(rm) for ni in range(rn))
    a = rng.normal(size=(rm, 16, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(size=(rn, 128, 16)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(120, 135, (rm, 16, 4)).astype(np.uint8)  # (repeat, row, K block)
    sb = rng.integers(120, 135, (rn, 16, 4)).astype(np.uint8)
    lane = np.arange(64)
    row, kb = lane % 16, lane // 16
    words = lambda x, i: formats.to_words("fp8", np.ascontiguousarray(x[i]))  # noqa: E731 - (16, 32) words of rows
    X = np.concatenate([np.stack([words(a, i)[r, 8 * k : 8 * k + 8] for r, k in zip(row, kb)]) for i in range(rm)], 1)
    Y = np.concatenate([np.stack([words(b.transpose(0, 2, 1), i)[r, 8 * k : 8 * k + 8] for r, k in zip(row, kb)])
                        for i in range(rn)], 1)
    SX, SY = sa[:, row, kb].T.copy(), sb[:, row, kb].T.copy()
    D = np.zeros((64, rm * rn * 4), np.float32)
    emulate(kernel, X, Y, SX, SY, D)
    ld, _ = mfma_fragment(SCALED, "D", (rm, rn))
    for mi in range(rm):
        for ni in range(rn):
            scale_a = np.exp2(np.repeat(sa[mi].astype(np.float64) - 127, 32, axis=1))
            scale_b = np.exp2(np.repeat(sb[ni].astype(np.float64) - 127, 32, axis=1)).T
            want = (a[mi].astype(np.float64) * scale_a) @ (b[ni].astype(np.float64) * scale_b)
            got = np.zeros((16, 16))
            for l in lane:
                for r in range(4):
                    _, i, j = lanes.acc_owner(SCALED, l, r)
                    got[i, j] = D[l, (mi * rn + ni) * 4 + r]
            compare(f"D[{mi}, {ni}]", got, want, rtol=1e-5, atol=1e-5)


def test_scaled_mfma_takes_an_fp8_element_tile_next_to_packed_words(rng):
    """A as uint8 elements (lane ``row + 16 kb`` holds K ``32 kb ..`` in byte order), B as bf8 words:
    the emulated product equals numpy's, and the unit scales (127) stay the scaled instruction."""
    kernel = scaled_byte_tile_probe(cbsz=0, blgp=1)
    assert "v_mfma_scale_f32_16x16x128_f8f6f4" in tvm_cdna4.build(kernel).asm
    a = rng.normal(size=(16, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(size=(128, 16)).astype(ml_dtypes.float8_e5m2)
    lane = np.arange(64)
    X = np.stack([a[l % 16, 32 * (l // 16) : 32 * (l // 16) + 32] for l in lane]).view(np.uint8)
    words = formats.to_words("bf8", np.ascontiguousarray(b.T))  # (16 columns, 32 words)
    Y = np.stack([words[l % 16, 8 * (l // 16) : 8 * (l // 16) + 8] for l in lane])
    D = np.zeros((64, 4), np.float32)
    emulate(kernel, X, Y, D)
    got = np.zeros((16, 16))
    for l in lane:
        for r in range(4):
            _, i, j = lanes.acc_owner(SCALED, l, r)
            got[i, j] = D[l, r]
    want = a.astype(np.float64) @ b.astype(np.float64)
    compare("D", got, want, rtol=1e-6, atol=1e-6)
