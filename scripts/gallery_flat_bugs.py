"""Advantage bugs that live in how trainers hold their data: flat rows with a group id per row,
ragged groups, masked rows and low-precision rewards. Each is a small estimator in the oracle's
``flat`` convention, ``fn(rewards [N], index [N], valid=[N] bool) -> [N]``, beside its fixed twin;
each pair reproduces the thread's arithmetic, not the trainer's plumbing. scripts/bug_gallery.py
runs the oracle on both (``--convention flat``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

EPS = 1e-6


def _dense(index: Any) -> Tensor:
    """Row → 0..B−1 in order of first appearance, whatever the ids (PR 7150's fix)."""
    keys = index.tolist() if hasattr(index, "tolist") else list(index)
    first: dict[Any, int] = {}
    return torch.tensor([first.setdefault(key, len(first)) for key in keys], dtype=torch.int64)


def _standardise(r: Tensor, group: Tensor, keep: Tensor | None = None) -> Tensor:
    """(r − group mean)/(group std + ε) per dense ``group`` id, in float64, over ``keep`` rows;
    a group of one gives 0."""
    x = r.double()
    keep = torch.ones_like(group, dtype=torch.bool) if keep is None else keep
    out = torch.zeros_like(x)
    for g in torch.unique(group).tolist():
        rows = ((group == g) & keep).nonzero().squeeze(-1)
        if len(rows) > 1:
            out[rows] = (x[rows] - x[rows].mean()) / (x[rows].std() + EPS)
    return out.to(r.dtype)


def verl_7150_buggy(rewards: Tensor, index: Any) -> Tensor:
    """``as_torch_index`` takes integer uids as dense positions: a negative uid indexes out of
    range and raises (a sparse one over-allocates)."""
    keys = np.asarray(index)
    group = torch.as_tensor(keys) if keys.dtype.kind in "iu" else _dense(index)
    counts = torch.zeros(int(group.max()) + 1).index_add_(0, group, torch.ones(len(group)))
    sums = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, group, rewards.double())
    return (rewards.double() - (sums / counts)[group]).to(rewards.dtype)


def verl_7150_fixed(rewards: Tensor, index: Any) -> Tensor:
    """PR 7150: ids mapped to 0..B−1 first."""
    group = _dense(index)
    counts = torch.zeros(int(group.max()) + 1).index_add_(0, group, torch.ones(len(group)))
    sums = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, group, rewards.double())
    return (rewards.double() - (sums / counts)[group]).to(rewards.dtype)


def nemo_3837_buggy(rewards: Tensor, index: Any, valid_mask: Tensor | None = None) -> Tensor:
    """GDPO / REINFORCE++ take ``valid_mask`` in ``**kwargs`` and never read it: placeholder
    rows join their group's baseline and get advantages of their own."""
    return _standardise(rewards, _dense(index))


def nemo_3837_fixed(rewards: Tensor, index: Any, valid_mask: Tensor | None = None) -> Tensor:
    keep = None if valid_mask is None else valid_mask.bool()
    out = _standardise(rewards, _dense(index), keep)
    return out if keep is None else out * keep


