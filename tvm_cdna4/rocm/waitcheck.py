"""``waitcheck``: a static check of the waits in gfx950 assembly (issue 35).

LLVM places every ``s_waitcnt`` of a gfx950 kernel (``SIInsertWaitcnts``) and has shipped wait bugs
(llvm #206825, #203770); the emulator runs the TIR, not the code object. ``check(asm)`` reads the
assembly LLVM printed (``BuildResult.asm``) or ``llvm-objdump`` disassembled, builds each function's
control-flow graph from its labels and branches (``s_branch``, ``s_cbranch_*``, fall-through) and
runs a dataflow analysis of the memory operations in flight to a fixed point: a loop's back-edge
carries what is still in flight into the next iteration, and at a join each operation keeps the
fewest newer operations of any path (what a wait can be sure of on every path).

Counter model (gfx9 ``s_waitcnt``, which gfx950 keeps; ``isa.sources`` keys ``cdna4-isa``,
``llvm-waitcnt``, ``llvm-waitcnt-syntax``, ``amdgpuusage``, ``llvm-lds-dma``, ``llvm-subtarget``):

- vmcnt: every vector-memory instruction counts (``buffer_`` / ``global_`` / ``scratch_`` loads,
  stores and atomics, and the direct-to-LDS loads ``buffer_load_* ... lds`` / ``global_load_lds_*``),
  and they complete in issue order: ``vmcnt(n)`` retires each one with at least ``n`` newer ones.
- lgkmcnt: LDS instructions (``ds_*``, ``ds_read_b64_tr_*`` included) complete in issue order,
  scalar-memory loads (``s_load_*``, ``s_buffer_load_*``) in any order. ``lgkmcnt(n)`` retires an LDS
  operation with at least ``n`` newer LDS operations (if it were still in flight, so would they: more
  than ``n``), whatever scalar loads are in flight, and a scalar load only at ``lgkmcnt(0)``.
- ``flat_*`` count on both counters and may complete out of order on both: retired by ``vmcnt(0)``
  and ``lgkmcnt(0)``. An instruction whose counting is not certain (``buffer_wbl2``, ``buffer_inv``,
  ``s_sendmsg``) is not counted: counting fewer newer operations only makes the check stricter.
- Waits: ``s_waitcnt`` in every spelling LLVM and llvm-mc accept (``vmcnt(6) lgkmcnt(0)``, ``&`` or
  ``,`` between fields, ``*_sat``, a raw immediate such as ``0x3f70``; a field left out waits for
  nothing). ``s_waitcnt_vmcnt null, N`` / ``s_waitcnt_lgkmcnt null, N`` are read too, though llvm-mc 22
  refuses them for gfx950 (gfx10+ encodings). ``s_barrier`` waits for nothing on gfx950 (it has the
  back-off barrier, so LLVM adds no wait before it); a call (``s_swappc_b64``) retires everything
  (LLVM's callee waits for everything on entry).

Rules checked; each finding names the line (the address too, for a code object), the instruction
and the register (``Finding``):

1. read: an instruction reads a VGPR / AGPR / SGPR that an operation in flight writes (a load's
   destination, an atomic's return value, a ``ds_read``'s): a wait must retire it first.
2. overwrite (WAW): an instruction writes such a register before the load does, except a load of the
   same in-order counter (vector memory after vector memory, LDS after LDS: the older one lands first).
3. direct-to-LDS loads (the check cannot see LDS addresses, so it checks the protocol of
   docs/patterns.md, "wait, then barrier, then read", in the form the package's pipelines have): a
   load still in flight at a barrier is the prefetch of a later stage, so (a) an LDS read while a
   direct-to-LDS load is in flight across more than ``barriers_in_flight`` barriers (default 1: the
   package's deepest pipeline, the GEMM's three LDS stages) is a finding, and (b) an LDS read after a
   barrier at which direct-to-LDS loads were in flight but none was retired by a ``vmcnt`` wait since
   the previous barrier (the barrier published nothing new) is a finding.

Not checked: stores' data registers (the hardware reads them at issue from gfx7 on: LLVM's
``vmemWriteNeedsExpWaitcnt`` is for gfx6 only), implicit operands (``exec``, ``vcc``, ``scc``,
``m0``: no load of these kernels writes them), LDS bytes (which DMA a read reads: a wave reading its
own direct-to-LDS bytes in the same phase, a wait weakened so that one load of the newest stage stays
in flight, an LDS write over a load in flight; ``rocm.lds_sync`` at the TIR level and the emulator
check those), hazards that need ``s_nop`` (``GCNHazardRecognizer``), and register allocation beyond
what the rules above see.

``waterfall`` loops: a loop of ``v_readfirstlane_b32``, ``v_cmp_eq_*``, ``s_and_saveexec_b64``, a
vector-memory instruction, ``s_xor_b64 exec`` and ``s_cbranch_execnz`` is how LLVM issues a load
whose scalar operand (``soffset``, M0, the resource) it cannot prove wave-uniform: once per distinct
value in the wave. ``check`` logs a WARNING naming the load (logger ``tvm_cdna4.rocm.waitcheck``).

``tvm_cdna4.build`` runs ``require_clean`` on every gfx950 build (a finding is a ``ContractError``
with ``check="waitcheck"``); ``python -m tvm_cdna4 waitcheck FILE`` (``main``) on a file.
"""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
import tempfile

