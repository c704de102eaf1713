"""``rocm.waitcheck``, the static check of the waits in gfx950 assembly (issue 35): the counter rules
on hand-written assembly (one rule each), zero findings on the package's kernels, seeded mutations of
those kernels' waits caught at the right line and register, the readfirstlane waterfall warning, the
``tvm_cdna4.build`` hook and the ``waitcheck`` command."""

import logging
import random
import re
import textwrap
import zlib

import attrs
import pytest
from dma_kernels import dma_soffset, dma_unpublished

import tvm_cdna4
from tvm_cdna4.rocm import waitcheck


def asm(text: str) -> str:
    """A kernel ``k`` of the instructions and labels in ``text``, as LLVM prints them (instructions
    indented, labels not); its line 1 is ``k:``."""
    lines = textwrap.dedent(text).strip("\n").splitlines()
    return "k:\n" + "".join(line + "\n" if line.endswith(":") else f"\t{line}\n" for line in lines)


def findings(text: str, **kw) -> set:
    return {(f.line, f.rule, f.registers) for f in waitcheck.check(text, **kw).findings}


# (name, assembly, findings: (line, rule, registers)); line 1 is the kernel's label
CASES = [
    ("vmcnt retires in issue order, stores count", asm("""
        buffer_load_dword v1, v0, s[4:7], 0 offen
        buffer_load_dword v2, v0, s[4:7], 0 offen
        global_store_dword v[8:9], v7, off
        buffer_load_dword v3, v0, s[4:7], 0 offen
        s_waitcnt vmcnt(2)
        v_add_f32_e32 v4, v1, v2
        v_add_f32_e32 v5, v3, v4
        s_endpgm"""), {(8, "read", ("v3",))}),
    ("lgkmcnt(n) retires LDS whatever scalar loads do, a scalar load only at lgkmcnt(0)", asm("""
        s_load_dwordx2 s[2:3], s[0:1], 0x0
        ds_read_b32 v1, v0
        ds_read_b32 v2, v0 offset:4
        s_waitcnt lgkmcnt(1)
        v_mov_b32_e32 v3, v1
        v_add_u32_e32 v4, s2, v2
        s_waitcnt lgkmcnt(0)
        v_add_u32_e32 v5, s3, v2
        s_endpgm"""), {(7, "read", ("s2",)), (7, "read", ("v2",))}),
    ("a write to a register a load in flight writes; a later load of the same counter may", asm("""
        buffer_load_dwordx2 v[2:3], v0, s[4:7], 0 offen
        buffer_load_dword v3, v0, s[4:7], 0 offen offset:8
        ds_read_b32 v2, v0
        v_mov_b32_e32 v3, 0
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_endpgm"""), {(4, "overwrite", ("v2",)), (5, "overwrite", ("v3",))}),
    ("a loop's back-edge carries the load into the next iteration", asm("""
        v_mov_b32_e32 v1, 0
        s_mov_b32 s0, 4
        .LBB0_1:
        v_add_f32_e32 v2, v1, v2
        buffer_load_dword v1, v0, s[4:7], 0 offen
        s_sub_u32 s0, s0, 1
        s_cmp_lg_u32 s0, 0
        s_cbranch_scc1 .LBB0_1
        s_waitcnt vmcnt(0)
        global_store_dword v[8:9], v2, off
        s_endpgm"""), {(5, "read", ("v1",))}),
    ("the same loop, waited for at its top", asm("""
        v_mov_b32_e32 v1, 0
        s_mov_b32 s0, 4
        .LBB0_1:
        s_waitcnt vmcnt(0)
        v_add_f32_e32 v2, v1, v2
        buffer_load_dword v1, v0, s[4:7], 0 offen
        s_sub_u32 s0, s0, 1
        s_cmp_lg_u32 s0, 0
        s_cbranch_scc1 .LBB0_1
        s_waitcnt vmcnt(0)
        global_store_dword v[8:9], v2, off
        s_endpgm"""), set()),
    ("a wait on one path only does not cover the join", asm("""
        buffer_load_dword v1, v0, s[4:7], 0 offen
        s_cmp_eq_u32 s0, 0
        s_cbranch_scc1 .LBB0_2
        s_waitcnt vmcnt(0)
        v_mov_b32_e32 v2, v1
        .LBB0_2:
        v_add_f32_e32 v3, v1, v1
        s_endpgm"""), {(8, "read", ("v1",))}),
    ("flat loads complete out of order on both counters", asm("""
        flat_load_dword v1, v[2:3]
        s_waitcnt vmcnt(0)
        v_mov_b32_e32 v4, v1
        flat_load_dword v5, v[2:3]
        s_waitcnt vmcnt(0) lgkmcnt(0)
        v_mov_b32_e32 v6, v5
        s_endpgm"""), {(4, "read", ("v1",))}),
    ("three LDS stages of direct-to-LDS loads: waited, then barrier, then read", asm("""
        buffer_load_dword v0, s[4:7], 0 offen lds
        buffer_load_dword v0, s[4:7], 4 offen lds
        s_waitcnt vmcnt(1)
        s_barrier
        buffer_load_dword v0, s[4:7], 8 offen lds
        ds_read_b32 v1, v2
        s_waitcnt vmcnt(1) lgkmcnt(0)
        s_barrier
        ds_read_b32 v3, v2 offset:4
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_barrier
        ds_read_b32 v4, v2 offset:8
        s_waitcnt lgkmcnt(0)
        s_endpgm"""), set()),
    ("the same without the second stage's vmcnt: in flight across two barriers, published by none", asm("""
        buffer_load_dword v0, s[4:7], 0 offen lds
        buffer_load_dword v0, s[4:7], 4 offen lds
        s_waitcnt vmcnt(1)
        s_barrier
        buffer_load_dword v0, s[4:7], 8 offen lds
        ds_read_b32 v1, v2
        s_waitcnt lgkmcnt(0)
        s_barrier
        ds_read_b32 v3, v2 offset:4
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_barrier
        ds_read_b32 v4, v2 offset:8
        s_waitcnt lgkmcnt(0)
        s_endpgm"""), {(10, "dma in flight", ()), (10, "dma unpublished", ())}),
    ("an LDS write in flight at the barrier other waves read after", asm("""
        ds_write_b32 v2, v1
        s_barrier
        ds_read_b32 v3, v2 offset:256
        s_waitcnt lgkmcnt(0)
        s_endpgm"""), {(4, "lds write unpublished", ())}),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_counter_rules(text, expected):
    assert findings(text) == expected


@pytest.mark.parametrize("wait, retires", [
    ("s_waitcnt vmcnt(0)", True), ("s_waitcnt 0x3f70", True), ("s_waitcnt 0", True),
    ("s_waitcnt vmcnt(0) & lgkmcnt(0)", True), ("s_waitcnt vmcnt(0), expcnt(1)", True),
    ("s_waitcnt_vmcnt null, 0", True), ("s_waitcnt 0xcf7f", False), ("s_waitcnt vmcnt_sat(100)", False),
    ("s_waitcnt expcnt(0) lgkmcnt(0)", False), ("s_waitcnt_lgkmcnt null, 0", False), ("s_waitcnt vmcnt(1)", False)])
def test_every_spelling_of_a_wait(wait, retires):
    text = asm(f"""
        buffer_load_dword v1, v0, s[4:7], 0 offen
        {wait}
        v_mov_b32_e32 v2, v1
        s_endpgm""")
    assert findings(text) == (set() if retires else {(4, "read", ("v1",))})


SPELLINGS = ["s_waitcnt vmcnt(0)", "s_waitcnt vmcnt(6) lgkmcnt(0)", "s_waitcnt 0x3f70", "s_waitcnt 0",
             "s_waitcnt vmcnt(1) & lgkmcnt(2)", "s_waitcnt vmcnt(1), lgkmcnt(2)", "s_waitcnt vmcnt(0), expcnt(1)",
             "s_waitcnt vmcnt_sat(100)", "s_waitcnt lgkmcnt_sat(20) vmcnt(17)", "s_waitcnt expcnt(0) lgkmcnt(3)",
             "s_waitcnt 0xcf7f", "s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)", "s_waitcnt vmcnt(40)"]


@pytest.mark.llvm("llvm-mc")
def test_the_wait_spellings_read_as_llvm_mc_encodes_them_for_gfx950(tmp_path):
    """What the check reads from each spelling is what isa.hardware decodes from llvm-mc 22's encoding of
    it; the gfx10 ``s_waitcnt_vmcnt`` is not a gfx950 instruction."""
    import subprocess

    from tvm_cdna4.isa.hardware import WAITCNT_MAX, waitcnt_counts
    from tvm_cdna4.rocm.build import llvm_tool

    def llvm_mc(lines):
        source = tmp_path / "waits.s"
        source.write_text("\n".join(lines) + "\n")
        return subprocess.run([llvm_tool("llvm-mc"), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-show-encoding",
                               str(source)], capture_output=True, text=True)

    encodings = re.findall(r"encoding: \[0x([0-9a-f]+),0x([0-9a-f]+),0x8c,0xbf\]", llvm_mc(SPELLINGS).stdout)
    assert len(encodings) == len(SPELLINGS)
    for spelling, (low, high) in zip(SPELLINGS, encodings):
        counts = waitcnt_counts(int(high + low, 16))
        decoded = tuple(None if counts[c] == WAITCNT_MAX[c] else counts[c] for c in ("vmcnt", "lgkmcnt"))
        assert waitcheck.parse(asm(spelling))[0].instrs[0].wait == decoded, spelling
    refused = llvm_mc(["s_waitcnt_vmcnt null, 1"])
    assert "instruction not supported on this GPU" in refused.stderr


def test_barriers_in_flight_is_the_pipeline_depth_allowed():
    """The three-stage pipeline keeps its newest stage in flight across one barrier: refused when none may be."""
    three_stages = CASES[7][1]
    assert findings(three_stages) == set()
    assert findings(three_stages, barriers_in_flight=0) == {(7, "dma in flight", ()), (10, "dma in flight", ())}


def test_llvm_objdump_listings_are_read_with_their_labels_and_addresses():
    listing = textwrap.dedent("""
        <k>:
        \tbuffer_load_dword v1, v0, s[4:7], 0 offen                  // 000000001900: E0501000 80010100
        \ts_cbranch_scc1 L0                                          // 000000001908: BF850001
        \ts_waitcnt vmcnt(0)                                         // 00000000190C: BF8C0F70
        <L0>:
        \tv_mov_b32_e32 v2, v1                                       // 000000001910: 7E040301
        \ts_endpgm                                                   // 000000001914: BF810000
        """)
    (finding,) = waitcheck.check(listing).findings
    assert (finding.line, finding.address, finding.registers) == (7, 0x1910, ("v1",))
    assert str(finding).startswith("line 7 (0x1910): `v_mov_b32_e32 v2, v1` reads v1, which "
                                   "`buffer_load_dword v1, v0, s[4:7], 0 offen` (line 3 (0x1900)) may still be writing; "
                                   "expected an s_waitcnt vmcnt(0) or lower between them")


# -- the package's kernels ------------------------------------------------------------------------


def _gemm(dtype, layout, M=4096, N=4096, K=4096, cfg=None):
    """Through the session's build cache, as tests/kernels/gfx950/test_gfx950_gemm.py's default_build and the goldens build
    them (``kernels.gemm.build``, what the CLI runs: the cost model's plan without ``cfg``)."""
    from tvm_cdna4.kernels import gemm

    return gemm.build(gemm.GemmProblem(M, N, K, dtype, layout), "gfx950", cfg)


def _default_config(dtype):
    from tvm_cdna4.kernels.gfx950.gemm import default_config

    return default_config(dtype)


def _dma_gemm():
    cfg = attrs.evolve(_default_config("f16"), block_k=32, mfma="32x32", lds_dma=True)
    return _gemm("f16", "nt", 256, 192, 512, cfg)  # the golden test's f16_nt_dma


def _small_gemm(kind):
    from tvm_cdna4.kernels.gfx950 import gemm as gfx950_gemm

    if kind == "split-K":  # test_gfx950_splitk.py's f32 atomics, with its SMALL tile
        return gfx950_gemm.build(16, 64, 512, "bf16", "nt", "f32", gfx950_gemm.Gfx950GemmConfig(32, 64, 64), k_splits=4)
    if kind == "split-K ticket":  # a bf16 C: the f32 workspace, a per-tile ticket, the last slice's epilogue
        return gfx950_gemm.build(16, 64, 512, "bf16", "nt", "bf16", gfx950_gemm.Gfx950GemmConfig(16, 64, 128, waves_m=1),
                                 k_splits=2)
    if kind == "dynamic M":
        return gfx950_gemm.build_dynamic(40, 128, "bf16", "nt", "f32").kernel_for(100)
    return gfx950_gemm.build_grouped(5, 40, 128, "bf16", "nt", "f32").kernel_for(27)


def _attention(dtype):
    """test_attention_gfx950.py's causal GQA 2:1 D 128 kernels (direct-to-LDS K and V, deferred P V)."""
    from tvm_cdna4.kernels.attention import build_gfx950
    from tvm_cdna4.kernels.gfx950.attention_plan import AttentionConfig, AttentionProblem

    return build_gfx950(AttentionProblem(1, 2, 1, 130, 130, 128, causal=True, dtype=dtype), AttentionConfig(128, 64))


GROUP_4096 = pytest.mark.xdist_group("gfx950-4096")
KERNELS = {  # name: (build, the xdist group of the tests that build it too)
    **{f"{d} {lay}": ((lambda d=d, lay=lay: _gemm(d, lay)), GROUP_4096) for d, lay in (
        ("f16", "nn"), ("bf16", "tn"), ("fp8", "nt"), ("bf8", "nn"), ("fp8_bf8", "nt"), ("bf8_fp8", "nn"), ("i8", "nn"),
        ("f64", "nn"), ("mxfp8", "tt"), ("mxfp6", "nn"), ("mxfp4", "tn"))},
    "f32 nn": (lambda: _gemm("f32", "nn", 100, 72, 90, _default_config("f32")), None),  # the golden test's
    "f16 nt direct-to-LDS": (_dma_gemm, pytest.mark.xdist_group("gfx950-dma")),
    **{kind: ((lambda kind=kind: _small_gemm(kind)), None) for kind in ("split-K", "split-K ticket", "dynamic M",
                                                                          "grouped")},
    **{f"attention {d} causal": ((lambda d=d: _attention(d)), pytest.mark.xdist_group("gfx950-attention"))
       for d in ("bf16", "fp8")},
}


SLOW_KERNELS = ("bf8 nn", "fp8_bf8 nt", "bf8_fp8 nn", "i8 nn", "mxfp6 nn")
"""Run with TVM_CDNA4_SLOW=1 (suite time): the same schedule as fp8 nt / mxfp8 tt with another element type."""


def kernel_param(name):
    marks = [KERNELS[name][1]] if KERNELS[name][1] else []
    return pytest.param(name, id=name, marks=marks + [pytest.mark.slow] * (name in SLOW_KERNELS))


@pytest.mark.parametrize("name", [kernel_param(n) for n in KERNELS])
def test_the_package_kernels_have_no_findings(name):
    report = waitcheck.check(KERNELS[name][0]().asm)
    assert report.findings == () and report.waterfalls == ()
    assert report.instructions > 200


# -- seeded mutations of the package kernels' waits ------------------------------------------------
# The expected finding comes from a straight-line reading of the text, not from the checker: the loads
# a wait retires among those issued since the previous wait of its basic block (vmcnt: a load with n
# or more newer vector-memory instructions after it there; lgkmcnt: an LDS read with n or more newer
# ds_* instructions, a scalar load at 0), then the first non-memory instruction after the wait, in its
# block and before the next wait on that counter, that names one of their destination registers.

_RANGE = re.compile(r"(?<![\w.])([vas])(?:(\d+)|\[(\d+):(\d+)\])(?!\w)")
_COUNTERS = {"vm": ("buffer_", "global_", "scratch_"), "lgkm": ("ds_",)}


def _registers(text: str) -> set[str]:
    out = set()
    for kind, one, lo, hi in _RANGE.findall(text):
        out |= {f"{kind}{r}" for r in ([int(one)] if one else range(int(lo), int(hi) + 1))}
    return out


def _instruction(line: str):
    """``(mnemonic, operands)`` of an instruction line, None for a label, directive or blank."""
    if not line[:1].isspace() or not line.strip() or line.strip().startswith((".", ";")):
        return None
    op, _, rest = line.strip().partition(" ")
    return op, rest.split(";")[0]


def _destination(op: str, rest: str, counter: str) -> set[str]:
    """The registers a memory instruction of ``counter`` writes (its first operand, for a load)."""
    if counter == "vm" and "_load" in op and not re.search(r"\blds\b", rest) and "load_lds" not in op:
        return _registers(rest.split(",")[0])
    if counter == "lgkm" and (op.startswith("ds_read") or op.startswith(("s_load", "s_buffer_load"))):
        return _registers(rest.split(",")[0])
    return set()


def expected_read(lines: list[str], w: int, counter: str, retired) -> tuple[int, str] | None:
    """(line number, register) of the first read of a register of a load that the wait on line index
    ``w`` retires (``retired(newer, n)``) and that nothing else retires before the read; None if none."""
    field = {"vm": "vmcnt", "lgkm": "lgkmcnt"}[counter]
    n = int(re.search(rf"\b{field}\((\d+)\)", lines[w]).group(1))
    segment = []
    for i in range(w - 1, -1, -1):
        ins = _instruction(lines[i])
        if ins is None or ins[0].startswith(("s_waitcnt", "s_branch", "s_cbranch", "s_endpgm", "s_setpc")):
            break
        segment.insert(0, ins)
    counted = [ins for ins in segment if ins[0].startswith(_COUNTERS[counter])]
    regs = set()
    for k, (op, rest) in enumerate(counted):
        if retired(len(counted) - k - 1, n):
            regs |= _destination(op, rest, counter)
    if counter == "lgkm" and n == 0:
        regs |= {r for op, rest in segment if op.startswith(("s_load", "s_buffer_load"))
                 for r in _destination(op, rest, "lgkm")}
    for j in range(w + 1, len(lines)):
        ins = _instruction(lines[j])
        if ins is None or ins[0].startswith(("s_branch", "s_cbranch", "s_endpgm", "s_setpc")) \
                or (ins[0].startswith("s_waitcnt") and field in ins[1]):
            return None
        if ins[0].startswith(("buffer_", "global_", "scratch_", "flat_", "ds_", "s_load", "s_buffer_load")):
            regs -= _destination(*ins, "vm") | _destination(*ins, "lgkm")  # reloaded: a new load's registers
            continue
        hit = _registers(ins[1]) & regs
        if hit:
            return j + 1, min(hit, key=lambda r: (r[0], int(r[1:])))
    return None


def mutations(text: str, seed: int, removals: int = 3, weakenings: int = 2):
    """Seeded: ``removals`` waits removed and ``weakenings`` waits weakened by one (``vmcnt(n)`` ->
    ``vmcnt(n + 1)``), chosen among those whose retirement a later instruction needs; each
    ``(description, mutated text, (line, register))``."""
    lines = text.splitlines()
    removable, weakenable = [], []
    for w, line in enumerate(lines):
        if not line.strip().startswith("s_waitcnt "):
            continue
        hits = [expected_read(lines, w, c, lambda newer, n: newer >= n) for c in ("vm", "lgkm")
                if f"{c}cnt(" in line]
        hits = [h for h in hits if h]
        if hits:
            removable.append((w, min(hits)))
        for counter, field in (("vm", "vmcnt"), ("lgkm", "lgkmcnt")):
            m = re.search(rf"\b{field}\((\d+)\)", line)
            if m and int(m.group(1)) + 1 < {"vm": 63, "lgkm": 15}[counter]:
                hit = expected_read(lines, w, counter, lambda newer, n: newer == n)
                if hit:
                    weakenable.append((w, field, int(m.group(1)), hit))
    rng = random.Random(seed)
    out = []
    for w, hit in rng.sample(removable, min(removals, len(removable))):
        mutated = lines[:w] + [""] + lines[w + 1:]  # the line numbers stay
        out.append((f"line {w + 1} `{lines[w].strip()}` removed", "\n".join(mutated), hit))
    for w, field, n, hit in rng.sample(weakenable, min(weakenings, len(weakenable))):
        weaker = lines[w].replace(f"{field}({n})", f"{field}({n + 1})")
        mutated = lines[:w] + [weaker] + lines[w + 1:]
        out.append((f"line {w + 1} `{lines[w].strip()}` -> `{weaker.strip()}`", "\n".join(mutated), hit))
    return out


MUTATED = ["f16 nn", "mxfp4 tn", "f64 nn", "f16 nt direct-to-LDS", "split-K ticket", "grouped", "attention bf16 causal",
           "attention fp8 causal"]


@pytest.mark.parametrize("name", [kernel_param(n) for n in MUTATED])
def test_seeded_mutations_of_the_waits_are_caught_at_the_read(name):
    text = KERNELS[name][0]().asm
    cases = mutations(text, seed=zlib.crc32(name.encode()))
    assert len(cases) == 5, [c[0] for c in cases]
    for what, mutated, (line, register) in cases:
        found = waitcheck.check(mutated).findings
        assert any(f.line == line and register in f.registers for f in found), (
            f"{name}: {what}: expected a finding on line {line} naming {register}; found "
            + "; ".join(map(str, found[:3])))


def publication_mutations(text: str, seed: int, field: str, count: int = 2):
    """Seeded: ``field`` dropped from ``count`` waits right before an ``s_barrier`` that retire an LDS
    write (``vmcnt``: a direct-to-LDS load; ``lgkmcnt``: a ``ds_write``) and that an LDS read follows
    before the next barrier; for ``vmcnt`` only the phase's first wait to retire one. Which writes a
    wait retires: the in-order queue of the counter's instructions in program order (a wait
    ``field(n)`` keeps the n newest). Each ``(description, mutated text, line of the barrier)``."""
    lines = text.splitlines()
    writes = (lambda op, rest: re.search(r"\blds$", rest.strip()) is not None) if field == "vmcnt" else \
        (lambda op, rest: op.startswith("ds_write"))
    counted = _COUNTERS["vm" if field == "vmcnt" else "lgkm"]
    queue, published, candidates = [], False, []
    for w, line in enumerate(lines):
        ins = _instruction(line)
        if ins is None:
            continue
        if ins[0].startswith(counted):
            queue.append(writes(*ins))
        elif ins[0] == "s_barrier":
            published = False
        elif ins[0].startswith("s_waitcnt") and re.search(rf"\b{field}\(\d+\)", ins[1]):
            n = int(re.search(rf"\b{field}\((\d+)\)", ins[1]).group(1))
            retired, queue = queue[:max(len(queue) - n, 0)], queue[max(len(queue) - n, 0):]
            if any(retired) and lines[w + 1].strip() == "s_barrier" and (field == "lgkmcnt" or not published):
                after = [_instruction(x) for x in lines[w + 2:]]
                ops = [a[0] for a in after if a]
                if any(op.startswith("ds_read") for op in ops[:ops.index("s_barrier") if "s_barrier" in ops else None]):
                    candidates.append(w)
            published = published or any(retired)
    out = []
    for w in random.Random(seed).sample(candidates, min(count, len(candidates))):
        weaker = re.sub(rf"\s*\b{field}\(\d+\)", "", lines[w])
        weaker = weaker if weaker.strip() != "s_waitcnt" else ""
        out.append((f"line {w + 1} `{lines[w].strip()}` -> `{weaker.strip()}`",
                    "\n".join(lines[:w] + [weaker] + lines[w + 1:]), w + 2))
    return out


@pytest.mark.parametrize("name, field, rules", [
    pytest.param(*p, id=f"{p[0]}-{p[1]}", marks=[KERNELS[p[0]][1]] if KERNELS[p[0]][1] else []) for p in [
        ("f16 nt direct-to-LDS", "vmcnt", ("dma unpublished",)),
        ("attention bf16 causal", "vmcnt", ("dma unpublished",)),
        ("attention fp8 causal", "vmcnt", ("dma unpublished",)),
        ("f16 nn", "lgkmcnt", ("lds write unpublished",)),
        ("mxfp4 tn", "lgkmcnt", ("lds write unpublished",))]])
def test_seeded_mutations_of_the_waits_before_a_barrier_are_caught_at_the_lds_read(name, field, rules):
    text = KERNELS[name][0]().asm
    cases = publication_mutations(text, zlib.crc32(f"{name} {field}".encode()), field)
    assert len(cases) == 2, [c[0] for c in cases]
    lines = text.splitlines()
    for what, mutated, barrier in cases:
        found = [f for f in waitcheck.check(mutated).findings if f.rule in rules and f.source_line == barrier]
        assert found, f"{name}: {what}: expected {rules} after the barrier on line {barrier}"
        assert all(lines[f.line - 1].strip().startswith("ds_read") for f in found), found


# -- the build hook, the waterfall warning, the command --------------------------------------------


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("tvm_cdna4") and r.levelno == logging.WARNING]


