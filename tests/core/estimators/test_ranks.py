"""Advantages on N ranks equal the advantages on one (issue 55; STYLE.md rule 31): every
registered estimator on one batch sharded over 2 and 3 gloo processes on the CPU, as the
trainer's per-rank rollouts (whole groups) and as flat rows whose groups lie on several ranks,
compared with one process holding the whole batch (tests/ranks_batch.py). A run with no process
group handed over (each rank's statistics, histories and groups its own) must fail it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from advest.fast import registry
from tests import ranks_batch

NAMES = registry.names()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, bool], list[Any]]:
    """Each rank's results, per (world size, planted defect); one launch each."""
    found = {}
    for world, plant in ((2, False), (3, False), (2, True)):
        out = tmp_path_factory.mktemp(f"world{world}{'_plant' * plant}")
        ranks_batch.launch(world, out, plant)
        found[world, plant] = [torch.load(out / f"rank{r}.pt") for r in range(world)]
    return found


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, list[Any]]]:
    return {name: ranks_batch.one_process(registry.entry(name)) for name in NAMES}


def _problems(
    name: str, world: int, ranks: list[Any], expected: dict[str, list[Any]]
) -> list[str]:
    """Every way the ranks' results differ from one process's, as sentences."""
    entry = registry.entry(name)
    found = []
    for step, want in enumerate(expected["grid"]):
        rewards = ranks_batch.whole(entry, step)["rewards"]
        cuts = [0, *torch.tensor(ranks_batch.SHARES[world]).cumsum(0).tolist()]
        for rank, result in enumerate(ranks):
            mine = slice(cuts[rank], cuts[rank + 1])
            why = ranks_batch.mismatch(entry, want[mine], result[name]["grid"][step], rewards[mine])
            if why:
                found.append(f"grid, step {step}, rank {rank}: {why}")
        flat_rewards = ranks_batch.flat_rows(ranks_batch.whole(entry, step))[0]
        got = [result[name]["flat"][step] for result in ranks]
        if any(isinstance(g, str) for g in got):
            found.append(f"flat, step {step}: {next(g for g in got if isinstance(g, str))}")
            continue
        why = ranks_batch.mismatch(
            entry, expected["flat"][step], torch.cat(got), flat_rewards.reshape(-1, 1)
        )
        if why:
            found.append(f"flat, step {step}: {why}")
    for layout, want_state in zip(("grid", "flat"), expected["state"], strict=True):
        if want_state is None:
            continue
        for rank, result in enumerate(ranks):
            state = result[name]["state"][("grid", "flat").index(layout)]
            if not _same_state(state, want_state):
                found.append(f"{layout}: rank {rank}'s history is not one process's")
    return found


def _same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    return all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
    )


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_advantages_on_n_ranks_equal_one_process_holding_the_batch(
    name: str,
    world: int,
    runs: dict[tuple[int, bool], list[Any]],
    expected: dict[str, dict[str, list[Any]]],
) -> None:
    assert _problems(name, world, runs[world, False], expected[name]) == []


def test_a_per_rank_statistic_fails_the_comparison(
    runs: dict[tuple[int, bool], list[Any]], expected: dict[str, dict[str, list[Any]]]
) -> None:
    """With no process group, an estimator that needs a collective gives other advantages on
    its own (grid) share; on flat rows every estimator does, since groups are split."""
    planted = runs[2, True]
    for name in NAMES:
        problems = _problems(name, 2, planted, expected[name])
        grid = [p for p in problems if p.startswith("grid")]
        flat = [p for p in problems if p.startswith("flat")]
        assert bool(grid) == registry.entry(name).collective, (name, problems)
        assert flat, name


def test_only_estimators_that_couple_the_batch_or_keep_a_history_need_a_collective() -> None:
    """``Entry.collective`` is derived from the claims and ``stateful``, never declared."""
    need = {e.name for e in registry.entries() if e.collective}
    assert need == {"ebpo", "gdpo", "grpo_batch_std", "james_stein", "kae", "reinforce_pp"}
    # a group-local estimator is handed no process group, so it pays for no collective
    from advest.fast import calling

    assert calling.plan("grpo").over(object()).group is None
    assert calling.plan("covariance_weights", "grpo_batch_std").collective