import attrs

from ..errors import ContractError

# ``isa.hardware`` (the waitcnt fields) is imported where it is used: importing ``isa`` loads the
# catalog, and the CLI builds this subcommand's parser on every call.

logger = logging.getLogger(__name__)

_NEWER = 64  # newer operations counted up to this, more than any counter's range: finite states, every wait retires it
BARRIERS_IN_FLIGHT = 1  # rule 3a: the GEMM's lds_dma pipeline keeps a stage in flight across one barrier
SUGGESTIONS = {  # by rule; `python -m tvm_cdna4 waitcheck FILE.s` lists every finding
    "read": "LLVM's wait insertion (SIInsertWaitcnts) left it out: report it with the kernel's LLVM IR "
            "(BuildResult.llvm_ir)",
    "dma": "retire the loads with T.rocm.s_waitcnt_vmcnt(n) before T.rocm.workgroup_barrier(): LLVM waits for no "
           "direct-to-LDS load (the async intrinsic; docs/patterns.md, direct-to-LDS loads)",
    "lds write unpublished": "order LDS writes and reads of different waves with T.rocm.workgroup_barrier() "
                             "(s_waitcnt lgkmcnt(0), then s_barrier), not a bare s_barrier",
}

# instruction kinds
WAIT, BARRIER, BRANCH, CBRANCH, END, CALL = "wait", "barrier", "branch", "cbranch", "end", "call"
VMEM_LOAD, VMEM_STORE, DMA, LDS, SMEM, FLAT, OTHER = "vmem load", "vmem", "dma", "lds", "smem", "flat", "other"

_REG = re.compile(r"(?<![\w.$])(?:([vas])(\d+)|([vas])\[(\d+):(\d+)\]|(vcc|exec|flat_scratch|xnack_mask)(?:_(lo|hi))?"
                  r"|(m0|scc))(?![\w$])")
_BASE = {"v": 0, "a": 256, "s": 512}
_SPECIAL = ("vcc_lo", "vcc_hi", "exec_lo", "exec_hi", "flat_scratch_lo", "flat_scratch_hi", "xnack_mask_lo",
            "xnack_mask_hi", "m0", "scc")
_SPECIAL_ID = {name: 1024 + i for i, name in enumerate(_SPECIAL)}
_INSTR = re.compile(r"^\s+([a-z][a-z0-9_]*)(?:\s+(.*?))?\s*$")
_LABEL = re.compile(r"^(?:<([^>]+)>|([.\w$]+)):")
_ADDRESS = re.compile(r"//\s*([0-9A-Fa-f]{6,}):")
_FUNC_TYPE = re.compile(r"^\s*\.type\s+([.\w$]+)\s*,\s*@function", re.M)
_FUNC_END = re.compile(r"^(?:\s*\.(?:size|section|amdgpu_metadata|end_amdgpu_metadata)\b|\.Lfunc_end\d*:"
                       r"|Disassembly of section)")
_WAIT_FIELD = re.compile(r"(vmcnt|expcnt|lgkmcnt)(_sat)?\s*\(\s*(\d+)\s*\)")
_DS_NOT_LDS = ("ds_bpermute", "ds_permute", "ds_swizzle", "ds_nop", "ds_gws", "ds_append", "ds_consume",
               "ds_ordered_count")
_NO_DESTINATION = ("s_cmp", "s_bitcmp", "s_set", "s_nop", "s_sleep", "s_sendmsg", "s_dcache", "s_icache",
                   "s_trap", "s_ttrace", "buffer_wbl2", "buffer_inv", "buffer_wbinv", "v_cmpx")


def _file(reg: int) -> str | None:
    return "v" if reg < 256 else "a" if reg < 512 else "s" if reg < 1024 else None


def register_name(reg: int) -> str:
    """``0`` -> ``v0``, ``256`` -> ``a0``, ``512`` -> ``s0``, special registers by name."""
    if reg >= 1024:
        return _SPECIAL[reg - 1024]
    return f"{_file(reg)}{reg - _BASE[_file(reg)]}"


