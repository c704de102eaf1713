"""Attrs records describing CDNA4 opcodes. Data only: the instances (``CATALOG``) live in ``mfma_table`` and
``ds_read_tr_table``; lane maps are pure functions in ``lanes``; semantics in ``reference``."""

from __future__ import annotations

import attrs

from ..errors import ContractError

WAVE_SIZE = 64


@attrs.frozen
class Modifier:
    """An immediate operand of an MFMA builtin with its legal closed range ``[lo, hi]``."""

    name: str
    lo: int
    hi: int
    meaning: str

    def check(self, value: int, opcode: str) -> None:
        """Raise a ContractError unless ``value`` is an int (not a bool) in ``[lo, hi]``."""
        if not isinstance(value, int) or isinstance(value, bool) or not self.lo <= value <= self.hi:
            raise ContractError(
                f"modifier {self.name}={value!r} is illegal", opcode=opcode,
                expected=f"an integer in [{self.lo}, {self.hi}] ({self.meaning})",
                suggestion=f"write {self.name}={int(value)}, an integer" if isinstance(value, bool) else None,
                check="modifier range")


@attrs.frozen
class MfmaOp:
    """One dense MFMA builtin (``kind='mfma'``) or scaled MFMA builtin (``kind='mfma_scale'``).

    Shapes: one instruction computes ``blocks`` independent ``D[b] = A[b] @ B[b] + C[b]`` with
    ``A[b]: m x k``, ``B[b]: k x n``. Each of the 64 lanes holds ``a_elems`` elements of A and
    ``b_elems`` of B (for scaled MFMA: K positions, whatever the format), and ``acc_elems``
    accumulator elements (``acc_regs`` 32-bit registers; f64 elements take two).
    """

    name: str
    builtin: str
    llvm_intrinsic: str
    mnemonic: str
    kind: str
    m: int
    n: int
    k: int
    blocks: int
    a_format: str  # element format; "f8f6f4" for scaled MFMA (chosen by cbsz/blgp codes)
    b_format: str
    acc_format: str
    a_elems: int
    b_elems: int
    acc_elems: int
    a_vector: str  # LLVM type of the A operand ("<8 x half>", "i64", ...); scaled: fp8 choice
    b_vector: str
    acc_vector: str
    acc_layout: str  # key into lanes.ACC_LAYOUTS
    modifiers: tuple[Modifier, ...]
    ops: int
    cycles: int  # scaled MFMA: the FP8/BF8 figure; see cycles_by_format
    cycles_by_format: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def acc_regs(self) -> int:
        from .formats import fmt

        return self.acc_elems * fmt(self.acc_format).bits // 32

    @property
    def blgp_role(self) -> str:
        """``lane_group_pattern``, ``negate`` (FP64) or ``format`` (scaled MFMA)."""
        if self.kind == "mfma_scale":
            return "format"
        return "negate" if self.acc_format == "f64" else "lane_group_pattern"

    def modifier(self, name: str) -> Modifier:
        for mod in self.modifiers:
            if mod.name == name:
                return mod
        raise KeyError(f"{self.name} has no modifier {name!r}; it has {[m.name for m in self.modifiers]}")

    def check_modifiers(self, **values: int) -> None:
        """Raise a ContractError naming the modifier for any unknown or out-of-range value."""
        names = {m.name for m in self.modifiers}
        for key, value in values.items():
            if key not in names:
                raise ContractError(f"unknown modifier {key!r}", opcode=self.name,
                                    expected=f"modifiers from {sorted(names)}", check="parameters")
            self.modifier(key).check(value, self.name)
        if self.kind == "mfma":
            cbsz, abid = values.get("cbsz", 0), values.get("abid", 0)
            if abid >= (1 << cbsz) and abid != 0:
                raise ContractError(
                    f"abid={abid} needs cbsz >= {abid.bit_length()} "
                    f"(abid selects a block inside a broadcast group of 2**cbsz={1 << cbsz} blocks)",
                    opcode=self.name, found=f"cbsz={cbsz}", check="modifier range")


@attrs.frozen
class DsReadTrOp:
    """One ``ds_read_tr`` transpose LDS load.

    Each lane supplies one LDS address; the hardware reads ``load_bits`` there (the lane's chunk)
    and, inside each group of 16 lanes, hands every lane ``elements`` values of ``element_bits``
    gathered across the chunks (see ``lanes.tr_provider``).
    """

    name: str
    builtin: str
    llvm_intrinsic: str
    mnemonic: str
    element_bits: int
    load_bits: int
    elements: int  # matrix elements returned per lane (= load_bits / element_bits)
    result_vector: str  # LLVM return type
    result_format: str  # format of the vector elements as typed by the builtin
    lds_alignment: int  # bytes
    k_split: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]  # per call, [lo, hi] ranges
    k_split_mfma: str  # MFMA whose operand the seed's K-split table describes (our reading)
    feeds: tuple[str, ...]  # MFMA formats this load serves
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    kind = "ds_read_tr"
