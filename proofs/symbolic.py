"""General-N binomial identities behind the counting proofs, with sympy, for symbolic N and K.

Ratios of binomials are rewritten as gamma functions and simplified to 1 (``gammasimp``); sums are
proved by induction (base case, then the difference of consecutive terms by Pascal's rule).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sympy as sp

from .records import Record, Status

N, K, p, q = sp.symbols("N K p q", integer=True, positive=True)


def _ratio_is_one(expr_a: sp.Expr, expr_b: sp.Expr) -> bool:
    ratio = sp.gammasimp(sp.expand_func(expr_a / expr_b))
    return bool(sp.simplify(ratio - 1) == 0)


def _record(claim: str, statement: str, spec: str, ok: bool, start: float, evidence: str) -> Record:
    status: Status = "proved" if ok else "unknown"
    return Record(
        claim,
        statement,
        spec,
        "sympy (symbolic N, K)",
        {"N": "symbolic", "K": "symbolic"},
        status,
        time.perf_counter() - start,
        evidence=evidence,
    )


def k_comb_identity() -> Record:
    """K·C(N−1, K) = (N−1)·C(N−2, K−1): each K-subset of O_i is counted K times in I2."""
    start = time.perf_counter()
    ok = _ratio_is_one(K * sp.binomial(N - 1, K), (N - 1) * sp.binomial(N - 2, K - 1))
    return _record(
        "k_comb_identity",
        "K·C(N−1,K) = (N−1)·C(N−2,K−1)",
        "maxk.md I2 (proof)",
        ok,
        start,
        "gammasimp of the ratio is 1",
    )


def n_minus_k_comb_identity() -> Record:
    """(N−K)·C(N−1, K−1) = (N−1)·C(N−2, K−1): each (K−1)-subset is counted N−K times in I2."""
    start = time.perf_counter()
    ok = _ratio_is_one((N - K) * sp.binomial(N - 1, K - 1), (N - 1) * sp.binomial(N - 2, K - 1))
    return _record(
        "n_minus_k_comb_identity",
        "(N−K)·C(N−1,K−1) = (N−1)·C(N−2,K−1)",
        "maxk.md I2 (proof)",
        ok,
        start,
        "gammasimp of the ratio is 1",
    )


def subset_fraction_identity() -> Record:
    """C(N−1, K−1)/C(N, K) = K/N: a fraction K/N of the K-subsets contain a given sample (I5)."""
    start = time.perf_counter()
    ok = _ratio_is_one(sp.binomial(N - 1, K - 1) / sp.binomial(N, K), K / N)
    return _record(
        "subset_fraction_identity",
        "C(N−1,K−1)/C(N,K) = K/N",
        "maxk.md I5 (proof)",
        ok,
        start,
        "gammasimp of the ratio is 1",
    )


def pascal_rule() -> Record:
    start = time.perf_counter()
    ok = _ratio_is_one(sp.binomial(p, K - 1) - sp.binomial(p - 1, K - 1), sp.binomial(p - 1, K - 2))
    return _record(
        "pascal_rule",
        "C(p,K−1) − C(p−1,K−1) = C(p−1,K−2)",
        "maxk.md §Algorithm",
        ok,
        start,
        "gammasimp of the ratio is 1",
    )


def hockey_stick() -> Record:
    """Σ_{q=1}^{p−1} C(q−1, K−2) = C(p−1, K−1) for K >= 2, hence Σ_{q<p} γ_q = α_p, and (p = N+1)
    Σ_q β_q = 1 and Σ_q μhi_q = 1: the facts behind the prefix/suffix forms."""
    start = time.perf_counter()

    def lhs(upper: sp.Expr) -> sp.Expr:
        return sp.Sum(sp.binomial(q - 1, K - 2), (q, 1, upper - 1))

    base = sp.simplify(
        lhs(1).doit() - sp.binomial(0, K - 1).subs(K, K + 1)
    )  # K >= 2: C(0, K−1) = 0
    step_lhs = sp.simplify((lhs(p + 1) - lhs(p)).doit())  # = C(p−1, K−2)
    ok = base == 0 and _ratio_is_one(sp.binomial(p, K - 1) - sp.binomial(p - 1, K - 1), step_lhs)
    evidence = "induction on p: base p = 1 (empty sum = C(0, K−1) = 0 for K >= 2); step by Pascal"
    return _record(
        "hockey_stick", "Σ_{q<p} C(q−1,K−2) = C(p−1,K−1)", "maxk.md §Algorithm", ok, start, evidence
    )


CLAIMS: list[Callable[[], Record]] = [
    k_comb_identity,
    n_minus_k_comb_identity,
    subset_fraction_identity,
    pascal_rule,
    hockey_stick,
]
