"""The kernels, by family and by target.

- Families (target-neutral): :mod:`.gemm` (``GemmProblem``, the fused epilogue, dynamic-M buckets,
  grouped offsets) and :mod:`.attention` (``AttentionProblem``); each holds its problem record, its
  float64 reference and error bound, and ``TARGETS``: one row per target with the same verbs.
- Targets: :mod:`.gfx950` (AMD CDNA4, the ``T.rocm`` / ``T.amdgcn`` patterns) and :mod:`.sm80`
  (CUDA Ampere class, also runs on sm_90): each target's plans, cost models and emitters.

docs/architecture.md draws the house and says where a new epilogue input, target, family or opcode goes.
"""