WATERFALL = re.compile(r"^(\.LBB\d+_\d+):\n(?:\t.*\n)*?\tv_readfirstlane_b32 (s\d+), v\d+\n(?:\t.*\n)*?"
                       r"\t(buffer_load_dwordx4 v\d+, s\[\d+:\d+\], \2 offen lds)\n(?:\t.*\n)*?\ts_cbranch_execnz \1$", re.M)


def test_a_wave_dependent_soffset_is_warned_about_as_a_waterfall_loop(caplog):
    """``tx // 64 * 4096`` is the same in every lane of a wave, but LLVM cannot prove it: it issues each
    of the four direct-to-LDS loads once per value of a readfirstlane of it, in a loop (docs/patterns.md,
    "Wave-uniform scalar operands"); the build warns once per load, naming it and its line."""
    caplog.set_level(logging.WARNING, logger="tvm_cdna4")
    asm = tvm_cdna4.build(dma_soffset("tx")).asm
    lines = asm.splitlines()
    loops = [(m.group(3), asm[:m.start(3)].count("\n") + 1) for m in WATERFALL.finditer(asm)]
    assert len(loops) == 4 and all(lines[line - 1].strip() == load for load, line in loops)
    warnings = _warnings(caplog)
    assert len(warnings) == 4
    for (load, line), warning in zip(loops, warnings):
        assert f"`{load}` (line {line}) runs in a readfirstlane waterfall loop" in warning
        assert "T.rocm.wave_id()" in warning


