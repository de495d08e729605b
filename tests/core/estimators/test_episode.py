"""The episode estimators (spec/episode.md): fast equals the exact reference on hostile groups
(ragged turn counts, observation tokens anywhere, ties, zeros, offsets with a tiny spread), the
turn ids a response mask gives, and bad input refused by name."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from advest.fast import episode as fast
from advest.fast import registry
from advest.oracle.properties.episodes import batch
from advest.oracle.reports.catalogue import EPISODE_NAMES
from advest.reference import episode as ref

REWARDS = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 1e6, 1e6 + 1e-7, 3.0])
OFFSET = st.sampled_from([1e6, 1e6 + 1e-7, 1e6 + 2e-7, 1e6 + 3e-7])
"""Offsets with a tiny spread: the advantages are 1e-7 on rewards of 1e6."""


@st.composite
def groups(draw: st.DrawFn) -> list[tuple[list[float], list[int]]]:
    values = draw(st.sampled_from([REWARDS, OFFSET]))
    G = draw(st.integers(2, 9))
    group = []
    for _ in range(G):
        turns = draw(st.integers(1, 4))
        rewards = [draw(values) for _ in range(turns)]
        ids: list[int] = [-1] * draw(st.integers(0, 2))  # a leading observation is allowed
        for k in range(turns):
            ids += [k] * draw(st.integers(1, 3)) + [-1] * draw(st.integers(0, 3))
        group.append((rewards, ids))
    return group


def _scale(want: list[list[Fraction]], group: list[tuple[list[float], list[int]]]) -> float:
    """The size of what the output is made of: the larger of the exact advantages' max |A| and
    the group's reward spread × K (the advantages are sums of up to K rewards); never the
    rewards' size, so offsets with a tiny spread are held to the spread."""
    flat = [x for r, _ in group for x in r]
    K = max(len(r) for r, _ in group)
    return max(max(abs(float(x)) for e in want for x in e), (max(flat) - min(flat)) * K)


def _mismatches(
    got: torch.Tensor,
    want: list[list[Fraction]],
    group: list[tuple[list[float], list[int]]],
    rel: float,
) -> list[tuple[int, int]]:
    """Tokens (episode, position) where ``got [G, T]`` is further than rel × scale from the
    exact turn advantages (0 on observation tokens and padding)."""
    allowed = rel * _scale(want, group)
    bad = []
    for i, (_, t) in enumerate(group):
        for pos in range(got.shape[-1]):
            k = t[pos] if pos < len(t) else -1
            exact = 0.0 if k < 0 else float(want[i][k])
            if abs(float(got[i, pos]) - exact) > allowed:
                bad.append((i, pos))
    return bad


@pytest.mark.parametrize("name", EPISODE_NAMES)
@given(group=groups())
def test_fast_equals_the_reference(name: str, group: list[tuple[list[float], list[int]]]) -> None:
    rewards, ids = batch([group])
    for dtype, rel in ((torch.float64, 1e-9), (torch.float32, 1e-4)):
        given = [([float(torch.tensor(x, dtype=dtype)) for x in r], t) for r, t in group]
        want = getattr(ref, name)([r for r, _ in given])  # on what the estimator was given
        got = registry.get(name)(rewards.to(dtype), ids)[0]
        assert got.dtype == dtype
        assert _mismatches(got, want, given, rel) == [], (name, dtype)


def test_an_all_zeros_output_fails_the_comparison() -> None:
    """Planted: the tolerance scales with the exact advantages, so zeros cannot pass."""
    group = [([1.0, 0.0], [0, -1, 1]), ([0.0], [0]), ([2.0], [0, 0])]
    rewards, ids = batch([group])
    want = ref.turn_rloo([r for r, _ in group])
    assert _mismatches(fast.turn_rloo(rewards, ids)[0], want, group, 1e-9) == []  # control
    assert _mismatches(torch.zeros(ids.shape[1:]), want, group, 1e-9) != []


def test_turn_ids_from_a_mask_and_back() -> None:
    mask = torch.tensor([[[0, 1, 1, 0, 1, 0, 0, 1]]])
    assert fast.turn_ids_from_mask(mask).tolist() == [[[-1, 0, 0, -1, 1, -1, -1, 2]]]
    with pytest.raises(ValueError, match=r"mask must have shape \[B, G, T\]"):
        fast.turn_ids_from_mask(torch.ones(3, 4))


BAD = [
    (lambda: fast.turn_rloo(torch.zeros(1, 2, 2), torch.tensor([[[0, 2], [0, 0]]])),
     r"turn_ids must lie in \[-1, K-1 = 1\]; group 0, episode 0 has 2 at token 1"),
    (lambda: fast.turn_rloo(torch.zeros(1, 2, 2), torch.tensor([[[0, 1], [-1, -1]]])),
     r"episode 1 of group 0 has no policy token"),
    (lambda: fast.turn_rloo(torch.tensor([[[0.0], [float("nan")]]]), torch.zeros(1, 2, 1).long()),
     r"turn_rewards has a non-finite value in group 0"),
    (lambda: fast.turn_rloo(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1).long()),
     r"turn_rloo needs groups of G >= 2 episodes; got G=1"),
    (lambda: fast.turn_rloo(torch.zeros(1, 2), torch.zeros(1, 2, 1).long()),
     r"turn_rewards must have shape \[B, G, K\]"),
    (lambda: fast.turn_index_mean(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1)),
     r"turn_ids must be an integer torch.Tensor"),
    (lambda: fast.turn_index_mean(torch.zeros(1, 2, 1), torch.zeros(1, 3, 1).long()),
     r"turn_ids must have shape \[B, G, T\] with turn_rewards' B, G"),
    (lambda: ref.turn_rloo([[1.0]]), r"turn_rloo needs groups of G >= 2 episodes"),
    (lambda: ref.turn_rloo([[1.0], []]), r"turn_rewards\[1\] is an empty group"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "says"), BAD, ids=[says[:40] for _, says in BAD])
def test_bad_input_is_refused_by_name(call: object, says: str) -> None:
    with pytest.raises((ValueError, TypeError), match=says):
        call()  # type: ignore[operator]
