"""The paged decode as programmatic dependent launches (``PagedDecodeConfig.pdl``, ``kernels.sm80.paged_decode_pdl``):
exact in the CUDA emulator (which refuses a read of what the other grid writes before the reading thread's
``griddepcontrol.wait``), the launch field in the built library's function information, the wait before the
partials' loads in the PTX, and the refusals. The default plans' code is unchanged (``test_paged_decode_wide``'s
golden digests; the merge kernel's below)."""

import hashlib
import re
import struct
import subprocess

import pytest

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention import paged, paged_verb
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.sm80 import paged_decode_pdl, paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode
from tvm_cdna4.selftest import nvcc

SLOW = pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
SMALL = PagedDecodeProblem(2, 4, 2, 64, 4, 16, 4, 12)  # 4 queries, two partitions of 32 keys
FIELD = "programmatic_stream_serialization"


def _config(merge="kernel", pdl=True):
    return PagedDecodeConfig(warps=2, stages=2, splits=2, merge=merge, pdl=pdl)


@pytest.mark.parametrize("target, kv_dtype, merge", [
    ("sm80", "bf16", "kernel"), pytest.param("sm90", "fp8", "kernel", marks=SLOW),  # PDL is off: suite time
    pytest.param("sm80", "fp8", "last-cta", marks=SLOW),
    pytest.param("sm80", "fp8", "kernel", marks=SLOW), pytest.param("sm90", "bf16", "kernel", marks=SLOW),
    pytest.param("sm90", "bf16", "last-cta", marks=SLOW)])
def test_pdl_is_exact_in_the_emulator_on_odd_contexts_and_4_queries(target, kv_dtype, merge):
    problem = PagedDecodeProblem(2, 4, 2, 64, 4, 16, 8, 16, kv_dtype=kv_dtype)
    p = paged_verb(target, "plan")(problem, _config(merge))
    assert p.pdl and p.merge == merge and p.split_kv == 2 and p.partition == 64  # 77 keys: both partitions
    # paged_target.execute: both kernels with every parameter after_wait
    result = attention.validate_paged(problem, target, _config(merge), seed=2, contexts=[5, 77])
    assert result.ok and result.where.startswith("the CUDA emulator") and 0 < result.o_ratio <= 1, result


def _merge_arrays(p):
    arrays = paged.random_inputs(p.problem, seed=2, contexts=[5, 41])
    out = {**arrays, **paged.output_arrays(p.problem), **paged_target.workspace(p)}
    return [out[q.name] for q in p.merge_params]


def test_the_emulator_refuses_a_read_before_the_wait():
    off, on = (plan_paged_decode(SMALL, _config(pdl=pdl)) for pdl in (False, True))
    with pytest.raises(EmulationError, match=r"read of 'W[MLO]' before the thread's griddepcontrol.wait"):
        emulate(paged_target.emit(off)[1], *_merge_arrays(off), target="sm80", after_wait=("WM", "WL", "WO"))
    with pytest.raises(EmulationError, match="read of 'CONTEXT_LENS' before"):  # the plain merge reads it first
        emulate(paged_target.emit(off)[1], *_merge_arrays(off), target="sm80", after_wait=("CONTEXT_LENS",))
    # the PDL merge reads nothing, CONTEXT_LENS included, before its wait
    emulate(paged_target.emit(on)[1], *_merge_arrays(on), target="sm80",
            after_wait=tuple(q.name for q in on.merge_params))
    with pytest.raises(ValueError, match="after_wait names 'Q', not a tensor parameter"):
        emulate(paged_target.emit(on)[1], *_merge_arrays(on), target="sm80", after_wait=("Q",))


def launch_fields(library: bytes) -> tuple[str, ...]:
    """The launch fields of the one kernel of an exported TIRx CUDA library: its device module's function
    information (``__tvm_function_info_v2__``) ends each kernel's record with a count (u64) and that many
    length-prefixed (u64) names, ``grid.x`` first; the CUDA runtime's launcher reads them (cuLaunchKernelEx's
    attributes, ``paged_decode_pdl``)."""
    start = library.index(b"__tvm_function_info_v2__")
    at = library.index(struct.pack("<Q", 6) + b"grid.x", start)
    count, = struct.unpack_from("<Q", library, at - 8)
    names = []
    for _ in range(count):
        size, = struct.unpack_from("<Q", library, at)
        names.append(library[at + 8:at + 8 + size].decode())
        at += 8 + size
    return tuple(names)


