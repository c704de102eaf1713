"""gfx950 (CDNA4) target and hardware constants: the target rule (``patterns.check_target``), the
occupancy estimate (``rocm.build.KernelInfo.waves_per_simd``) and the schedules' LDS budget read them."""

from __future__ import annotations

GFX950 = "gfx950"  # the LLVM ``mcpu`` (and TIRx ROCm target) name
TARGET_SPELLING = '{"kind": "rocm", "mcpu": "gfx950"}'  # the TIRx target, as users write it
GFX950_VGPRS_PER_SIMD_LANE = 512  # unified ArchVGPR + AccVGPR file
GFX950_MAX_WAVES_PER_SIMD = 8
GFX950_LDS_BYTES = 160 * 1024  # per CU, shared by its 4 SIMDs
