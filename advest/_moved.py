"""Modules that 0.2.0 shipped and that live elsewhere now: importing an old name warns and gives
the module under its new name, until ``REMOVED_IN``. They are served by a finder on
``sys.meta_path``, not by files at the old paths, because most old paths now sit in a layer below
their module's (``advest.spec.oracle`` is the oracle, which ``spec/`` may not import)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

REMOVED_IN = "0.4.0"

MOVED = {
    "advest.fast.bench": "advest.experiments.cost.bench",
    "advest.spec.catalogue": "advest.oracle.reports.catalogue",
    "advest.spec.oracle": "advest.oracle",
    "advest.training.bench": "advest.experiments.cost.tokens",
    "advest.training.demo": "advest.oracle.reports.demo",
    "advest.training.parsing": "advest.parsing",
    "advest.training.experiments": "advest.experiments",
    "advest.training.experiments.bandit": "advest.experiments.bandit",
    "advest.training.experiments.compare": "advest.experiments.compare",
    "advest.training.experiments.values": "advest.experiments.values",
}
"""``{0.2.0's module: where it is now}`` (the CHANGELOG's Deprecated section lists them)."""


def new_name(old: str) -> str | None:
    """Where ``old`` is now: its own entry, or its package's (``advest.training.experiments.grid``
    is ``advest.experiments.grid``); None for a name that never moved."""
    if old in MOVED:
        return MOVED[old]
    package = max((p for p in MOVED if old.startswith(p + ".")), key=len, default=None)
    return None if package is None else MOVED[package] + old[len(package) :]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds only the old names; the module it gives is the new one, already imported."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None  # not moved, or moved nowhere: the usual ModuleNotFoundError
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_name(spec.name)
        assert new is not None  # find_spec answered only for moved names
        warnings.warn(
            f"{spec.name} is deprecated and is removed in {REMOVED_IN}: it is {new}",
            DeprecationWarning,
            stacklevel=2,  # importlib's own frames are skipped: this names the import statement
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module ran when it was imported."""


def install() -> None:
    """First on ``sys.meta_path``: an old package's new home (``advest.training.experiments``
    is ``advest.experiments``) would otherwise let the path finder load its modules a second
    time, under the old names and without a warning."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
