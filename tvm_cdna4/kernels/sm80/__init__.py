"""sm80-class CUDA (cp.async, ldmatrix, mma.sync; sm_80 and later): the GEMM, decode GEMM and attention plans, cost models and emitters."""
