"""Prefix.prefix_baseline_adds_no_bias, as pinned, covers reference/hista.py's baseline.

The theorem: for any ``b : seq Y -> R``, the term ``b (take t y) * score (take t.+1 y)`` has
expectation 0 under an autoregressive policy, for every length and step. Hista's baseline at
token t of rollout i is V̂_i(⌊t/w⌋), computed from rollout i's complete blocks before t and from
the other rollouts (independent samples: fixed values inside the expectation over rollout i).
With hidden states that a causal model computes (the state of token u reads tokens 0..u), that
is a function of ``take t y`` alone, which is the theorem's premise. This test checks it by
exhaustive enumeration: every response of a small alphabet and length, with the other rollouts
fixed, and V̂_i(t) compared across all responses that share their first t tokens. A planted
non-causal state (token u's state reads token u + 1) breaks it, as
``Prefix.later_token_baseline_can_be_biased`` says it may."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

import pytest

from advest.proofs import coq_check as coq
from advest.reference import hista

Q = Fraction
ALPHABET = (0, 1, 2)
LENGTH = 5
State = Callable[[Sequence[int], int], list[Fraction]]


def causal(y: Sequence[int], u: int) -> list[Fraction]:
    """Token u's hidden state: reads y[0..u] only (a causal model's last layer)."""
    seen = y[: u + 1]
    return [Q(len(seen)), Q(sum(seen), 3), Q(seen[-1] * seen[-1] + 1, 2)]


def peeking(y: Sequence[int], u: int) -> list[Fraction]:
    """The planted defect: token u's state also reads token u + 1."""
    ahead = y[u + 1] if u + 1 < len(y) else 0
    return [*causal(y, u)[:2], Q(ahead + 1, 2)]


def prefix_dependence(state: State, w: int) -> list[tuple[int, tuple[int, ...]]]:
    """The (t, prefix) pairs at which Hista's V̂_0(t) differs between two responses of rollout 0
    that share their first t tokens (rollouts 1, 2 fixed)."""
    others = [(2, 0, 1, 1, 2), (1, 1, 0, 2, 0)]
    seen: dict[tuple[int, tuple[int, ...]], Fraction] = {}
    bad = []
    for y in itertools.product(ALPHABET, repeat=LENGTH):
        rollouts = [y, *others]
        hidden = [[state(r, u) for u in range(len(r))] for r in rollouts]
        values = hista.state_values(hidden, [Q(sum(y) % 2), Q(1), Q(0)], w=w)[0]
        for t in range(LENGTH):
            key = (t, y[:t])
            if seen.setdefault(key, values[t]) != values[t] and key not in bad:
                bad.append(key)
    return bad


def test_the_pinned_theorem_is_about_a_baseline_of_the_prefix() -> None:
    """The pinned statement has the form this test relies on: a baseline of ``take t y``
    times the score of ``take t.+1 y``, for any ``b``, with the premises on the step."""
    pin = coq.pinned()["theorems"]["Prefix.prefix_baseline_adds_no_bias"]
    assert isinstance(pin, dict)
    statement = pin["coq"]
    assert "forall (b : seq Y -> R) (t n : nat) (h : seq Y)" in statement, statement
    assert "Eseq (R:=R) (Y:=Y) p n h (fun y : seq Y => b (take t y) * score (take t.+1 y)) = 0" in (
        statement
    ), statement
    body = coq.pinned()["definitions"]["Prefix.Eseq"]
    assert isinstance(body, str)
    assert "\\sum_v p h v * Eseq n' (rcons h v) F" in body, body  # the autoregressive expectation


@pytest.mark.parametrize("w", [1, 2])
def test_hista_baseline_at_token_t_reads_only_the_first_t_tokens(w: int) -> None:
    assert prefix_dependence(causal, w) == []


def test_a_state_that_reads_the_next_token_is_caught() -> None:
    bad = prefix_dependence(peeking, 1)
    assert bad, "the planted non-causal state went unseen"
    assert all(t >= 1 for t, _ in bad)  # token 0's baseline reads no block (the LOO mean)
