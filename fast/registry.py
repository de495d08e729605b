"""Every fast estimator by name: ``get("maxpo")`` returns the callable.

A plain dict filled by the ``register`` decorator in each family module; duplicates are refused,
and an unknown name raises ``KeyError`` listing the valid ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Family = Literal["maxk", "group", "token"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    """A registered estimator and how to call it.

    family "maxk": ``fn(rewards [B, G], k)``; family "group": ``fn(rewards [B, G])``, plus
    ``lengths [B, G]`` when ``needs_lengths``; family "token": token-level estimators, each with
    its own documented inputs (``[B, G, T]`` tensors and a mask).
    """

    name: str
    family: Family
    fn: Callable[..., Any]
    needs_k: bool
    needs_lengths: bool = False


_REGISTRY: dict[str, Entry] = {}


def register(
    name: str, family: Family, *, needs_k: bool, needs_lengths: bool = False
) -> Callable[[F], F]:
    def add(fn: F) -> F:
        if name in _REGISTRY:
            raise ValueError(f"estimator {name!r} is registered twice")
        _REGISTRY[name] = Entry(name, family, fn, needs_k, needs_lengths)
        return fn

    return add


def _load() -> None:
    # Importing the family modules runs their @register decorators.
    from spec.catalogue import FAMILIES

    for family in FAMILIES:
        importlib.import_module(f"fast.{family}")


def entry(name: str) -> Entry:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown estimator {name!r}; valid names: {', '.join(names())}") from None


def get(name: str) -> Callable[..., Any]:
    """The fast estimator registered as ``name``."""
    return entry(name).fn


def names() -> list[str]:
    _load()
    return sorted(_REGISTRY)
