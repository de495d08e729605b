"""Ties Turns.v's premises to reference/episode.py by exhaustive enumeration of small groups
(docs/theorems.md, Turns.v): ``turn_rloo``'s baseline R_{i,k} − A_{i,k} is a function of the
other episodes alone (the theorems' g(c)), and ``turn_index_mean``'s baseline at turn 0 of
episodes of at most two turns is exactly μ_0 + [T_i = 2] μ_1 (``turn_index_mean_bias``'s form)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

from advest.reference import episode as ref

EPISODES = [
    [r for r in rewards]
    for turns in (1, 2)
    for rewards in itertools.product([Fraction(0), Fraction(1), Fraction(-1, 2)], repeat=turns)
]  # every episode of one or two turns with rewards in {0, 1, −1/2}
Reference = Callable[[Sequence[Sequence[Fraction]]], list[list[Fraction]]]


def _baselines_vary_with_own_episode(fn: Reference) -> list[tuple[object, ...]]:
    """Where the baseline of episode 0 at turn 0 (R_{0,0} − A_{0,0}) changes when only episode 0
    changes, the two others fixed: empty when it is a function of the others alone."""
    moved = []
    for others in itertools.product(EPISODES, repeat=2):
        seen = {ref.returns_to_go([own])[0][0] - fn([own, *others])[0][0] for own in EPISODES}
        if len(seen) > 1:
            moved.append((others, sorted(seen)))
    return moved


def test_turn_rloo_baseline_is_a_function_of_the_other_episodes() -> None:
    assert _baselines_vary_with_own_episode(ref.turn_rloo) == []


def test_a_baseline_that_reads_the_own_episode_is_caught() -> None:
    """Planted: the per-turn-index mean (its baseline counts the episode's own turns)."""
    assert _baselines_vary_with_own_episode(ref.turn_index_mean) != []


def test_turn_index_mean_baseline_is_the_theorems_form_at_turn_0() -> None:
    for group in itertools.product(EPISODES, repeat=3):
        mu = [
            sum((e[m] for e in group if len(e) > m), Fraction(0))
            / sum(1 for e in group if len(e) > m)
            if any(len(e) > m for e in group)
            else Fraction(0)
            for m in (0, 1)
        ]
        advantages = ref.turn_index_mean(group)
        for i, own in enumerate(group):
            go_on = Fraction(int(len(own) == 2))
            baseline = ref.returns_to_go([own])[0][0] - advantages[i][0]
            assert baseline == mu[0] + go_on * mu[1], (group, i)