@pytest.mark.parametrize("by", ["wave_id", "voffset"])
def test_a_uniform_soffset_needs_no_waterfall_loop(by, caplog):
    caplog.set_level(logging.WARNING, logger="tvm_cdna4")
    asm = tvm_cdna4.build(dma_soffset(by)).asm
    assert WATERFALL.search(asm) is None and _warnings(caplog) == []
    assert asm.count("buffer_load_dwordx4") == 4


def test_the_build_refuses_a_direct_to_lds_load_no_wait_publishes():
    """The kernel's missing ``T.rocm.s_waitcnt_vmcnt``: rocm.lds_sync cannot decide its LDS index (a
    kernel argument: a WARNING, in its default mode) and LLVM waits for no async direct-to-LDS load, so
    the assembly shows it."""
    with pytest.raises(tvm_cdna4.ContractError) as info:
        tvm_cdna4.build(dma_unpublished())
    error = info.value
    assert error.check == "waitcheck" and error.opcode == "ds_read_b32" and error.operand == "LDS"
    assert "which published no direct-to-LDS load of the 1 in flight there" in error.rule
    assert error.expected == "an s_waitcnt vmcnt retiring the loads this phase reads before that barrier"
    assert "T.rocm.s_waitcnt_vmcnt(n) before T.rocm.workgroup_barrier()" in error.suggestion


