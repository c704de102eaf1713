"""Global atomics for gfx950 kernels, exposed as ``T.rocm.*``: what split-K GEMMs reduce with.

- ``T.rocm.global_atomic_add_f32(dst, index, value)``: ``dst[index] += value`` as one
  ``global_atomic_add_f32`` (no return value; ``index`` a flat offset in float32 elements from the
  start of ``dst``, whose shape is ignored), at **agent scope** (every workgroup of the device
  sees one order of the additions to an address) with relaxed ordering: it orders nothing else.
  Contract: ``dst`` is a float32 tensor in global memory (a kernel parameter or a view of one),
  ``value`` a float32 scalar, the element 4-byte aligned (a float32 element of a 4-byte-aligned
  buffer), coarse-grained memory (``hipMalloc``; not fine-grained host memory) and target gfx950.
  Violations visible before the kernel runs are ``ContractError`` (dtype, scope: here; target:
  ``rocm.analysis``). Additions to one address from many lanes and workgroups happen one at a
  time in some order, so a sum is exact up to f32 reassociation; a plain store to an address that
  an atomic of the same launch updates is a race (the emulator raises ``EmulationError`` for it,
  whichever comes first), and so is reading such an address in the same launch, unless the
  release/acquire pair below orders them.
- ``T.rocm.global_atomic_add_u32(dst, index, value)`` -> uint32: ``old = dst[index]; dst[index] +=
  value`` as one ``global_atomic_add ... sc0`` (the returning form), agent scope, relaxed: a
  split-K tile's *ticket* (the workgroup that draws ``k_splits - 1`` is the last of its tile).
  Contract: ``dst`` a uint32 (or int32) global tensor, ``value`` a 32-bit integer.
- ``T.rocm.fence_release()`` / ``T.rocm.fence_acquire()``: agent-scope fences (LLVM ``fence
  syncscope("agent") release|acquire``; on gfx950 ``buffer_wbl2 sc1; s_waitcnt vmcnt(0)
  lgkmcnt(0)`` and ``s_waitcnt vmcnt(0); buffer_inv sc1``, ``isa.llvm_helpers.FENCE_MNEMONICS``).
  The publication pattern of a split-K reduction: every thread's atomics (or stores) into the
  workspace, ``fence_release``, a workgroup barrier, one thread's ticket; the workgroup that draws
  the last ticket runs ``fence_acquire`` before it reads the workspace. The emulator checks both
  halves: a global load (or plain store) of a byte that another thread updated atomically in the
  launch is a race unless that thread released its update and the reader acquired after it
  (``emulator.globalmem.GlobalAtomics``); a plain store after the thread's own atomic is the last
  update of that byte (the ticket's reset) is ordered by coherence.
"""

from __future__ import annotations

from tvm_tirx.script.ir_builder.base import auto_emit_void_call
from tvm_tirx.tirx import op as _op

from ..errors import ContractError
from ..isa.llvm_helpers import (FENCE_ACQUIRE_AGENT, FENCE_RELEASE_AGENT, GLOBAL_ATOMIC_ADD_F32,
                                GLOBAL_ATOMIC_ADD_F32_MNEMONIC, GLOBAL_ATOMIC_ADD_U32, GLOBAL_ATOMIC_ADD_U32_MNEMONIC)


def _dtype(x) -> str:
    ty = getattr(x, "ty", None)
    return str(getattr(ty, "dtype", getattr(x, "dtype", "")))


@auto_emit_void_call
def global_atomic_add_f32(dst, index, value):
    """``T.rocm.global_atomic_add_f32(dst, index, value)``: ``dst[index] += value`` as one atomic
    read-modify-write, with no return value.

    - ``dst``: a float32 tensor in global memory (a kernel parameter or a view of one).
    - ``index``: the element to add to, as a **flat offset in float32 elements** (not bytes) from
      the start of ``dst``'s data: ``dst`` is used as a pointer and its shape is ignored, so element
      ``(i, j)`` of an ``(M, N)`` tensor is ``index = i * N + j`` (int32; lane-varying allowed).
      Nothing checks the bounds at compile time; the emulator reports an index past the buffer.
    - ``value``: the float32 scalar to add.

    Lowers to ``global_atomic_add_f32`` (an ``atomicrmw fadd`` at ``syncscope("agent")``,
    monotonic): every workgroup of the device sees one order of the additions to an address, and
    it orders nothing else (relaxed). Waits: none to write; it counts in ``vmcnt``. To read the sum
    in the same launch, the adding threads run ``T.rocm.fence_release()`` and the reader
    ``T.rocm.fence_acquire()`` after observing them (module docstring: the split-K pattern).
    Contract: ``dst``'s memory is coarse-grained (``hipMalloc``), the target gfx950 (``rocm.analysis``).
    ``ContractError`` for a ``dst`` that is not float32 or not in global memory, a ``value`` that
    is not float32.

    Example: ``T.rocm.global_atomic_add_f32(C, row * N + col, acc[r])``
    """
    opcode = GLOBAL_ATOMIC_ADD_F32_MNEMONIC
    elem = str(getattr(dst, "dtype", ""))
    if elem != "float32":
        raise ContractError("global_atomic_add_f32 adds to float32 elements", opcode=opcode, operand="dst",
                            expected="a float32 tensor in global memory", found=f"{getattr(dst, 'name', dst)} ({elem or 'not a tensor'})",
                            suggestion="reduce 16-bit outputs in an f32 workspace, then convert", check="dtype")
    scope = str(getattr(getattr(dst, "ty", None), "scope", "global") or "global")
    if scope != "global":
        raise ContractError("global_atomic_add_f32 needs a global-memory destination", opcode=opcode, operand="dst",
                            expected="scope 'global'", found=f"scope {scope!r}", check="storage scope")
    if _dtype(value) != "float32":
        raise ContractError("global_atomic_add_f32 adds a float32 value", opcode=opcode, operand="value",
                            expected="float32", found=_dtype(value) or repr(value), check="dtype")
    return _op.call_extern(GLOBAL_ATOMIC_ADD_F32, dst.data, index, value, ty="void")


