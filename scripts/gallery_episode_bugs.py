"""The multi-turn bugs of the gallery (scripts/bug_gallery.py), each beside its fixed twin, as
estimators of the episode kind: ``fn(turn_rewards [B, G, K], turn_ids [B, G, T]) -> [B, G, T]``
(spec/episode.md). The episode oracle (``advest.oracle.properties.episodes``) judges both; the
registered ``turn_rloo`` is the fixed twin where a bug is a wrong baseline."""

from __future__ import annotations

import torch
from torch import Tensor

from advest.fast.episode import turn_index_mean, turn_rloo

__all__ = ["turn_index_mean", "turn_rloo"]


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


def gae_masked_but_counted(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """The second half of miles #1827: observation tokens masked to 0 in the output, but still
    counted by the discount, so their number moves every earlier policy token."""
    return torch.where(turn_ids >= 0, gae_over_all_tokens(turn_rewards, turn_ids), 0.0)
