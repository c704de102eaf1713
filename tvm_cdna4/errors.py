"""Contract errors, and how a build shows them.

``ContractError`` (a ``ValueError``) is what every pattern contract, modifier range and operand
check raises: it names the opcode, the operand, the rule, what was expected and found and, where
one exists, a fix. Its first line is that sentence; what the analyzer could not prove (its
*residue*, e.g. ``cannot prove atom_lane % 4 == 0``) follows on the next line.

TIRx wraps every exception a tile pattern's ``lower()`` raises in a ``RuntimeError("Tensor
instruction lowering failed: ...")`` and hands it through C++, which keeps only the text. Two
things undo that, on every route (``tvm_tirx.tirx.compile`` included):

- ``unwrapped_dispatch(run_dispatch)`` is the dispatch of ``tirx.rocm.tile.apply`` (our op only;
  ``tirx_private.wrap_tile_dispatch``): a ``ContractError`` under TIRx's wrapper is raised as
  itself. ``tvm_ffi`` knows the type (``register_error``), so it crosses C++ as a
  ``ContractError``, rebuilt from its text with TIRx's context (``Error in pass``, the TVMScript
  location) appended; the rebuilt error takes the fields of its original (the latest
  ``ContractError`` of the thread) and keeps that context in ``context``, after the sentence.
- ``presented()``, around our own TIRx compile calls, re-raises the original itself, without
  TIRx's context, the wrapper and the pattern's own frames. Both stay (the wrapper, with TIRx's C++
  frames, as the cause) under ``TVM_CDNA4_TRACEBACK=1`` or ``full_tracebacks()`` (the CLI's ``-v``).

``report()`` prints an error for the command line.

``presented()`` also moves TIRx's two ROCm codegen warnings (no ROCm install on a build machine is
normal) from the process's stderr to the ``tvm_cdna4`` logger at DEBUG; other stderr output passes
through unchanged. ``rocm.build``'s hooks do the same on every route (``tvm_tirx.tirx.compile``
included): around each rocm ``Target``'s construction, where TIRx's parser prints the first one, and
around the ROCm codegen in ``target.build.rocm``, which prints the second.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import traceback

logger = logging.getLogger("tvm_cdna4")

TRACEBACK_ENV = "TVM_CDNA4_TRACEBACK"
# printed by TIRx's C++ at every gfx950 build on a machine without ROCm
CODEGEN_WARNINGS = ("Unable to detect ROCm version", "Cannot get maximum number of threads for AMD codegen")

_latest = threading.local()
_verbose = threading.local()
_stderr_lock = threading.RLock()
FIELDS = ("rule", "opcode", "operand", "check", "expected", "found", "suggestion", "proof", "location")
# ``ContractError.check``: the name of the rule an error breaks, one of these (docs/patterns.md,
# "Contract checks", says what each covers). The patterns' and the catalog's per-operand rules:
PATTERN_CHECKS = ("operands", "parameters", "modifier range", "scope", "storage scope", "layout", "shape", "dtype",
                  "owner map", "registers", "alignment", "provider map", "operand form", "compile-time value",
                  "target", "swizzle", "major")
# the whole-kernel rules (rocm.analysis, rocm.lds_sync, rocm.storage, rocm.math_calls, cuda.wgmma_check) and
# the waits of the compiled code (rocm.waitcheck):
KERNEL_CHECKS = ("backend", "workgroup size", "whole waves", "wave count", "wave-uniform control",
                 "wave-uniform operand", "LDS view", "LDS alignment", "LDS synchronization", "bf16/fp8 storage",
                 "math call", "waitcheck", "accumulator wait")
CHECKS = PATTERN_CHECKS + KERNEL_CHECKS


class ContractError(ValueError):
    """A kernel breaks a rule of the CDNA4 patterns or the instruction catalog.

    ``str()`` reads ``opcode: operand X: rule; expected E, found F. Suggestion: S`` (parts that do
    not apply are left out), then, on their own lines, the analyzer's residue ``proof`` and the
    ``location`` (the failing ``T.rocm.tile.apply`` call, set by the pattern dispatcher).
    ``check`` names the rule, one of ``CHECKS``: a per-operand rule of the patterns (``"owner map"``,
    ``"dtype"``, ``"scope"``, ...) or a whole-kernel rule of ``tvm_cdna4.rocm.analysis`` (``"target"``,
    ``"wave count"``, ...): a stable name that tests and callers can match. ``context``: what
    TIRx's C++ appended when the error crossed it (the failing pass and TVMScript location), else None.
    """

    __module__ = "tvm_cdna4"  # tracebacks name it as it is exported: tvm_cdna4.ContractError

    def __init__(self, rule: str, *, opcode: str | None = None, operand: str | None = None, expected=None,
                 found=None, suggestion: str | None = None, proof: str | None = None, check: str | None = None):
        super().__init__(rule)
        self.context: str | None = None
        self._original: ContractError | None = None
        latest = getattr(_latest, "error", None)
        if latest is not None and not any((opcode, operand, expected, found, suggestion, proof, check)) \
                and (rule == str(latest) or rule.startswith(str(latest) + "\n")):
            # tvm_ffi rebuilds a ContractError from its text, after C++ may have appended its context
            for name in FIELDS:
                setattr(self, name, getattr(latest, name))
            self.context = rule[len(str(latest)):].strip("\n") or None
            self._original = latest
            return
        self.rule, self.opcode, self.operand, self.check = rule, opcode, operand, check
        self.expected, self.found, self.suggestion, self.proof = expected, found, suggestion, proof
        self.location: str | None = None
        _latest.error = self

    @property
    def sentence(self) -> str:
        """The first line: what is wrong and what to do."""
        text = ": ".join(x for x in (self.opcode, self.operand and f"operand {self.operand}", self.rule) if x)
        if self.expected is not None:
            text += f"; expected {self.expected}"
        if self.found is not None:
            text += f", found {self.found}" if self.expected is not None else f"; found {self.found}"
        if self.suggestion:
            text += f". Suggestion: {self.suggestion}"
        return text

    def __str__(self) -> str:
        return self.sentence + "".join(f"\n  {label}: {text}" for label, text in
                                       (("analyzer", self.proof), ("at", self.location)) if text) \
            + (f"\n{self.context}" if self.context else "")

    @property
    def original(self) -> ContractError:
        """The error as its rule raised it: itself, or the error that ``tvm_ffi`` rebuilt this one from."""
        return self._original or self


def traceback_requested() -> bool:
    return getattr(_verbose, "on", False) or os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


@contextlib.contextmanager
def full_tracebacks(enabled: bool = True):
    """Within: contract errors keep TIRx's wrapper and their frames, as with ``TVM_CDNA4_TRACEBACK=1``."""
    previous = getattr(_verbose, "on", False)
    _verbose.on = enabled or previous
    try:
        yield
    finally:
        _verbose.on = previous