def _global_scope(dst, opcode: str) -> None:
    scope = str(getattr(getattr(dst, "ty", None), "scope", "global") or "global")
    if scope != "global":
        raise ContractError(f"{opcode} needs a global-memory destination", opcode=opcode, operand="dst",
                            expected="scope 'global'", found=f"scope {scope!r}", check="storage scope")


def global_atomic_add_u32(dst, index, value):
    """``T.rocm.global_atomic_add_u32(dst, index, value)`` -> uint32: ``old = dst[index]; dst[index] +=
    value`` as one atomic read-modify-write; returns ``old``.

    - ``dst``: a uint32 (or int32) tensor in global memory.
    - ``index``: a flat offset in 32-bit **elements** from the start of ``dst``'s data, as for
      ``global_atomic_add_f32`` (``dst``'s shape is ignored).
    - ``value``: the 32-bit integer to add (a Python int becomes a uint32 constant).

    Lowers to ``global_atomic_add ... sc0`` (the returning form of an ``atomicrmw add`` at
    ``syncscope("agent")``, monotonic): a split-K tile's *ticket* (the workgroup that draws
    ``k_splits - 1`` is the last of its tile). Waits: LLVM waits (``vmcnt``) before ``old`` is
    used; publishing what was written before it takes ``T.rocm.fence_release()`` first, reading what
    others published ``T.rocm.fence_acquire()`` after. ``ContractError`` for a ``dst`` that is not a
    32-bit integer tensor in global memory, a ``value`` that is not a 32-bit integer.

    Example: ``ticket[0] = T.rocm.global_atomic_add_u32(Tickets, tile, T.uint32(1))``
    """
    opcode = GLOBAL_ATOMIC_ADD_U32_MNEMONIC
    elem = str(getattr(dst, "dtype", ""))
    if elem not in ("uint32", "int32"):
        raise ContractError("global_atomic_add_u32 adds to 32-bit integer elements", opcode=opcode, operand="dst",
                            expected="a uint32 or int32 tensor in global memory",
                            found=f"{getattr(dst, 'name', dst)} ({elem or 'not a tensor'})", check="dtype")
    _global_scope(dst, opcode)
    if isinstance(value, int):
        value = _op.const(value, "uint32")
    if _dtype(value) not in ("uint32", "int32"):
        raise ContractError("global_atomic_add_u32 adds a 32-bit integer value", opcode=opcode, operand="value",
                            expected="uint32 or int32", found=_dtype(value) or repr(value), check="dtype")
    return _op.call_extern(GLOBAL_ATOMIC_ADD_U32, dst.data, index, value, ty="uint32")


@auto_emit_void_call
def fence_release():
    """``T.rocm.fence_release()``: agent-scope release fence. No arguments.

    This thread's earlier global writes and atomics become visible to a thread of any workgroup
    that acquires (``T.rocm.fence_acquire()``) after observing a later write of this thread.
    Lowers to ``fence syncscope("agent") release``: on gfx950 ``buffer_wbl2 sc1`` then
    ``s_waitcnt vmcnt(0) lgkmcnt(0)``, so it is itself the wait for the thread's stores and atomics.

    Example: ``T.rocm.global_atomic_add_f32(W, i, v); T.rocm.fence_release()``
    """
    return _op.call_extern(FENCE_RELEASE_AGENT, ty="void")


@auto_emit_void_call
def fence_acquire():
    """``T.rocm.fence_acquire()``: agent-scope acquire fence. No arguments.

    This thread's later loads see what the releases it synchronised with (by observing a write
    made after them: a ticket) published. Lowers to ``fence syncscope("agent") acquire``: on gfx950
    ``s_waitcnt vmcnt(0)`` then ``buffer_inv sc1`` (stale vector L1 / L2 lines dropped).

    Example: ``if last_ticket: T.rocm.fence_acquire(); total = W[i]``
    """
    return _op.call_extern(FENCE_ACQUIRE_AGENT, ty="void")
