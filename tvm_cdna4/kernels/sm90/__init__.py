"""The Hopper (sm_90a) target: the warp-specialized TMA + wgmma GEMM (``gemm_target``)."""
