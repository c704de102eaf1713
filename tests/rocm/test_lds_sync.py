"""The compile-time LDS synchronization check (tvm_cdna4.rocm.lds_sync): missing barriers and waits
refused on tvm_cdna4.build and tvm_tirx.tirx.compile, with both statements (a ds_read_tr as the
T.rocm.tile.apply written), the buffer and the fix; every LDS access of the catalog and the helpers
seen (f16, bf16 and 8-bit ds_read_tr, direct-to-LDS loads); T.rocm.wave_id() and blockIdx-dependent
trip counts evaluated; the package's GEMMs, double and triple buffering and direct-to-LDS pipelines
accepted; what it cannot decide a WARNING, or with check="strict" a ContractError.
docs/patterns.md ("LDS synchronization tests") lists what each test catches."""

import logging
import re

import numpy as np
import pytest
import tvm_tirx

import dma_kernels as DMA
import lds_sync_kernels as L
import rocm_kernels as R
import tvm_cdna4
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.isa.llvm_helpers import bf16_tr_helper, helpers_ll
from tvm_cdna4.rocm import lds_sync
from tvm_cdna4.kernels.gfx950.gemm import build_grouped, gfx950_gemm
from tvm_cdna4.kernels.gfx950.gemm_plan import Gfx950GemmConfig
from tvm_cdna4.kernels.gfx950.mx_gemm import gfx950_mx_gemm
from tvm_cdna4.rocm.build import LDS_CHECK_ENV

GFX950 = {"kind": "rocm", "mcpu": "gfx950"}
FIX = r"Suggestion: order them with T\.rocm\.workgroup_barrier\(\) \(s_waitcnt lgkmcnt\(0\), then s_barrier\)"
ROUTES = {"build": tvm_cdna4.build, "tirx.compile": lambda k: tvm_tirx.tirx.compile(k, target=GFX950)}
UNDECIDED = "is left to the emulator"
TR_OPS = [op.name for op in CATALOG.values() if op.kind == "ds_read_tr"]
LOWERED = ("llvm.amdgcn", "mbcnt", "call_extern", "tvm_cdna4_")  # never quoted: the statement as written is


@pytest.fixture
def undecided(caplog):
    caplog.set_level(logging.DEBUG, logger=lds_sync.logger.name)
    return lambda: [r.getMessage() for r in caplog.records if UNDECIDED in r.getMessage()]


def _quoted(error) -> str:
    """The statements an error quotes (what is between backquotes)."""
    return " ".join(re.findall(r"`[^`]*`", str(error)))


# ---- plain LDS loads and stores -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("stages", [2, 3], ids=["double", "triple"])
def test_the_buffered_gemm_is_exact_and_accepted_on_both_routes(stages, dtype, undecided, rng):
    import ml_dtypes

    np_dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    a = rng.integers(-2, 3, (64, 32 * 5)).astype(np_dtype)
    b = rng.integers(-2, 3, (32 * 5, 16)).astype(np_dtype)
    d = np.zeros((64, 16), np.float32)
    emulate(L.double_buffered_gemm(5, stages=stages, dtype=dtype), a, b, d)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32))
    for route in ROUTES.values():
        route(L.double_buffered_gemm(5, stages=stages, dtype=dtype))
    assert undecided() == []  # decided, not skipped


