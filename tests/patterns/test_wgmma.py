"""Hopper wgmma as a checked tile pattern: the owner maps against the forms and TIRx's counts,
the contracts (each violation a ContractError naming operand and rule), accepted kernels compiling for
sm_90a, and ``selftest --target sm90``."""

from collections import Counter

import pytest

from tvm_cdna4.errors import ContractError, presented
from tvm_cdna4.isa import hopper_layout as L
from tvm_cdna4.isa import wgmma_table as W


def test_accumulator_owner_map_matches_the_isa_and_tirx_counts():
    from tvm_tirx.backend.cuda.ptx.table import _wgmma_acc_lanes

    for n in (8, 16, 64, 256):
        shape = W.WgmmaShape(n, "bf16", "bf16")
        assert shape.acc_registers == _wgmma_acc_lanes({"shape": f"m64n{n}k16", "dtype": "f32"})
        owned = Counter(L.accumulator_coords(t, r) for t in range(128) for r in range(shape.acc_registers))
        assert set(owned) == {(i, j) for i in range(64) for j in range(n)} and set(owned.values()) == {1}
    # PTX ISA figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": T0 d0,d1 at
    # row 0 cols 0,1; d2,d3 at row 8; T5 (lane 5) d0 at row 1, col 2; warp 1 starts at row 16
    assert [L.accumulator_coords(0, r) for r in range(6)] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9)]
    assert L.accumulator_coords(5, 0) == (1, 2) and L.accumulator_coords(32, 0) == (16, 0) and L.accumulator_coords(127, 7) == (63, 15)