def registers(text: str) -> list[int]:
    """The registers an operand text names (``v[4:7]`` -> 4 ids; ``vcc`` -> ``vcc_lo``, ``vcc_hi``)."""
    return _registers(text, 0)[1]


def _registers(text: str, cut: int) -> tuple[list[int], list[int]]:
    """The registers ``text`` names before character ``cut`` (the destination operand) and after it."""
    before, after = [], []
    for m in _REG.finditer(text):
        out = before if m.start() < cut else after
        if m.group(1):
            out.append(_BASE[m.group(1)] + int(m.group(2)))
        elif m.group(3):
            out.extend(range(_BASE[m.group(3)] + int(m.group(4)), _BASE[m.group(3)] + int(m.group(5)) + 1))
        elif m.group(6):
            halves = (m.group(7),) if m.group(7) else ("lo", "hi")
            out.extend(_SPECIAL_ID[f"{m.group(6)}_{h}"] for h in halves)
        else:
            out.append(_SPECIAL_ID[m.group(8)])
    return before, after


def span(regs) -> str:
    """Registers in asm syntax, runs of one file joined: ``v34, v35, v36, s2`` -> ``v[34:36], s2``."""
    names, regs, i = [], sorted(set(regs)), 0
    while i < len(regs):
        j = i
        while j + 1 < len(regs) and _file(regs[i]) and regs[j + 1] == regs[j] + 1 and _file(regs[j + 1]) == _file(regs[i]):
            j += 1
        first = register_name(regs[i])
        names.append(first if i == j else f"{first[0]}[{first[1:]}:{register_name(regs[j])[1:]}]")
        i = j + 1
    return ", ".join(names)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _mask(regs) -> int:
    out = 0
    for r in regs:
        out |= 1 << r
    return out


_OPERAND_COMMA = re.compile(r",(?![^\[(]*[\])])")  # a comma not inside [...] / (...)


def _operands(text: str) -> list[str]:
    return [o.strip() for o in _OPERAND_COMMA.split(text) if o.strip()]


class Instr:
    """One instruction: where it is, its kind and the registers it writes (``dst``) and reads (``src``)."""

    __slots__ = ("index", "line", "address", "text", "op", "kind", "dst", "src", "mask", "target", "wait",
                 "reads_lds", "writes_lds")

    def __init__(self, index: int, line: int, address: int | None, op: str, rest: str):
        self.index, self.line, self.address, self.op = index, line, address, op
        self.text = f"{op} {rest}".strip()
        self.kind, has_dst = _classify(op, rest)
        self.reads_lds = self.kind == LDS and not op.startswith(("ds_write", *_DS_NOT_LDS))
        self.writes_lds = self.kind == LDS and not op.startswith(("ds_read", *_DS_NOT_LDS))
        comma = _OPERAND_COMMA.search(rest) if has_dst else None
        first, others = _registers(rest, (comma.start() if comma else len(rest)) if has_dst else 0)
        self.dst, self.src = _mask(first), _mask(others)
        self.mask = self.dst | self.src
        self.target = rest.split()[0] if self.kind in (BRANCH, CBRANCH) and rest else None
        self.wait = _wait_counts(op, _operands(rest)) if self.kind == WAIT else None

    def where(self) -> str:
        return f"line {self.line}" + (f" (0x{self.address:x})" if self.address is not None else "")


def _classify(op: str, rest: str) -> tuple[str, bool]:
    """``(kind, whether the first operand is written)``."""
    if op.startswith("s_waitcnt"):
        return WAIT, False
    control = {"s_barrier": BARRIER, "s_branch": BRANCH, "s_endpgm": END, "s_endpgm_saved": END,
               "s_setpc_b64": END, "s_swappc_b64": CALL, "s_call_b64": CALL}
    if op in control:
        return control[op], op in ("s_swappc_b64", "s_call_b64")
    if op.startswith("s_cbranch_"):
        return CBRANCH, False
    if op.startswith(("buffer_", "global_", "scratch_")):
        if op.startswith(("global_load_lds_", "scratch_load_lds_")) or \
                (op.startswith("buffer_load_") and re.search(r"(?<![\w])lds(?![\w])", rest)):
            return DMA, False
        if "_load" in op:
            return VMEM_LOAD, True
        if "_atomic" in op:
            returns = re.search(r"(?<![\w])(sc0|glc)(?![\w])", rest) is not None
            return (VMEM_LOAD, True) if returns else (VMEM_STORE, False)
        return (VMEM_STORE, False) if "_store" in op else (OTHER, False)
    if op.startswith("flat_"):
        returns = "_load" in op or ("_atomic" in op and re.search(r"(?<![\w])(sc0|glc)(?![\w])", rest) is not None)
        return FLAT, returns
    if op.startswith("ds_"):
        writes = op.startswith(("ds_read", "ds_bpermute", "ds_permute", "ds_swizzle", "ds_append", "ds_consume")) \
            or "_rtn" in op
        return LDS, writes
    if op.startswith(("s_load_", "s_buffer_load_", "s_scratch_load_")) or op in ("s_memtime", "s_memrealtime"):
        return SMEM, True
    return OTHER, not op.startswith(_NO_DESTINATION)