def test_a_finding_is_a_contract_error_naming_the_first_and_counting_the_others():
    text = CASES[1][1]  # two findings on line 7: s2 and v2
    with pytest.raises(tvm_cdna4.ContractError) as info:
        waitcheck.require_clean(text)
    error = info.value
    assert (error.check, error.opcode, error.operand) == ("waitcheck", "v_add_u32_e32", "s2")
    assert error.rule == ("reads s2, which `s_load_dwordx2 s[2:3], s[0:1], 0x0` (line 2) may still be writing "
                          "(line 7 of the assembly)")
    assert error.expected == "an s_waitcnt lgkmcnt(0) between them (scalar loads complete out of order)"
    assert error.proof.startswith("1 more: line 7: `v_add_u32_e32 v4, s2, v2` reads v2, which `ds_read_b32 v2, v0 "
                                  "offset:4` (line 4)")
    assert waitcheck.require_clean(CASES[4][1]).findings == ()


@pytest.fixture
def waitcheck_cli(tmp_path, capsys):
    """``python -m tvm_cdna4 waitcheck ARGS`` in-process: (returncode, stdout, stderr)."""
    from tvm_cdna4.cli import main

    def run(*args):
        capsys.readouterr()
        code = main(["waitcheck", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_the_command_exits_0_clean_1_with_each_finding_2_on_a_usage_error(waitcheck_cli, tmp_path):
    clean, bad, empty = tmp_path / "clean.s", tmp_path / "bad.s", tmp_path / "empty.s"
    clean.write_text(CASES[4][1])
    bad.write_text(CASES[1][1])
    empty.write_text("\t.text\n")
    assert waitcheck_cli(str(clean)) == (0, f"{clean}: 0 finding(s) in 1 function(s), 11 instructions\n", "")
    code, out, err = waitcheck_cli(str(bad))
    lines = out.splitlines()
    assert code == 1 and err == "" and len(lines) == 3
    assert lines[0].startswith(f"{bad}: line 7: `v_add_u32_e32 v4, s2, v2` reads s2, which")
    assert lines[1].startswith(f"{bad}: line 7: `v_add_u32_e32 v4, s2, v2` reads v2, which")
    for args, message in [((), "error: waitcheck takes one FILE: gfx950 assembly (.s) or a code object (.hsaco/.o)"),
                          ((str(tmp_path / "none.s"),), f"error: cannot read {tmp_path / 'none.s'}: No such file or directory"),
                          ((str(empty),), f"error: no instructions in {empty}: expected gfx950 assembly (LLVM's .s or "
                                          "llvm-objdump -d output)"),
                          ((str(clean), "--barriers-in-flight", "-1"), "error: --barriers-in-flight must be 0 or more; got -1")]:
        assert waitcheck_cli(*args) == (2, "", message + "\n"), args


@pytest.mark.llvm("llvm-objdump")
@pytest.mark.xdist_group("gfx950-dma")
def test_the_command_disassembles_a_code_object(waitcheck_cli, tmp_path):
    """The direct-to-LDS GEMM's linked code object, through llvm-objdump: the same instructions, no finding."""
    result = _dma_gemm()
    path = tmp_path / "gemm.hsaco"
    path.write_bytes(result.code_object)
    code, out, err = waitcheck_cli(str(path))
    assert (code, err) == (0, "")
    count = int(re.search(r"(\d+) instructions$", out.strip()).group(1))
    assert count >= waitcheck.check(result.asm).instructions
