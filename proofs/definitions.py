"""The max@K subset definitions (spec/maxk.md §Conventions), generic in the number type.

The same literal definitions as ``reference.maxk``, but over sample *indices*, with the values
and the max supplied by an algebra: z3 reals with if-then-else maxima (``proofs.bounded``), or
sympy symbols whose order is known (``proofs.unbiased``). max(∅) = 0 as everywhere.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations
from typing import Any, Protocol


class Algebra(Protocol):
    """Values of one group of n samples."""

    def const(self, q: Fraction) -> Any: ...
    def value(self, i: int) -> Any: ...
    def max_of(self, items: Sequence[int]) -> Any:
        """max of the values at ``items``; 0 for no items."""
        ...


def _avg(alg: Algebra, terms: list[Any]) -> Any:
    return alg.const(Fraction(1, len(terms))) * sum(terms[1:], terms[0])


def _without(n: int, *removed: int) -> list[int]:
    return [j for j in range(n) if j not in removed]


class Definitions:
    """Every building block and estimator of one group of n samples with comparator size k."""

    def __init__(self, alg: Algebra, n: int, k: int) -> None:
        self.alg, self.n, self.k = alg, n, k

    def m_plus(self, i: int) -> Any:
        """avg over S ⊂ O_i, |S| = K−1, of max(r_i, max_S r)."""
        subsets = combinations(_without(self.n, i), self.k - 1)
        return _avg(self.alg, [self.alg.max_of((i, *s)) for s in subsets])

    def m_minus(self, i: int) -> Any:
        """avg over T ⊂ O_i, |T| = K, of max_T r."""
        subsets = combinations(_without(self.n, i), self.k)
        return _avg(self.alg, [self.alg.max_of(t) for t in subsets])

    def m_hat(self) -> Any:
        return _avg(self.alg, [self.alg.max_of(t) for t in combinations(range(self.n), self.k)])

    def _ei_on(self, j: int, pool: list[int]) -> Any:
        """avg over S ⊂ pool, |S| = K−1, of max(r_j, max_S r) − max_S r."""
        subsets = combinations(pool, self.k - 1)
        return _avg(self.alg, [self.alg.max_of((j, *s)) - self.alg.max_of(s) for s in subsets])

    def ei(self, i: int) -> Any:
        return self._ei_on(i, _without(self.n, i))

    def l2o_baseline(self, i: int) -> Any:
        """(1/(N−1)) Σ_{j≠i} EI_j on the pool without i."""
        terms = [self._ei_on(j, _without(self.n, i, j)) for j in _without(self.n, i)]
        return _avg(self.alg, terms)

    def maxpo(self, i: int) -> Any:
        return self.ei(i) - self.l2o_baseline(i)

    def canonical(self, i: int) -> Any:
        return self.m_plus(i) - self.m_minus(i)

    def _s(self, j: int, pool: list[int]) -> Any:
        """S(j, K, X) = (1/C(|X|, K)) Σ_{I ⊂ X, |I| = K, j ∈ I} max_I r (PKPO Eq. 28)."""
        terms = [self.alg.max_of(s) for s in combinations(pool, self.k) if j in s]
        return self.alg.const(Fraction(1, math.comb(len(pool), self.k))) * sum(terms[1:], terms[0])

    def pkpo_s(self, i: int) -> Any:
        return self._s(i, list(range(self.n)))

    def pkpo_sloo(self, i: int) -> Any:
        others = [self._s(j, _without(self.n, i)) for j in _without(self.n, i)]
        return self.pkpo_s(i) - _avg(self.alg, others)

    def pkpo_sloo_minus_one(self, i: int) -> Any:
        terms = [
            self.alg.max_of(s) - self.alg.max_of([t for t in s if t != i])
            for s in combinations(range(self.n), self.k)
            if i in s
        ]
        return self.alg.const(Fraction(1, math.comb(self.n, self.k))) * sum(terms[1:], terms[0])

    def ei_l1o(self, i: int) -> Any:
        return self.ei(i) - _avg(self.alg, [self.ei(j) for j in _without(self.n, i)])


def per_sample() -> tuple[str, ...]:
    """The definitions of one sample's value: every public method of ``Definitions`` that takes
    the sample's index (``m_hat``, the group's value, is not one)."""
    return tuple(
        name
        for name, fn in inspect.getmembers(Definitions, inspect.isfunction)
        if not name.startswith("_") and list(inspect.signature(fn).parameters) == ["self", "i"]
    )


class _Numbers:
    """Distinct exact numbers r_i = i + 1, for finding where a definition has a value."""

    def const(self, q: Fraction) -> Fraction:
        return q

    def value(self, i: int) -> Fraction:
        return Fraction(i + 1)

    def max_of(self, items: Sequence[int]) -> Fraction:
        return Fraction(max((i + 1 for i in items), default=0))


def defined(name: str, n: int, k: int) -> bool:
    """Whether definition ``name`` has a value at every sample of a group of ``n`` with
    comparator size ``k``: computed, so the domain is the definition's own (an average over no
    subsets, or a count C(m, k) = 0 dividing, has none; e.g. ``maxpo`` needs K ≤ N − 1)."""
    if not 1 <= k <= n:
        return False
    definitions = Definitions(_Numbers(), n, k)
    try:
        for i in range(n):
            getattr(definitions, name)(i)
    except (ZeroDivisionError, IndexError):
        return False
    return True
