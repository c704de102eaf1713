"""The fused residual read spread over the mainloop (``Sm90Config.residual_read`` ``"sliced"`` and ``"prefetch"``,
``kernels/sm90/gemm_residual.py``): the schedule of the pieces, the plan's rules, the emitted loads and prefetches,
and the kernels in the CUDA emulator (which checks every access and each mbarrier's transaction count)."""

from __future__ import annotations

import operator

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_residual as R
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]
ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


def _plan(M, N, K, cfg, fusion=Fusion(residual=True), out="bf16"):
    return gemm.plan(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, sms=132)


@pytest.mark.slow  # 'sliced' is not the cost model's residual read
def test_the_emulator_validates_sliced_residual_loads_with_every_epilogue_step():
    # two consumers, 12 k-tiles (the window: k-tiles 6 and 7), an 80-column tile: one 64-column block and a
    # 16-column tail (32-byte swizzle), 8 rows a box: 16 boxes a warpgroup, 8 at each step; M = 66 leaves the
    # second warpgroup two rows, its other boxes zero-filled past M
    p = _plan(66, 80, 768, Sm90Config(128, 80, 2, 2, ctas=1, epilogue="tma", residual_read="sliced",
                                      activation_form="tanh"), ALL)
    assert R.slice_window(p) == (6, 2) and R.slice_boxes(p) == 16
    v = gemm.validate(GemmProblem(66, 80, 768, "bf16", "nt", "bf16", ALL), "sm90", p.config)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0


def test_the_emulator_validates_the_l2_prefetch_with_the_register_epilogue():
    # one consumer, stores from registers (f32 C), four tiles on one CTA; 10 k-tiles: the producer prefetches
    # 13-row boxes at k-tiles 5..9 (the last one reaching past the tile and past M: TMA skips what is outside)
    problem = GemmProblem(77, 48, 640, "bf16", "nt", "f32", Fusion(residual=True, bias=True))
    cfg = Sm90Config(64, 32, 3, 1, ctas=1, residual_read="prefetch")
    p = gemm.plan(problem, "sm90", cfg, sms=132)
    assert R.prefetch_window(p) == (5, 5) and R.prefetch_rows(p) == 13 and R.prefetch_box(p) == (32, 13)
    v = gemm.validate(problem, "sm90", cfg)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)"


@pytest.mark.slow  # the sliced schedule is covered above; this adds one consumer and an unswizzled 8-column tail
def test_the_emulator_validates_sliced_loads_of_one_consumer_with_an_unswizzled_tail():
    problem = GemmProblem(40, 104, 768, "f16", "nt", "f16", Fusion(residual=True))  # two column tiles, the second ragged
    v = gemm.validate(problem, "sm90", Sm90Config(64, 72, 3, 1, ctas=1, epilogue="tma", residual_read="sliced"))
    assert v.ok and v.ratio <= 1.0


@pytest.mark.slow  # the prefetch is covered above; this adds the ping-pong schedule and the TMA epilogue
def test_the_emulator_validates_the_prefetch_with_ping_pong_and_tma_stores():
    problem = GemmProblem(130, 64, 256, "bf16", "nt", "bf16", ALL)
    v = gemm.validate(problem, "sm90", Sm90Config(128, 64, 2, 2, ctas=1, schedule="pingpong", epilogue="tma",
                                                  residual_read="prefetch"))
    assert v.ok and v.ratio <= 1.0


@pytest.mark.parametrize("N, K", [(4096, 4096), (4096, 1024), (200, 4096), (56, 64)])
def test_every_sliced_box_is_issued_once_evenly_over_the_window(N, K):
    c = Sm90Config(128, 256 if N > 200 else 96 if N == 200 else 56, 3, 2, epilogue="tma", residual_read="sliced")
    p = _plan(4096, N, K, c)
    start, steps = R.slice_window(p)
    issued = [R.slice_range(p, kt, operator.floordiv) for kt in range(start, start + steps)]
    assert issued[0][0] == 0 and issued[-1][1] == R.slice_boxes(p)
    assert all(a[1] == b[0] for a, b in zip(issued, issued[1:]))  # contiguous: each box once
    per = [hi - lo for lo, hi in issued]
    assert max(per) - min(per) <= 1  # spread evenly
    assert start + steps <= max(p.slice_tiles - R.SLICE_LEAD, start + 1)  # the last box SLICE_LEAD k-tiles early
    if (N, K) == (4096, 4096):  # the case: k-tiles 32..59, 32 boxes of 1 KB a warpgroup, 1 or 2 a k-tile
        assert (start, steps, R.slice_boxes(p), max(per)) == (32, 28, 32, 2)


