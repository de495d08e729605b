"""Forcing the max@K estimators onto one path, for the tests only: shipped code always decides
by itself (``fast._maxk_core._find_levels``: counts when every group has at most
``max_levels(G)`` distinct rewards, else the sort); here that one function is replaced for the
duration of a block, so every differential and property test runs on both paths."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal
from unittest import mock

from torch import Tensor

from advest.fast import _levels, _maxk_core

Path = Literal["auto", "sorted", "counts"]
PATHS: tuple[Path, ...] = ("auto", "sorted", "counts")


def _never(rewards: Tensor) -> _levels.Levels | None:
    return None


def _always(rewards: Tensor) -> _levels.Levels | None:
    # any number of levels; float64 rewards beyond ±4.5e307 still sort (_levels.find declines)
    return _levels.find(rewards, None)


@contextlib.contextmanager
def forced_path(path: Path) -> Iterator[None]:
    """Run every max@K estimator on ``path`` inside the block: ``"sorted"``, ``"counts"``, or
    ``"auto"`` (what shipped code does)."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}; got {path!r}")
    if path == "auto":
        yield
        return
    with mock.patch.object(_maxk_core, "_find_levels", _never if path == "sorted" else _always):
        yield
