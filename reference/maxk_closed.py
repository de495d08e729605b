"""The O(N log N) sorted prefix/suffix-sum forms of the max@K building blocks, in exact arithmetic.

This is *not* the definition (that is ``reference.maxk``, by subset enumeration); it is the exact
closed form ``fast/`` evaluates in float64, kept here so that large groups (N up to 1024) have an
exact reference. Tests check it against ``reference.maxk`` and ``fast`` against it.

Generic in the number type: the same code runs on Fractions (here) and on z3 reals (``proofs/``).
For the sample at sorted position p (1-based, one stable sort):

    M⁺_(p) = α_p r_(p) + Σ_{q>p} β_q r_(q)        C_(p) = Σ_{q<p} γ_q r_(q) + Σ_{q>p} β_q r_(q)
    M⁻_(p) = Σ_{q<p} μlo_q r_(q) + Σ_{q>p} μhi_q r_(q)       EI_(p) = α_p r_(p) − Σ_{q<p} γ_q r_(q)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, TypeVar

from advest.spec.maxk_weights import ALPHA, BETA, GAMMA, M_HAT, MU_HI, MU_LO, BinomRatio

from ._exact import Number, check_k, to_fractions

T = TypeVar("T")


@dataclass(frozen=True)
class SortedBlocks(Generic[T]):
    """Building blocks at each sorted position (index p−1), all of length N."""

    m_plus: list[T]
    m_minus: list[T]  # zeros when K = N (M⁻ needs K <= N−1)
    comparator: list[T]
    ei: list[T]


def sorted_blocks(
    xs: Sequence[Any], k: int, weight: Callable[[BinomRatio, int, int, int], Any]
) -> SortedBlocks[Any]:
    """M⁺, M⁻, C and EI at every position of ``xs``, which must be sorted ascending.

    ``weight(w, q, n, k)`` evaluates one table entry in the caller's number type.
    """
    n = len(xs)
    w = {name: [weight(ratio, q, n, k) for q in range(1, n + 1)] for name, ratio in _USED.items()}
    low_gamma, low_mu = _exclusive_prefix(w["gamma"], xs), _exclusive_prefix(w["mu_lo"], xs)
    high_beta = _exclusive_prefix(w["beta"][::-1], xs[::-1])[::-1]
    high_mu = _exclusive_prefix(w["mu_hi"][::-1], xs[::-1])[::-1]
    alpha_x = [a * x for a, x in zip(w["alpha"], xs, strict=True)]
    m_plus = [a + h for a, h in zip(alpha_x, high_beta, strict=True)]
    comparator = [lo + h for lo, h in zip(low_gamma, high_beta, strict=True)]
    ei = [a - lo for a, lo in zip(alpha_x, low_gamma, strict=True)]
    m_minus = [lo + h for lo, h in zip(low_mu, high_mu, strict=True)] if k <= n - 1 else [0] * n
    return SortedBlocks(m_plus, m_minus, comparator, ei)


def _exclusive_prefix(weights: Sequence[Any], xs: Sequence[Any]) -> list[Any]:
    """[Σ_{q<p} w_q x_q for each p]."""
    out, running = [], 0
    for w_q, x_q in zip(weights, xs, strict=True):
        out.append(running)
        running = running + w_q * x_q
    return out


_USED = {"alpha": ALPHA, "beta": BETA, "gamma": GAMMA, "mu_lo": MU_LO, "mu_hi": MU_HI}


def _exact_weight(ratio: BinomRatio, q: int, n: int, k: int) -> Fraction:
    return ratio.exact(q, n, k) if (k + ratio.den_k) <= (n + ratio.den_n) else Fraction(0)


@dataclass(frozen=True)
class Blocks:
    """Exact building blocks in the original sample order."""

    m_plus: list[Fraction]
    m_minus: list[Fraction]
    comparator: list[Fraction]
    ei: list[Fraction]
    m_hat: Fraction

    @property
    def l2o_baseline(self) -> list[Fraction]:
        return [m - c for m, c in zip(self.m_minus, self.comparator, strict=True)]

    @property
    def canonical(self) -> list[Fraction]:
        return [p - m for p, m in zip(self.m_plus, self.m_minus, strict=True)]


def blocks(rewards: Sequence[Number], k: int) -> Blocks:
    """All building blocks of one group, exactly, via one stable sort. Domain 1 <= K <= N."""
    r = to_fractions(rewards)
    n = len(r)
    check_k(k, n, "blocks", k_max=n)
    order = sorted(range(n), key=lambda t: r[t])
    xs = [r[t] for t in order]
    s = sorted_blocks(xs, k, _exact_weight)
    out: dict[str, list[Fraction]] = {}
    for name in ("m_plus", "m_minus", "comparator", "ei"):
        values = [Fraction(0)] * n
        for p, t in enumerate(order):
            values[t] = Fraction(getattr(s, name)[p])
        out[name] = values
    m_hat = sum((M_HAT.exact(q, n, k) * xs[q - 1] for q in range(1, n + 1)), Fraction(0))
    return Blocks(m_hat=m_hat, **out)
