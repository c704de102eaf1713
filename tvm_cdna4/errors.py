"""``ContractError``: a program that breaks a documented contract (minimal; see issue 14)."""

from __future__ import annotations


class ContractError(ValueError):
    """A contract violation; ``opcode``, ``operand`` and ``rule`` name what broke it (or None)."""

    def __init__(self, message: str, *, opcode: str | None = None, operand: str | None = None, rule: str | None = None):
        super().__init__(message)
        self.opcode, self.operand, self.rule = opcode, operand, rule
