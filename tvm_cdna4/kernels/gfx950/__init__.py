"""gfx950 (AMD CDNA4, MI350/MI355X): the GEMM and attention plans, cost models and emitters."""
