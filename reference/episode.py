"""Turn-level advantages of multi-turn episodes, exactly (spec/episode.md).

One group of G episodes in: episode i has T_i ≥ 1 turns and a reward per turn, ``turn_rewards[i]
= [r_{i,0}, …, r_{i,T_i−1}]`` (a step reward, and the episode's final reward added to its last
turn's). One advantage per turn out, ``[G][T_i]``; every policy token of turn k gets A_{i,k}
(observation tokens get none: they carry no score).

Return-to-go R_{i,k} = Σ_{m≥k} r_{i,m}; an episode that stopped before turn k has R_{j,k} = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ._exact import Number, mean, public, to_fractions


def _episodes(turn_rewards: Sequence[Sequence[Number]]) -> list[list[Fraction]]:
    if isinstance(turn_rewards, str | bytes) or not isinstance(turn_rewards, Sequence):
        raise TypeError(f"turn_rewards must be a sequence of episodes; got {type(turn_rewards)}")
    if len(turn_rewards) == 0:
        raise ValueError("turn_rewards is an empty group; a group needs at least 1 episode")
    return [to_fractions(episode, f"turn_rewards[{i}]") for i, episode in enumerate(turn_rewards)]


def returns_to_go(turn_rewards: Sequence[Sequence[Number]]) -> list[list[Fraction]]:
    """R_{i,k} = Σ_{m=k}^{T_i−1} r_{i,m} for every episode i and turn k < T_i."""
    return [[sum(r[k:], Fraction(0)) for k in range(len(r))] for r in _episodes(turn_rewards)]


def _padded_return(returns: list[Fraction], k: int) -> Fraction:
    """R_{j,k}, and 0 for a turn the episode never took."""
    return returns[k] if k < len(returns) else Fraction(0)


def turn_rloo(turn_rewards: Sequence[Sequence[Number]]) -> list[list[Fraction]]:
    """A_{i,k} = R_{i,k} − (1/(G−1)) Σ_{j≠i} R_{j,k}, with R_{j,k} = 0 past episode j's end.

    The baseline of turn k reads only the other episodes, all G − 1 of them whether or not they
    reached turn k: it does not depend on episode i's own later turns or its number of turns, so
    it adds no bias however the policy decides when to stop. One-turn episodes give ``rloo``."""
    R = returns_to_go(turn_rewards)
    G = len(R)
    if G < 2:
        raise ValueError(f"turn_rloo needs groups of G >= 2 episodes; got G={G}")
    return [
        [
            R[i][k]
            - Fraction(1, G - 1) * sum((_padded_return(R[j], k) for j in range(G) if j != i),
                                       Fraction(0))
            for k in range(len(R[i]))
        ]
        for i in range(G)
    ]  # fmt: skip


def turn_index_mean(turn_rewards: Sequence[Sequence[Number]]) -> list[list[Fraction]]:
    """The per-turn-index normalisation (MT-GRPO, arXiv:2505.11821, its mean; verl #7244's
    "natural construction"): μ_m = the mean of r_{j,m} over the episodes that reached turn m,
    A_{i,k} = Σ_{m=k}^{T_i−1} (r_{i,m} − μ_m).

    Biased when the policy decides when to stop: the baseline Σ_{m=k}^{T_i−1} μ_m has T_i − k
    terms, set by the episode's own stopping turn, so every further turn adds −μ_m to the
    advantage of the turns before it. Kept as the labelled contrast. One-turn episodes give
    ``dr_grpo``."""
    r = _episodes(turn_rewards)
    depth = max(len(e) for e in r)
    mu = [mean([e[m] for e in r if m < len(e)]) for m in range(depth)]
    return [
        [sum((e[m] - mu[m] for m in range(k, len(e))), Fraction(0)) for k in range(len(e))]
        for e in r
    ]


__all__ = public(globals())  # every public function and class above
