"""Turn-level advantages of multi-turn episodes, batched (spec/episode.md; exact twin:
``reference/episode.py``).

Inputs, as a multi-turn trainer holds them: ``turn_rewards: [B, G, K]`` (episode (b, i)'s reward
of turn k: a step reward, and the final reward added to its last turn's; entries past the
episode's last turn are ignored) and ``turn_ids: [B, G, T]`` int64, the turn each response
token belongs to, −1 for observation tokens (the environment's answers, tool output) and
padding. Episode (b, i) has T_bi = max(turn_ids[b, i]) + 1 turns. Output: ``[B, G, T]``, every
policy token of turn k given A_{i,k}, exactly 0 on observation tokens and padding.

``turn_ids_from_mask`` derives the turn ids from a response mask where a trainer gives none
(verl's multi-turn agent loop: ``response_mask`` is 1 on the model's tokens, 0 on tool output):
each maximal run of 1s is one turn.
"""

from __future__ import annotations

import torch
from torch import Tensor

from advest.spec import scales
from advest.spec.claims import Claims
from advest.spec.tolerances import pair

from ._checks import check_finite
from .registry import defined_in, register

SUMS = (
    "the group's smallest reward subtracted first (exact), then float64 sums of up to K turn "
    "rewards: a few ulps of the spread × K"
)


def turn_ids_from_mask(mask: Tensor) -> Tensor:
    """``mask: [B, G, T]`` (1 on the policy's tokens) -> turn ids ``[B, G, T]`` int64: the j-th
    maximal run of 1s is turn j, every 0 is −1."""
    if mask.dim() != 3:
        raise ValueError(f"mask must have shape [B, G, T]; got shape {tuple(mask.shape)}")
    on = mask.bool()
    before = torch.zeros_like(on[..., :1])
    starts = on & ~torch.cat([before, on[..., :-1]], dim=-1)  # a run of 1s begins here
    ids = starts.long().cumsum(-1) - 1
    return torch.where(on, ids, torch.full_like(ids, -1))


