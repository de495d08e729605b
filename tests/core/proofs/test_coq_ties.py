"""Unbiased.rloo, Unbiased.grpo, MaxRL.maxrl and MaxRL.maxrl_unbiased, as pinned in
proofs/coq/statements.json, are the reference functions: each test asserts the pinned Coq body
contains the formula, then evaluates that formula, transcribed with Coq's x / 0 = 0, exactly
against reference/ on random groups (as test_coq ties Baselines.kae). The theorems are therefore
about the code's formulas, degenerate groups included."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from advest.proofs import coq_check as coq
from advest.reference import group, maxrl

Q = Fraction


def _div(a: Fraction, b: Fraction) -> Fraction:
    """Coq's field division: x / 0 = 0."""
    return a / b if b else Q(0)


def _body(name: str, formula: str) -> None:
    body = coq.pinned()["definitions"][name]
    assert isinstance(body, str) and formula in body, f"{name} no longer reads {formula!r}"


def _groups(seed: int, smallest: int, nonnegative: bool = False) -> list[list[Fraction]]:
    rng = random.Random(seed)
    low = 0 if nonnegative else -5
    out = [[Q(rng.randint(low, 6), rng.randint(1, 3)) for _ in range(rng.randint(smallest, 6))]]
    for _ in range(300):
        n = rng.randint(smallest, 6)
        pool = [Q(0), Q(1)] if rng.random() < 0.5 else [Q(rng.randint(low, 6), rng.randint(1, 3))]
        out.append(
            [rng.choice(pool) if rng.random() < 0.5 else Q(rng.randint(low, 6)) for _ in range(n)]
        )
    return out


def test_unbiased_rloo_is_reference_rloo() -> None:
    _body("Unbiased.rloo", "r (y i) - (\\sum_(j | j != i) r (y j)) / m.-1%:R")
    for r in _groups(1, 2):
        n = len(r)
        want = [
            r[i] - _div(sum((r[j] for j in range(n) if j != i), Q(0)), Q(n - 1)) for i in range(n)
        ]
        assert group.rloo(r) == want, r


@pytest.mark.parametrize("ddof", [0, 1])
def test_unbiased_grpo_is_reference_grpo_without_epsilon(ddof: int) -> None:
    """reference.grpo's std is exact up to a 60-digit square root, so the comparison is on the
    square: A_i² · var = (r_i − μ)² with var = Σ (r_j − μ)² / (N − ddof), and A = 0 where var = 0
    (Coq: x / sqrt 0 = 0), signs equal."""
    _body(
        "Unbiased.grpo",
        "let mu := (\\sum_j r (y j)) / m%:R in (r (y i) - mu) / "
        "Num.sqrt ((\\sum_j (r (y j) - mu) ^+ 2) / (m - ddof)%:R)",
    )
    for r in _groups(2, 1):
        n = len(r)
        mu = _div(sum(r, Q(0)), Q(n))
        var = _div(sum(((x - mu) ** 2 for x in r), Q(0)), Q(max(n - ddof, 0)))
        got = group.grpo(r, eps=0.0, ddof=ddof)
        for x, a in zip(r, got, strict=True):
            if var == 0:
                assert a == 0, r
            else:
                assert (a > 0) == (x > mu) and abs(a * a * var - (x - mu) ** 2) < Q(1, 10**40), r


def test_maxrl_maxrl_is_reference_maxrl() -> None:
    _body(
        "MaxRL.maxrl",
        "let rbar := (\\sum_j r (y j)) / m%:R in if rbar == 0 then 0 else (r (y i) - rbar) / rbar",
    )
    for r in _groups(3, 1, nonnegative=True):
        rbar = sum(r, Q(0)) / len(r)
        want = [Q(0) if rbar == 0 else (x - rbar) / rbar for x in r]
        assert maxrl.maxrl(r) == want, r


@pytest.mark.parametrize("baseline", [True, False])
def test_maxrl_maxrl_unbiased_is_reference_maxrl_unbiased(baseline: bool) -> None:
    _body(
        "MaxRL.maxrl_unbiased",
        "let S := \\sum_j r (y j) in if S == 0 then 0 else m%:R * r (y i) / S - "
        "(baseline && [exists j, (j != i) && (0 < r (y j))])%:R",
    )
    for r in _groups(4, 1, nonnegative=True):
        n, s = len(r), sum(r, Q(0))
        want = [
            Q(0)
            if s == 0
            else n * r[i] / s - (1 if baseline and any(r[j] > 0 for j in range(n) if j != i) else 0)
            for i in range(n)
        ]
        assert maxrl.maxrl_unbiased(r, baseline=baseline) == want, r
