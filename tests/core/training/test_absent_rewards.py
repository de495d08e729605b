"""A reward that never arrived, in the trainer: a planted slow verifier times out on some samples,
which are left out of their groups (the other samples' advantages are those of a run where they
were never drawn), out of the loss, and counted in the log; ``--failed_reward 0`` scores them 0
as before."""

from __future__ import annotations

import csv
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.fast import absent, calling
from advest.training import scoring
from advest.training.module import RLModule
from advest.training.sampling import verify
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, _train, model_path

__all__ = ["model_path"]

pytestmark = TRAINER_WARNINGS

SLOW = """
    import time


    def slow(completion: str, answer: str) -> float:
        if completion.startswith("slow"):  # a verifier that hangs on some answers
            time.sleep(60)
        return float(completion.strip() == answer)


    def slow_even(completion: str, answer: str) -> float:
        if len(completion) % 2 == 0:
            time.sleep(60)
        return 0.5 * sum(a == b for a, b in zip(completion, answer)) / max(len(answer), 1)
"""


def _module(folder: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    (folder / f"{name}.py").write_text(textwrap.dedent(SLOW))
    monkeypatch.chdir(folder)
    return name


@pytest.mark.parametrize("workers", [0, 2])
def test_a_slow_verifiers_samples_are_absent_as_if_never_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    mod = _module(tmp_path, f"slow_rewards_{workers}", monkeypatch)
    scorer = scoring.Scorer([f"{mod}:slow"], timeout_s=0.3, workers=workers, failed=None)
    texts = ["7", "slow 7", "3", "7", "1", "slow", "1", "2", "5", "5", "5", "6"]  # B = 3, G = 4
    with pytest.warns(UserWarning, match="left out of its group"):
        rewards, _ = verify(scorer, texts, ["7", "1", "5"])
    scorer.close()
    arrived = torch.isfinite(rewards)
    assert (~arrived).nonzero().tolist() == [[0, 1], [1, 1]]
    assert scorer.failures == {"timeout": 2}
    plan = calling.plan("rloo")
    mask = torch.ones(3, 4, 2, dtype=torch.bool)
    valid, dropped = absent.admit(plan, arrived)
    got = absent.advantages(plan, {"rewards": rewards, "mask": mask}, valid)[..., 0]  # [B, G]
    assert not bool(dropped.any())
    # the run where the slow samples were never drawn: groups of 3, 3 and 4
    for b, drawn in enumerate([["7", "3", "7"], ["1", "1", "2"], ["5", "5", "5", "6"]]):
        alone = torch.tensor([[float(t == ["7", "1", "5"][b]) for t in drawn]])
        assert torch.equal(got[b][valid[b]], plan.per_sample({"rewards": alone})[0])
    assert got[0, 1] == 0 and got[1, 1] == 0


def test_a_training_run_leaves_timed_out_samples_out_of_their_groups_and_counts_them(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _module(tmp_path, "slow_rewards_run", monkeypatch)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = RLModule.advantages

    def spy(self: RLModule, rollout: Any) -> tuple[torch.Tensor, dict[str, float]]:
        rewards = rollout.rewards.clone()
        adv, counts = original(self, rollout)
        seen.append((rewards, adv[..., 0].clone()))
        return adv, counts

    monkeypatch.setattr(RLModule, "advantages", spy)
    over = {"reward": f"{mod}:slow_even", "reward_timeout": 0.2, "reward_workers": 0}
    _train(_cfg(model_path, tmp_path, estimator="rloo", **over), "absent")
    rows = _rows(tmp_path / "absent")
    absent_total = sum(float(r["absent_samples"]) for r in rows)
    assert absent_total == float(rows[-1]["reward_failures"]) > 0
    plan = calling.plan("rloo")
    for rewards, adv in seen:
        arrived = torch.isfinite(rewards)
        assert sum(float(r["absent_samples"]) for r in rows) >= int((~arrived).sum())
        for b in range(rewards.shape[0]):
            keep = arrived[b]
            if int(keep.sum()) < 2:  # dropped: rloo's leave-one-out needs another sample
                assert bool((adv[b] == 0).all())
                continue
            want = plan.per_sample({"rewards": rewards[b, keep].unsqueeze(0)})[0]
            assert torch.equal(adv[b, keep], want)
            assert bool((adv[b, ~keep] == 0).all())
    dropped = sum(int((torch.isfinite(r).sum(-1) < 2).sum()) for r, _ in seen)
    assert sum(float(r["dropped_groups"]) for r in rows) == dropped


def test_failed_reward_zero_scores_a_timed_out_sample_zero_as_before(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _module(tmp_path, "slow_rewards_zero", monkeypatch)
    over = {"reward": f"{mod}:slow_even", "reward_timeout": 0.2, "reward_workers": 0}
    _train(_cfg(model_path, tmp_path, failed_reward=0.0, **over), "zero")
    rows = _rows(tmp_path / "zero")
    assert float(rows[-1]["reward_failures"]) > 0
    assert all(float(r["absent_samples"]) == 0 for r in rows)
    assert all(math.isfinite(float(r["reward"])) for r in rows)


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "metrics.csv").open() as f:
        return list(csv.DictReader(f))