A_LOAD = r"A\[\(tx & 63\) \* 128 \+ \(tx >> 6\) \* 8\]"
WRITE = rf"`SA\[\(tx & 63\) \* 32 \+ \(tx >> 6\) \* 8\] = ({A_LOAD}|T\.reinterpret\({A_LOAD}, ty=T\.int16\))`"
READ = r"`ra\[0\] = SA\[(\(kt & 1\)|T\.truncmod\(kt, 3\)) \* 2048 \+ \(tx >> 6\) \* 512 \+ \(tx & 15\) \* 32 \+ \(\(tx & 63\) >> 4\) \* 8\]`"
MISSING = {
    "after the prologue stores": (dict(prologue_barrier=False), rf"wave 1 wrote it in {WRITE} and wave 0 reads it in {READ} \(kt = 0\)"),
    "at the end of a K step": (dict(step_barrier=False), rf"wave 1 read it in {READ} \(kt = 0\) and wave 0 writes it in `SA\[.*\(kt = 1\)"),
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("stages", [2, 3], ids=["double", "triple"])
@pytest.mark.parametrize("missing", list(MISSING))
def test_a_missing_barrier_is_refused_at_compile_time(missing, stages, dtype, route):
    change, message = MISSING[missing]
    with pytest.raises(ContractError, match=rf"^operand SA: LDS race on byte \d+: {message}, with no barrier ordering the two\. {FIX}") as info:
        ROUTES[route](L.double_buffered_gemm(4, stages=stages, dtype=dtype, **change))
    assert (info.value.check, info.value.operand) == ("LDS synchronization", "SA")


REFUSED = {
    "no barrier": (lambda: R.lds_exchange(barrier=False), r"wave 1 wrote it in `S\[tx\] = A\[tx\]` and wave 0 reads it in `B\[tx\] = S\["),
    "s_barrier without a wait": (R.lds_exchange_s_barrier, r"wave 1 wrote it in `S\[tx\] = A\[tx\]`"),
    "direct-to-LDS wait after the barrier": (lambda: DMA.dma_copy(waves=2, read_other_wave=True, wait_after_barrier=True),
                                             r"wave 1 wrote it in `T\.rocm\.buffer_load_lds\(X\.data, 2048, .*, 0, S\[\(tx >> 6\) \* 256\], 16\)`"),
    "direct-to-LDS vmcnt too high": (lambda: DMA.dma_pipeline(vmcnt=2),
                                     r"wave 1 wrote it in `T\.rocm\.buffer_load_lds\(.*\)` and wave 0 reads it in `acc\[0\] = .*` \(k = 0\)"),
    "no barrier after the reads": (lambda: DMA.dma_pipeline(barrier_after_reads=False),
                                   r"wave 1 read it in .*\(k = 0\) and wave 0 writes it in `T\.rocm\.buffer_load_lds\(.*\(k = 1\)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_seeded_races_are_refused(case):
    make, message = REFUSED[case]
    with pytest.raises(ContractError, match=rf"^operand S: LDS race on byte \d+: {message}") as info:
        tvm_cdna4.build(make())
    assert info.value.check == "LDS synchronization"
    assert not any(word in _quoted(info.value) for word in LOWERED)


def test_a_wave_reading_its_own_load_in_flight_is_refused():
    with pytest.raises(ContractError, match=r"^operand S: wave 0 reads byte 0 in `D\[tx \* 4\] = S\[tx \* 4\]` while its own "
                       r"direct-to-LDS load `T\.rocm\.buffer_load_lds\(X\.data, 1024, .*, 0, S\[0\], 16\)` into it is still in flight\. "
                       r"Suggestion: wait for the load first"):
        tvm_cdna4.build(DMA.dma_copy(wait=False))


@pytest.mark.parametrize("make", [R.lds_exchange, lambda: R.lds_exchange_s_barrier(wait=0), DMA.dma_pipeline,
                                  lambda: DMA.dma_copy(waves=2, read_other_wave=True), R.tr_operand_then_mfma,
                                  lambda: R.tr_operand_then_mfma("ds_read_tr16_b64_v4bf16", "mfma_f32_32x32x16_bf16",
                                                                 "bfloat16")],
                         ids=["workgroup_barrier", "lgkmcnt(0) + s_barrier", "direct-to-LDS pipeline", "dma copy",
                              "ds_read_tr operand f16", "ds_read_tr operand bf16"])
def test_synchronized_kernels_are_accepted(make, undecided):
    tvm_cdna4.build(make())
    assert undecided() == []


# ---- ds_read_tr: every opcode, f16 and bf16 alike ---------------------------------------------

def _apply(opcode: str, *operands: str, **params: str) -> str:
    """The regex of ``T.rocm.tile.apply(T.amdgcn["opcode"], operands..., scope="wave", params...)`` as written."""
    parts = [rf'T\.amdgcn\["{opcode}"\]', *(re.escape(x) for x in operands), 'scope="wave"',
             *(f'{k}="{v}"' for k, v in params.items())]
    return r"T\.rocm\.tile\.apply\(" + ", ".join(parts) + r"\)"


OPERAND_READ = {
    "f16": _apply("ds_read_tr16_b64_v4f16", "Bf[0:16, 0:32]", "SB[0:32, 0:16]", mfma="mfma_f32_16x16x32_f16", operand="B"),
    "bf16": _apply("ds_read_tr16_b64_v4bf16", "Bf[0:16, 0:32]", "SB[0:32, 0:16]", mfma="mfma_f32_16x16x32_bf16", operand="B"),
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("sync", ["none", "s_barrier"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_ds_read_tr_of_another_waves_store_needs_a_workgroup_barrier(dtype, sync, route):
    """Issue 35: two waves each store half of a 32 x 16 tile, each reads all of it by the operand form."""
    with pytest.raises(ContractError, match=rf"^operand SB: LDS race on byte \d+: wave 1 wrote it in `SB\[tx \* 4\] = .*` "
                       rf"and wave 0 reads it in `{OPERAND_READ[dtype]}`, with no barrier ordering the two\. {FIX}") as info:
        ROUTES[route](L.tr_operand_exchange(dtype, sync))
    assert info.value.check == "LDS synchronization"
    assert not any(word in _quoted(info.value) for word in LOWERED)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_ds_read_tr_after_a_workgroup_barrier_is_accepted(dtype, undecided):
    tvm_cdna4.build(L.tr_operand_exchange(dtype))
    assert undecided() == []


def _tile_regions(opcode: str) -> tuple[str, str]:
    """The dst and src regions of ``L.tr_tile_exchange(opcode)`` as printed: ``(1, *atom)`` each."""
    op = CATALOG[opcode]
    if op.element_bits < 8:
        dst, src = (4, 16, op.load_bits // 32), (4, 16, op.load_bits // 8)
    else:
        dst = src = (4, op.elements, 16)
    return tuple(f"{name}[0, " + ", ".join(f"0:{n}" for n in atom) + "]" for name, atom in (("Df", dst), ("S", src)))


@pytest.mark.parametrize("opcode", TR_OPS)
def test_every_ds_read_tr_opcode_is_seen(opcode, undecided):
    """The tile form of each of the 6 catalog opcodes (intrinsic or bf16 helper): a read of the other
    wave's half without a barrier is refused, quoting the tile.apply; with one, accepted and decided."""
    with pytest.raises(ContractError, match=rf"^operand S: LDS race on byte \d+: wave 1 wrote it in `S\[.*` \(q = 0\) and "
                       rf"wave 0 reads it in `{_apply(opcode, *_tile_regions(opcode))}`"):
        tvm_cdna4.build(L.tr_tile_exchange(opcode, "none"))
    tvm_cdna4.build(L.tr_tile_exchange(opcode))
    assert undecided() == []


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_direct_to_lds_load_read_by_ds_read_tr_needs_its_vmcnt_wait(dtype, undecided):
    with pytest.raises(ContractError, match=r"^operand SB: LDS race on byte \d+: wave 1 wrote it in "
                       rf"`T\.rocm\.buffer_load_lds\(B\.data, 1024, .*, 0, SB\[.*\], 4\)` and wave 0 reads it in `{OPERAND_READ[dtype]}`"):
        tvm_cdna4.build(L.tr_operand_exchange(dtype, dma=True, wait=False))
    tvm_cdna4.build(L.tr_operand_exchange(dtype, dma=True))
    assert undecided() == []


# ---- wave_id(), blockIdx ------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, destination", [("wave_id", r"S\[T\.rocm\.wave_id\(\) \* 64\]"),
                                                   ("tx", r"S\[\(tx >> 6\) \* 64\]")])
def test_a_direct_to_lds_load_is_checked_whatever_spells_the_wave(spelling, destination, undecided):
    """Issue 35: ``w = T.rocm.wave_id()`` (readfirstlane of workitem.id.x // 64) is evaluated like ``tx // 64 % 2``."""
    with pytest.raises(ContractError, match=r"^operand S: LDS race on byte 256: wave 1 wrote it in "
                       rf"`T\.rocm\.buffer_load_lds\(X\.data, 512, tx \* 4, 0, {destination}, 4\)` and wave 0 reads it"):
        tvm_cdna4.build(L.dma_by_wave(spelling, wait=False))
    tvm_cdna4.build(L.dma_by_wave(spelling))
    assert undecided() == []


@pytest.mark.parametrize("groups", [4, 4096])
def test_a_block_dependent_trip_count_is_checked_for_every_workgroup_behaviour(groups, undecided):
    """``for kv in T.serial(bx + 1)``: workgroup 0 runs one step and cannot race across steps;
    workgroup 1 is the first that does. 4096 workgroups: the check groups them by trip count."""
    with pytest.raises(ContractError, match=r"^operand S: LDS race on byte 0 in workgroup blockIdx\.x = 1: wave 1 read it in "
                       r"`acc\[0\] = acc\[0\] \+ S\[.*\]` \(kv = 0\) and wave 0 writes it in `S\[tx\] = A\[.*\]` \(kv = 1\)"):
        tvm_cdna4.build(L.causal_loop(groups, step_barrier=False))
    with pytest.raises(ContractError, match=rf"in workgroup blockIdx\.x = {groups - 1}: wave 1 wrote it in `S\[tx\] = A\[.*\]` "
                       r"\(kv = 0\) and wave 0 reads it"):
        tvm_cdna4.build(L.causal_loop(groups, last_group_barrier=False))
    tvm_cdna4.build(L.causal_loop(groups))
    assert undecided() == []


def test_workgroups_are_grouped_by_what_the_check_evaluates():
    """Trip counts up to 12 each their own group; beyond, one group per phase (mod 6) of the first
    and one of the last trip count of that phase (the loops' own premise, ``iterations``)."""
    counts = np.arange(1, 4097)  # bx + 1
    groups = lds_sync.trip_count_groups(counts)
    kept = sorted(int(counts[g[0]]) for g in groups)
    assert all(len(set(counts[g].tolist())) == 1 for g in groups)
    assert kept == [int(counts[g[0]]) for g in groups]  # in trip count order: a race names its first workgroup
    assert kept == list(range(1, 13)) + [13, 14, 15, 16, 17, 18, 4091, 4092, 4093, 4094, 4095, 4096]


@pytest.mark.parametrize("flag, condition", [("lds", r"F\[0\] == 1"), ("global", r"P\[0\] == 1"),
                                             ("register", r"f\[0\] == 1")])
def test_a_branch_on_one_value_of_the_workgroup_is_checked_both_ways(flag, condition, undecided):
    """``if F[0] == 1:`` (an LDS flag: every thread reads the same published bytes; a split-K GEMM's
    ticket), ``if P[0] == 1:`` (one global address) or ``if f[0] == 1:`` (a register every thread set
    to ``P[0]``; the grouped GEMM's group): the check runs the kernel with it taken and not taken; the
    race is in the taken branch only."""
    with pytest.raises(ContractError, match=rf"^operand S: LDS race on byte 0 \(`if {condition}:` taken\): wave 1 read it "
                       r"in `r\[0\] = S\[tx \+ 64 & 127\]` \(i = 0\) and wave 0 writes it in `S\[tx\] = r\[0\]` \(i = 0\)"):
        tvm_cdna4.build(L.uniform_branch(barrier=False, flag=flag))
    tvm_cdna4.build(L.uniform_branch(flag=flag))
    assert undecided() == []


# ---- what it cannot decide --------------------------------------------------------------------

CANNOT_DECIDE = {  # (the statement, why)
    "a branch on a value per thread": (lambda: L.uniform_branch(flag="thread"), r"`if P\[tx\] == 1:`",
                                       r"`P\[tx\]` is read from memory"),
    "a branch on a register some threads overwrote": (lambda: L.uniform_branch(flag="register per thread"),
                                                      r"`if f\[0\] == 1:`", r"`f\[0\]` is read from memory"),
    "more runs than MAX_RUNS": (lambda: L.uniform_branch(steps=7), None,  # 2**7 branch outcomes
                                r"it tells more than 64 behaviours apart \(groups of workgroups times branch outcomes\); "
                                r"the others are not checked"),
    "an index read from memory": (L.undecidable_index, r"`S\[P\[tx\]\] = A\[tx\]`", r"`P\[tx\]` is read from memory"),
    "an LDS atomic it does not model": (L.lds_pointer_call, r'`counter: T\.let\[T\.int32\] = T\.call_llvm_intrin\('
                                        r'"llvm\.amdgcn\.ds\.append", T\.address_of\(S\[0\]\), .*\)`',
                                        r"it takes an LDS \(addrspace 3\) pointer"),
}


@pytest.mark.parametrize("case", list(CANNOT_DECIDE))
def test_what_it_cannot_decide_is_a_warning_naming_the_statement(case, caplog):
    make, statement, why = CANNOT_DECIDE[case]
    caplog.set_level(logging.WARNING, logger="tvm_cdna4")
    tvm_cdna4.build(make())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("tvm_cdna4")]
    where = f"{statement}: " if statement else ""
    assert len(warnings) == 1 and re.fullmatch(rf"LDS synchronization of kernel_kernel {UNDECIDED}: {where}{why}.*",
                                               warnings[0]), warnings


STRICT = {"build": lambda k: tvm_cdna4.build(k, check="strict"), "tirx.compile": ROUTES["tirx.compile"]}


@pytest.mark.parametrize("route", list(STRICT))
@pytest.mark.parametrize("case", list(CANNOT_DECIDE))
def test_strict_mode_refuses_what_it_cannot_decide(case, route, monkeypatch):
    make, statement, why = CANNOT_DECIDE[case]
    if route == "tirx.compile":
        monkeypatch.setenv(LDS_CHECK_ENV, "strict")
    where = f": {statement}" if statement else ""
    with pytest.raises(ContractError, match=rf"^the LDS synchronization of kernel_kernel cannot be decided at build time"
                       rf"{where}; expected LDS indices, loop bounds, barriers and LDS calls the check can evaluate, "
                       rf"found {why}.*\. Suggestion: index LDS") as info:
        STRICT[route](make())
    assert info.value.check == "LDS synchronization"
    STRICT[route](R.lds_exchange())  # decided: accepted


def test_the_check_mode_is_warn_or_strict(monkeypatch):
    with pytest.raises(ValueError, match=r"check='pedantic' is not a mode of the LDS synchronization check; expected 'warn' or 'strict'"):
        tvm_cdna4.build(R.lds_exchange(), check="pedantic")
    monkeypatch.setenv(LDS_CHECK_ENV, "Strict ")
    with pytest.raises(ValueError, match=r"TVM_CDNA4_LDS_CHECK='Strict ' is not a mode"):
        tvm_cdna4.build(R.lds_exchange())
    monkeypatch.setenv(LDS_CHECK_ENV, "strict")
    with pytest.raises(ContractError, match="cannot be decided"):  # the environment is the default of build too
        tvm_cdna4.build(L.undecidable_index())
    tvm_cdna4.build(L.undecidable_index(), check="warn")  # the argument overrides it


# ---- one source of truth ------------------------------------------------------------------------

def test_the_check_knows_every_lds_access_of_the_catalog_and_the_helpers():
    """Every helper that takes an LDS (addrspace 3) pointer and every ds_read_tr intrinsic of the
    catalog (as LLVM names it in TIR: without its overload suffix) is in the check's table."""
    effects = lds_sync.EFFECTS
    takes_lds = {m.group(1) for m in re.finditer(r"^define [^@]*@(\w+)\((.*)\) .*\{$", helpers_ll(), flags=re.M)
                 if "ptr addrspace(3)" in m.group(2)}
    assert takes_lds <= set(effects) and len(takes_lds) == 1 + 3  # the bf16 tr helper, the 3 direct-to-LDS sizes
    for opcode in TR_OPS:
        op = CATALOG[opcode]
        names = {op.llvm_intrinsic, op.llvm_intrinsic.rsplit(".", 1)[0]} | ({bf16_tr_helper(opcode)} if "bfloat" in op.result_vector else set())
        assert {effects[n].kind for n in names} == {"read"} and {effects[n].bytes for n in names} == {op.load_bits // 8}


def test_loops_run_their_first_iterations_and_a_tail_in_phase():
    assert lds_sync.iterations(5) == [0, 1, 2, 3, 4]
    assert lds_sync.iterations(12) == list(range(12))
    assert lds_sync.iterations(64) == [0, 1, 2, 3, 4, 5, 60, 61, 62, 63]
    assert lds_sync.iterations(13) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


GEMMS = {
    "f16 nn": lambda: gfx950_gemm(256, 256, 512, "f16", "nn"),
    "bf16 nt, one tile ahead": lambda: gfx950_gemm(256, 256, 512, "bf16", "nt", config=Gfx950GemmConfig(load_ahead=1)),
    "fp8 tn": lambda: gfx950_gemm(256, 256, 512, "fp8", "tn"),
    "f16 tn direct-to-LDS": lambda: gfx950_gemm(256, 256, 256, "f16", "tn", config=Gfx950GemmConfig(lds_dma=True)),
    "bf16 tn direct-to-LDS": lambda: gfx950_gemm(256, 256, 256, "bf16", "tn", config=Gfx950GemmConfig(lds_dma=True)),
    "bf16 nt split-K, bf16 out (workspace, ticket)": lambda: gfx950_gemm(64, 256, 1024, "bf16", "nt", "bf16",
                                                                         config=Gfx950GemmConfig(32, 64, 64), k_splits=2),
    "grouped bf16 nt (group search, dynamic rows)": lambda: build_grouped(4, 256, 512, "bf16", "nt", cache=False).primfunc(300),
    "mxfp8 nt": lambda: gfx950_mx_gemm(256, 256, 512, "mxfp8", "nt"),
    "mxfp4 nn": lambda: gfx950_mx_gemm(256, 256, 512, "mxfp4", "nn"),
}


@pytest.mark.parametrize("gemm", [pytest.param(g, marks=pytest.mark.slow) if g in ("bf16 tn direct-to-LDS", "mxfp4 nn")
                                  else g for g in GEMMS])  # (slow: the f16 / mxfp8 kernels are the same code paths)
def test_the_package_gemms_are_decided_and_accepted(gemm, undecided):
    tvm_cdna4.build(GEMMS[gemm]())
    assert undecided() == []
