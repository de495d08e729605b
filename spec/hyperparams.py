"""Hyperparameters read exactly: one parser for ``reference.covariance`` and ``fast.covariance``.

A float setting is read as the decimal it was written as, so the exact reference and the fast
version select the same tokens at the same thresholds. Imports neither implementation.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["clip_range", "decimal"]


def decimal(x: object, name: str) -> Fraction:
    """A hyperparameter read as the decimal it was written as (0.29 -> 29/100, not the float)."""
    if isinstance(x, bool) or not isinstance(x, int | float | Fraction):
        raise TypeError(f"{name} must be a number; got {type(x)}")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"{name} must be finite; got {x}")
        return Fraction(repr(x))
    return Fraction(x)


def clip_range(clip_low: object, clip_high: object) -> tuple[Fraction, Fraction]:
    """[1 − ε_low, 1 + ε_high]; PRIME's Clip-Cov runs use ε_low = ε_high = 1 (ratio in [0, 2])."""
    eps_low, eps_high = decimal(clip_low, "clip_low"), decimal(clip_high, "clip_high")
    if not 0 <= eps_low <= 1 or eps_high < 0:
        raise ValueError(
            f"need 0 <= clip_low <= 1 and clip_high >= 0; got {clip_low!r}, {clip_high!r}"
        )
    return 1 - eps_low, 1 + eps_high