def report(error: ContractError, file=None) -> int:
    """Print ``error`` for the command line, its sentence as the first line (the full traceback
    when requested); return the exit status, 2."""
    file = file or sys.stderr
    print(f"error: {error}", file=file)
    if traceback_requested():
        error.__suppress_context__ = False
        traceback.print_exception(type(error), error, error.__traceback__, file=file)
    else:
        print(f"(the full traceback: python -m tvm_cdna4 -v ..., or {TRACEBACK_ENV}=1)", file=file)
    return 2


@contextlib.contextmanager
def presented():
    """Around a TIRx compile call: a ``ContractError`` raised inside comes out as itself, not as
    TIRx's wrapper; the ROCm codegen warnings go to ``logging`` (see the module docstring)."""
    _latest.error = None
    try:
        with codegen_warnings_to_logging():
            yield
    except ContractError as error:
        original = error.original
        if original is error:
            raise
        if traceback_requested():
            raise original from (original.__cause__ or error)
        raise original.with_traceback(None) from None
    except Exception as wrapper:
        error = getattr(_latest, "error", None)
        if error is None or error.sentence not in str(wrapper):
            raise
        if traceback_requested():
            raise error from wrapper
        raise error.with_traceback(None) from None
    finally:
        _latest.error = None


def unwrapped_dispatch(run_dispatch):
    """TIRx's tile dispatch, a ``ContractError`` raised under its ``RuntimeError`` wrapper raised as
    itself (the wrapper its cause when tracebacks are requested); any other error unchanged."""
    def dispatch(call, sctx):
        try:
            return run_dispatch(call, sctx)
        except RuntimeError as wrapper:
            error = wrapper.__cause__
            if not isinstance(error, ContractError):
                raise
            if traceback_requested():
                raise error from wrapper
            raise error.with_traceback(None) from None

    return dispatch


@contextlib.contextmanager
def codegen_warnings_to_logging():
    """Capture file descriptor 2 (C++ writes there directly) and re-emit it line by line: the
    ``CODEGEN_WARNINGS`` to the ``tvm_cdna4`` logger at DEBUG, everything else to stderr."""
    with _stderr_lock, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        try:
            saved = os.dup(2)
        except OSError:  # no stderr to capture
            yield
            return
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            for line in sink.read().decode(errors="replace").splitlines(keepends=True):
                if any(warning in line for warning in CODEGEN_WARNINGS):
                    logger.debug("TIRx: %s", line.strip())
                else:
                    sys.stderr.write(line)
            sys.stderr.flush()
