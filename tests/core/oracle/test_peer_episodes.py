"""Multi-turn rows as verl and SkyRL hold them (per-token rewards, a response mask that is 0 on
tool output, a uid per row, ragged groups in any order) reach the episode estimators through the
one shared path, ``integrations.peers.per_token``: the same advantages as the estimator on the
regrouped episodes, 0 on tool output and padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from advest.fast import episode, registry
from advest.integrations import peers, skyrl, verl

# Rows: (uid, response mask, the per-token rewards' positions and values)
ROWS = [
    ("a", [1, 1, 0, 0, 1, 1, 0], {1: 0.5, 5: 1.0}),  # two turns, a step reward on turn 0
    ("b", [1, 1, 1, 0, 0, 0, 0], {2: 1.0}),
    ("a", [1, 0, 0, 0, 0, 0, 0], {0: 0.0}),
    ("b", [1, 0, 1, 0, 1, 0, 0], {3: 0.25, 6: 1.0}),  # rewards on tool-output tokens
    ("a", [1, 1, 1, 1, 0, 0, 0], {3: 1.0}),
    ("b", [0, 0, 0, 0, 0, 0, 0], {}),  # verl's padding row: no sample
    ("b", [1, 0, 0, 1, 0, 0, 0], {0: 0.5}),
]


def _batch() -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    mask = torch.tensor([m for _, m, _ in ROWS])
    rewards = torch.zeros(mask.shape)
    for i, (_, _, at) in enumerate(ROWS):
        for t, r in at.items():
            rewards[i, t] = r
    return rewards, mask, np.array([u for u, _, _ in ROWS], dtype=object)


def _direct(name: str, rewards: torch.Tensor, mask: torch.Tensor, uids: np.ndarray) -> torch.Tensor:
    """The estimator on each group's episodes, put back in the rows' order."""
    out = torch.zeros(mask.shape)
    turn_rewards, turn_ids = episode.turns_from_tokens(rewards, mask)
    for uid in sorted(set(uids)):
        rows = [i for i, u in enumerate(uids) if u == uid and int(mask[i].sum()) > 0]
        got = registry.get(name)(turn_rewards[rows][None], turn_ids[rows][None])[0]
        out[rows] = got.float()
    return out


def test_turns_from_tokens_keeps_every_reward_in_the_turn_before_it() -> None:
    rewards, mask, _ = _batch()
    turn_rewards, turn_ids = episode.turns_from_tokens(rewards, mask)
    assert turn_ids[3].tolist() == [0, -1, 1, -1, 2, -1, -1]
    assert turn_rewards[3].tolist() == [0.0, 0.25, 1.0]  # 0.25 on token 3 (tool output) -> turn 1
    assert turn_rewards[0].tolist()[:2] == [0.5, 1.0]
    torch.testing.assert_close(turn_rewards.sum(-1), rewards.sum(-1))


def test_verl_and_skyrl_run_the_episode_estimators_on_multi_turn_rows() -> None:
    rewards, mask, uids = _batch()
    for name in ("turn_rloo", "turn_index_mean"):
        assert name not in verl.SKIPPED and name not in skyrl.skipped()
        want = _direct(name, rewards, mask, uids)
        got_verl, _ = verl.adapter(name)(rewards, mask, uids)
        got_skyrl, _ = skyrl.Estimator(name)(rewards, mask, uids)
        for got in (got_verl, got_skyrl):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert bool((got[mask == 0] == 0).all())  # tool output and padding


def test_a_group_of_one_episode_is_refused_naming_its_uid() -> None:
    rewards, mask, uids = _batch()
    uids[0] = "lonely"
    plan = peers.calling.plan("turn_rloo")
    says = r"uid 'lonely' \(verl batch rows 0\) has 1 samples: turn_rloo needs groups of at least 2"
    with pytest.raises(ValueError, match=says):
        peers.per_token(plan, rewards, mask, uids, "verl")
