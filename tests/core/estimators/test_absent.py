"""Absent samples (a reward that never arrived) and the flat layout's refusals: a NaN group id is
refused naming its rows, a list of rewards is read or refused in a sentence, ``nonfinite="mask"``
equals the batch without those rows, and ``fast.absent`` estimates each group on the samples that
arrived, dropping a group left below what its estimator needs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from advest.fast import absent, by_group, calling, registry

K = 2
SEQUENCE = [
    e.name for e in registry.entries() if e.kind == "sequence" and not e.claims.batch_coupled
]


def _plan(name: str) -> calling.Plan:
    return calling.plan(name, k=K)


@pytest.mark.parametrize(
    "index", [np.array([math.nan, math.nan, 1, 1]), [0, 0, math.nan, 0], [(1, math.nan)] * 4]
)
def test_an_id_not_equal_to_itself_is_refused_naming_its_rows(index: object) -> None:
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    with pytest.raises(
        ValueError, match=r"index: the id of rows? [0-9, ]+\(.*nan.*\) is not equal"
    ):
        by_group("grpo", rewards, index)


def test_a_nan_id_behind_the_mask_is_never_read() -> None:
    valid = torch.tensor([True, True, False])
    got = by_group("grpo", torch.tensor([1.0, 0.0, 5.0]), [0, 0, math.nan], valid=valid)
    assert got[2] == 0 and got[0] > 0


def test_a_list_of_rewards_is_read_as_float64_and_a_list_of_text_is_refused_in_a_sentence() -> None:
    index = [0, 0, 1, 1]
    listed = by_group("grpo", [1.0, 0.0, 1, 1], index)
    assert listed.dtype == torch.float64
    assert torch.equal(
        listed, by_group("grpo", torch.tensor([1.0, 0, 1, 1], dtype=torch.float64), index)
    )
    with pytest.raises(
        TypeError, match="rewards must be a tensor, a numpy array or a list of numbers"
    ):
        by_group("grpo", ["1", "0", "1", "1"], index)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"rewards must be real numbers, one per row \(\[N\]\)"):
        by_group("grpo", [[1.0], [0.0]], [0, 0])  # type: ignore[list-item]


def test_a_nonfinite_reward_is_refused_by_default_naming_its_group_id_and_rows() -> None:
    rewards = torch.tensor([1.0, 0.0, 1.0, math.nan])
    with pytest.raises(ValueError, match=r"non-finite value in group id 'b' \(batch rows 2, 3\)"):
        by_group("grpo", rewards, ["a", "a", "b", "b"])
    with pytest.raises(ValueError, match="nonfinite must be 'refuse' or 'mask'"):
        by_group("grpo", rewards, ["a", "a", "b", "b"], nonfinite="drop")  # type: ignore[arg-type]


@given(
    st.lists(st.integers(0, 3), min_size=12, max_size=12),
    st.lists(st.sampled_from([0.0, 1.0, 0.5, math.nan, math.inf]), min_size=12, max_size=12),
    st.sampled_from(["grpo", "rloo", "maxpo"]),
)
def test_nonfinite_mask_equals_the_batch_without_those_rows(
    ids: list[int], values: list[float], name: str
) -> None:
    rewards = torch.tensor(values, dtype=torch.float64)
    finite = torch.isfinite(rewards)
    plan = _plan(name)
    kept = [ids[i] for i in range(12) if finite[i]]
    if not kept or min(kept.count(i) for i in set(kept)) < absent.needed(plan):
        with pytest.raises(ValueError):
            by_group(plan, rewards, ids, nonfinite="mask")
        return
    got = by_group(plan, rewards, ids, nonfinite="mask")
    want = by_group(plan, rewards[finite], kept)
    assert torch.equal(got[finite], want)
    assert bool((got[~finite] == 0).all())


def _absent_batch(G: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """``[3, G]`` rewards with a NaN (absent) sample in two groups, and which arrived."""
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(3, G, generator=gen, dtype=torch.float64).round()
    rewards[0] = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])[:G]
    rewards[0, 1] = rewards[2, 4] = math.nan
    return rewards, torch.isfinite(rewards)


@pytest.mark.parametrize("name", SEQUENCE)
def test_each_groups_advantages_are_those_of_the_samples_that_arrived_alone(name: str) -> None:
    plan = _plan(name)
    rewards, arrived = _absent_batch()
    T = 3
    source = {"rewards": rewards, "mask": torch.ones(3, 5, T, dtype=torch.bool)}
    valid, dropped = absent.admit(plan, arrived)
    got = absent.advantages(plan, source, valid)  # [B, G, T]
    for b in range(3):
        if dropped[b]:
            assert bool((got[b] == 0).all())
            continue
        keep = valid[b]
        alone = rewards[b, keep].unsqueeze(0)  # [1, G_b]: the group as if never drawn
        mask = torch.ones(1, int(keep.sum()), T, dtype=torch.bool)
        want = plan.advantages({"rewards": alone, "mask": mask})[0]
        assert torch.equal(got[b, keep], want), name
        assert bool((got[b, ~keep] == 0).all())


def test_a_group_left_below_what_its_estimator_needs_is_dropped() -> None:
    arrived = torch.tensor([[True, False, False, True], [True, True, True, False]])
    valid, dropped = absent.admit(_plan("maxpo"), arrived)  # K = 2 on 1 ≤ K ≤ G − 1: 3 samples
    assert dropped.tolist() == [True, False]
    assert valid.tolist() == [[False] * 4, [True, True, True, False]]
    _, dropped = absent.admit(_plan("grpo"), arrived)
    assert dropped.tolist() == [False, False]
    # one std over the batch needs groups of one size: any absence drops its group
    _, dropped = absent.admit(_plan("grpo_batch_std"), arrived)
    assert dropped.tolist() == [True, True]
    assert absent.needed(_plan("rloo")) == 2 and absent.needed(_plan("grpo")) == 1


def test_a_batch_with_nothing_left_has_zero_advantages() -> None:
    plan = _plan("grpo")
    source = {
        "rewards": torch.full((2, 3), math.nan),
        "mask": torch.ones(2, 3, 4, dtype=torch.bool),
    }
    got = absent.advantages(plan, source, torch.zeros(2, 3, dtype=torch.bool))
    assert got.shape == (2, 3, 4) and bool((got == 0).all())


@pytest.mark.parametrize("name", registry.names())
def test_every_estimator_runs_with_an_absent_sample_and_gives_it_zero(name: str) -> None:
    from advest.training.rollout import synthetic

    rollout = synthetic(3, 4, 5)
    rollout.rewards = rollout.rewards.clone()
    rollout.rewards[0, 1] = math.nan  # its reward never arrived
    plan = _plan(name)
    valid, _ = absent.admit(plan, torch.isfinite(rollout.rewards))
    rollout.mask = rollout.mask & valid.unsqueeze(-1)
    got = absent.advantages(plan, rollout, valid)  # [B, G, T]
    assert got.shape == (3, 4, 5) and bool(torch.isfinite(got).all())
    assert bool((got[0, 1] == 0).all()) and bool((got[~valid] == 0).all())
