"""T.rocm.global_atomic_add_f32 (what split-K reduces with): the compiled instruction, the emulator's
sums and race checks, and the contract errors."""

import numpy as np
import pytest

from tvm_cdna4 import ContractError, build
from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.rocm.build import register

import atomic_kernels as K

register()


def test_compiles_to_one_native_global_atomic_add_f32_without_a_cas_loop():
    asm = build(K.atomic_sum()).asm
    body = asm.split("s_endpgm")[0]
    assert [ln.split()[0] for ln in body.splitlines() if "atomic" in ln and ln.startswith("\t")] == ["global_atomic_add_f32"]
    assert "cmpswap" not in body and "_rtn" not in body  # no return value, no compare-and-swap expansion


def test_sums_every_lane_of_every_workgroup_into_its_bin():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(256).astype(np.float32)
    c = np.full(8, 0.5, np.float32)
    emulate(K.atomic_sum(), x, c)
    want = 0.5 + x.astype(np.float64).reshape(-1, 8).sum(0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_a_plain_store_after_an_atomic_of_the_launch_is_a_race():
    with pytest.raises(EmulationError, match="written by an atomic and by a plain store in one launch"):
        emulate(K.atomic_sum(store_after=True), np.ones(256, np.float32), np.zeros(8, np.float32))


def test_a_plain_store_before_an_atomic_of_the_launch_is_a_race():
    with pytest.raises(EmulationError, match="written by a plain store and by an atomic in one launch"):
        emulate(K.store_then_atomic(), np.zeros(8, np.float32))


@pytest.mark.parametrize("kwargs, operand, found", [
    (dict(dtype="float16"), "dst", "float16"),
    (dict(dtype="float32", scope="shared"), "dst", "shared"),
    (dict(dtype="float32", value_dtype="float16"), "value", "float16"),
], ids=["f16 destination", "LDS destination", "f16 value"])
def test_contract(kwargs, operand, found):
    with pytest.raises(ContractError) as err:
        K.atomic_on(**kwargs)
    assert err.value.operand == operand and found in str(err.value.found)


def test_needs_gfx950():
    from tvm_cdna4.rocm.analysis import check_kernel

    with pytest.raises(ContractError, match="compiles only for mcpu gfx950") as err:
        check_kernel(K.atomic_sum(), {"kind": "rocm", "mcpu": "gfx942"})
    assert err.value.opcode == "tvm_cdna4_global_atomic_add_f32"


# ---- the split-K ticket: T.rocm.global_atomic_add_u32, fence_release / fence_acquire ----------

def _ticket(groups=3, **kw):
    x = np.arange(groups * 64, dtype=np.float32) - 50
    w, s, y = np.zeros(64, np.float32), np.zeros(1, np.uint32), np.full(64, np.nan, np.float32)
    emulate(K.ticket_reduce(groups, **kw), x, w, s, y)
    return x, w, s, y


def test_ticket_last_workgroup_reads_the_sum_and_leaves_zeros():
    x, w, s, y = _ticket()
    assert np.array_equal(y, x.reshape(3, 64).sum(0))  # small integers: exact in any order
    assert not w.any() and s[0] == 0  # ready for the next launch


def test_ticket_compiles_to_the_returning_atomic_and_the_agent_fences():
    body = build(K.ticket_reduce()).asm.split("s_endpgm")[0]
    lines = [ln.strip() for ln in body.splitlines() if ln.startswith("\t")]
    ticket = next(i for i, ln in enumerate(lines) if ln.startswith("global_atomic_add ") and ln.endswith("sc0"))
    wbl2 = lines.index("buffer_wbl2 sc1")
    inv = lines.index("buffer_inv sc1")
    # release (write back L2, wait for the f32 atomics) before the ticket; acquire after it
    assert lines.index(next(ln for ln in lines if ln.startswith("global_atomic_add_f32"))) < wbl2 < ticket < inv
    assert any(ln.startswith("s_waitcnt vmcnt(0)") for ln in lines[wbl2:ticket])


@pytest.mark.parametrize("kw, why", [(dict(release=False), "was not released"),
                                     (dict(acquire=False), "did not acquire after its release")])
def test_ticket_without_its_fences_is_a_race(kw, why):
    with pytest.raises(EmulationError, match=f"updated by an atomic and read by a plain load.*{why}"):
        _ticket(**kw)


def test_u32_atomic_contract():
    with pytest.raises(ContractError) as err:
        K.ticket_on("float32")
    assert err.value.operand == "dst" and "float32" in str(err.value.found)


def test_slices_stored_by_other_workgroups_need_the_fences_too():
    x = np.random.default_rng(1).standard_normal(3 * 64).astype(np.float32)
    y = np.zeros(64, np.float32)
    emulate(K.slice_reduce(), x, np.zeros(3 * 64, np.float32), np.zeros(1, np.uint32), y)
    assert np.array_equal(y, (x[:64] + x[64:128]) + x[128:])  # the slices in index order, in f32
    for kw, why in ((dict(release=False), "was not released"), (dict(acquire=False), "did not acquire")):
        with pytest.raises(EmulationError, match=f"stored by another workgroup and read by a plain load.*{why}"):
            emulate(K.slice_reduce(**kw), x, np.zeros(3 * 64, np.float32), np.zeros(1, np.uint32), y)