def _wait_counts(op: str, operands: list[str]) -> tuple[int | None, int | None]:
    """``(vmcnt, lgkmcnt)`` a wait leaves in flight; None: no wait on that counter (its largest value)."""
    from ..isa.hardware import WAITCNT_MAX, waitcnt_counts

    counts = dict(WAITCNT_MAX)
    text = ", ".join(operands)
    if op == "s_waitcnt":
        fields = _WAIT_FIELD.findall(text)
        for name, sat, value in fields:
            counts[name] = min(int(value), WAITCNT_MAX[name]) if sat else int(value)
        if not fields and operands:
            try:
                counts = waitcnt_counts(int(operands[0].split()[0], 0))
            except ValueError:
                pass  # an expression we cannot read: no wait (stricter)
    elif op in ("s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt") and len(operands) == 2 and operands[0] in ("null", "off"):
        try:
            counts[op[len("s_waitcnt_"):]] = int(operands[1], 0)
        except ValueError:
            pass
    return tuple(None if counts[c] >= WAITCNT_MAX[c] else counts[c] for c in ("vmcnt", "lgkmcnt"))


@attrs.frozen
class Function:
    """A function of the assembly: its instructions and ``{label: index of the instruction after it}``."""

    name: str
    instrs: tuple[Instr, ...]
    labels: dict[str, int]


def parse(text: str) -> list[Function]:
    """The functions of LLVM's printed assembly (``.type NAME,@function``, ``NAME:`` ... ``.Lfunc_end``)
    or of ``llvm-objdump -d --symbolize-operands`` (``<NAME>:``, local labels ``<L0>:``)."""
    declared = set(_FUNC_TYPE.findall(text))
    functions, current = [], None
    for number, raw in enumerate(text.splitlines(), 1):
        address = _ADDRESS.search(raw)
        line = re.sub(r"\s*(//|;).*$", "", raw)
        if _FUNC_END.match(line):
            current = None
            continue
        label = _LABEL.match(line)
        if label:
            name = label.group(1) or label.group(2)
            if label.group(1):  # llvm-objdump: <NAME>: a symbol, <L0>: a local label
                function = not re.fullmatch(r"L\d+", name)
            else:
                function = name in declared if declared else not name.startswith(".")
            if function:
                current = (name, [], {})
                functions.append(current)
            elif current is not None:
                current[2][name] = len(current[1])
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            current[1].append(Instr(len(current[1]), number, int(address.group(1), 16) if address else None,
                                    m.group(1), m.group(2) or ""))
    return [Function(name, tuple(instrs), labels) for name, instrs, labels in functions if instrs]


@attrs.frozen
class Block:
    start: int
    end: int  # one past the last instruction
    succs: tuple[int, ...]  # block indices


def blocks(fn: Function) -> list[Block]:
    """The basic blocks: a new one at every label and after every branch or end."""
    n = len(fn.instrs)
    starts = {0} | {i for i in fn.labels.values() if i < n}
    starts |= {i + 1 for i, ins in enumerate(fn.instrs) if ins.kind in (BRANCH, CBRANCH, END) and i + 1 < n}
    order = sorted(starts)
    block_of = {s: b for b, s in enumerate(order)}
    out = []
    for b, start in enumerate(order):
        end = order[b + 1] if b + 1 < len(order) else n
        last = fn.instrs[end - 1]
        succs = []
        if last.kind in (BRANCH, CBRANCH):
            target = fn.labels.get(last.target)
            if target in block_of:
                succs.append(block_of[target])
        if last.kind not in (BRANCH, END) and end < n:
            succs.append(block_of[end])
        out.append(Block(start, end, tuple(dict.fromkeys(succs))))
    return out


