"""MaxRL (Maximum Likelihood Reinforcement Learning), exactly: the trainers' p-normalised form and
advest's unbiased form.

One group of non-negative rewards in, one advantage per sample out, in the input order.
Conventions in ``spec/maxrl.md``: N = G samples, S = Σ_j r_j, r̄ = S/N; no ε anywhere; a group
with r̄ = 0 gives exact zeros; negative rewards are refused (p-normalisation divides by a
success rate).

Source: Fahim Tajwar et al., *Maximum Likelihood Reinforcement Learning*, arXiv:2602.02710: the
estimator (1/K)·Σ_{i: r_i = 1} ∇log π(y_i) (K successes) and its expectation
Σ_{k=1}^{N} (1/k)·∇pass@k; the p-normalised advantage (r_i − r̄)/r̄ is what TRL, SkyRL and
prime-rl ship.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from advest.spec.conventions import SKYRL_MAXRL_EPS, MaxrlConvention, check_maxrl_convention

from ._exact import Number, public, to_fractions


def _nonnegative(r: Sequence[Fraction], name: str) -> None:
    for i, x in enumerate(r):
        if x < 0:
            raise ValueError(
                f"{name} needs non-negative rewards (p-normalisation divides by the mean reward); "
                f"group 0 has {x} at sample {i}"
            )


def maxrl(rewards: Sequence[Number], *, convention: MaxrlConvention = "advest") -> list[Fraction]:
    """The p-normalised MaxRL advantage A_i = (r_i − r̄)/r̄, and A = 0 when r̄ = 0.

    For pass/fail rewards with K = Σ r_i successes this is N·r_i/K − 1 (K > 0): N times the
    paper's weight 1/K on each success, minus a baseline of 1 that is subtracted only when some
    sample succeeded.

    ``convention="skyrl-0.4.0"``: SkyRL's ``compute_maxrl_advantage``
    (skyrl/backends/skyrl_train/utils/ppo_utils.py), A_i = (r_i − r̄)/(r̄ + ε) with ε the double
    1e-6, exactly, and A = r for a group of one (SkyRL's group mean of one sample is 0).
    """
    conv = check_maxrl_convention(convention)
    r = to_fractions(rewards)
    _nonnegative(r, "maxrl")
    r_bar = sum(r, Fraction(0)) / len(r)
    if conv == "skyrl-0.4.0":
        if len(r) == 1:
            return list(r)
        return [(x - r_bar) / (r_bar + Fraction(SKYRL_MAXRL_EPS)) for x in r]
    if r_bar == 0:
        return [Fraction(0)] * len(r)
    return [(x - r_bar) / r_bar for x in r]


def maxrl_unbiased(rewards: Sequence[Number], *, baseline: bool = True) -> list[Fraction]:
    """A_i = N·r_i/S − [S_{−i} > 0], S = Σ_j r_j, S_{−i} = S − r_i; A = 0 when S = 0.

    N·r_i/S is N times the paper's estimator (1/K on each of the K successes). The baseline
    [S_{−i} > 0] (1 when some *other* sample has a positive reward) is a function of the other
    samples only, so it leaves the expectation unchanged; it differs from the p-normalised
    form's baseline [S > 0] only on a sample that is the group's one success. ``baseline=False``
    gives N·r_i/S alone, the paper's estimator scaled by N.
    """
    r = to_fractions(rewards)
    _nonnegative(r, "maxrl_unbiased")
    N, S = len(r), sum(r, Fraction(0))
    if S == 0:
        return [Fraction(0)] * N
    out = []
    for i, x in enumerate(r):
        others_positive = any(r[j] > 0 for j in range(N) if j != i)
        out.append(N * x / S - (1 if baseline and others_positive else 0))
    return out


__all__ = public(globals())  # every public function and class above
