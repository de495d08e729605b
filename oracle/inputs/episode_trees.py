"""Small multi-turn episodes, enumerated exactly (spec/episode.md §The episode oracle).

The policy writes a turn (one token from an alphabet of ``A``, then an end-of-turn token that
decides: stop, or go on), the environment answers a "go on" with observation tokens (its answer
may depend on the history and be random, with rational probabilities), up to ``max_turns``
turns; the last turn's end-of-turn is forced. Rewards come per turn (a step reward) and at the
end (added to the last turn's). Only the policy's choices carry a score: the score of choice x
at decision point h is e_x − π(·|h) (a tabular softmax's ∇log π), so ∇J and every expected
gradient are exact rationals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

History = tuple[tuple[int, int, tuple[int, ...]], ...]
"""The turns so far: (policy token, decision (0 stop, 1 go on), observation tokens)."""
Point = tuple[str, History, int]
"""A decision point: ("token", history, -1) or ("stop", history, token)."""
Gradient = dict[tuple[Point, int], Fraction]


@dataclass(frozen=True)
class World:
    """A policy, an environment and rewards over episodes of at most ``max_turns`` turns."""

    name: str
    alphabet: int
    max_turns: int
    token: Callable[[History], list[Fraction]]
    """π(a | history): one probability per token of the alphabet."""
    go_on: Callable[[History, int], Fraction]
    """π(go on | history, this turn's token)."""
    answer: Callable[[History, int], list[tuple[tuple[int, ...], Fraction]]]
    """The environment's observation tokens after a "go on", with their probabilities."""
    step_reward: Callable[[History, int], Fraction]
    """The reward of a turn that wrote ``token`` after ``history``."""
    final_reward: Callable[[History], Fraction]
    """The reward at the end of the finished episode."""


@dataclass(frozen=True)
class Episode:
    turns: History
    probability: Fraction
    turn_rewards: tuple[Fraction, ...]
    scores: tuple[tuple[Gradient, Gradient], ...]
    """Per turn, the score of its two policy tokens: its token, its end-of-turn (empty when the
    end was forced)."""

    @property
    def total(self) -> Fraction:
        return sum(self.turn_rewards, Fraction(0))


def _score(point: Point, probs: list[Fraction], chosen: int) -> Gradient:
    return {(point, x): (1 if x == chosen else 0) - p for x, p in enumerate(probs)}


def episodes(world: World) -> Iterator[Episode]:
    """Every episode with positive probability, exactly."""

    def grow(h: History, p: Fraction, rewards: tuple[Fraction, ...],
             scores: tuple[tuple[Gradient, Gradient], ...]) -> Iterator[Episode]:  # fmt: skip
        probs = world.token(h)
        for a, pa in enumerate(probs):
            if pa == 0:
                continue
            score = _score(("token", h, -1), probs, a)
            r = world.step_reward(h, a)
            last = len(h) + 1 == world.max_turns
            go = Fraction(0) if last else world.go_on(h, a)
            decisions = [Fraction(1) - go, go]
            for d, pd in enumerate(decisions):
                if pd == 0:
                    continue
                end = {} if last else _score(("stop", h, a), decisions, d)
                here = (score, end)
                if d == 0:
                    done = (*h, (a, 0, ()))
                    final = world.final_reward(done)
                    yield Episode(done, p * pa * pd, (*rewards, r + final), (*scores, here))
                    continue
                for obs, po in world.answer(h, a):
                    if po:
                        yield from grow((*h, (a, 1, obs)), p * pa * pd * po, (*rewards, r),
                                        (*scores, here))  # fmt: skip

    yield from grow((), Fraction(1), (), ())


def add(into: Gradient, scale: Fraction, g: Gradient) -> None:
    for key, value in g.items():
        into[key] = into.get(key, Fraction(0)) + scale * value


def objective_gradient(world: World) -> Gradient:
    """∇J, J = E[Σ_k r_k], exactly: Σ_τ P(τ) R(τ) Σ_{choices} score (the score-function identity
    on a finite tree)."""
    grad: Gradient = {}
    for e in episodes(world):
        for pair in e.scores:
            for score in pair:
                add(grad, e.probability * e.total, score)
    return grad


def tokens(e: Episode) -> tuple[list[int], list[int]]:
    """Episode ``e`` as a trainer holds it: (turn ids, token values) per response token. Each
    turn is its token and its end-of-turn (turn id k), then the observation tokens (−1)."""
    ids: list[int] = []
    values: list[int] = []
    for k, (a, d, obs) in enumerate(e.turns):
        ids += [k, k]
        values += [a, d]
        ids += [-1] * len(obs)
        values += list(obs)
    return ids, values


def _third(h: History, a: int) -> Fraction:
    return Fraction(1, 3) if a == 0 else Fraction(2, 3)


WORLDS = (
    # The policy decides when to stop; step rewards on every turn (the verl #7244 setting); the
    # environment answers with one or two tokens at random, depending on the token.
    World(
        "step rewards, policy stops",
        alphabet=2,
        max_turns=3,
        token=lambda h: [Fraction(1, 3), Fraction(2, 3)] if len(h) % 2 else [Fraction(1, 2)] * 2,
        go_on=lambda h, a: Fraction(1, 2) if a == 0 else Fraction(1, 4),
        answer=lambda h, a: [((1,), _third(h, a)), ((0, 1), 1 - _third(h, a))],
        step_reward=lambda h, a: Fraction(1, 2) if a == 1 else Fraction(-1, 4),
        final_reward=lambda h: Fraction(1) if h[-1][0] == 1 else Fraction(0),
    ),
    # Final reward only, a deterministic environment whose answer depends on the history.
    World(
        "final reward, history-dependent answers",
        alphabet=2,
        max_turns=3,
        token=lambda h: [Fraction(2, 5), Fraction(3, 5)],
        go_on=lambda h, a: Fraction(2, 3) if a == 0 else Fraction(1, 3),
        answer=lambda h, a: [((len(h) + a,), Fraction(1))],
        step_reward=lambda h, a: Fraction(0),
        final_reward=lambda h: Fraction(len([t for t in h if t[0] == 1]), len(h)),
    ),
)
"""The worlds the unbiasedness row enumerates (small: every group of N = 2 episodes)."""