@attrs.frozen
class Finding:
    """One wait missing: ``line`` (of the text checked; ``address`` in a code object), the instruction,
    the registers (none for the direct-to-LDS rules), what is wrong and the wait expected vs found."""

    rule: str  # "read", "overwrite", "dma in flight", "dma unpublished"
    line: int
    address: int | None
    instruction: str
    registers: tuple[str, ...]
    what: str
    expected: str
    found: str
    source_line: int  # the load, or the barrier, it concerns

    @property
    def opcode(self) -> str:
        return self.instruction.split()[0]

    @property
    def where(self) -> str:
        return f"line {self.line}" + (f" (0x{self.address:x})" if self.address is not None else "")

    def __str__(self) -> str:
        return f"{self.where}: `{self.instruction}` {self.what}; expected {self.expected}, found {self.found}"


class _State:
    """The memory operations in flight at a program point, over every path to it."""

    __slots__ = ("vm", "lds", "smem", "flat", "published", "unpublished", "_mask")

    def __init__(self):
        self.vm: dict[tuple[int, int, int], int] = {}  # (index, barriers crossed or -1: a register load, last barrier) -> newer ops
        self.lds: dict[int, int] = {}  # ds_* -> newer LDS ops
        self.smem: dict[int, int] = {}  # scalar loads (out of order: only lgkmcnt(0) retires them)
        self.flat: dict[int, int] = {}  # flat loads -> counters waited to 0 on every path (1 vmcnt, 2 lgkmcnt)
        self.published = False  # a direct-to-LDS load retired by a wait since the last barrier, on every path
        self.unpublished: dict[int, frozenset[int]] = {}  # barrier -> LDS writes it did not publish (rules 3b, 4)
        self._mask: int | None = 0

    def copy(self) -> _State:
        out = _State()
        out.vm, out.lds, out.smem, out.flat = dict(self.vm), dict(self.lds), dict(self.smem), dict(self.flat)
        out.published, out.unpublished, out._mask = self.published, dict(self.unpublished), self._mask
        return out

    def mask(self, instrs) -> int:
        """The registers that operations in flight will write."""
        if self._mask is None:
            m = 0
            for key in self.vm:
                m |= instrs[key[0]].dst if key[1] < 0 else 0
            for table in (self.lds, self.smem, self.flat):
                for i in table:
                    m |= instrs[i].dst
            self._mask = m
        return self._mask

    def merge(self, other: _State) -> bool:
        """Join ``other`` into this state (fewest newer operations, counters waited on every path);
        whether anything changed."""
        changed = False
        for mine, theirs in ((self.vm, other.vm), (self.lds, other.lds), (self.smem, other.smem)):
            for key, n in theirs.items():
                if key not in mine or n < mine[key]:
                    mine[key], changed = n, True
        for i, bits in other.flat.items():
            if self.flat.get(i, bits) & bits != self.flat.get(i):
                self.flat[i], changed = self.flat.get(i, bits) & bits, True
        if self.published and not other.published:
            self.published, changed = False, True
        for barrier, loads in other.unpublished.items():
            if not loads <= self.unpublished.get(barrier, frozenset()):
                self.unpublished[barrier], changed = self.unpublished.get(barrier, frozenset()) | loads, True
        if changed:
            self._mask = None
        return changed


def _retire(st: _State, vm_n: int | None, lgkm_n: int | None) -> None:
    """An ``s_waitcnt`` leaving at most ``vm_n`` / ``lgkm_n`` in flight (None: no wait on that counter)."""
    if vm_n is not None:
        retired = [key for key, n in st.vm.items() if n >= vm_n]
        st.published = st.published or any(key[1] >= 0 for key in retired)
        for key in retired:
            del st.vm[key]
    if lgkm_n is not None:
        st.lds = {i: n for i, n in st.lds.items() if n < lgkm_n}
        if lgkm_n == 0:
            st.smem = {}
    done = (1 if vm_n == 0 else 0) | (2 if lgkm_n == 0 else 0)
    if done and st.flat:
        st.flat = {i: bits | done for i, bits in st.flat.items() if bits | done != 3}
    st._mask = None


def _cross(st: _State, barrier: int, instrs, limit: int) -> None:
    """An ``s_barrier``: the direct-to-LDS loads in flight cross it (rule 3); it publishes no LDS write
    still in flight (rule 4), nor the direct-to-LDS loads if none was retired since the last barrier."""
    dma = {key: n for key, n in st.vm.items() if key[1] >= 0}
    unpublished = {key[0] for key in dma} if not st.published else set()
    unpublished |= {i for i in st.lds if instrs[i].writes_lds}
    st.unpublished = {barrier: frozenset(unpublished)} if unpublished else {}
    st.vm = {key: n for key, n in st.vm.items() if key[1] < 0}
    for (i, crossed, _), n in dma.items():
        key = (i, min(crossed + 1, limit + 1), barrier)
        st.vm[key] = min(st.vm.get(key, n), n)
    st.published = False


