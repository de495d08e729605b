"""Advantages on N ranks equal the advantages on one (issue 55; STYLE.md rule 31): every
registered estimator on one batch sharded over 2 gloo processes on the CPU (3 in the slow
tier), as the trainer's per-rank rollouts (whole groups) and as flat rows whose groups lie on
several ranks, compared with one process holding the whole batch (tests/ranks_batch.py). The
same processes also run with no process group handed over (each rank's statistics, histories
and groups its own): that planted defect must fail the comparison."""

from __future__ import annotations

from typing import Any

import pytest

from advest.fast import calling, registry
from tests import ranks_batch

NAMES = registry.names()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    # forked from this process (no second import of torch); the slow tier starts 3 fresh ones
    return ranks_batch.launch(2, tmp_path_factory.mktemp("world2"), fresh=False)


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, list[Any]]]:
    return {name: ranks_batch.one_process(registry.entry(name)) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_advantages_on_two_ranks_equal_one_process_holding_the_batch(
    name: str, ranks: list[dict[str, Any]], expected: dict[str, dict[str, list[Any]]]
) -> None:
    plain = [rank["plain"] for rank in ranks]
    assert ranks_batch.problems(name, 2, plain, expected[name]) == []


def test_a_per_rank_statistic_fails_the_comparison(
    ranks: list[dict[str, Any]], expected: dict[str, dict[str, list[Any]]]
) -> None:
    """With no process group, an estimator that needs a collective gives other advantages on
    its own (grid) share, and a group-local one does not; on flat rows every estimator does,
    since groups are split over the ranks."""
    planted = [rank["planted"] for rank in ranks]
    for name in NAMES:
        problems = ranks_batch.problems(name, 2, planted, expected[name])
        grid = [p for p in problems if p.startswith("grid")]
        flat = [p for p in problems if p.startswith("flat")]
        assert bool(grid) == registry.entry(name).collective, (name, problems)
        assert flat, name


def test_only_estimators_that_couple_the_batch_or_keep_a_history_need_a_collective() -> None:
    """``Entry.collective`` is derived from the claims and ``stateful``, never declared; a
    group-local estimator is handed no process group, so it pays for no collective."""
    need = {e.name for e in registry.entries() if e.collective}
    assert need == {"ebpo", "gdpo", "grpo_batch_std", "james_stein", "kae", "reinforce_pp"}
    assert calling.plan("grpo").over(object()).group is None
    assert calling.plan("covariance_weights", "grpo_batch_std").collective
