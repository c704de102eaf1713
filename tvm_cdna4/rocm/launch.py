"""The launch configuration of a kernel, read from its TIR: the one walk over ``launch_thread``.

``launch_extents(root)`` collects the ``T.launch_thread`` regions under ``root`` (a kernel's body,
a device entry's body or a lowered device function's body): ``blockIdx.*`` extents are the grid,
``threadIdx.*`` extents the workgroup. The whole-kernel rules (``rocm.analysis``), the emulator and
the HIP launcher (``runtime.hip``) all read it.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class LaunchExtents:
    """``{"x": 256, ...}`` per axis of the grid (``blockIdx``) and the workgroup (``threadIdx``);
    None for an extent that is not a constant."""

    grid: dict[str, int | None]
    block: dict[str, int | None]
    expressions: dict[str, object] = attrs.field(factory=dict)
    """``{"blockIdx.x": extent, ...}``: the TIR expression of every extent that is not a constant (a
    dynamic-M kernel's grid; ``emulator.emulate`` evaluates it once the shapes bind ``M``)."""

    def constant(self, who: str) -> tuple[dict[str, int], dict[str, int]]:
        """``(grid, block)`` as ints; a ValueError naming ``who`` when an extent is symbolic."""
        symbolic = [f"{kind}.{axis}" for kind, extents in (("blockIdx", self.grid), ("threadIdx", self.block))
                    for axis, value in extents.items() if value is None]
        if symbolic:
            raise ValueError(f"{who}: the launch extent of {', '.join(symbolic)} is not a constant")
        return dict(self.grid), dict(self.block)


def launch_extents(root) -> LaunchExtents:
    """The ``launch_thread`` extents under ``root`` (a TIR statement)."""
    import tvm_ffi
    from tvm_tirx import ir

    grid: dict[str, int | None] = {}
    block: dict[str, int | None] = {}
    expressions: dict[str, object] = {}

    def visit(node):
        if node.op.name == "tirx.launch_thread":
            tag = node.args[0].value
            kind, _, axis = tag.partition(".")
            extent = node.args[1]
            (block if kind == "threadIdx" else grid)[axis] = int(extent.value) if isinstance(extent, ir.IntImm) else None
            if not isinstance(extent, ir.IntImm):
                expressions[tag] = extent

    tvm_ffi.structural_walk(root, [(ir.RegionStmt, visit)])
    return LaunchExtents(grid=grid, block=block, expressions=expressions)
