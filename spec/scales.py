"""The scales an estimator's claims are written in, as functions of (N, K) with exact values:

* its unbiasedness scale ``pg_scale``: E[Σ_i A_i ∇log π(a_i)] = pg_scale(N, K) · ∇J, J = max@K
  (K = 1 for the group baselines: the mean reward);
* its shift behaviour ``shift``: r → r + c moves every output by c · shift(N, K).

Each estimator's registry entry (``fast/registry.py``, through ``spec.claims.Claims``) names the
functions below; this module only defines them. Pure (Fractions only, no advest import), so
that the registry, the bandit experiment and the proofs read one definition.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

Scale = Callable[[int, int], Fraction]


def const(value: int) -> Scale:
    """The scale ``value`` at every (N, K)."""
    return lambda n, k: Fraction(value)


def zero(n: int, k: int) -> Fraction:
    """0: the output does not move (a shift-invariant estimator)."""
    return Fraction(0)


def one(n: int, k: int) -> Fraction:
    """1: unbiased for ∇J itself."""
    return Fraction(1)


def k_over_n(n: int, k: int) -> Fraction:
    """K/N."""
    return Fraction(k, n)


def n_over_k(n: int, k: int) -> Fraction:
    """N/K: the expected-improvement estimators (EI, MaxPO, canonical) for ∇max@K."""
    return Fraction(n, k)


def n_minus_k_over_n(n: int, k: int) -> Fraction:
    """(N − K)/N (Bagirov's centred transform)."""
    return Fraction(n - k, n)


def n_minus_k_over_k(n: int, k: int) -> Fraction:
    """(N − K)/K (Chen's raw pass@K advantage)."""
    return Fraction(n - k, k)


def n_scale(n: int, k: int) -> Fraction:
    """N (RLOO: N samples, each unbiased)."""
    return Fraction(n)


def n_minus_one(n: int, k: int) -> Fraction:
    """N − 1 (Dr.GRPO: the group mean includes the sample itself)."""
    return Fraction(n - 1)


def only_at_k1(scale: Scale) -> Scale:
    """``scale`` at K = 1 and 0 at every other K."""
    return lambda n, k: scale(n, k) if k == 1 else Fraction(0)


def minus_k_over_n_n_minus_1(n: int, k: int) -> Fraction:
    """−K/(N(N − 1)) (PKPO's s_loo shift)."""
    return Fraction(-k, n * (n - 1))


def only_at_n1(n: int, k: int) -> Fraction:
    """1 at N = 1, else 0 (Tang's pass@N returns r for a single sample)."""
    return Fraction(int(n == 1))