def turns_from_tokens(token_rewards: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """A trainer's per-token rewards and response mask, ``[..., T]`` each, -> ``turn_rewards
    [..., K]`` and ``turn_ids [..., T]``: the turns are the mask's runs of 1s
    (``turn_ids_from_mask``), and a reward on an observation token counts for the turn before
    it (on a token before the first turn, for the first), so every reward is kept."""
    lead = mask.shape[:-1]
    flat_mask = mask.reshape(1, -1, mask.shape[-1])
    ids = turn_ids_from_mask(flat_mask)[0]  # [R, T]
    owner = ids.clamp(min=0).cummax(-1).values  # the last turn begun at or before each token
    K = max(int(ids.max()) + 1 if ids.numel() else 1, 1)
    rewards = token_rewards.reshape(-1, token_rewards.shape[-1]).to(torch.float64)
    turn_rewards = rewards.new_zeros(rewards.shape[0], K).scatter_add_(1, owner, rewards)
    return turn_rewards.reshape(*lead, K).to(token_rewards.dtype), ids.reshape(mask.shape)


def _turns(turn_rewards: Tensor, turn_ids: Tensor) -> tuple[Tensor, Tensor]:
    """Checked inputs -> (rewards [B, G, K] float64 with turns past each episode's end zeroed,
    present [B, G, K] bool)."""
    if not isinstance(turn_rewards, Tensor) or not turn_rewards.is_floating_point():
        raise TypeError("turn_rewards must be a floating-point torch.Tensor of shape [B, G, K]")
    if turn_rewards.dim() != 3 or turn_rewards.shape[-1] == 0:
        raise ValueError(f"turn_rewards must have shape [B, G, K], K >= 1; got "
                         f"{tuple(turn_rewards.shape)}")  # fmt: skip
    if not isinstance(turn_ids, Tensor) or turn_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError("turn_ids must be an integer torch.Tensor of shape [B, G, T]")
    if turn_ids.dim() != 3 or turn_ids.shape[:2] != turn_rewards.shape[:2]:
        raise ValueError(f"turn_ids must have shape [B, G, T] with turn_rewards' B, G; got "
                         f"{tuple(turn_ids.shape)} and {tuple(turn_rewards.shape)}")  # fmt: skip
    K = turn_rewards.shape[-1]
    ids = turn_ids.long()
    if bool((ids < -1).any()) or bool((ids >= K).any()):
        bad = ((ids < -1) | (ids >= K)).nonzero()[0].tolist()
        raise ValueError(f"turn_ids must lie in [-1, K-1 = {K - 1}]; group {bad[0]}, episode "
                         f"{bad[1]} has {int(ids[tuple(bad)])} at token {bad[2]}")  # fmt: skip
    turns = ids.amax(-1) + 1 if ids.shape[-1] else torch.zeros(ids.shape[:2], dtype=torch.long)
    if bool((turns < 1).any()):
        b, i = (turns < 1).nonzero()[0].tolist()
        raise ValueError(f"episode {i} of group {b} has no policy token (every turn id is -1); "
                         "an episode needs at least one turn")  # fmt: skip
    present = torch.arange(K, device=ids.device) < turns.unsqueeze(-1)
    r = turn_rewards.to(torch.float64)
    # the slots past an episode's last turn are padding: never read, whatever they hold (a NaN
    # there is no error), as spec/oracle.md's mask rule says
    r = torch.where(present, r, torch.zeros_like(r))
    check_finite(r, "turn_rewards")
    return r, present


def _shift(r: Tensor, present: Tensor) -> tuple[Tensor, Tensor]:
    """(c [B, 1, 1], d [B, G, K]): c the smallest reward of each group's turns, d = r − c on the
    turns taken (exact for rewards within a factor of 2 of each other), 0 elsewhere."""
    big = torch.full_like(r, float("inf"))
    c = torch.where(present, r, big).amin(dim=(1, 2), keepdim=True)
    return c, torch.where(present, r - c, torch.zeros_like(r))


def _returns(r: Tensor) -> Tensor:
    """R_{i,k} = Σ_{m≥k} r_{i,m} along the last axis: ``[B, G, K]``."""
    return r.flip(-1).cumsum(-1).flip(-1)


def _to_tokens(adv: Tensor, turn_ids: Tensor, dtype: torch.dtype) -> Tensor:
    """Turn advantages ``[B, G, K]`` -> tokens ``[B, G, T]``: 0 where turn_ids is −1."""
    ids = turn_ids.long()
    picked = adv.gather(-1, ids.clamp(min=0))
    return torch.where(ids >= 0, picked, torch.zeros_like(picked)).to(dtype)


@register(
    kind="episode",
    inputs=("turn_rewards", "turn_ids"),
    one_turn="rloo",
    tolerance=pair("output", SUMS),
    claims=Claims(min_n=2, pg_scale=scales.one, shift=None),
)
def turn_rloo(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """A_{i,k} = R_{i,k} − (1/(G−1)) Σ_{j≠i} R_{j,k} (R_{j,k} = 0 past episode j's end), on every
    policy token of turn k: ``[B, G, K]``, ``[B, G, T]`` -> ``[B, G, T]``."""
    r, present = _turns(turn_rewards, turn_ids)
    G = r.shape[1]
    if G < 2:
        raise ValueError(f"turn_rloo needs groups of G >= 2 episodes; got G={G}")
    # r = c + d with c the group's smallest reward (d exact, Sterbenz): R = c·n + D, n the turns
    # remaining. The counts' part is exact in integers, so episodes with as many turns left as
    # the others get exactly 0 from c, and offsets like 1e6 + tiny spread keep the spread's
    # precision.
    c, d = _shift(r, present)
    n = present.flip(-1).cumsum(-1).flip(-1).to(torch.float64)  # [B, G, K] turns left
    D = _returns(d)

    def loo(x: Tensor) -> Tensor:
        return x - (x.sum(1, keepdim=True) - x) / (G - 1)

    return _to_tokens(c * loo(n) + loo(D), turn_ids, turn_rewards.dtype)


@register(
    kind="episode",
    inputs=("turn_rewards", "turn_ids"),
    one_turn="dr_grpo",
    tolerance=pair("output", SUMS),
    claims=Claims(comparison_scale=scales.one, shift=None),
)
def turn_index_mean(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """MT-GRPO's per-turn-index normalisation (its mean), biased where the policy decides when
    to stop: μ_m = mean of r_{j,m} over the episodes that reached turn m, A_{i,k} =
    Σ_{m=k}^{T_i−1} (r_{i,m} − μ_m): ``[B, G, K]``, ``[B, G, T]`` -> ``[B, G, T]``."""
    r, present = _turns(turn_rewards, turn_ids)
    _, d = _shift(r, present)  # r − μ = d − mean d: the group's offset cancels exactly
    reached = present.sum(1, keepdim=True).clamp(min=1)  # [B, 1, K]
    mu = d.sum(1, keepdim=True) / reached
    centred = torch.where(present, d - mu, torch.zeros_like(d))
    return _to_tokens(_returns(centred), turn_ids, turn_rewards.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
