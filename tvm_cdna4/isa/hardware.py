"""gfx950 (CDNA4) target and hardware constants: the target rule (``patterns.check_target``), the
occupancy estimate (``rocm.build.KernelInfo.waves_per_simd``) and the schedules' LDS budget read them."""

from __future__ import annotations

GFX950 = "gfx950"  # the LLVM ``mcpu`` (and TIRx ROCm target) name
TARGET_SPELLING = '{"kind": "rocm", "mcpu": "gfx950"}'  # the TIRx target, as users write it
GFX950_VGPRS_PER_SIMD_LANE = 512  # unified ArchVGPR + AccVGPR file
GFX950_MAX_WAVES_PER_SIMD = 8
GFX950_LDS_BYTES = 160 * 1024  # per CU, shared by its 4 SIMDs

# ``s_waitcnt`` on gfx9 targets, gfx950 included (isa.sources ``llvm-waitcnt-syntax``): the counters' bit
# fields of the 16-bit immediate and their largest values; a counter a wait leaves out is its largest
# value, i.e. no wait on it. ``rocm.waitcheck`` decodes waits with these, ``patterns.wave`` encodes them.
WAITCNT_MAX = {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 15}
_WAITCNT_FIELDS = {"vmcnt": ((0, 4), (14, 2)), "expcnt": ((4, 3),), "lgkmcnt": ((8, 4),)}  # (low bit, width), low first


def waitcnt_imm(vmcnt: int = 63, expcnt: int = 7, lgkmcnt: int = 15) -> int:
    """The ``s_waitcnt`` immediate of these counter values (each within ``WAITCNT_MAX``)."""
    imm = 0
    for name, value in (("vmcnt", vmcnt), ("expcnt", expcnt), ("lgkmcnt", lgkmcnt)):
        if not 0 <= value <= WAITCNT_MAX[name]:
            raise ValueError(f"s_waitcnt {name} must be in 0..{WAITCNT_MAX[name]}; got {value}")
        for low, width in _WAITCNT_FIELDS[name]:
            imm |= (value & ((1 << width) - 1)) << low
            value >>= width
    return imm


def waitcnt_counts(imm: int) -> dict[str, int]:
    """``{"vmcnt": .., "expcnt": .., "lgkmcnt": ..}`` of an ``s_waitcnt`` immediate (``s_waitcnt 0x3f70``)."""
    out = {}
    for name, fields in _WAITCNT_FIELDS.items():
        value, shift = 0, 0
        for low, width in fields:
            value |= ((imm >> low) & ((1 << width) - 1)) << shift
            shift += width
        out[name] = value
    return out