def _apply(ins: Instr, st: _State, instrs, limit: int) -> None:
    """What ``ins`` does to the operations in flight."""
    kind = ins.kind
    if kind == WAIT:
        _retire(st, *ins.wait)
    elif kind == BARRIER:
        _cross(st, ins.index, instrs, limit)
    elif kind in (VMEM_LOAD, VMEM_STORE, DMA):
        st.vm = {key: min(n + 1, _NEWER) for key, n in st.vm.items()}
        if kind != VMEM_STORE:
            st.vm[(ins.index, -1, -1) if kind == VMEM_LOAD else (ins.index, 0, -1)] = 0
            st._mask = None
    elif kind == LDS:
        st.lds = {i: min(n + 1, _NEWER) for i, n in st.lds.items()}
        st.lds[ins.index] = 0
        st._mask = None if ins.dst else st._mask
    elif kind in (SMEM, FLAT) and ins.dst:
        (st.smem if kind == SMEM else st.flat)[ins.index] = 0
        st._mask = None
    elif kind == CALL:
        st.vm, st.lds, st.smem, st.flat, st._mask = {}, {}, {}, {}, 0


def _wait_text(counter: str, value: int) -> tuple[str, str]:
    """``(expected, found)`` for a register still written by an operation of ``counter``: ``value`` is
    its newer operations in flight (at least that many: the count stops at the counter's range), for
    a flat load the counters already waited to 0 (bit 1 vmcnt, bit 2 lgkmcnt)."""
    from ..isa.hardware import WAITCNT_MAX

    n, bits = min(value, WAITCNT_MAX["vmcnt" if counter == "vm" else "lgkmcnt"] - 1), value
    if counter == "vm":
        return (f"an s_waitcnt vmcnt({n}) or lower between them",
                f"none on some path ({n} newer vector-memory operations there)")
    if counter == "lds":
        return f"an s_waitcnt lgkmcnt({n}) or lower between them", f"none on some path ({n} newer LDS operations there)"
    if counter == "smem":
        return "an s_waitcnt lgkmcnt(0) between them (scalar loads complete out of order)", "none on some path"
    missing = " and ".join(c for c, bit in (("vmcnt(0)", 1), ("lgkmcnt(0)", 2)) if not bits & bit)
    return "s_waitcnt vmcnt(0) and lgkmcnt(0) between them (flat operations complete out of order)", \
        f"no {missing} on some path"


def _check_registers(ins: Instr, st: _State, instrs, found: dict) -> None:
    """Rules 1 and 2: ``ins`` reads or writes a register an operation in flight writes."""
    tables = (("vm", ((k[0], n) for k, n in st.vm.items() if k[1] < 0)), ("lds", st.lds.items()),
              ("smem", st.smem.items()), ("flat", st.flat.items()))
    for counter, entries in tables:
        for i, n in entries:
            load = instrs[i]
            if not ins.mask & load.dst:
                continue
            read = ins.src & load.dst
            if not read and ((counter == "vm" and ins.kind == VMEM_LOAD) or (counter == "lds" and ins.kind == LDS)):
                continue  # the same in-order counter: the older load lands first
            regs = _bits((read or ins.dst) & load.dst)
            verb = "reads" if read else "writes"
            after = "may still be writing" if read else "in flight will write after it"
            expected, missing = _wait_text(counter, n)
            found[("read" if read else "overwrite", ins.index, i)] = Finding(
                "read" if read else "overwrite", ins.line, ins.address, ins.text, tuple(register_name(r) for r in regs),
                f"{verb} {span(regs)}, which `{load.text}` ({load.where()}) {after}", expected, missing, load.line)


