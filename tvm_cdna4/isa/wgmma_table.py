"""Hopper ``wgmma.mma_async``: the forms the package registers (which instructions exist). Pure data
(no TIRx import); every layout of these forms (owner maps, the matrix descriptor, canonical shared
layouts, the swizzle) is ``isa.hopper_layout``'s.

Public source: NVIDIA PTX ISA 8.x (8.0+, ``sm_90a``), §9.7.15 "Asynchronous Warpgroup Level Matrix
Multiply-Accumulate Instructions" (numbered §9.7.17 in later editions, whose numbers are quoted here):

- §9.7.17.2 "Matrix Shape": ``m64nNkK``, N a multiple of 8 in [8, 256]; K = 32 bytes of input: 16 for
  f16/bf16, 32 for e4m3/e5m2 (``KIND``, ``N_DOMAIN``; ``hopper_layout.k_of``).
- §9.7.17.5.2 ``wgmma.mma_async``: ``imm-trans-a/b`` (an MN-major shared operand) exist for
  f16/bf16 only; the RS form takes no ``imm-trans-a``; ``imm-scale-a/b`` in {-1, 1}.
- §9.7.17.7 ``wgmma.fence`` / ``commit_group`` / ``wait_group``.

The fp8 forms' accumulation (``FP8_ACCUMULATION_BITS``) is not in the PTX ISA (which says f32): DeepSeek-V3
technical report (arXiv 2412.19437), §3.3.2 "Increasing Accumulation Precision" and §3.5.2 "Compute Hardware":
on Hopper an fp8 GEMM aligns the 32 products of a k-step by right-shifting them to the largest exponent and keeps
the highest 14 bits of each, truncating the rest; the accumulation into the registers also keeps 14 bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hopper_layout import M, WARPGROUP_THREADS, k_of

N_DOMAIN = tuple(range(8, 257, 8))  # §9.7.17.2: f16/bf16/fp8 lines


@dataclass(frozen=True)
class WgmmaKind:
    """One input type group with an f32 accumulator: the PTX type names, element bits and K."""

    atype: str
    btype: str
    bits: int
    tir_dtypes: tuple[str, ...]
    """TIR dtypes a shared/register tile of these elements may have (bit-pattern spellings too)."""
    transposable: bool
    """Whether a shared operand may be MN-major (``imm-trans``: f16/bf16 only)."""

    @property
    def k(self) -> int:
        """One instruction's K (32 bytes of input: ``hopper_layout.k_of``)."""
        return k_of(self.bits)

    @property
    def elems_per_register(self) -> int:
        return 32 // self.bits


# the registered input types (f32 accumulator); fp8 A and B types may differ (§9.7.17.5.2)
KIND = {
    "f16": WgmmaKind("f16", "f16", 16, ("float16", "uint16", "int16"), True),
    "bf16": WgmmaKind("bf16", "bf16", 16, ("bfloat16", "uint16", "int16"), True),
    "e4m3": WgmmaKind("e4m3", "e4m3", 8, ("float8_e4m3fn", "uint8", "int8"), False),
    "e5m2": WgmmaKind("e5m2", "e5m2", 8, ("float8_e5m2", "uint8", "int8"), False),
}
FP8 = ("e4m3", "e5m2")
ACC_DTYPE = "float32"  # the registered forms accumulate in f32 (dtype .f32)
FP8_ACCUMULATION_BITS = 14
"""e4m3 / e5m2 forms: the significant bits the tensor cores keep of each addend of a k-step (its 32 products and
the accumulator, aligned to the largest one's exponent; the bits below truncated: the module docstring's DeepSeek-V3
report). The sm90 fp8 attention's S = Q K^T on an H100 matched this model to 4 digits (docs/sm90_attention.md,
"fp8 accumulation"); ``kernels.attention.problem.Accumulation`` charges it."""
FORMS = ("ss", "rs")  # A from shared memory (descriptor) or from registers


@dataclass(frozen=True)
class WgmmaShape:
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{atype}.{btype}``."""

    n: int
    atype: str
    btype: str

    def __post_init__(self):
        if self.atype not in KIND or self.btype not in KIND:
            raise ValueError(f"input types must be among {sorted(KIND)}, got {self.atype}/{self.btype}")
        if (self.atype in FP8) != (self.btype in FP8) or (self.atype not in FP8 and self.atype != self.btype):
            raise ValueError(f"A and B types must be the same 16-bit type or both fp8, got {self.atype}/{self.btype}")
        if self.n not in N_DOMAIN:
            raise ValueError(f"N must be a multiple of 8 in [8, 256], got {self.n}")

    @property
    def k(self) -> int:
        return KIND[self.atype].k

    @property
    def ptx(self) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n{self.n}k{self.k}.f32.{self.atype}.{self.btype}"

    @property
    def acc_registers(self) -> int:
        """f32 accumulator registers per thread: M*N/128 = N/2."""
        return M * self.n // WARPGROUP_THREADS

    @property
    def a_elements(self) -> int:
        """A elements per thread in the RS form: M*K/128 (4 registers)."""
        return M * self.k // WARPGROUP_THREADS


def parse(name: str) -> WgmmaShape:
    """A registered form from its PTX spelling, with or without the ``wgmma.mma_async.sync.aligned.``
    prefix: ``m64n128k16.f32.bf16.bf16``. ValueError when it is not one."""
    text = str(name).removeprefix("wgmma.mma_async.sync.aligned.")
    parts = text.split(".")
    if len(parts) != 4 or not parts[0].startswith("m64n") or "k" not in parts[0] or parts[1] != "f32":
        raise ValueError(f"{name!r} is not a registered wgmma form: expected 'm64n<N>k<K>.f32.<atype>.<btype>' "
                         f"with atype/btype among {sorted(KIND)}")
    n_text, k_text = parts[0][4:].split("k", 1)
    shape = WgmmaShape(int(n_text), parts[2], parts[3])
    if int(k_text) != shape.k:
        raise ValueError(f"{name!r}: {shape.atype} takes K = {shape.k}, not {k_text}")
    return shape


def registered_forms() -> list[tuple[str, WgmmaShape]]:
    """The forms the selftest compiles: ``(form, shape)`` for bf16/f16 SS and RS, e4m3/e5m2 SS and RS
    (the smallest N that exercises two 8-column accumulator blocks, 16)."""
    return [(form, WgmmaShape(16, t, t)) for t in KIND for form in FORMS]


__all__ = ["ACC_DTYPE", "FORMS", "FP8", "FP8_ACCUMULATION_BITS", "KIND", "N_DOMAIN", "WgmmaKind", "WgmmaShape", "parse", "registered_forms"]
