"""Exact policy-gradient bias of an advantage estimator on a softmax bandit (spec/maxk.md §Bandit).

A actions with fixed rewards r_a, policy π (rational), N i.i.d. samples per batch, objective
J = E[max of K i.i.d. rewards]. The score of a softmax policy is ∇_θ log π(a) = e_a − π, so
E[ĝ] is a polynomial in π and can be computed exactly by enumerating all A^N action tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import product

Advantage = Callable[[list[Fraction]], list[Fraction]]


def objective(pi: Sequence[Fraction], r: Sequence[Fraction], k: int) -> Fraction:
    """J = Σ_j r_(j) (F_j^K − F_{j−1}^K), F_j the CDF of the rewards sorted ascending."""
    order = sorted(range(len(r)), key=lambda a: r[a])
    total, cdf_prev = Fraction(0), Fraction(0)
    for a in order:
        cdf = cdf_prev + pi[a]
        total += r[a] * (cdf**k - cdf_prev**k)
        cdf_prev = cdf
    return total


def gradient(pi: Sequence[Fraction], r: Sequence[Fraction], k: int) -> list[Fraction]:
    """∂J/∂θ_c = K π_c (EI(c) − Σ_a π_a EI(a)), with EI(a) = E[ReLU(r_a − max of K−1 draws)]."""
    order = sorted(range(len(r)), key=lambda a: r[a])

    def expected_improvement(a: int) -> Fraction:
        if k == 1:
            return r[a]
        total, cdf_prev = Fraction(0), Fraction(0)
        for j in order:
            cdf = cdf_prev + pi[j]
            total += max(r[a] - r[j], Fraction(0)) * (cdf ** (k - 1) - cdf_prev ** (k - 1))
            cdf_prev = cdf
        return total

    ei = [expected_improvement(a) for a in range(len(r))]
    mean_ei = sum((p * e for p, e in zip(pi, ei, strict=True)), Fraction(0))
    return [k * pi[c] * (ei[c] - mean_ei) for c in range(len(r))]


def expected_estimate(
    pi: Sequence[Fraction], r: Sequence[Fraction], n: int, advantage: Advantage
) -> list[Fraction]:
    """E[Σ_i A_i (e_{a_i} − π)] over all A^N tuples of N i.i.d. actions, exactly."""
    num_actions = len(pi)
    total = [Fraction(0)] * num_actions
    for actions in product(range(num_actions), repeat=n):
        prob = Fraction(1)
        for a in actions:
            prob *= pi[a]
        adv = advantage([r[a] for a in actions])
        for a_i, value in zip(actions, adv, strict=True):
            for c in range(num_actions):
                total[c] += prob * value * ((1 if c == a_i else 0) - pi[c])
    return total
