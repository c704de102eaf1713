"""The module switches a family's planner reads (``PLAN_FLAGS``) and their values as a cache key (``FlagSet``).

A family's planning module lists ``PLAN_FLAGS``: ``(module, name)`` of every module-level switch (a bool, or a str
naming one of its choices: ``WEIGH_*``, ``SHIFT_*``, ``FINE_CUTS``, ``GROUPED_WALK`` ...) of the modules its build
imports, dotted from ``tvm_cdna4.kernels`` (a superset of what one plan reads, as the guard reads it:
``tests/kernels/test_plan_flags.py``); ``plan_flags = FlagSet(PLAN_FLAGS)``; ``plan_flags()``: their values now,
what a cache of plans or kernels keys besides the problem (``tvm_cdna4.torch``). The families: the sm90 GEMM
(``sm90.gemm_target``: dense, grouped, its decode buckets), the sm80-class GEMM (``sm80.gemm``: dense, grouped,
the decode kernel of ``sm80.decode_plan``), attention (``sm80`` / ``sm90.attention_target``), paged decode
(``sm80.paged_decode_rule``). Tuning constants and hardware data (``STAGES``, ``DEVICES`` ...) are not switches.

**The cost of a read.** A ``FlagSet`` reads its flags once (importing their modules), keeps the values and watches
the modules (``watch``: their class becomes ``_Watched``): setting a watched flag through its module
(``module.FLAG = value``, ``setattr``, ``monkeypatch.setattr``) drops every set's kept values and calls the
``listen`` callbacks (``tvm_cdna4.torch``: forget the prepared launches). So ``plan_flags()`` is one attribute
test after its first call. A flag written past its module's ``__setattr__`` (``vars(module)[name] = ...``, a
``global`` statement in the module itself, ``importlib.reload`` of it) is not seen: clear the caches then
(``tvm_cdna4.torch.kernel_cache().clear()``: ``forget``, the sets read afresh). A set while another thread reads keeps no value of before it
(``_SETTING``); a reload of this module keeps what was watched, read and listened to."""

from __future__ import annotations

import importlib
import operator
import sys
import threading
import types

PACKAGE = __package__
"""The package ``PLAN_FLAGS``' module names are dotted from (``tvm_cdna4.kernels``)."""
# the state below survives ``importlib.reload`` of this module (the modules watched, the sets read and the listeners
# registered before it are still served; the watched modules take the reloaded ``_Watched``: the end of the module)
_WATCHED: dict = globals().get("_WATCHED", {})
"""``{module name: {flag names}}``: the flags whose assignment ``_Watched`` reports."""
_SETS: list = globals().get("_SETS", [])
"""Every ``FlagSet`` read so far (their kept values dropped on a set)."""
_LISTENERS: list = globals().get("_LISTENERS", [])
"""What ``changed`` calls after a watched flag is set (``listen``)."""
_SETTING = globals().get("_SETTING", [0, threading.Lock()])
"""``[sets so far, lock]``: ``forget`` counts under the lock; a ``FlagSet`` keeps values it read only where no set
came between its read's start and its keeping (another thread's set mid-read would leave the old value kept)."""


class _Watched(types.ModuleType):
    """A module whose watched flags' assignment (or deletion) calls ``changed``."""

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        if name in _WATCHED.get(self.__name__, ()):
            changed()

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        if name in _WATCHED.get(self.__name__, ()):
            changed()


def changed() -> None:
    """A watched flag was set: every ``FlagSet`` reads its flags afresh (``forget``), every listener is called."""
    forget()
    for listener in tuple(_LISTENERS):
        listener()


def sets() -> int:
    """The count of watched-flag sets (and ``forget`` calls) so far: a cache that keeps what it computed under the
    flags compares it before and after (``tvm_cdna4.torch._store``)."""
    return _SETTING[0]


def forget() -> None:
    """Every ``FlagSet`` reads its flags afresh at its next call (``tvm_cdna4.torch.kernel_cache().clear()`` calls
    this: what sees a flag written past its module)."""
    with _SETTING[1]:
        _SETTING[0] += 1
        for flag_set in _SETS:
            flag_set.values = None


def listen(listener) -> None:
    """Call ``listener()`` after each set of a watched flag (once however often it is passed)."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def watch(module: types.ModuleType, names) -> None:
    """Report the assignment of ``names`` of ``module`` (imported) to ``changed``: its class made ``_Watched``."""
    _WATCHED.setdefault(module.__name__, set()).update(names)
    if not isinstance(module, _Watched):
        module.__class__ = _Watched


class FlagSet:
    """``PLAN_FLAGS``' values as a key: ``flag_set()`` -> the tuple of the values now, in the flags' order, kept
    until a watched flag is set (module docstring). ``package``: what the flags' module names are dotted from."""

    def __init__(self, flags: tuple, package: str = PACKAGE):
        self.flags, self.package, self.values, self._read = tuple(flags), package, None, None

    def __call__(self) -> tuple:
        values = self.values
        if values is None:
            if self._read is None:
                self._read = self._reader()
            sets = _SETTING[0]
            values = self._read()
            with _SETTING[1]:
                if _SETTING[0] == sets:  # no set since the read began: keep what it read
                    self.values = values
        return values

    def _reader(self):
        """``read()``: one ``operator.attrgetter`` of every flag, dotted from the package, its modules imported and
        watched first."""
        for module, name in self.flags:
            watch(importlib.import_module(f"{self.package}.{module}"), (name,))
        if self not in _SETS:
            _SETS.append(self)
        if not self.flags:
            return tuple
        getter = operator.attrgetter(*(f"{m}.{n}" for m, n in self.flags))
        package = sys.modules[self.package]
        if len(self.flags) == 1:
            return lambda: (getter(package),)
        return lambda: getter(package)


for _name in _WATCHED:  # a reload: the modules watched so far take this ``_Watched``
    if isinstance(sys.modules.get(_name), types.ModuleType):
        sys.modules[_name].__class__ = _Watched

__all__ = ["PACKAGE", "FlagSet", "changed", "forget", "listen", "sets", "watch"]
