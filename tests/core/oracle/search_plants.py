"""Planted estimators for the search's tests: for each family a buggy twin whose bug fires only
on inputs no explicit example contains, and its correct twin."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def grpo(rewards: Tensor) -> Tensor:
    """GRPO in float64: 0 for a flat group, (r − mean)/std (population) otherwise."""
    r = rewards.double()
    m = r.mean(-1, keepdim=True)
    flat = (r == r[..., :1]).all(-1, keepdim=True)
    s = (r - m).pow(2).mean(-1, keepdim=True).sqrt()
    return torch.where(flat, 0.0, (r - m) / torch.where(flat, 1.0, s)).to(rewards.dtype)


def grpo_bessel(rewards: Tensor) -> Tensor:
    """The same with Bessel's n − 1 and no guard: NaN for a group of one."""
    r = rewards.double()
    m = r.mean(-1, keepdim=True)
    G = r.shape[-1]
    flat = (r == r[..., :1]).all(-1, keepdim=True) & (G > 1)
    s = r.std(-1, keepdim=True)
    return torch.where(flat, 0.0, (r - m) / torch.where(flat, 1.0, s)).to(rewards.dtype)


def _dense(index: object) -> Tensor:
    keys = index.tolist() if hasattr(index, "tolist") else list(index)  # type: ignore[call-overload]
    _, inverse = np.unique(np.array([str(k) for k in keys]), return_inverse=True)
    return torch.as_tensor(inverse, dtype=torch.long)


def _flat(rewards: Tensor, index: object, valid: Tensor | None, multiply: bool) -> Tensor:
    g = _dense(index)
    v = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid
    # masking by multiplication carries a NaN at a masked row into its group (NaN · 0 = NaN)
    r = rewards.double() * v.double() if multiply else torch.where(v, rewards.double(), 0.0)
    n = torch.zeros(int(g.max()) + 1, dtype=torch.float64).index_add_(0, g, v.double())
    s = torch.zeros_like(n).index_add_(0, g, r)
    return torch.where(v, r - (s / n.clamp_min(1))[g], 0.0).to(rewards.dtype)


def flat_mean(rewards: Tensor, index: object, valid: Tensor | None = None) -> Tensor:
    """The group-mean baseline on flat rows, masked rows selected out."""
    return _flat(rewards, index, valid, multiply=False)


def flat_mean_multiplied(rewards: Tensor, index: object, valid: Tensor | None = None) -> Tensor:
    """The same, masked rows multiplied by 0."""
    return _flat(rewards, index, valid, multiply=True)


def _whiten(rewards: Tensor, mask: Tensor, ddof: int) -> Tensor:
    r = rewards.double()
    a = (r - r.mean(-1, keepdim=True))[..., None] * mask
    valid = a[mask.bool()]
    std = valid.std(correction=ddof) if valid.numel() > ddof else torch.zeros((), dtype=r.dtype)
    return torch.where(mask.bool(), a / (std + 1e-8), 0.0).to(rewards.dtype)


def token_whitened(rewards: Tensor, mask: Tensor) -> Tensor:
    """GRPO's advantage on each valid token, whitened over the batch's valid tokens."""
    return _whiten(rewards, mask, ddof=0)


def token_whitened_bessel(rewards: Tensor, mask: Tensor) -> Tensor:
    """The same with Bessel's n − 1: NaN for a batch with one valid token."""
    r = rewards.double()
    a = (r - r.mean(-1, keepdim=True))[..., None] * mask
    std = a[mask.bool()].std()
    return torch.where(mask.bool(), a / (std + 1e-8), 0.0).to(rewards.dtype)


def _episode(turn_rewards: Tensor, turn_ids: Tensor, multiply: bool) -> Tensor:
    K = turn_rewards.shape[-1]
    turns = (turn_ids.max(-1).values + 1).clamp_min(0)  # [B, G]
    used = torch.arange(K) < turns[..., None]  # [B, G, K]
    # multiplying the unused slots by 0 carries a NaN there into the return
    kept = turn_rewards * used if multiply else torch.where(used, turn_rewards, 0.0)
    returns = kept.sum(-1)
    a = returns - returns.mean(-1, keepdim=True)
    return torch.where(turn_ids >= 0, a[..., None], 0.0)


def episode_mean(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """Each policy token gets its episode's return minus the group's mean return."""
    return _episode(turn_rewards, turn_ids, multiply=False)


def episode_mean_multiplied(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """The same, unused turn slots multiplied by 0."""
    return _episode(turn_rewards, turn_ids, multiply=True)


def maxrl_silent_at_one(rewards: Tensor) -> Tensor:
    """MaxRL's unbiased form, but 0 for every group of one (so it learns nothing at N = 1)."""
    from advest.fast.maxrl import maxrl_unbiased

    a = maxrl_unbiased(rewards)
    return torch.zeros_like(a) if rewards.shape[-1] == 1 else a


def _gr3(rewards: Tensor, lengths: Tensor, mean: Tensor) -> Tensor:
    """GR³'s r / (1 + α·L/L̄), α = 0.5, L̄ floored away from 0 (all-zero lengths: r)."""
    return rewards / (1 + 0.5 * lengths / mean.clamp_min(1e-12))


def gr3(rewards: Tensor, lengths: Tensor) -> Tensor:
    """A shaping: GR³ with each group's mean length."""
    return _gr3(rewards, lengths, lengths.mean(-1, keepdim=True))


def gr3_bessel_mean(rewards: Tensor, lengths: Tensor) -> Tensor:
    """The same, the mean written as a sum over G − 1 times (G − 1)/G: equal for G ≥ 2 (the
    explicit inputs have G = 4), 0·inf = NaN for a group of one."""
    G = rewards.shape[-1]
    mean = lengths.sum(-1, keepdim=True) / (G - 1) * ((G - 1) / G)
    return _gr3(rewards, lengths, mean)


def flat_mean_rescaled(rewards: Tensor, index: object, valid: Tensor | None = None) -> Tensor:
    """The group-mean baseline divided by the batch's largest |reward| when it exceeds 1 (a
    rescaling for rewards out of [0, 1]): every group then depends on the others, which rewards
    in [0, 1] (every explicit input) never show."""
    a = flat_mean(rewards, index, valid)
    v = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid
    top = rewards.double()[v].abs().max() if bool(v.any()) else torch.tensor(0.0)
    return (a.double() / top.clamp_min(1.0)).to(rewards.dtype)