def _check_dma(ins: Instr, st: _State, instrs, found: dict, limit: int) -> None:
    """Rule 3: an LDS read while a direct-to-LDS load is in flight across too many barriers, or after a
    barrier that published none of those in flight."""
    def keep(key, finding):
        if key not in found or ins.index <= found[key][0]:
            found[key] = (ins.index, finding)

    for (i, crossed, barrier), _ in st.vm.items():
        if crossed > limit:
            dma, b = instrs[i], instrs[barrier]
            keep(("dma in flight", i), Finding(
                "dma in flight", ins.line, ins.address, ins.text, (),
                f"reads LDS while the direct-to-LDS `{dma.text}` ({dma.where()}) is in flight across more than "
                f"{limit} barrier(s), the last at {b.where()}", f"an s_waitcnt vmcnt retiring it before {b.where()}",
                "it still in flight here", dma.line))
    for barrier, writes in st.unpublished.items():
        b = instrs[barrier]
        for rule, kind in (("dma unpublished", DMA), ("lds write unpublished", LDS)):
            mine = sorted(i for i in writes if instrs[i].kind == kind)
            if not mine:
                continue
            first = instrs[mine[0]]
            if kind == DMA:
                what = (f"reads LDS after the s_barrier at {b.where()}, which published no direct-to-LDS load of the "
                        f"{len(mine)} in flight there (the first: `{first.text}`, {first.where()})")
                expected = "an s_waitcnt vmcnt retiring the loads this phase reads before that barrier"
                missing = "no direct-to-LDS load retired since the barrier before it"
            else:
                what = (f"reads LDS after the s_barrier at {b.where()}, at which the LDS write `{first.text}` "
                        f"({first.where()}) was still in flight" + (f" ({len(mine)} such writes)" if len(mine) > 1 else ""))
                expected = "an s_waitcnt lgkmcnt retiring it before that barrier (T.rocm.workgroup_barrier)"
                missing = "it in flight at the barrier"
            keep((rule, barrier), Finding(rule, ins.line, ins.address, ins.text, (), what, expected, missing, b.line))


def analyze(fn: Function, limit: int = BARRIERS_IN_FLIGHT) -> list[Finding]:
    """Every finding of one function: the dataflow over its blocks to a fixed point (a worklist in
    program order; each block's entry state only grows, over a finite lattice, so it ends)."""
    import heapq

    bl = blocks(fn)
    entry = {0: _State()}
    queue, queued = [0], {0}
    registers_found: dict = {}
    dma_found: dict = {}
    while queue:
        b = heapq.heappop(queue)
        queued.discard(b)
        st = entry[b].copy()
        for ins in fn.instrs[bl[b].start:bl[b].end]:
            if ins.mask and ins.mask & st.mask(fn.instrs):
                _check_registers(ins, st, fn.instrs, registers_found)
            if ins.reads_lds and (st.unpublished or st.vm):
                _check_dma(ins, st, fn.instrs, dma_found, limit)
            _apply(ins, st, fn.instrs, limit)
        for s in bl[b].succs:
            if s not in entry:
                entry[s] = st.copy()
            elif not entry[s].merge(st):
                continue
            if s not in queued:
                heapq.heappush(queue, s)
                queued.add(s)
    return list(registers_found.values()) + [finding for _, finding in dma_found.values()]


def waterfalls(fn: Function) -> list[tuple[Instr, Instr, Instr]]:
    """``(memory instruction, first, last instruction of the loop)`` of each readfirstlane waterfall loop:
    a loop closed by ``s_cbranch_execnz`` holding ``v_readfirstlane_b32``, ``v_cmp_eq_*``,
    ``s_and_saveexec_*``, ``s_xor_* exec`` and the vector-memory instruction it issues per value."""
    out = []
    for last in fn.instrs:
        target = fn.labels.get(last.target) if last.op == "s_cbranch_execnz" else None
        if target is None or target > last.index:
            continue
        body = fn.instrs[target:last.index + 1]
        ops = [i.op for i in body]
        if "v_readfirstlane_b32" in ops and any(op.startswith("v_cmp_eq_") for op in ops) \
                and any(op.startswith("s_and_saveexec_") for op in ops) \
                and any(i.op.startswith("s_xor_") and i.text.split()[1].startswith("exec") for i in body):
            out.extend((i, body[0], last) for i in body if i.kind in (VMEM_LOAD, VMEM_STORE, DMA))
    return out


@attrs.frozen
class Report:
    findings: tuple[Finding, ...]
    waterfalls: tuple[str, ...]  # the warnings logged
    functions: int
    instructions: int


def check(asm: str, barriers_in_flight: int = BARRIERS_IN_FLIGHT) -> Report:
    """Every finding of every function of ``asm`` (LLVM's assembly or ``llvm-objdump -d`` output), in
    line order; a WARNING on the ``tvm_cdna4.rocm.waitcheck`` logger for each waterfall loop."""
    functions = parse(asm)
    findings, warnings = [], []
    for fn in functions:
        findings.extend(analyze(fn, barriers_in_flight))
        for ins, first, last in waterfalls(fn):
            warnings.append(
                f"{fn.name}: `{ins.text}` ({ins.where()}) runs in a readfirstlane waterfall loop ({first.where()} to "
                f"{last.where()}): LLVM could not prove a scalar operand of it (soffset, M0, the buffer resource) "
                f"wave-uniform and issues it once per distinct value in the wave; compute that operand from "
                f"kernel arguments, blockIdx or T.rocm.wave_id() (readfirstlane), not from threadIdx")
            logger.warning(warnings[-1])
    findings.sort(key=lambda f: (f.line, f.rule, f.registers))
    return Report(tuple(findings), tuple(warnings), len(functions), sum(len(fn.instrs) for fn in functions))


