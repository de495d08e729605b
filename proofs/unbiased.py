"""Exact unbiasedness as polynomial identities (sympy), on a softmax bandit with A actions,
symbolic probabilities π_1..π_A (Σ π = 1) and symbolic rewards r_1 < … < r_A.

E[c·Σ_i A_i (e_{a_i} − π)] − ∇_θ J, summed over all A^N action tuples, must expand to the zero
polynomial, with c the inverse of the scale each estimator's registry entry claims (K/N for
the MaxPO family, 1 for PKPO's; spec/maxk.md §Unbiasedness). The rewards are ordered so that
every max is resolved by the action index; both sides are continuous in r, so the identity
extends to ties.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import product
from typing import Any

import sympy as sp

from advest.fast.registry import Entry

from .definitions import Definitions
from .records import Record, Status


class OrderedAlgebra:
    """Sample values r_{a_i}, with max taken by action index (r_1 < r_2 < … < r_A)."""

    def __init__(self, actions: Sequence[int], rewards: Sequence[sp.Symbol]) -> None:
        self.actions, self.rewards = list(actions), list(rewards)

    def const(self, q: Fraction) -> Any:
        return sp.Rational(q.numerator, q.denominator)

    def value(self, i: int) -> Any:
        return self.rewards[self.actions[i]]

    def max_of(self, items: Sequence[int]) -> Any:
        if not items:
            return sp.Integer(0)
        return self.rewards[max(self.actions[i] for i in items)]


def objective_gradient(pi: Sequence[Any], r: Sequence[Any], k: int) -> list[Any]:
    """∂J/∂θ_c for J = Σ_j r_j (F_j^K − F_{j−1}^K) (actions in reward order, π unconstrained):
    the softmax chain rule ∂J/∂θ_c = π_c (∂J/∂π_c − Σ_a π_a ∂J/∂π_a)."""
    cdf = [sum(pi[: j + 1], sp.Integer(0)) for j in range(len(pi))]
    prev = [sp.Integer(0), *cdf[:-1]]
    j_obj = sum((r[j] * (cdf[j] ** k - prev[j] ** k) for j in range(len(pi))), sp.Integer(0))
    grad_pi = [sp.diff(j_obj, x) for x in pi]
    mean = sum((pi[a] * grad_pi[a] for a in range(len(pi))), sp.Integer(0))
    return [pi[c] * (grad_pi[c] - mean) for c in range(len(pi))]


def expected_estimate(
    pi: Sequence[Any],
    n: int,
    k: int,
    advantage: Callable[[Definitions, int], Any],
    r: Sequence[Any],
) -> list[Any]:
    """E[Σ_i A_i (e_{a_i} − π)] over all A^N tuples."""
    num_actions = len(pi)
    total = [sp.Integer(0)] * num_actions
    for actions in product(range(num_actions), repeat=n):
        prob = sp.Mul(*(pi[a] for a in actions))
        d = Definitions(OrderedAlgebra(actions, r), n, k)
        for i, a_i in enumerate(actions):
            value = advantage(d, i)
            for c in range(num_actions):
                total[c] += prob * value * ((1 if c == a_i else 0) - pi[c])
    return total


def estimators() -> dict[str, Entry]:
    """The estimators whose unbiasedness claim the bandit identity decides, from the registry:
    each max@K entry that ``Definitions`` transcribes and whose claims give a scale, its
    ``pg_scale`` (claimed unbiased) or, for a biased one, its ``comparison_scale`` (the identity
    then fails on purpose)."""
    from advest.fast import registry

    return {
        e.name: e
        for e in registry.entries()
        if e.family == "maxk"
        and hasattr(Definitions, e.name)
        and (e.claims.pg_scale or e.claims.comparison_scale) is not None
    }


def _scale(entry: Entry, n: int, k: int) -> Fraction:
    """c in E[c·Σ A_i ∇log π] = ∇J: the inverse of the entry's scale."""
    scale = entry.claims.pg_scale or entry.claims.comparison_scale
    assert scale is not None  # estimators() keeps only entries with one
    return 1 / scale(n, k)


