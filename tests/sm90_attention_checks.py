"""Shared by the sm90 attention emulator tests (tests/kernels/sm90): one config validated in the CUDA emulator."""

from tvm_cdna4.kernels import attention

EMULATOR = "the CUDA emulator (no GPU runner)"
"""``Validation.where`` of a run in the CUDA emulator (no GPU here)."""


def check_emulated(problem, config, lse: bool = True):
    """``attention.validate`` of ``config`` in the CUDA emulator: within the bound, and not vacuously (P and O round to
    16 bits, so O's error is not 0 but where one key is all there is; with ``lse``, the LSE's not 0 either)."""
    v = attention.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR, v
    assert v.o_ratio > 0 or problem.seq_kv == 1, v
    assert v.lse_ratio > 0 or not lse, v
    return v
