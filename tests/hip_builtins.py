"""Builtin lists of AMD's HIP documentation, transcribed (tests check the catalog against them).

Sources (public; the HIP documentation at rocm.docs.amd.com, "MFMA builtins" reference section):

- ``MFMA_BUILTINS``: page "CDNA4 dense MFMA builtins" (``cdna4-dense-mfma-builtins``), section
  "Builtin reference", the 38 builtins in the order the page lists them.
- ``DS_READ_TR_BUILTINS``: page "CDNA4 MFMA LDS transpose load builtins" (``cdna4-mfma-lds-builtins``,
  titled "CDNA4 MFMA transpose load builtins"), section "Builtin reference", in page order.
"""

MFMA_BUILTINS = (
    "__builtin_amdgcn_mfma_f32_32x32x1f32",
    "__builtin_amdgcn_mfma_f32_16x16x1f32",
    "__builtin_amdgcn_mfma_f32_4x4x1f32",
    "__builtin_amdgcn_mfma_f32_32x32x2f32",
    "__builtin_amdgcn_mfma_f32_16x16x4f32",
    "__builtin_amdgcn_mfma_f32_32x32x4f16",
    "__builtin_amdgcn_mfma_f32_16x16x4f16",
    "__builtin_amdgcn_mfma_f32_4x4x4f16",
    "__builtin_amdgcn_mfma_f32_32x32x8f16",
    "__builtin_amdgcn_mfma_f32_16x16x16f16",
    "__builtin_amdgcn_mfma_f32_32x32x16_f16",
    "__builtin_amdgcn_mfma_f32_16x16x32_f16",
    "__builtin_amdgcn_mfma_f32_32x32x4bf16_1k",
    "__builtin_amdgcn_mfma_f32_16x16x4bf16_1k",
    "__builtin_amdgcn_mfma_f32_4x4x4bf16_1k",
    "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k",
    "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k",
    "__builtin_amdgcn_mfma_f32_32x32x16_bf16",
    "__builtin_amdgcn_mfma_f32_16x16x32_bf16",
    "__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8",
    "__builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8",
    "__builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8",
    "__builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8",
    "__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8",
    "__builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8",
    "__builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8",
    "__builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8",
    "__builtin_amdgcn_mfma_f64_16x16x4f64",
    "__builtin_amdgcn_mfma_f64_4x4x4f64",
    "__builtin_amdgcn_mfma_i32_32x32x4i8",
    "__builtin_amdgcn_mfma_i32_16x16x4i8",
    "__builtin_amdgcn_mfma_i32_4x4x4i8",
    "__builtin_amdgcn_mfma_i32_32x32x16_i8",
    "__builtin_amdgcn_mfma_i32_16x16x32_i8",
    "__builtin_amdgcn_mfma_i32_32x32x32_i8",
    "__builtin_amdgcn_mfma_i32_16x16x64_i8",
    "__builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4",
    "__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4",
)

DS_READ_TR_BUILTINS = (
    "__builtin_amdgcn_ds_read_tr4_b64_v2i32",
    "__builtin_amdgcn_ds_read_tr6_b96_v3i32",
    "__builtin_amdgcn_ds_read_tr8_b64_v2i32",
    "__builtin_amdgcn_ds_read_tr16_b64_v4i16",
    "__builtin_amdgcn_ds_read_tr16_b64_v4f16",
    "__builtin_amdgcn_ds_read_tr16_b64_v4bf16",
)
