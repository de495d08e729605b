"""The oracle's "split over ranks" row (oracle/properties/ranks.py): a user's estimator on shards
of a batch over 2 to 4 gloo processes, against one process holding it all."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import Tensor

from advest.oracle.properties import ranks


def _group_mean(rewards: Tensor, index: Tensor) -> Tensor:
    """``[N]``: each row's group mean over the rows this call holds."""
    ids, inverse = torch.unique(index, return_inverse=True)
    sums = torch.zeros(ids.shape[0], dtype=rewards.dtype).index_add_(0, inverse, rewards)
    counts = torch.zeros(ids.shape[0], dtype=rewards.dtype).index_add_(
        0, inverse, torch.ones_like(rewards)
    )
    return (sums / counts)[inverse]


def group_local(rewards: Tensor, index: Tensor) -> Tensor:
    return rewards - _group_mean(rewards, index)


def per_rank_whitening(rewards: Tensor, index: Tensor) -> Tensor:
    """The planted defect: REINFORCE++'s whitening over the rows of the call (one rank's)."""
    c = group_local(rewards, index)
    return c / c.std()


def collective_whitening(rewards: Tensor, index: Tensor) -> Tensor:
    """The same whitening with its sums all-reduced over the default process group when one is
    running: right with whole groups on each rank, wrong when a group is split."""
    c = group_local(rewards, index)
    if not dist.is_initialized():
        return c / c.std()
    totals = torch.stack([c.sum(), (c * c).sum(), torch.tensor(float(c.numel()))]).double()
    dist.all_reduce(totals)
    total, squares, n = totals.unbind()
    return c / torch.sqrt((squares - total * total / n) / (n - 1))


def row_local(rewards: Tensor, index: Tensor) -> Tensor:
    return rewards - 0.5


def raises_on_rank_one(rewards: Tensor, index: Tensor) -> Tensor:
    if dist.is_initialized() and dist.get_rank() == 1:
        raise ValueError("rewards: a planted refusal")
    return rewards


def enters_a_collective_alone(rewards: Tensor, index: Tensor) -> Tensor:
    if dist.is_initialized() and dist.get_rank() == 0:
        dist.all_reduce(rewards.clone())
    return rewards


@pytest.mark.parametrize("world", [2, 3])
def test_a_per_rank_whitening_is_named_as_needing_a_collective(world: int) -> None:
    found = ranks.split_over_ranks(per_rank_whitening, world)
    assert found.verdict == ranks.NEEDS_COLLECTIVE, found
    assert "all-reduce" in found.evidence


def test_a_group_local_estimator_passes_with_each_group_on_one_rank() -> None:
    found = ranks.split_over_ranks(group_local, 2)
    assert found.verdict == ranks.GROUPS_ON_ONE_RANK, found
    assert found.data["whole groups"]["max_error"] == 0.0


def test_a_whitening_reduced_over_the_ranks_passes_with_whole_groups() -> None:
    found = ranks.split_over_ranks(collective_whitening, 4)
    assert found.verdict == ranks.GROUPS_ON_ONE_RANK, found
    whole = found.data["whole groups"]
    assert 0 <= whole["max_error"] <= whole["allowance"]


def test_a_row_local_estimator_is_right_however_rows_are_placed() -> None:
    assert ranks.split_over_ranks(row_local, 3).verdict == ranks.YES


def test_a_rank_that_raises_or_hangs_fails_the_row_naming_it() -> None:
    raised = ranks.split_over_ranks(raises_on_rank_one, 2)
    assert raised.verdict == ranks.FAILS and "rank 1" in raised.evidence
    assert "planted refusal" in raised.evidence
    hung = ranks.split_over_ranks(enters_a_collective_alone, 2, timeout=3)
    assert hung.verdict == ranks.FAILS and "hung" in hung.evidence, hung


def test_the_layouts_split_groups_only_where_asked() -> None:
    _, index = ranks.batch()
    rows = ranks.layouts(index, 3)
    for name, shards in rows.items():
        assert sorted(torch.cat(shards).tolist()) == list(range(index.shape[0]))
        spread = [{int(r) for r, s in enumerate(shards) if g in index[s]} for g in range(6)]
        split = sum(len(s) > 1 for s in spread)
        assert (split == 0) == (name == "whole groups"), (name, spread)


def test_a_bad_world_size_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="world"):
        ranks.split_over_ranks(row_local, 5)


def test_advest_check_on_flat_rows_shows_the_split_over_ranks_row() -> None:
    """``advest check --convention flat``'s row: a per-rank whitening is named, a group-local
    estimator passes with each group on one rank."""
    from advest.oracle.reports import report

    from . import search_plants as plants

    def whitened_per_rank(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
        a = plants.flat_mean(rewards, index, valid).double()
        return ((a - a.mean()) / (a.std() + 1e-6)).to(rewards.dtype)

    def row(fn: Any) -> str:
        found = report.check(fn, "outcome", convention="flat", ns=[3], budget=None, float64=False)
        return next(f.verdict for f in found if f.prop == "split over ranks")

    assert row(plants.flat_mean) == "yes, with each group on one rank"
    assert row(whitened_per_rank) == "no: needs a collective"
