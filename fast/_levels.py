"""The distinct reward levels of each group, found without sorting: the counting path of
``fast.maxk`` (spec/maxk_paths.md §Counting path).

Notation: ``rewards: [B, G]``; L = the largest number of distinct values in any group. A group
with fewer levels is padded with copies of its maximum (a padded level holds no sample).

Level l + 1 is the smallest value strictly above level l. Per level: one comparison written as a
0/1 float (``torch.le(..., out=float)``), one count, and one masked minimum (the samples already
counted are pushed up by the dtype's largest value, an exact no-op on the others), so about four
passes over ``[B, G]``. On CPU a bool result, a bool→float cast or a ``torch.where`` over
``[B, G]`` each cost 5–30× such a pass, so none is used.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class Levels(NamedTuple):
    values: Tensor  # [B, L] work dtype: each group's distinct rewards, ascending, max-padded
    end: Tensor  # [B, L] int64: how many samples of the group are <= values[:, l]
    at_most: tuple[Tensor, ...]  # L − 1 indicators [B, G], work dtype 0/1: r <= values[:, l]


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays; every other float works in float32 (exact widening of 16-bit values, and
    counts up to 2^24 stay exact)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def find(rewards: Tensor, max_levels: int | None) -> Levels | None:
    """The levels of every group of ``rewards: [B, G]``; None when some group has more than
    ``max_levels`` distinct values (None: no limit), or when a value is beyond a quarter of the
    largest float64 (the push-up could then overflow into range). One host sync per level."""
    r = rewards.to(work_dtype(rewards.dtype))
    G = r.shape[1]
    hi = r.amax(dim=-1, keepdim=True)  # [B, 1]
    v = r.amin(dim=-1, keepdim=True)  # [B, 1]: level 0
    top = torch.finfo(r.dtype).max
    if r.numel() and bool(torch.maximum(hi.abs(), v.abs()).amax() > top / 4):
        if r.dtype == torch.float64:
            return None
        r, hi, v, top = r.double(), hi.double(), v.double(), torch.finfo(torch.float64).max
    values, ends, at_most = [v], [], []
    while not bool((v == hi).all()):
        if max_levels is not None and len(values) >= max_levels:
            return None
        below = torch.le(r, v, out=torch.empty_like(r))  # [B, G]: 1.0 where r <= v, else 0.0
        at_most.append(below)
        ends.append(below.sum(dim=-1, keepdim=True).to(torch.int64))
        # r + top·[r <= v]: the others are unchanged (r + 0), the counted ones land above 3/4 of
        # top > hi, so the minimum is the next level; an exhausted group gets hi (padding).
        v = torch.minimum(torch.add(r, below, alpha=top).amin(dim=-1, keepdim=True), hi)
        values.append(v)
    ends.append(torch.full_like(hi, G, dtype=torch.int64))
    return Levels(torch.cat(values, dim=1), torch.cat(ends, dim=1), tuple(at_most))


def expand(per_level: Tensor, levels: Levels, G: int) -> Tensor:
    """``per_level: [B, L]`` → ``[B, G]``, each sample its level's value, in ``per_level``'s dtype.

    An exact blend Σ_l a_l·[sample on level l] (one indicator is 1, the others 0, and a·0 = 0),
    so tied samples get identical outputs and nothing rounds.
    """
    B = per_level.shape[0]
    if not levels.at_most:  # every group is constant: one level
        return per_level[:, :1].expand(B, G).contiguous()
    a = per_level.to(levels.values.dtype)
    out = a[:, :1] * levels.at_most[0]
    for index in range(1, len(levels.at_most) + 1):
        upper = levels.at_most[index] if index < len(levels.at_most) else 1
        only = upper - levels.at_most[index - 1]  # [B, G]: 1 exactly on level `index`
        out.addcmul_(a[:, index : index + 1], only)
    return out.to(per_level.dtype)