@pytest.mark.parametrize("atype", ["bf16", "e4m3"])
def test_rs_a_owner_map_covers_the_atom_once(atype):
    kind = W.KIND[atype]
    shape = W.WgmmaShape(8, atype, atype)
    assert shape.a_elements == 4 * kind.elems_per_register  # four 32-bit registers (TIRx's lanes=4)
    owned = Counter(L.a_fragment_coords(t, e, kind.bits) for t in range(128) for e in range(shape.a_elements))
    assert set(owned) == {(i, k) for i in range(64) for k in range(kind.k)} and set(owned.values()) == {1}
    # register 2 (elements 2p..3p-1) of lane 0: row 0, k = K/2 (the mma.m16n8k16 A fragment per warp)
    assert L.a_fragment_coords(0, 2 * kind.elems_per_register, kind.bits) == (0, kind.k // 2)
    assert L.a_fragment_coords(0, kind.elems_per_register, kind.bits) == (8, 0)


def test_parse_forms():
    assert W.parse("m64n128k16.f32.bf16.bf16").ptx == "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
    assert W.parse("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2").btype == "e5m2"
    for bad in ("m64n12k16.f32.bf16.bf16", "m64n16k32.f32.bf16.bf16", "m64n16k16.f16.f16.f16", "m64n16k16.f32.f16.bf16"):
        with pytest.raises(ValueError):
            W.parse(bad)


def _compile(**kw):
    from tvm_cdna4.cuda.build import compile_blobs
    from tvm_cdna4.probes_wgmma import probe

    with presented():
        return compile_blobs(probe(**kw), "sm_90a")["source"].decode()


@pytest.mark.parametrize("kw", [
    dict(atype="bf16", swizzle=0), dict(atype="bf16", swizzle=32, k_repeats=1), dict(atype="e4m3", swizzle=64, k_repeats=2),
    dict(atype="f16", n=64, a_major="mn", b_major="mn", swizzle=128, k_repeats=1),
    dict(atype="bf16", a_major="mn", b_major="mn", swizzle=0), dict(atype="e5m2", form="rs"),
], ids=["k-none", "k-32B", "fp8-k-64B", "mn-128B", "mn-none", "e5m2-rs"])
def test_accepted_kernels_compile_for_sm90a(kw):
    source = _compile(**kw)
    shape = W.WgmmaShape(kw.get("n", 16), kw["atype"], kw["atype"])
    assert source.count(f"{shape.ptx} ") == 1 and "wgmma.fence.sync.aligned" in source
    assert "wgmma.commit_group.sync.aligned" in source


def _swizzle_for_fp8_units():
    from tvm_tirx.tirx.layout import ComposeLayout

    from tvm_cdna4.probes_wgmma import shared_layout

    return ComposeLayout(4, 3, 3, shared_layout(64, 16, 4, 16, 128).tile_layout)


@pytest.mark.parametrize("kw, check, operand", [
    (dict(atype="bf16", overrides={"scope": "warp"}), "scope", None),
    (dict(atype="bf16", overrides={"threads": 96}), "scope", None),
    (dict(atype="bf16", overrides={"A.layout": "fp8-units"}), "swizzle", "A"),
    (dict(atype="bf16", overrides={"B.align": 64}), "alignment", "B"),
    (dict(atype="bf16", overrides={"D.dtype": "float16"}), "dtype", "D"),
    (dict(atype="e4m3", overrides={"params": {"scale_d": False, "b_major": "mn"}}), "major", "B"),
    (dict(atype="bf16", overrides={"params": {"scale_d": False, "b_major": "mn"}}), "layout", "B"),
    (dict(atype="bf16", form="rs", overrides={"A.layout": "fp8-fragment"}), "owner map", "A"),
    (dict(atype="f16", n=64, swizzle=64, k_repeats=2, a_major="mn", b_major="mn",
          overrides={"B.layout": "aliasing-mn"}), "layout", "B"),
    (dict(atype="bf16", overrides={"final_wait": 1}), "accumulator wait", "acc_raw"),
    (dict(atype="bf16", overrides={"params": {"scale_d": False, "hoist": "yes"}}), "parameters", None),
], ids=["scope", "threads", "swizzle", "misaligned", "acc-dtype", "fp8-mn-major", "declared-major", "rs-a-layout", "aliasing-mn",
        "read-before-wait", "hoist-not-a-bool"])
def test_contract_violations_are_refused(kw, check, operand):
    from tvm_cdna4.probes_wgmma import a_register_layout

    o = kw.get("overrides", {})
    if o.get("A.layout") == "fp8-units":
        o["A.layout"] = _swizzle_for_fp8_units()
    elif o.get("B.layout") == "aliasing-mn":  # K rows 8.. and N 32.. both 8 rows of 64 B on: LBO == SBO
        from tvm_tirx.tirx.layout import ComposeLayout, S, TileLayout

        o["B.layout"] = ComposeLayout(3, 2, 3, TileLayout(S[(1, 2, 2, 32, 16):(1, 16 * 64, 256, 1, 32)]))
    elif o.get("A.layout") == "fp8-fragment":
        o["A.layout"] = a_register_layout(W.KIND["e4m3"], (1, 4))
    with pytest.raises(ContractError) as info:
        _compile(**kw)
    assert info.value.check == check and info.value.operand == operand
    assert "wgmma" in info.value.sentence


def test_a_region_start_the_analyzer_cannot_bound_is_refused_and_a_clamped_one_accepted():
    """A shared operand's region starting at a counter held in a local (a ring's carried stage): the bounds check
    cannot prove it in range and says so (no silent skip); clamped to the last index (the sm90 attention's
    ``operand_stage``), the region is proven in bounds and the kernel compiles."""
    from tvm_tirx.script import tirx as T

    with pytest.raises(ContractError) as info:
        _compile(atype="bf16", overrides={"B.start": lambda c: T.Cast("int32", c)})
    assert info.value.check == "shape" and info.value.operand == "B"
    # one sentence naming the operand once (it read "operand B: operand B: B: region ..."), the residue apart
    assert info.value.sentence.endswith(": operand B: region exceeds tensor shape")
    assert info.value.proof.startswith("cannot prove ") and str(info.value).count("operand B") == 1
    source = _compile(atype="bf16", overrides={"B.start": lambda c: T.Cast("int32", T.min(c, T.uint32(0)))})
    assert source.count("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 ") == 1


def test_selftest_sm90_one_line_per_form(capsys):
    from tvm_cdna4.selftest import main

    assert main(["bf16_ss", "e4m3_rs"], target="sm90") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bf16_ss") and out[0].endswith("OK") and out[1].startswith("e4m3_rs")
    assert main(["bf17_ss"], target="sm90") == 2


@pytest.mark.parametrize("kw", [
    dict(atype="bf16", swizzle=0), dict(atype="bf16", swizzle=128), dict(atype="e4m3", swizzle=64, k_repeats=2),
    dict(atype="f16", n=64, a_major="mn", b_major="mn", swizzle=128, k_repeats=2), dict(atype="bf16", form="rs"),
], ids=["k-none", "k-128B", "fp8-k-64B", "mn-128B", "bf16-rs"])
def test_hoisted_descriptors_compute_the_same_product(kw):
    """``hoist=True`` (the descriptor's low word a hoisted base plus the atom's offset) gives D bit for bit as the
    default descriptor, in the emulator, over the k-repeats of each canonical family and swizzle; its CUDA C
    masks the start field once, on the tile's base."""
    import numpy as np

    default, hoisted = (_emulated_product(kw, hoist) for hoist in (False, True))
    assert masked_starts(hoisted[0]) == {"0"}  # each instruction adds a constant to the masked start of element 0
    assert np.isfinite(default[1]).all() and np.abs(default[1]).max() > 0
    np.testing.assert_array_equal(hoisted[1], default[1])


@pytest.mark.parametrize("swizzle, origin", [(0, 64), (128, 512)], ids=["k-none", "k-128B"])
def test_hoisted_descriptors_start_at_a_layout_with_an_offset(swizzle, origin):
    """B's layout with an origin (a TileLayout's ``+ offset``: element 0 at ``origin`` elements, one swizzle period
    at 128 B): the hoisted base is the data's start, the origin counted once (in the atom's offset), as the
    default's address (before: counted twice, the emulator refused the read past B's tile)."""
    import numpy as np
    from tvm_tirx.tirx.layout import ComposeLayout, TileLayout

    from tvm_cdna4.probes_wgmma import shared_layout

    layout = shared_layout(16, 16, 4, 16, swizzle)
    tile = layout.tile_layout if swizzle else layout
    moved = TileLayout.from_iters(shard=tile.shard, replica=tile.replica, offset={"m": origin})
    if swizzle:
        moved = ComposeLayout(int(layout.per_element), int(layout.swizzle_len), int(layout.atom_len), moved)
    kw = dict(atype="bf16", swizzle=swizzle)
    default, hoisted = (_emulated_product(kw, hoist, {"B.layout": moved}) for hoist in (False, True))
    assert np.isfinite(default[1]).all() and np.abs(default[1]).max() > 0
    np.testing.assert_array_equal(hoisted[1], default[1])


def _emulated_product(kw, hoist, overrides=None):
    """(the probe kernel of ``kw`` with ``hoist``, its D in the emulator) over finite random A and B (seed 0)."""
    import numpy as np

    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.probes_wgmma import probe

    majors = {f"{x}_major": kw[f"{x}_major"] for x in "ab" if kw.get(f"{x}_major", "k") != "k"}
    rng = np.random.default_rng(0)
    params = {"scale_d": False, **majors, **({"hoist": True} if hoist else {})}
    kernel = probe(**kw, overrides={"params": params, **(overrides or {})})
    a, b, d = (p.ty for p in kernel.params)
    args = [rng.integers(0, 2 ** 16, tuple(int(x) for x in t.shape)).astype(str(t.dtype)) for t in (a, b)]
    if kw["atype"] == "e4m3":  # finite e4m3 bytes (no NaN 0x7f / 0xff)
        args = [x & np.uint8(0x77) for x in args]
    else:  # finite 16-bit values of modest exponent
        args = [(x & np.uint16(0x83FF)) | np.uint16(0x3800) for x in args]
    out = np.zeros(tuple(int(x) for x in d.shape), np.float32)
    emulate(kernel, *args, out, target="sm90")
    return kernel, out


def masked_starts(kernel) -> set:
    """The shared elements whose address the kernel's CUDA C masks into a descriptor's start field."""
    import re

    from tvm_cdna4.cuda.build import compile_blobs

    with presented():
        source = compile_blobs(kernel, "sm_90a")["source"].decode()
    return set(re.findall(r"to_shared\(\(&\(\w+\[(\w+)\]\)\)\) >> \(uint\)4\) & \(uint\)16383", source))


def _launched_by_launch_thread():
    """The docs/patterns.md first wgmma kernel with the gfx950 tutorial's launch (``T.launch_thread``)
    in place of a ``T.cuda.LaunchConfig``: TIRx leaves the pattern's ``T.cuda.thread_in_warpgroup()``
    unresolved there ("Unresolved call" in codegen, "not emulated" in the emulator, before stop 54)."""
    from tvm_tirx.script import tirx as T

    from tvm_cdna4.probes_wgmma import acc_layout, shared_layout

    sa_layout, sb_layout, d_layout = shared_layout(64, 16, 4, 16), shared_layout(16, 16, 4, 16), acc_layout(16)

    @T.function
    def kernel(A: T.Tensor((64, 64), "float16"), B: T.Tensor((16, 64), "float16"), D: T.Tensor((64, 16), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            SA = T.alloc_shared((1, 4, 64, 16), "float16", align=1024, layout=sa_layout)
            SB = T.alloc_shared((1, 4, 16, 16), "float16", align=1024, layout=sb_layout)
            for q in T.serial(32):
                SA[0, (q * 128 + tx) % 64 // 16, (q * 128 + tx) // 64, tx % 16] = A[(q * 128 + tx) // 64, tx % 64]
            for q in T.serial(8):
                SB[0, (q * 128 + tx) % 64 // 16, (q * 128 + tx) // 64, tx % 16] = B[(q * 128 + tx) // 64, tx % 64]
            T.cuda.cta_sync()
            acc = T.alloc_local((8,), "float32")
            Df = T.decl_tensor(T.address_of(acc[0]), ty_args=[T.Tensor((1, 1, 64, 16), "float32", scope="local",
                                                                       layout=d_layout)])
            T.sm90.tile.apply(T.wgmma["m64n16k16.f32.f16.f16"], Df, SA, SB, scope="warpgroup", wait=0)
            for r in T.unroll(8):
                D[L.accumulator_coords(tx, r)] = acc[r]

    return kernel


def test_a_launch_without_a_launch_config_is_a_scope_error_naming_the_fix():
    import numpy as np

    from tvm_cdna4.cuda.build import compile_blobs
    from tvm_cdna4.emulator import emulate

    kernel = _launched_by_launch_thread()
    with pytest.raises(ContractError) as built, presented():
        compile_blobs(kernel, "sm_90a")
    arrays = (np.zeros((64, 64), np.float16), np.zeros((16, 64), np.float16), np.zeros((64, 16), np.float32))
    with pytest.raises(ContractError) as emulated:
        emulate(kernel, *arrays, target="sm90")
    for error in (built.value, emulated.value):
        assert error.check == "scope" and error.opcode == "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16"
        assert error.expected == "T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...))"
        assert error.found == "a launch without a LaunchConfig (T.launch_thread)"
        assert "T.cuda.thread_in_warpgroup()" in error.suggestion


@pytest.mark.parametrize("args, operand, expected, found, suggestion", [
    ((64, 16, 2, 16), "k * k_repeats", 64, "16 * 2 = 32", "k_repeats=4"),
    ((64, 32, 1, 8, 64), "k * k_repeats", 64, "32 * 1 = 32", "k_repeats=2"),
    ((48, 16, 1, 16, 128, "mn"), "rows", "a multiple of 64", 48, None),
], ids=["f16-128B", "fp8-64B", "mn-rows"])
def test_a_shared_layout_of_the_wrong_width_is_a_contract_error(args, operand, expected, found, suggestion):
    from tvm_cdna4.probes_wgmma import shared_layout

    with pytest.raises(ContractError) as caught:
        shared_layout(*args)
    error = caught.value
    assert (error.check, error.operand, error.expected, error.found) == ("shape", operand, expected, found)
    assert error.suggestion == suggestion