def verl_6452_buggy(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
    """A fully rejected response (no valid token) gets 0, but its reward still enters its
    group's mean and std."""
    out = _standardise(rewards, _dense(index))
    return out if valid is None else out * valid


def openrlhf_1239_buggy(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
    """Samples with zero actions are scored 0 and stay in the group's reward mean (RLOO-style
    mean baseline), shifting their siblings."""
    group = _dense(index)
    x = rewards.double() if valid is None else torch.where(valid, rewards.double(), 0.0)
    mean = torch.zeros(int(group.max()) + 1, dtype=torch.float64).index_add_(0, group, x)
    count = torch.zeros(len(mean), dtype=torch.float64).index_add_(0, group, torch.ones_like(x))
    out = x - (mean / count)[group]
    return (out if valid is None else out * valid).to(rewards.dtype)


def openrlhf_1239_fixed(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
    group = _dense(index)
    keep = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid
    x = torch.where(keep, rewards.double(), 0.0)
    mean = torch.zeros(int(group.max()) + 1, dtype=torch.float64).index_add_(0, group, x)
    count = torch.zeros(len(mean), dtype=torch.float64).index_add_(0, group, keep.double())
    out = (x - (mean / count.clamp(min=1))[group]) * keep
    return out.to(rewards.dtype)


def slime_2230_buggy(rewards: Tensor, index: Any) -> Tensor:
    """Uneven groups fall back to one batch-wide baseline and std: a constant group gets a
    nonzero advantage."""
    group = _dense(index)
    if len(set(torch.bincount(group).tolist())) > 1:
        x = rewards.double()
        return ((x - x.mean()) / (x.std() + EPS)).to(rewards.dtype)
    return _standardise(rewards, group)


def grouped_fixed(rewards: Tensor, index: Any) -> Tensor:
    """Each group standardised alone, whatever the sizes and the ids (the fix of slime 2230,
    AReaL 1419 and 1673, slime 1414)."""
    return _standardise(rewards, _dense(index))


def _strided(rewards: Tensor, size: int) -> Tensor:
    """Rows in blocks of ``size`` consecutive rows, each standardised; rows left over after the
    last full block divided by ε."""
    x = rewards.double()
    full = len(x) // size * size
    blocks = x[:full].reshape(-1, size)
    out = torch.empty_like(x)
    std = blocks.std(-1, keepdim=True) if size > 1 else torch.zeros_like(blocks)
    out[:full] = ((blocks - blocks.mean(-1, keepdim=True)) / (std + EPS)).reshape(-1)
    out[full:] = x[full:] / EPS
    return out.to(rewards.dtype)


def areal_1673_buggy(rewards: Tensor, index: Any) -> Tensor:
    """Rows sorted by group, reshaped into groups of the first group's size: rows left over
    when the batch is not a multiple of it are divided by ε ([1, 2, 3], G = 2 → 300000)."""
    group = _dense(index)
    order = torch.sort(group, stable=True).indices
    size = int((group == group[0]).sum())
    out = torch.empty_like(rewards)
    out[order] = _strided(rewards[order], size)
    return out


def areal_1419_buggy(rewards: Tensor, index: Any) -> Tensor:
    """Partial rollouts: groups taken as consecutive blocks of group_size rows as the rows
    arrive, not by id, so interleaved rows are grouped with strangers."""
    group = _dense(index)
    size = int((group == group[0]).sum())
    return _strided(rewards, size)


def slime_1414_buggy(rewards: Tensor, index: Any) -> Tensor:
    """Unequal group sizes reshaped into equal groups of the most common size, in id order."""
    group = _dense(index)
    order = torch.sort(group, stable=True).indices
    size = int(torch.bincount(group).mode().values)
    x = rewards[order].double()
    full = len(x) // size * size
    out = torch.zeros_like(x)
    blocks = x[:full].reshape(-1, size)
    std = blocks.std(-1, keepdim=True) if size > 1 else torch.ones_like(blocks)
    out[:full] = ((blocks - blocks.mean(-1, keepdim=True)) / (std + EPS)).reshape(-1)
    result = torch.empty_like(rewards)
    result[order] = out.to(rewards.dtype)
    return result


def openrlhf_1334_buggy(rewards: Tensor, index: Any) -> Tensor:
    """The group mean and std in the rewards' own dtype: bf16 rounds a near tie's baseline away
    ([1, 1, 1, 1.0078] → about [0, 0, 0, 2])."""
    group = _dense(index)
    out = torch.zeros_like(rewards)
    for g in torch.unique(group).tolist():
        rows = (group == g).nonzero().squeeze(-1)
        r = rewards[rows]
        if len(rows) > 1:
            out[rows] = (r - r.mean()) / (r.std() + EPS)
    return out


# verl's convention: fn(token_level_rewards [bs, T], response_mask [bs, T], index, config, ...)
# -> (advantages, returns), the outcome reward on the last valid token.


def _z_by_uid(token_level_rewards: Tensor, index: Any, divide: bool) -> Tensor:
    """Each response's (r − group mean)/(group std + ε), or r − group mean, ``[bs]``."""
    r = token_level_rewards.sum(-1).double()
    group = _dense(index)
    out = torch.zeros_like(r)
    for g in torch.unique(group).tolist():
        rows = (group == g).nonzero().squeeze(-1)
        if len(rows) > 1:
            c = r[rows] - r[rows].mean()
            out[rows] = c / (r[rows].std() + EPS) if divide else c
    return out


def verl_6497_buggy(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """GDPO's final whitening over the batch's tokens: a response weighs by its length."""
    z = _z_by_uid(token_level_rewards, index, divide=True)[:, None] * response_mask  # [bs, T]
    m = response_mask.bool()
    white = (z - z[m].mean()) / (z[m].std() + EPS) * response_mask
    out = white.to(token_level_rewards.dtype)
    return out, out


def verl_6497_fixed(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """PR 6497: whitened over responses, one value each."""
    z = _z_by_uid(token_level_rewards, index, divide=True)
    white = (z - z.mean()) / (z.std() + EPS)
    out = (white[:, None] * response_mask).to(token_level_rewards.dtype)
    return out, out


def verl_7893_buggy(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any, config: Any = None, **kw: Any
) -> tuple[Tensor, Tensor]:
    """``grpo_vectorized`` reads its own keyword, which ``compute_advantage`` never forwards:
    ``norm_adv_by_std_in_grpo=False`` in the config still divides by the std."""
    z = _z_by_uid(token_level_rewards, index, divide=True)
    out = (z[:, None] * response_mask).to(token_level_rewards.dtype)
    return out, out


def verl_7893_fixed(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any, config: Any = None, **kw: Any
) -> tuple[Tensor, Tensor]:
    """PR 7893: the config's flag decides."""
    divide = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    z = _z_by_uid(token_level_rewards, index, divide=divide)
    out = (z[:, None] * response_mask).to(token_level_rewards.dtype)
    return out, out
