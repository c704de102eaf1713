"""The whole-kernel rule of ``T.sm90.tile.apply(T.wgmma[...])`` (``patterns.wgmma``): an accumulator
is not read or written between the wgmma that writes it and the ``wgmma.wait_group`` that retires
it (PTX ISA §9.7.17.7.3: "Accessing the accumulator register ... before the wait ... is undefined").

``check_accumulators(func)`` walks the kernel as written, in program order: each pattern call is one
committed wgmma group (its ``wait=`` retires groups at once); ``T.ptx["wgmma.wait_group.sync.aligned"](n)``
retires all groups but the newest ``n``. Storage is named by its root buffer (``decl_tensor`` views
of it included, and views made from a pointer into it, ``p = acc.ptr_to(...)``). Any other statement
that names a buffer of a pending group is a ``ContractError`` (check ``"accumulator wait"``); another
wgmma into the same accumulator is not (the hardware orders them). Loops are walked twice (what one
iteration leaves pending meets the next; a ``while``'s condition is read before each), and the state
after a loop is the union of its end and of every ``break``'s; both branches of an ``if`` are walked
(its condition is read first) and the state after either is their union. What the walk cannot decide
(a wait count that is not a constant, a ``continue`` with a group in flight) is logged as a WARNING
(a non-constant wait retires nothing). ``cuda.build`` runs it
on every kernel it compiles.
"""

from __future__ import annotations

import logging

import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.ir import Var

from ..errors import ContractError

logger = logging.getLogger("tvm_cdna4")
PATTERN_OP = "tirx.cuda.sm90.tile.apply"
WAIT_OP = "tirx.ptx.wgmma_wait_group"


def _call(stmt):
    if isinstance(stmt, ir.Evaluate) and isinstance(stmt.value, ir.Call) and hasattr(stmt.value.op, "name"):
        return stmt.value
    return None


class _Walk:
    def __init__(self):
        self.alias: dict = {}
        self.groups: list[tuple[int, object, str]] = []  # pending (group, root buffer, call text)
        self.count = 0
        self.exits: list[list] = []  # the pending groups at each ``break`` of the innermost loop

    def root(self, var):
        while var in self.alias:
            var = self.alias[var]
        return var

    def names(self, node) -> list:
        found = []
        tvm_ffi.structural_walk(node, [(Var, lambda v: found.append(self.root(v)))])
        return found

    def bind(self, stmt):
        from tvm_tirx.tirx import is_tensor_var

        sources = [v for v in self.names(stmt.value) if is_tensor_var(v) or v in self.alias]
        if sources:  # a tensor view, or a pointer into a tensor (``acc.ptr_to(...)``) a view is made from
            self.alias[stmt.var] = sources[0]

    def pending(self):
        return {root: text for _, root, text in self.groups}

    def retire(self, keep: int):
        self.groups = self.groups[len(self.groups) - keep:] if keep else []

    def wgmma(self, call):
        operands = list(call.args[1].fields)
        d = operands[0].source if hasattr(operands[0], "source") else None
        if d is None:
            logger.warning("wgmma accumulator check: cannot decide: the accumulator of %s is not a tensor region", call)
            return
        root = self.root(d)
        self._access([op for op in operands[1:]], call, skip=root)
        self.count += 1
        self.groups.append((self.count, root, str(call).splitlines()[0][:200]))
        params = {p.fields[0].value: p.fields[1] for p in (call.args[2].fields if call.args[2] is not None else ())}
        wait = params.get("wait")
        if wait is not None:
            self.retire(int(wait.value))

    def wait(self, call):
        from ..tirx_private import decode_ptx_call, ptx_entry

        group = decode_ptx_call(ptx_entry("wgmma_wait_group"), call.args).operands["group"][0]
        value = getattr(group, "value", None)
        if not isinstance(value, int):
            logger.warning("wgmma accumulator check: cannot decide: wgmma.wait_group count %s is not a constant; "
                           "treated as retiring no group", group)
            return
        self.retire(value)

    def _access(self, node, stmt, skip=None):
        pending = self.pending()
        if not pending:
            return
        for root in self.names(node):
            if (skip is not None and root.same_as(skip)) or root not in pending:
                continue
            text = pending[root]
            raise ContractError(
                "the accumulator of a wgmma is read or written before the wgmma.wait_group that retires it",
                opcode="wgmma.mma_async", operand=str(root.name if hasattr(root, "name") else root),
                expected="wgmma.wait_group (or wait= on the pattern call) before this access",
                found=f"{str(stmt).splitlines()[0][:160]} after {text}",
                suggestion='T.ptx["wgmma.wait_group.sync.aligned"](0) before reading the accumulator',
                check="accumulator wait")

    def loop(self, s):
        """The body twice (constant waits: no new pending group from a third iteration), a while's condition
        before each; after it the union of the end state and every ``break``'s."""
        outer, self.exits = self.exits, []
        for _ in range(2):
            if isinstance(s, ir.While):
                self._access(s.condition, s)
            self.stmt(s.body)
        for state in self.exits:
            self.groups = list(dict.fromkeys([*self.groups, *state]))
        self.exits = outer

    def stmt(self, s):
        if isinstance(s, ir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, ir.For | ir.While):
            self.loop(s)
        elif isinstance(s, ir.Break):  # its groups leave the loop with it (``loop``)
            self.exits.append(list(self.groups))
        elif isinstance(s, ir.Continue):
            if self.groups:
                logger.warning("wgmma accumulator check: cannot decide: a continue with a wgmma group in flight "
                               "(%s); the check follows the loop's end only", self.groups[-1][2])
        elif isinstance(s, ir.If):
            self._access(s.condition, s)
            before = list(self.groups)
            self.stmt(s.then_case)
            after_then, self.groups = self.groups, before
            if s.else_case is not None:
                self.stmt(s.else_case)
            self.groups = list(dict.fromkeys([*after_then, *self.groups]))
        elif isinstance(s, ir.RegionStmt):
            self.stmt(s.body)
        elif isinstance(s, ir.Bind):
            self._access(s.value, s)
            self.bind(s)
        else:
            call = _call(s)
            name = call.op.name if call is not None else ""
            if name == PATTERN_OP:
                self.wgmma(call)
            elif name == WAIT_OP:
                self.wait(call)
            else:
                self._access(s, s)


def check_accumulators(func) -> None:
    """Raise a ``ContractError`` when ``func`` (a TIRx PrimFunc, as written) reads or writes a wgmma
    accumulator before its wait (module docstring)."""
    body = getattr(func, "body", None)
    if body is None:
        return
    found = []
    tvm_ffi.structural_walk(body, [(ir.Call, lambda c: found.append(1) if getattr(c.op, "name", "") == PATTERN_OP
                                    else None)])
    if found:
        _Walk().stmt(body)


__all__ = ["check_accumulators"]
