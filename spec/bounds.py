"""The magnitude bounds an estimator's claims are written in: for rewards in [0, 1], every
advantage satisfies |A| ≤ bound(N, K), N the group size (for an estimator whose groups are
coupled through batch statistics, the number of rows the statistic spans, B·G).

A bound is what a reader can check an output against without knowing the estimator's internals:
a trainer that divides by a leave-one-out std whose others tie (NeMo-RL #1518) or by ε for
a group of one (AReaL PR 1673) gives |A| near 10⁶, far past every bound here. Floats, not
Fractions: the standardised bounds are square roots. Pure (``math`` only), like ``scales``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Bound = Callable[[int, int], float]


def unit(n: int, k: int) -> float:
    """1: the rewards' own range; a baseline inside the group's rewards (a mean, a leave-one-out
    mean, a max@K weight sum ≤ 1) leaves |r − b| ≤ max r − min r ≤ 1."""
    return 1.0


def standardised(n: int, k: int) -> float:
    """(N − 1)/√N: the largest |r − mean| / std(ddof = 1) of N numbers (one apart from N − 1
    ties); ε in the denominator only lowers it."""
    return (n - 1) / math.sqrt(n)


def standardised_ddof0(n: int, k: int) -> float:
    """√(N − 1): the largest |r − mean| / std(ddof = 0) of N numbers; it also bounds the
    ddof = 1 form, so batch-whitened estimators of either convention claim it."""
    return math.sqrt(max(n - 1, 0))


def n_minus_one(n: int, k: int) -> float:
    """N − 1: r / mean − 1 with one success among N (MaxRL's p-normalised form)."""
    return float(max(n - 1, 1))


def n_scale(n: int, k: int) -> float:
    """N: the harmonic-weighted pass@k sum with one success among N (MaxRL's unbiased form)."""
    return float(n)


def standardised_or_reward(n: int, k: int) -> float:
    """(N − 1)/√N, and 1 at N = 1: verl's GRPO returns r/(1 + ε) for a group of one."""
    return 1.0 if n == 1 else standardised(n, k)
