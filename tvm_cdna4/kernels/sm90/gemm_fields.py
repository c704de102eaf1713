"""The ``Sm90Config`` fields the sm90 GEMM takes by name (``gemm_target.config_from_options``; the CLI's
``--cluster-m`` ...). A leaf module without imports: the command line reads the names without importing the target
(its planner and cost model: most of a second at start-up)."""

FIELD_OPTIONS = ("cluster_m", "residual_read", "tile_walk", "epilogue", "epilogue_tile", "raster", "split_k")
"""The ``Sm90Config`` fields ``config_from_options`` takes by name (the CLI's ``--cluster-m``, ``--residual-read``,
``--tile-walk``, ``--epilogue``, ``--epilogue-tile``, ``--raster``, ``--split-k``): each replaces that field of the config
the options would otherwise give (the cost model's choice, or the tile options'; ``split_k`` carries ``decomposition``
with it, ``gemm_target._replaced``); the config's ``check`` and the plan refuse a value."""

__all__ = ["FIELD_OPTIONS"]