def error(findings) -> ContractError:
    """The ``ContractError`` (``check="waitcheck"``) of ``findings``: the first one's sentence, the
    others (up to four) after it."""
    first, rest = findings[0], findings[1:]
    more = (f"{len(rest)} more: " + "; ".join(map(str, rest[:4])) + ("; ..." if len(rest) > 4 else "")) if rest else None
    return ContractError(f"{first.what} ({first.where} of the assembly)", opcode=first.opcode, operand=span(
        [r for name in first.registers for r in registers(name)]) or "LDS", expected=first.expected,
        found=first.found, suggestion=SUGGESTIONS.get(first.rule, SUGGESTIONS["dma" if first.rule.startswith("dma")
                                                              else "read"]), proof=more, check="waitcheck")


def require_clean(asm: str, barriers_in_flight: int = BARRIERS_IN_FLIGHT) -> Report:
    """``check(asm)``; a finding is a ``ContractError`` (``check="waitcheck"``)."""
    report = check(asm, barriers_in_flight)
    if report.findings:
        raise error(report.findings)
    return report


def disassemble(code_object: bytes, objdump: str) -> str:
    """``llvm-objdump -d --symbolize-operands`` of a gfx950 code object (``check`` reads it)."""
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(code_object)
        f.flush()
        proc = subprocess.run([objdump, "-d", "--mcpu=gfx950", "--symbolize-operands", "--no-leading-addr", f.name],
                              capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{objdump} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
    return proc.stdout


def _arguments(p: argparse.ArgumentParser, find_tool) -> argparse.ArgumentParser:
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="LLVM's gfx950 assembly (.s, e.g. --emit asm) or a code object (.hsaco/.o: disassembled "
                        "with llvm-objdump)")
    p.add_argument("--barriers-in-flight", type=int, default=BARRIERS_IN_FLIGHT, metavar="N",
                   help="barriers a direct-to-LDS load may stay in flight across while LDS reads go on "
                        f"(default {BARRIERS_IN_FLIGHT}: three LDS stages)")
    p.set_defaults(func=lambda args: run(args.file, args.barriers_in_flight, find_tool))
    return p


def add_parser(subparsers, find_tool=None) -> argparse.ArgumentParser:
    """The ``waitcheck`` subcommand (``find_tool(name)``: the path of an LLVM tool that knows gfx950,
    ``rocm.build.llvm_tool``, for a code object's disassembly)."""
    return _arguments(subparsers.add_parser("waitcheck", help="check the s_waitcnt of gfx950 assembly or a code object",
                                            description=__doc__.split("\n\n")[0]), find_tool)


def run(path: str | None, barriers_in_flight: int = BARRIERS_IN_FLIGHT, find_tool=None) -> int:
    """Check one file: 0 clean, 1 findings (one line each on stdout), 2 a usage error (one line)."""
    import shutil

    def usage(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)
        return 2

    if not path:
        return usage("waitcheck takes one FILE: gfx950 assembly (.s) or a code object (.hsaco/.o)")
    if barriers_in_flight < 0:
        return usage(f"--barriers-in-flight must be 0 or more; got {barriers_in_flight}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        return usage(f"cannot read {path}: {err.strerror}")
    if data.startswith(b"\x7fELF"):
        tool = (find_tool or (lambda name: shutil.which(f"{name}-22")))("llvm-objdump")
        if tool is None:
            return usage(f"{path} is a code object; disassembling it needs llvm-objdump for gfx950 (Debian llvm-22)")
        try:
            data = disassemble(data, tool).encode()
        except RuntimeError as err:
            return usage(str(err))
    report = check(data.decode(errors="replace"), barriers_in_flight)
    if not report.instructions:
        return usage(f"no instructions in {path}: expected gfx950 assembly (LLVM's .s or llvm-objdump -d output)")
    for finding in report.findings:
        print(f"{path}: {finding}")
    print(f"{path}: {len(report.findings)} finding(s) in {report.functions} function(s), {report.instructions} "
          f"instructions")
    return 1 if report.findings else 0


def main(argv: list[str] | None = None, find_tool=None) -> int:
    """``python -m tvm_cdna4 waitcheck FILE`` without the package's CLI around it."""
    args = _arguments(argparse.ArgumentParser(prog="python -m tvm_cdna4 waitcheck"), find_tool).parse_args(argv)
    return args.func(args)
