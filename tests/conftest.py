"""Fixtures and markers for these tests come from the package's pytest plugin,
``tvm_cdna4.testing`` (``rng``, ``run_gfx950``, ``run_cuda``; ``gfx950``, ``cuda``, ``llvm``)."""
