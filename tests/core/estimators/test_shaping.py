"""Reward shaping: each transform's fast form equals its exact reference (hypothesis), keeps the
invariants it declares (``oracle/properties/shaping.py``), and each invariant's check fails on a
planted transform that breaks it; ``by_group(..., shaping=...)`` is the estimator on the shaped
groups, and never reads a masked row."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch import Tensor

from advest.fast import by_group, shaping
from advest.oracle.properties import shaping as oracle
from advest.reference import shaping as ref

G = 4
OPTIONS: dict[str, dict[str, float]] = {
    "gr3": {"alpha": 0.5},
    "overlong": {"max_length": 20, "cache": 4},
    "length_penalty": {"weight": 0.5, "threshold": 1.0},
    "efficiency": {},
}
rewards_st = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -1.0, 3.0]), min_size=G, max_size=G)
lengths_st = st.lists(st.integers(0, 30), min_size=G, max_size=G)


@pytest.mark.parametrize("name", sorted(shaping.SHAPINGS))
@given(rewards=rewards_st, lengths=lengths_st)
@example(rewards=[1.0, 1.0, 0.0, 0.0], lengths=[0, 0, 0, 0])  # all-zero lengths and costs
@example(rewards=[1.0, 1.0, 1.0, 0.0], lengths=[7, 7, 7, 7])  # all equal
def test_fast_equals_the_exact_reference(
    name: str, rewards: list[float], lengths: list[int]
) -> None:
    options = OPTIONS[name]
    fast = shaping.shaping(name, **options)(
        torch.tensor([rewards], dtype=torch.float64), torch.tensor([lengths])
    )[0]
    exact = getattr(ref, name)(rewards, lengths, **options)
    for got, want in zip(fast.tolist(), exact, strict=True):
        assert abs(Fraction(got) - want) <= Fraction(1, 10**12) * (1 + abs(want))


@pytest.mark.parametrize("name", sorted(shaping.SHAPINGS))
def test_each_shaping_keeps_the_invariants_it_declares(name: str) -> None:
    made = shaping.shaping(name, **OPTIONS[name])
    findings = oracle.check(made, made.keeps)
    assert [f.prop for f in findings] == list(made.keeps)
    assert all(f.verdict == "yes" for f in findings), [(f.prop, f.evidence) for f in findings]


def _gr3_unguarded(rewards: Tensor, lengths: Tensor) -> Tensor:
    """GR³ without its L̄ = 0 rule: 0/0 on all-zero lengths."""
    r, L = rewards.double(), lengths.double()
    return r / (1 + 0.5 * L / L.mean(-1, keepdim=True))


def _gr3_batch_mean(rewards: Tensor, lengths: Tensor) -> Tensor:
    """GR³ by the batch's mean length: a group's rewards depend on the other groups."""
    r, L = rewards.double(), lengths.double()
    return r / (1 + 0.5 * L / L.mean().clamp(min=1))


def _baseline_from_raw(rewards: Tensor, lengths: Tensor) -> Tensor:
    """prime-rl #2040's composition: shaped rewards minus the raw rewards' mean."""
    return shaping.GR3()(rewards, lengths) - rewards.mean(-1, keepdim=True)


PLANTED: list[tuple[str, Callable[[Tensor, Tensor], Tensor], bool]] = [
    ("finite", _gr3_unguarded, False),
    ("finite", lambda r, L: r * (1 - L / L.mean(-1, keepdim=True)), False),  # prime-rl #2377
    ("centred", _baseline_from_raw, True),
    ("pass_over_fail", shaping.LengthPenalty(weight=3.0), False),  # w > 2
    ("pass_over_fail", shaping.GR3(alpha=-3.0), False),  # a pass rescaled below zero
    ("per_group", _gr3_batch_mean, False),
]


@pytest.mark.parametrize(("prop", "fn", "advantages"), PLANTED)
def test_each_invariants_check_fails_on_a_planted_transform_that_breaks_it(
    prop: str, fn: Callable[[Tensor, Tensor], Tensor], advantages: bool
) -> None:
    (finding,) = oracle.check(fn, (prop,), advantages=advantages)
    assert finding.verdict.startswith("no"), finding.evidence
    assert "rewards" in finding.evidence or prop in ("per_group", "centred")


@pytest.mark.parametrize("name", sorted(shaping.SHAPINGS))
def test_by_group_with_shaping_is_the_estimator_on_the_shaped_groups(name: str) -> None:
    made = shaping.shaping(name, **OPTIONS[name])
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    lengths = torch.tensor([3, 9, 22, 5, 0, 17, 4])
    index = ["a", "a", "a", "b", "b", "b", "b"]  # ragged: 3 and 4 samples
    got = by_group("rloo", rewards, index, shaping=made, lengths=lengths)
    for rows in ([0, 1, 2], [3, 4, 5, 6]):
        shaped = made(rewards[rows].unsqueeze(0), lengths[rows].unsqueeze(0))
        want = by_group("rloo", shaped[0], [0] * len(rows))
        assert torch.equal(got[rows], want)


def test_a_masked_rows_reward_and_length_are_never_read_by_the_shaping() -> None:
    made = shaping.GR3()
    rewards = torch.tensor([1.0, 0.0, math.nan, 1.0], dtype=torch.float64)
    lengths = torch.tensor([3.0, 5.0, math.nan, 8.0])
    valid = torch.tensor([True, True, False, True])
    got = by_group("grpo", rewards, [0, 0, 0, 0], valid=valid, shaping=made, lengths=lengths)
    keep = valid.nonzero().squeeze(-1)
    alone = by_group("grpo", rewards[keep], [0, 0, 0], shaping=made, lengths=lengths[keep])
    assert torch.equal(got[keep], alone) and got[2] == 0


def test_bad_shaping_input_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="shaping reads each sample's length"):
        by_group("grpo", [1.0, 0.0], [0, 0], shaping=shaping.GR3())
    with pytest.raises(ValueError, match="lengths must be >= 0; group 0 has -1"):
        shaping.GR3()(torch.ones(1, 2), torch.tensor([[3, -1]]))
    with pytest.raises(KeyError, match="unknown shaping 'gr4'; valid: efficiency, gr3"):
        shaping.shaping("gr4")
    with pytest.raises(ValueError, match=r"shaping 'gr3' takes options \['alpha'\]"):
        shaping.shaping("gr3", beta=1.0)
