"""What an estimator claims, as data: the fields of its registry entry (``fast/registry.py``)
that the tests check, the proofs cite and the spec pages state in words.

Pure (no advest import): the registry declares one ``Claims`` per estimator (and one per
variant of its keyword options); the catalogue (``oracle/reports/catalogue.py``) turns each into
a test row. Each field is checked by the test named beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from .bounds import Bound
from .scales import Scale, zero


@dataclass(frozen=True)
class Claims:
    """The properties an estimator (one set of its options) claims for rewards ``[B, G]``."""

    pg_scale: Scale | None = None
    """Unbiasedness (tests/core/experiments/test_bandit.py, exact bandit enumeration): E[Σ_i A_i
    ∇log π(a_i)] = pg_scale(N, K) · ∇J, J = max@K (K = 1 without K: the mean reward); None: biased
    or not claimed."""
    comparison_scale: Scale | None = None
    """For a biased estimator, the scale it would have if unbiased: the bandit experiment divides
    it out to show the bias (None: not compared)."""
    shift: Scale | None = zero
    """r → r + c moves the output by c · shift(N, K) (tests/core/estimators/test_properties.py);
    None: not claimed."""
    scale_power: int | None = 1
    """r → a·r (a > 0) scales the output by a**scale_power; None: not claimed."""
    centred: bool = False
    """Σ_i A_i = 0 in every group."""
    exact_zero_on_flat: bool = False
    """Exact zeros when fewer than K samples lie below the group's max (K = 1: a flat group)."""
    monotone: bool = True
    """Non-decreasing along the sorted rewards of a group."""
    min_n: int = 1
    """The smallest group the estimator accepts."""
    min_b: int = 1
    """The fewest groups a batch needs (shrinkage across prompts needs 2)."""
    binary_only: bool = False
    """Defined for 0/1 rewards only."""
    nonnegative: bool = False
    """Refuses negative rewards (MaxRL divides by the mean reward)."""
    batch_coupled: bool = False
    """One group's output depends on the other groups (REINFORCE++'s batch std)."""
    rational: bool = True
    """The reference is rational; False where a square root makes it exact only to 60 digits."""
    magnitude: Bound | None = None
    """For rewards in [0, 1], |A| ≤ magnitude(N, K), N the group size (B·G for a batch-coupled
    estimator: the rows its statistics span); ``advest check``'s "magnitude bound" row, checked
    for every registered estimator in tests/core/oracle/test_grouped.py. None: not claimed."""


DEFAULTS = Claims()
"""The claims every field's default makes: shift-invariant, scale-equivariant and monotone, and
nothing else (no unbiasedness, no centring)."""


class Flags(TypedDict, total=False):
    """Claims that travel together (``Claims(**FLAT)``)."""

    exact_zero_on_flat: bool
    centred: bool
    rational: bool


FLAT: Flags = {"exact_zero_on_flat": True, "centred": True}
"""The claims of an estimator that gives exact zeros on flat groups and is centred."""
IRRATIONAL: Flags = {"exact_zero_on_flat": True, "centred": True, "rational": False}
"""The same, for an estimator whose reference takes a square root (a z-score)."""


@dataclass(frozen=True)
class Variant:
    """Another setting of an estimator's keyword ``options``, tested with its own ``claims``."""

    options: dict[str, Any] = field(default_factory=dict)
    claims: Claims = DEFAULTS