@pytest.mark.parametrize("merge", ["kernel", pytest.param("last-cta", marks=pytest.mark.slow)])
@pytest.mark.slow  # PDL timed and left off (stop 55)
def test_the_built_launches_carry_programmatic_stream_serialization(merge):
    on = paged_target.build(SMALL, _config(merge), arch="sm_90")
    off = paged_target.build(SMALL, _config(merge, pdl=None), arch="sm_90")
    assert len(on) == 2 and (on[1] is None) == (merge == "last-cta")
    for kernel in filter(None, on):
        fields = launch_fields(kernel.library)
        assert fields[:6] == ("grid.x", "grid.y", "grid.z", "block.x", "block.y", "block.z") and fields[-1] == FIELD
    for kernel in filter(None, off):
        assert FIELD not in launch_fields(kernel.library) and "griddepcontrol" not in kernel.source
    # the value the host passes: the device entry's last launch operand, 1
    main, merge_kernel = paged_target.emit(plan_paged_decode(SMALL, _config(merge)))
    for func in filter(None, (main, merge_kernel)):
        entry = re.search(r"T\.device_entry\(([^a]*)attrs=", func.script()).group(1)
        assert entry.rstrip(", ").split(", ")[-1] == "1"


def _ptx(source: str, tmp_path) -> list[str]:
    (tmp_path / "k.cu").write_text(source)
    r = subprocess.run([nvcc(), "-arch=sm_90a", "-ptx", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return [line.strip() for line in (tmp_path / "k.ptx").read_text().splitlines()]


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_ptx_waits_before_the_first_read_of_main_and_the_partials_reads_of_the_merge(tmp_path):
    main, merge = paged_target.build(SMALL, _config(), arch="sm_90")
    lines = _ptx(main.source, tmp_path)
    wait, trigger = lines.index("griddepcontrol.wait;"), lines.index("griddepcontrol.launch_dependents;")
    reads = [i for i, s in enumerate(lines) if s.startswith(("ld.global", "cp.async.cg", "cp.async.ca", "atom.global"))]
    assert reads and wait < trigger < min(reads)  # main: nothing read before the kernels before it completed
    lines = _ptx(merge.source, tmp_path)
    wait = lines.index("griddepcontrol.wait;")
    loads = [(i, s.split()[0]) for i, s in enumerate(lines) if s.startswith("ld.global")]
    assert [op for i, op in loads if i < wait] == []  # not even CONTEXT_LENS
    partials = [i for i, op in loads if op.endswith(".f32")]  # WM, WL, WO (f32): every one after the wait
    assert len(partials) >= 4 and min(partials) > wait


def test_the_default_merge_kernel_is_unchanged():
    # sha256 of the merge's TVMScript before PDL (commit bbd13d5): bf16 and fp8, batch 8, 32/8 heads, D 128
    for kv_dtype, digest in (("bf16", "5929fc26d7426556"), ("fp8", "c9d89c2648647bd6")):
        problem = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 1024, 2048, kv_dtype=kv_dtype)
        p = plan_paged_decode(problem, PagedDecodeConfig(merge="kernel"), context=2048, sms=132)
        assert not p.pdl
        assert hashlib.sha256(paged_target.emit(p)[1].script().encode()).hexdigest()[:16] == digest


def test_pdl_is_refused_below_sm90_and_off_by_default(monkeypatch):
    with pytest.raises(ContractError, match="pdl: a bool or None"):
        PagedDecodeConfig(pdl=1)
    with pytest.raises(ContractError, match="griddepcontrol needs sm_90") as info:
        plan_paged_decode(SMALL, _config(), arch="sm_80")
    assert info.value.operand == "pdl"
    assert not plan_paged_decode(SMALL, _config(pdl=None), arch="sm_90a").pdl  # PDL: off until timed
    monkeypatch.setattr(paged_decode_pdl, "PDL", True)
    assert plan_paged_decode(SMALL, _config(pdl=None), arch="sm_90a").pdl
    assert not plan_paged_decode(SMALL, _config(pdl=None), arch="sm_80").pdl  # the flag: where the arch has it
    assert not plan_paged_decode(SMALL, _config(pdl=False), arch="sm_90a").pdl
