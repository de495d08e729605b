"""The unbiasedness scale each estimator claims with its default options:
E[Σ_i A_i ∇log π(a_i)] = pg_scale(N, K) · ∇J, J = max@K (K = 1 for the group family: the mean
reward). The catalogue's rows cite these (tests/test_bandit.py checks each by exact bandit
enumeration), and the bandit experiment divides by them: a pure module (Fractions only, no
advest import), so that the experiment loads neither the catalogue nor the exact references.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

Scale = Callable[[int, int], Fraction]


def _const(value: int) -> Scale:
    return lambda n, k: Fraction(value)


def _zero(n: int, k: int) -> Fraction:
    return Fraction(0)


_ZERO: Scale = _zero


def _k_over_n(n: int, k: int) -> Fraction:
    return Fraction(k, n)


def _k1_only(scale: Scale) -> Scale:
    return lambda n, k: scale(n, k) if k == 1 else Fraction(0)


_N_OVER_K: Scale = lambda n, k: Fraction(n, k)  # noqa: E731

PG_SCALE: dict[str, Scale] = {
    "ei": _N_OVER_K,
    "maxpo": _N_OVER_K,
    "canonical": _N_OVER_K,
    "pkpo_s": _const(1),
    "pkpo_sloo": _const(1),
    "pkpo_sloo_minus_one": _const(1),
    "tang_passk": _const(1),
    "bagirov_transform": _const(1),
    "bagirov_centered": lambda n, k: Fraction(n - k, n),
    "dr_grpo": lambda n, k: Fraction(n - 1),
    "rloo": lambda n, k: Fraction(n),
}
"""pg_scale(N, K) by estimator name, default options; a name not here claims no scale (biased,
or not claimed)."""

COMPARISON_SCALE: dict[str, Scale] = {"ei_l1o": _N_OVER_K}
"""The scale a *biased* estimator would have if it were unbiased, by name: the bandit experiment
divides it out to show the bias (``ei_l1o`` is EI with a leave-one-out baseline, EI's N/K)."""