def _expected(entry: Entry, k: int) -> Status:
    """A biased entry's identity fails for K ≥ 2; at K = 1 its leave-one-out baseline is the
    other samples' mean, which RLOO shows unbiased."""
    return "refuted" if entry.claims.pg_scale is None and k >= 2 else "proved"


def bias(name: str, a: int, n: int, k: int) -> tuple[list[Any], list[Any], list[Any]]:
    """(bias polynomials on the simplex, π symbols, r symbols)."""
    pi = list(sp.symbols(f"pi1:{a + 1}", positive=True))
    r = list(sp.symbols(f"r1:{a + 1}", real=True))
    scale = _scale(estimators()[name], n, k)
    est = expected_estimate(pi, n, k, lambda d, i: getattr(d, name)(i), r)
    grad = objective_gradient(pi, r, k)
    c = sp.Rational(scale.numerator, scale.denominator)
    on_simplex = {pi[-1]: 1 - sum(pi[:-1], sp.Integer(0))}
    diff = [sp.expand((c * e - g).subs(on_simplex)) for e, g in zip(est, grad, strict=True)]
    return diff, pi, r


def unbiased(name: str, a: int, n: int, k: int) -> Record:
    """The estimator's bias is the zero polynomial (or, for a biased one such as ``ei_l1o``, a
    nonzero one)."""
    start = time.perf_counter()
    diff, pi, r = bias(name, a, n, k)
    zero = all(d == 0 for d in diff)
    params = {"estimator": name, "A": a, "N": n, "K": k}
    expected = _expected(estimators()[name], k)
    claim = f"{name}_is_unbiased" + (" (false on purpose)" if expected == "refuted" else "")
    statement = f"E[c Σ A_i ∇log π(a_i)] = ∇J for {name}, symbolic π and r"
    seconds = time.perf_counter() - start
    outcome: dict[str, Any] = {"status": "proved", "evidence": "bias expands to 0"}
    if not zero:
        point = _witness(a, pi, r)
        example = {str(s): str(v) for s, v in point.items()}
        example["bias"] = str([d.subs(point) for d in diff])
        outcome = {
            "status": "refuted",
            "counterexample": example,
            "evidence": f"bias_1 = {sp.factor(diff[0])}",
        }
    return Record(
        claim,
        statement,
        "maxk.md §Unbiasedness",
        "sympy (polynomial identity)",
        params,
        seconds=seconds,
        expected=expected,
        **outcome,
    )


def _witness(a: int, pi: list[Any], r: list[Any]) -> dict[Any, Any]:
    """A rational point with r_1 < … < r_A on the simplex's interior."""
    point: dict[Any, Any] = {pi[j]: sp.Rational(1, a + j) for j in range(a - 1)}
    point |= {r[j]: sp.Rational(j * j, 2) - 1 for j in range(a)}
    return point


def claims(max_n: int = 4, max_a: int = 3) -> list[tuple[str, int, int, int]]:
    """(estimator, A, N, K) for every estimator, A = 2..max_a, N = 2..max_n, K in its domain."""
    out = []
    for name, entry in estimators().items():
        for a in range(2, max_a + 1):
            for n in range(2, max_n + 1):
                out += [(name, a, n, k) for k in range(1, entry.k_max(n) + 1)]
    return out


def __getattr__(name: str) -> Any:
    """``ESTIMATORS``, 0.2.0's hand-kept ``{name: (definition, c(N, K))}``, derived now, with a
    DeprecationWarning until 0.4.0 removes it."""
    if name != "ESTIMATORS":
        raise AttributeError(f"module 'advest.proofs.unbiased' has no attribute {name!r}")
    import warnings

    warnings.warn(
        "advest.proofs.unbiased.ESTIMATORS is deprecated and is removed in 0.4.0: use "
        "estimators(), the registry entries whose claims the bandit identity decides",
        DeprecationWarning,
        stacklevel=2,
    )
    return {n: (n, lambda a, b, e=e: _scale(e, a, b)) for n, e in estimators().items()}