def test_the_prefetch_covers_the_tile_s_rows_over_the_second_half_of_its_loads():
    p = _plan(4096, 4096, 4096, Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="prefetch"))
    start, steps = R.prefetch_window(p)
    assert (start, steps, R.prefetch_rows(p), R.prefetch_box(p)) == (32, 32, 4, (256, 4))
    assert steps * R.prefetch_rows(p) >= 128


def test_the_sliced_kernel_loads_8_row_boxes_and_the_prefetch_kernel_its_own_map():
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    sliced = _plan(300, 160, 1024, Sm90Config(128, 160, 2, 2, epilogue="tma", residual_read="sliced"))
    src = gemm_emit.signature_source(sliced)
    # the residual's boxes 64 columns x 8 rows, 128-byte swizzled; its tail map's 32 columns x 8 rows, 64-byte
    assert "T.cuda.tensormap_encode_tiled(mapresidual, residual.ptr_to([0, 0]), 160, 300, 320, 64, 8, 1, 1" in src
    assert "T.cuda.tensormap_encode_tiled(mapresidualTail, residual.ptr_to([0, 0]), 160, 300, 320, 32, 8, 1, 1" in src
    text = device_function(gemm_emit.emit(sliced), "sm90").script()
    assert text.count("address_of(mapresidual)") == 1 and text.count("address_of(mapresidualTail)") == 1
    assert "mapresidualL2" not in src and '"prefetch", "tensor"' not in text
    pre = _plan(300, 160, 1024, Sm90Config(128, 160, 2, 2, epilogue="tma", residual_read="prefetch"))
    src = gemm_emit.signature_source(pre)
    assert "tensormap_encode_tiled(mapresidualL2, residual.ptr_to([0, 0]), 160, 300, 320, 160, 16, 1, 1" in src
    assert "swizzle=0" in src.split("mapresidualL2, ")[1].split("\n")[0]
    assert "mapC, mapresidualL2, mapCTail" in src  # after C's map, before the tail maps (gemm_residual.prefetch_map)
    text = device_function(gemm_emit.emit(pre), "sm90").script()
    # one prefetch in the producer's k-loop: 16-row boxes (128 rows over k-tiles 8..15) of the tile's 160 columns
    assert text.count('"prefetch", "tensor", "2d", "L2", "global", "tile"') == 1 and "address_of(mapresidual)" not in text
    assert "T.address_of(mapresidualL2), ty=T.Ptr(T.void)), T.int32(0), T.cuda.block_idx(\"x\") * 128 + kt * 16 - 128" in text
    assert gemm_emit.barriers(pre) == 2 * 2 and gemm_emit.barriers(sliced) == 2 * 2 + 2


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(128, 256, 4, 2, residual_read="sliced"), "residual_read='sliced', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, residual_read="sliced"), "residual_read='sliced', epilogue='tma', epilogue_tile=64, schedule='cooperative', split_k=1"),
    (Sm90Config(128, 128, 4, 2, schedule="pingpong", epilogue="tma", residual_read="sliced"), "residual_read='sliced', epilogue='tma', epilogue_tile=0, schedule='pingpong', split_k=1"),
    (Sm90Config(128, 256, 3, 2, split_k=2, residual_read="prefetch"), "residual_read='prefetch', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=2"),
])
def test_a_spread_read_the_kernel_cannot_do_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError, match="config residual_read: how a fused residual is read") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "residual_read" and e.value.check == "parameters" and e.value.found == found


