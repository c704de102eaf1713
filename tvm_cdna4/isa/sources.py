"""Where each catalog fact comes from. Cited by key from the records (``Record.sources``)."""

SOURCES: dict[str, str] = {
    "seed-mfma": "shared/seeds/cdna4-dense-mfma-builtins.txt (AMD HIP docs: CDNA4 dense MFMA builtins)",
    "seed-tr": "shared/seeds/cdna4-ds-read-tr-builtins.txt (AMD HIP docs: CDNA4 MFMA transpose load builtins)",
    "llc22": "Debian llc 22.1.8, -mtriple=amdgcn-amd-amdhsa -mcpu=gfx950: every llvm_intrinsic here "
    "compiles and prints this mnemonic (checked by tests/test_catalog_llvm.py when llc-22 is installed)",
    "cdna3-isa": "AMD Instinct MI300 (CDNA3) ISA reference, section 7.1 'Dependent/MFMA' "
    "(CBSZ/ABID broadcast, BLGP lane-group patterns, NEG for DGEMM)",
    "lane-model": "Generic MFMA input model: lane = row + M*block + M*blocks*kgroup, element = k mod "
    "elements-per-lane (seed: 'packed inputs ... blocks = 64/M', 'scalar inputs ... each K position "
    "occupies a separate group of M lanes'; AMD matrix instruction calculator; Triton AMD MFMA layouts)",
    "tr-rule": "ds_read_b64_tr rule of shared/notes/cdna4-facts.md (matches rocRoller hardware-test "
    "expectations and the seed's FP16 GEMM load_b)",
}
