"""``--filter_groups`` (dynamic sampling): draws until the step has its groups with signal, at most
``--filter_max_draws`` draws, the estimator's own rule deciding; the kept groups are the drawn
ones unchanged; counted in the log; refused where it cannot judge a group before the forward
pass."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.fast import calling
from advest.fast.shaping import Shaping
from advest.training import dynamic
from advest.training.config import validate
from advest.training.data import Item, PromptSource
from advest.training.sampling import Scored
from advest.training.settings import ConfigError, RLConfig
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, _train, model_path

__all__ = ["model_path"]

pytestmark = TRAINER_WARNINGS

G, T = 3, 2


@dataclass
class _Tokenizer:
    pad_token_id: int = 0


@dataclass
class _Fake:
    """A module whose samples' rewards are planted: a prompt's group has signal when its id is
    in ``signal``; each draw's prompts are one token wider than the last's."""

    cfg: RLConfig
    signal: set[int]
    plan: calling.Plan = field(default_factory=lambda: calling.plan("grpo"))
    shaping: Shaping | None = None
    source: PromptSource = field(default_factory=lambda: PromptSource(None, 0, pool=40))
    tokenizer: Any = field(default_factory=_Tokenizer)
    drawn: list[list[int]] = field(default_factory=list)

    def sample(self, items: list[Item]) -> Scored:
        self.drawn.append([i.prompt_id for i in items])
        B, P = len(items), len(self.drawn)
        rewards = torch.tensor(
            [
                [float(g == 0) if i.prompt_id in self.signal else 1.0 for g in range(G)]
                for i in items
            ]
        )
        ids = torch.tensor([i.prompt_id for i in items]).repeat_interleave(G)  # [S]
        sequences = torch.cat([ids[:, None] + 100 * torch.ones(B * G, P, dtype=torch.long),
                               ids[:, None].expand(B * G, T)], 1)  # fmt: skip
        ones = torch.ones(B * G, P, dtype=torch.long)
        return Scored(
            sequences, ones, torch.ones(B * G, T, dtype=torch.bool),
            [str(int(i)) for i in ids], rewards, rewards.unsqueeze(-1),
            torch.zeros(B * G, dtype=torch.bool), generate_s=1.0, reward_s=0.5,
        )  # fmt: skip


def test_draws_until_the_step_has_its_groups_with_signal_and_keeps_them_unchanged() -> None:
    cfg = RLConfig(filter_groups=True, filter_max_draws=5, group_size=G)
    fake = _Fake(cfg, signal=set(range(1, 40, 3)))  # about one prompt in three
    first = fake.source.batch(0, 0, 1, 4)
    items, scored, counts = dynamic.draw(fake, 0, 0, 1, first)
    draws = len(fake.drawn)
    assert [i.prompt_id for i in items] == [p for d in fake.drawn for p in d if p in fake.signal][
        :4
    ]
    assert counts == {
        "drawn_prompts": 4.0 * draws,
        "draws": float(draws),
        "filled_without_signal": 0.0,
    }
    assert 1 < draws <= 5
    assert scored.rewards.shape == (4, G) and scored.sequences.shape[0] == 4 * G
    assert scored.generate_s == draws * 1.0 and scored.reward_s == draws * 0.5
    for b, item in enumerate(items):  # each kept group is its draw's, left-padded to the widest
        rows = scored.sequences[b * G : (b + 1) * G]
        assert bool((rows[:, -T:] == item.prompt_id).all())
        width = int(scored.prompt_mask[b * G].sum())
        assert bool((rows[:, -T - width : -T] == item.prompt_id + 100).all())
        assert bool((rows[:, : -T - width] == 0).all())  # the padding the mask leaves out
        assert scored.texts[b * G] == str(item.prompt_id)


def test_at_the_cap_the_step_is_filled_with_groups_without_signal_in_the_order_drawn() -> None:
    cfg = RLConfig(filter_groups=True, filter_max_draws=2, group_size=G)
    fake = _Fake(cfg, signal={2})
    items, _, counts = dynamic.draw(fake, 0, 0, 1, fake.source.batch(0, 0, 1, 4))
    order = [p for d in fake.drawn for p in d]
    assert [i.prompt_id for i in items] == [2, *[p for p in order if p != 2][:3]]
    assert counts == {"drawn_prompts": 8.0, "draws": 2.0, "filled_without_signal": 3.0}


def test_a_group_with_signal_is_the_estimators_rule_not_all_equal_rewards() -> None:
    plan = calling.plan("maxpo", k=2)
    rewards = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.ones(3, 3, T, dtype=torch.bool)
    # max@2 of {1, 1, 0}: every pair holds a 1, so maxpo gives zeros though the rewards differ
    assert dynamic.has_signal(plan, rewards, mask).tolist() == [False, True, False]
    rewards[1, 0] = float("nan")  # absent: two samples left, below maxpo's K + 1
    assert dynamic.has_signal(plan, rewards, mask).tolist() == [False, False, False]


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"estimator": "ktae"}, "also reads"),
        ({"turns": 2}, "one-turn groups"),
        ({"filter_max_draws": 0}, "--filter_max_draws must be at least 1"),
    ],
)
def test_filter_groups_is_refused_where_it_cannot_judge_a_group(
    over: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        validate(RLConfig(filter_groups=True, **over))


def test_a_training_run_with_filter_groups_logs_its_draws(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _cfg(model_path, tmp_path, reward="exact", filter_groups=True, filter_max_draws=3)
    _train(cfg, "filtered")
    with (tmp_path / "filtered" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        draws = float(row["draws"])
        assert 1 <= draws <= 3 and float(row["drawn_prompts"]) == 4 * draws
        assert 0 <= float(row["filled_without_signal"]) <= 4
        if draws < 3:
            assert float(row["filled_without_signal"]) == 0
