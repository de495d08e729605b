"""The episode oracle (oracle/episodes.py; spec/episode.md): each row passes a correct
estimator and fails a planted one, and the four multi-turn bugs trainers shipped are told apart
from their fixed twins by the rows the issue threads describe."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from advest.fast import episode, registry
from advest.oracle import episodes
from advest.oracle.episode_trees import WORLDS
from advest.oracle.episode_trees import episodes as enumerate_episodes

GROUPS = episodes.random_groups(0)


def _turns(turn_rewards: Tensor, turn_ids: Tensor) -> tuple[Tensor, Tensor]:
    """(rewards [B, G, K] float64 zeroed past each episode's end, turns [B, G])."""
    turns = turn_ids.amax(-1) + 1
    present = torch.arange(turn_rewards.shape[-1]) < turns.unsqueeze(-1)
    return torch.where(present, turn_rewards.double(), 0.0), turns


def _tokens(adv: Tensor, turn_ids: Tensor) -> Tensor:
    picked = adv.gather(-1, turn_ids.clamp(min=0))
    return torch.where(turn_ids >= 0, picked, 0.0)


def reinforce_to_go(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """No baseline: R_{i,k}. Unbiased, reads nothing else."""
    r, _ = _turns(turn_rewards, turn_ids)
    return _tokens(r.flip(-1).cumsum(-1).flip(-1), turn_ids)


def own_count_baseline(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """Planted (the verl #7244 class): R_{i,k} minus a baseline that grows with the episode's
    own number of turns."""
    r, turns = _turns(turn_rewards, turn_ids)
    R = r.flip(-1).cumsum(-1).flip(-1)
    return _tokens(R - 0.25 * turns.unsqueeze(-1).double(), turn_ids)


def rows_per_turn(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """agent-lightning #445: every turn a row of the group statistic (the mean return-to-go over
    all turns of all episodes), so an episode with more turns weighs more."""
    r, turns = _turns(turn_rewards, turn_ids)
    R = r.flip(-1).cumsum(-1).flip(-1)
    present = torch.arange(r.shape[-1]) < turns.unsqueeze(-1)
    mean = (R * present).sum((1, 2), keepdim=True) / present.sum((1, 2), keepdim=True)
    return _tokens(R - mean, turn_ids)


def gae_over_all_tokens(turn_rewards: Tensor, turn_ids: Tensor, gamma: float = 0.9) -> Tensor:
    """miles #1827: a discounted return over every response token, observation tokens included
    (value 0): the terminal reward is attenuated by the tool output's length, and the masked
    tokens get advantages."""
    r, _ = _turns(turn_rewards, turn_ids)
    B, G, T = turn_ids.shape
    token_r = torch.zeros(B, G, T, dtype=torch.float64)
    is_last = torch.ones_like(turn_ids, dtype=torch.bool)
    is_last[..., :-1] = turn_ids[..., :-1] != turn_ids[..., 1:]
    last_of_turn = (turn_ids >= 0) & is_last  # a turn's reward lands on its last policy token
    token_r[last_of_turn] = r.gather(-1, turn_ids.clamp(min=0))[last_of_turn]
    out, running = torch.zeros_like(token_r), torch.zeros(B, G, dtype=torch.float64)
    for t in range(T - 1, -1, -1):
        running = token_r[..., t] + gamma * running
        out[..., t] = running
    return out


def gae_over_policy_tokens(turn_rewards: Tensor, turn_ids: Tensor, gamma: float = 0.9) -> Tensor:
    """Its twin: the discount runs over policy tokens only; observation tokens get 0."""
    out = torch.zeros(turn_ids.shape, dtype=torch.float64)
    for b in range(turn_ids.shape[0]):
        for i in range(turn_ids.shape[1]):
            keep = (turn_ids[b, i] >= 0).nonzero().flatten()
            out[b, i, keep] = gae_over_all_tokens(
                turn_rewards[b : b + 1, i : i + 1], turn_ids[b : b + 1, i : i + 1, keep], gamma
            )[0, 0]
    return out


def final_overwrites_steps(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """AReaL #1674: every turn gets the episode's last-turn (final) reward's leave-one-out
    advantage: the intermediate turns' own step rewards are overwritten."""
    r, turns = _turns(turn_rewards, turn_ids)
    final = r.gather(-1, (turns - 1).unsqueeze(-1)).squeeze(-1)  # [B, G]
    G = final.shape[1]
    adv = final - (final.sum(1, keepdim=True) - final) / (G - 1)
    return torch.where(turn_ids >= 0, adv.unsqueeze(-1), 0.0)


def _verdicts(fn: episodes.EpisodeEstimator, single: str | None = None) -> dict[str, str]:
    one = registry.get(single) if single else None
    return {f.prop: f.verdict for f in episodes.report(fn, one, single)}


YES = "yes"


def test_the_worlds_are_distributions_whose_length_the_policy_chooses() -> None:
    for world in WORLDS:
        eps = list(enumerate_episodes(world))
        assert sum(e.probability for e in eps) == 1
        assert {len(e.turns) for e in eps} == {1, 2, 3}


@pytest.mark.parametrize("name", ["turn_rloo", "turn_index_mean"])
def test_registered_estimators_get_the_verdicts_their_claims_state(name: str) -> None:
    entry = registry.entry(name)
    got = _verdicts(entry.fn, entry.one_turn)
    assert got["one-turn episodes"] == YES
    assert (got["unbiased"] == YES) == (entry.claims.pg_scale is not None)
    if entry.claims.pg_scale is not None:
        assert set(got.values()) == {YES}


def test_unbiased_row_passes_reinforce_and_fails_a_baseline_that_counts_its_own_turns() -> None:
    assert _verdicts(reinforce_to_go)["unbiased"] == YES
    planted = _verdicts(own_count_baseline)
    assert planted["unbiased"] == "no: biased"
    assert planted["reads its own future"].startswith("no")


def test_the_own_future_row_names_where_it_moved() -> None:
    finding = episodes.own_future(own_count_baseline, GROUPS)
    assert "one more turn taken later" in finding.evidence and "episode" in finding.evidence


def test_verl_7244_the_per_turn_index_normalisation_against_its_fix() -> None:
    bug, fix = _verdicts(episode.turn_index_mean), _verdicts(episode.turn_rloo)
    assert bug["unbiased"] == "no: biased" and fix["unbiased"] == YES
    assert bug["reads its own future"].startswith("no") and fix["reads its own future"] == YES


def test_agent_lightning_445_turns_as_rows_against_episodes_counted_once() -> None:
    bug, fix = _verdicts(rows_per_turn), _verdicts(episode.turn_rloo)
    assert bug["counts each episode once"] == "no: an episode with more turns weighs more"
    assert fix["counts each episode once"] == YES


def test_miles_1827_discounting_over_tool_tokens_against_policy_tokens_only() -> None:
    bug, fix = _verdicts(gae_over_all_tokens), _verdicts(gae_over_policy_tokens)
    assert bug["observation tokens"].startswith("no")
    assert fix["observation tokens"] == YES


def test_areal_1674_final_reward_overwriting_step_rewards_is_biased() -> None:
    bug, fix = _verdicts(final_overwrites_steps), _verdicts(episode.turn_rloo)
    assert bug["unbiased"] == "no: biased" and fix["unbiased"] == YES


def test_the_one_turn_row_fails_an_estimator_unlike_its_single_turn_twin() -> None:
    assert _verdicts(episode.turn_rloo, "rloo")["one-turn episodes"] == YES
    assert _verdicts(episode.turn_rloo, "dr_grpo")["one-turn episodes"].startswith("no")
    assert _verdicts(episode.turn_rloo)["one-turn episodes"] == "not compared"


def test_a_wrong_output_shape_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"an episode estimator returns \[B, G, T\]"):
        episodes.report(lambda r, ids: r)


def test_discounting_over_tool_tokens_moves_policy_tokens_even_with_them_masked() -> None:
    """The second half of miles #1827: observation tokens masked to 0 in the output, but still
    counted by the discount, so their number moves every earlier policy token."""

    def masked(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
        return torch.where(turn_ids >= 0, gae_over_all_tokens(turn_rewards, turn_ids), 0.0)

    verdict = _verdicts(masked)["observation tokens"]
    assert verdict == "no: observation tokens move advantages"
