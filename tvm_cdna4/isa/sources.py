"""Where each catalog fact comes from. Records cite these keys in ``sources``; docs/sources.md quotes them."""

SOURCES: dict[str, str] = {
    "hip-mfma": "AMD HIP documentation (rocm.docs.amd.com, HIP reference, MFMA builtins), page 'CDNA4 dense MFMA "
    "builtins': shapes, types, block counts, accumulator layout tables, modifier ranges, throughput table",
    "hip-tr": "AMD HIP documentation (rocm.docs.amd.com, HIP reference, MFMA builtins), page 'CDNA4 MFMA transpose "
    "load builtins': types, K-split table, alignment, FP16 GEMM example",
    "llc22": "Debian llc 22.1.8 -mtriple=amdgcn-amd-amdhsa -mcpu=gfx950: each llvm_intrinsic compiles and "
    "prints this mnemonic (tests/isa/test_catalog_llvm.py re-checks when llc-22 is installed)",
    "calculator": "ROCm/amd_matrix_instruction_calculator, matrix_calculator.py: InstCalcGfx9.__get_input_reg_lanes "
    "('lane = b * M; lane += int(k / elements_in_contiguous_gprs) * M * B; lane += i'), "
    "_get_cbsz_abid_transformed_block ('base_block + abid'), _get_blgp_transformed_lane; README: "
    "'CBSZ cannot be greater than log2(blocks), ABID cannot be greater than 2^CBSZ-1', FP64 "
    "'lowest-order bit of BLGP will negate Src0 ... middle bit ... Src1 ... highest-order bit ... C'",
    "llvm-td": "llvm/include/llvm/IR/IntrinsicsAMDGPU.td: 'in gfx940 BLGP argument is replaced by NEG bitfield "
    "in the DGEMM MFMA'; scaled MFMA intrinsics overloaded on the A/B vector types",
    "triton-mx": "triton-lang/triton AMD backend (LinearLayoutConversions.cpp, gfx950 dot_scaled): 32 consecutive "
    "K values per lane for every MX format; scale of row/col L % M, K block L // M in lane L",
    "rocroller-tr6": "ROCm/rocRoller transpose-load utilities: 'extra number of bytes required to fulfill 128b "
    "alignment requirement of 6-bit transpose loads'",
    "tr-rule": "per-lane rule of ds_read_b64_tr (lane L, element i reads element (L mod 16) mod n of the chunk of "
    "lane 16*(L//16) + (L mod 16 >> log2 n) + (16/n)*i): matches ROCm/rocRoller's transpose-load hardware-test "
    "expectations, the FP16 GEMM load_b and K-split table of hip-tr, and the '16x8 bytes, two interleaved 8x8 byte "
    "transposes' description of tr8",
    "dpp": "llvm/lib/Target/AMDGPU/SIDefines.h (DppCtrl: QUAD_PERM_FIRST 0 with four 2-bit lane selects, "
    "ROW_MIRROR 0x140, ROW_HALF_MIRROR 0x141; a DPP row is 16 lanes); llvm.amdgcn.update.dpp; gfx950's "
    "llvm.amdgcn.permlane16.swap / permlane32.swap given the same value twice return the lane's own and its partner's "
    "value (lane ^ 16 / lane ^ 32): mlir/test/Conversion/AMDGPUToROCDL/permlane.mlir lowers amdgpu.permlane_swap %x 16 "
    "and 32 for gfx950 to rocdl.permlane16/32.swap %x, %x and keeps the result that is not %x; llc 22 for gfx950 fuses "
    "a DPP move into its VALU user (tests/patterns/test_wave_reduce.py)",
    "cdna4-isa": "AMD Instinct CDNA4 ISA Reference Guide (MI350 series; amd.com), S_WAITCNT and the data dependency "
    "resolution it describes: a wave waits on its vector-memory (VM_CNT), LDS/GDS/constant/message (LGKM_CNT) and "
    "export (EXP_CNT) counters. No copy of it was reachable here: the counter facts rocm.waitcheck uses are taken from "
    "the LLVM sources below, which implement them for gfx950",
    "llvm-waitcnt": "llvm/lib/Target/AMDGPU/SIInsertWaitcnts.cpp: counterOutOfOrder ('Scalar memory read always can go "
    "out of order'; 'On targets without VScnt, LOAD_CNT includes all of STORE_CNT as well. All these events use one "
    "counter and do not go out of order with respect to each other'); the file's header ('when both SMEM and LDS are "
    "in flight and we need to wait for the i-th-last LDS instruction, then an lgkmcnt(i) is actually sufficient'); a "
    "pending FLAT operation forces a wait to 0 (hasPendingFlat); callWaitsOnFunctionEntry ('the callee inserts an "
    "s_waitcnt 0 on function entry'); LDS DMA scored on the vector-memory counter (EXTRA_VGPR_LDS)",
    "llvm-waitcnt-syntax": "llvm/docs/AMDGPU/gfx9_waitcnt.rst (gfx940 the same): VM_CNT bits 15:14 and 3:0 (0..63), "
    "EXP_CNT 6:4 (0..7), LGKM_CNT 11:8 (0..15); '*_sat' helpers; 'Spaces, ampersands, and commas may be used as optional "
    "separators'; 'If some values are omitted, the corresponding fields will default to their maximum value'. llvm-mc "
    "22 -mcpu=gfx950 encodes every such spelling and refuses s_waitcnt_vmcnt / s_waitcnt_lgkmcnt ('instruction not "
    "supported on this GPU': gfx10+ encodings; tests/rocm/test_waitcheck.py re-checks both)",
    "amdgpuusage": "llvm/docs/AMDGPUUsage.rst, Memory Model GFX942: 'All LDS operations of a CU are performed as "
    "wavefront wide operations in a global order and involve no caching. Completion is reported to a wavefront in "
    "execution order.'; LLVM PR #153244: 'global_load_lds or buffer/global_load instructions with the lds flag are LDS "
    "DMA loads'",
    "llvm-lds-dma": "LLVM PR #170263 (SIInsertWaitcnts, Dec 2025): the LDS DMA instructions 'update only VM_CNT (on "
    "GFX9)' and are not flat operations",
    "llvm-subtarget": "llvm/lib/Target/AMDGPU/GCNSubtarget.h: vmemWriteNeedsExpWaitcnt() is getGeneration() < "
    "SEA_ISLANDS: only gfx6 holds a vector-memory store's data registers after issue (an EXP_CNT wait before they are "
    "overwritten), so on gfx950 a store's data registers are free once it issues",
}
