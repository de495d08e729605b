"""``advest train --shaping``: each step's advantages are the estimator's on the shaped rewards
(by each completion's length), and a bad shaping is refused naming the flag before any model
loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from advest.fast import by_group, shaping
from advest.training.config import validate
from advest.training.module import RLModule
from advest.training.settings import ConfigError, RLConfig
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, _train, model_path

__all__ = ["model_path"]

pytestmark = TRAINER_WARNINGS


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"shaping": "gr4"}, "--shaping: unknown shaping 'gr4'; valid: efficiency"),
        ({"shaping": "gr3", "shaping_options": {"beta": 1}}, "takes options \\['alpha'\\]"),
    ],
)
def test_a_bad_shaping_is_refused_naming_the_flag(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        validate(RLConfig(**over))


def test_a_run_with_shaping_trains_on_the_estimators_advantages_of_the_shaped_rewards(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    original = RLModule.advantages

    def spy(self: RLModule, rollout: Any) -> tuple[torch.Tensor, dict[str, float]]:
        rewards, lengths = rollout.rewards.clone(), rollout.lengths.clone()
        adv, counts = original(self, rollout)
        seen.append((rewards, lengths, adv[..., 0].clone()))
        return adv, counts

    monkeypatch.setattr(RLModule, "advantages", spy)
    options = {"weight": 0.5}
    _train(_cfg(model_path, tmp_path, shaping="length_penalty", shaping_options=options), "shaped")
    assert len(seen) == 2
    made = shaping.shaping("length_penalty", **options)
    for rewards, lengths, adv in seen:
        B, G = rewards.shape
        index = torch.arange(B).repeat_interleave(G)
        want = by_group(
            "grpo", rewards.reshape(-1), index, shaping=made, lengths=lengths.reshape(-1)
        )
        assert torch.equal(adv, want.view(B, G))
        # the shaping changed something: a run without it would have trained on other values
        assert not torch.equal(want, by_group("grpo", rewards.reshape(-1), index))
