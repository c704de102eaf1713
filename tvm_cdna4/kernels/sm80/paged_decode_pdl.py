"""Programmatic dependent launch (PDL) of the sm80-class paged decode (``PagedDecodeConfig.pdl``,
``PagedDecodePlan.pdl``; the sm90 row takes sm80's launch code and merge kernel, so the same).

With ``pdl``, each launch of a call (``main``; then ``merge``, unless the plan merges in main's last CTA) is
a programmatic dependent of the kernel before it in the stream: its ``LaunchConfig`` sets
``programmatic_stream_serialization`` (TIRx records the launch field in the device module's function
information; its CUDA runtime launches the kernel by ``cuLaunchKernelEx`` with the attribute
``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``, under CUDA-graph capture a programmatic edge), so
the kernel may start before the one before it has finished, once every CTA of that one has run
``griddepcontrol.launch_dependents`` or exited. The PTX ISA (9.7.15.14, ``griddepcontrol``):

* ``griddepcontrol.wait`` blocks the thread until every prerequisite grid has *completed* and its memory
  operations are performed and visible to the current grid (not merely until those grids triggered); where
  the kernel was launched without the attribute, it returns at once;
* ``griddepcontrol.launch_dependents`` only lets the dependents be *scheduled* early (once every CTA of this
  grid ran it or exited); it orders nothing, so it may run at the kernel's start.

Hence, in each kernel (``paged_decode_emit.grid_wait``), what reads memory another kernel may write comes after
the thread's wait:

* ``main``: its wait comes before its first global read (the first is ``CONTEXT_LENS``; Q, the caches, the
  table and the scales later): a kernel before it in the stream (the cache append, the previous call's merge,
  which reads the workspace main overwrites) has completed before any of them. Its ``launch_dependents`` right
  after: the merge's CTAs (with the last-CTA merge: the next kernel's) start in the slots main's last wave
  leaves, while main runs.
* ``merge``: its index math before its wait, every global read after it (``CONTEXT_LENS``, then the
  partials ``WM``, ``WL``, ``WO``: main does not write the lengths, but the ISA promises visibility only to a
  grid that waited, so the lengths wait too; ptxas hoists the wait there anyway); then its
  ``launch_dependents`` (the next call's ``main`` waits in turn before it overwrites the workspace). The
  partials are read by ``ld.global.nc`` (the compiler's choice for a kernel that does not write them): none is
  read before the wait, which makes main's writes visible to this grid.

The emulator runs the grids in order (``griddepcontrol`` does nothing there); ``emulate(...,
after_wait=names)`` checks that no thread reads those buffers through a plain or ``ld`` load before its
wait (``paged_target.execute`` passes every parameter of both kernels; cp.async and TMA
reads, main's Q, K and V, are not checked)."""

from __future__ import annotations

PDL = False
"""Whether a plan without ``PagedDecodeConfig.pdl`` launches as a programmatic dependent: no, until timed
(``gpu_stop45.sh pagedpdl``)."""
PDL_ARCH = 90  # griddepcontrol (and the launch attribute) need sm_90 (PTX ISA 9.7.15.14)


def choose_pdl(config, arch: str, target: str) -> bool:
    """The plan's ``pdl``: ``config.pdl``, else ``PDL`` where ``arch`` has it; forced below ``PDL_ARCH``: refused."""
    from ...errors import ContractError
    from .attention_plan import arch_number

    has = arch_number(arch) >= PDL_ARCH
    if config.pdl and not has:
        raise ContractError(f"{target} paged decode pdl: griddepcontrol needs sm_{PDL_ARCH}", operand="pdl",
                            check="parameters", expected=f"an arch of sm_{PDL_ARCH} or newer", found=arch)
    return (PDL and has) if config.pdl is None else config.pdl


def serialization(p):
    """The launch field ``programmatic_stream_serialization``: True with ``p.pdl``, else None (left out: the
    default plans' code stays as it was)."""
    return True if p.pdl else None


__all__ = ["PDL", "PDL_ARCH", "choose_pdl", "serialization"]
