"""The GEMM family: the problem, the fused epilogue, dynamic-M buckets and grouped offsets both targets share."""