def test_the_prefetch_needs_a_residual_whole_16_byte_rows_and_an_unswapped_kernel():
    cfg = Sm90Config(128, 128, 3, 2, residual_read="prefetch")
    with pytest.raises(ContractError, match="'prefetch' loads the fused residual") as e:
        _plan(256, 256, 64, cfg, Fusion(bias=True))
    assert e.value.operand == "residual_read"
    with pytest.raises(ContractError, match="'prefetch' reads the residual through a tensor map") as e:
        _plan(256, 100, 64, cfg, out="f32")
    assert (e.value.operand, e.value.check, e.value.found) == ("residual_read", "alignment", "residual_read='prefetch', N = 100")
    with pytest.raises(ContractError, match="config swap_ab") as e:
        Sm90Config(128, 80, 3, 2, swap_ab=True, residual_read="prefetch").check(H100.smem_per_unit)
    assert e.value.operand == "swap_ab"
    grouped = GemmProblem(None, 128, 64, "bf16", "nt", "bf16", Fusion(residual=True), groups=4)
    with pytest.raises(ContractError, match="grouped GEMM config residual_read") as e:
        gemm.plan(grouped, "sm90", Sm90Config(128, 64, 2, 2, epilogue="tma", residual_read="sliced"), m=64)
    assert e.value.found == "'sliced'"


@pytest.mark.parametrize("read", ["sliced", "prefetch"])
def test_the_choice_of_a_spread_read_is_one_line_and_plans_where_a_staged_read_did(monkeypatch, read):
    # RESIDUAL_CHOICE is what the cost model's configs take where a staged read is allowed: flipping it to either
    # spread read plans the 4096^3 case with it and leaves the f32 C (stores from registers) and odd N on 'global'
    from tvm_cdna4.kernels.sm90 import gemm_plan

    monkeypatch.setattr(gemm_plan, "RESIDUAL_CHOICE", read)

    def chosen(N, out):
        return gemm.plan(GemmProblem(4096, N, 4096, "bf16", "nt", out, Fusion(residual=True)), "sm90", sms=132).config
    assert (chosen(4096, "bf16").residual_read, chosen(4096, "bf16").epilogue) == (read, "tma")
    assert chosen(4096, "f32").residual_read == chosen(4100, "bf16").residual_read == "global"


def test_the_cost_model_keeps_its_residual_read_and_a_config_keeps_its_own():
    from tvm_cdna4.kernels.sm90.gemm_plan import RESIDUAL_CHOICE, epilogue_choices

    fused = gemm.plan(GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16", Fusion(residual=True)), "sm90", sms=132)
    assert fused.config.residual_read == RESIDUAL_CHOICE == "global"  # the fastest read timed (stop 50, 4096^3)
    own = Sm90Config(128, 256, 3, 2, epilogue="tma", residual_read="sliced")
    assert epilogue_choices(own, Fusion(residual=True), "bf16").residual_read == "sliced"


def test_the_prefetch_map_of_an_f32_residual_strides_whole_f32_rows():
    # the residual has C's dtype: an f32 row of 48 columns is 192 bytes (cuTensorMapEncodeTiled: globalStrides[0]
    # spans globalDim[0] elements); 96 made the driver refuse the map or the prefetch fetch other rows' lines
    from tvm_cdna4.kernels.sm90.gemm_emit import signature_source
    f32 = gemm.plan(GemmProblem(77, 48, 640, "bf16", "nt", "f32", Fusion(residual=True)), "sm90",
                    Sm90Config(64, 32, 3, 1, ctas=1, residual_read="prefetch"), sms=132)
    bf16 = _plan(77, 48, 640, Sm90Config(64, 32, 3, 1, ctas=1, residual_read="prefetch"))
    line = [s for s in signature_source(f32).splitlines() if "encode_tiled(mapresidualL2" in s][0]
    assert "48, 77, 192, 32, 13," in line and "'float32'" in line
    assert "48, 77, 96, 32, 13," in [s for s in signature_source(bf16).splitlines() if "(mapresidualL2" in s][0]
