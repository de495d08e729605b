"""The distinct reward levels of each group, found without sorting: the counting path of
``fast.maxk`` (spec/maxk.md §Counting path).

Notation: ``rewards: [B, G]``; L = the largest number of distinct values in any group. A group
with fewer levels is padded with copies of its maximum (a padded level holds no sample).

Level l + 1 is the smallest value strictly above level l: per level one indicator, one count and
one masked minimum, each a pass over ``[B, G]``. Indicators are 0/1 floats made by arithmetic
(sign of the difference, clamped), and selections are exact blends ``a·m + b·(1 − m)`` (one term
is exactly 0): on CPU, ``torch.where`` and bool→float casts over ``[B, G]`` cost 5–30× an
arithmetic pass. The sign of ``r − v`` is exact in IEEE arithmetic (gradual underflow; overflow
keeps the sign), so the indicator is exactly ``[r > v]``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class Levels(NamedTuple):
    values: Tensor  # [B, L] work dtype: each group's distinct rewards, ascending, max-padded
    end: Tensor  # [B, L] int64: how many samples of the group are <= values[:, l]
    above: tuple[Tensor, ...]  # L − 1 indicators [B, G] (work dtype, 0/1): r > values[:, l]


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for 16-bit rewards (exact widening; counts up to G = 1024 stay exact), else own."""
    return torch.float32 if torch.finfo(dtype).bits < 32 else dtype


def find(rewards: Tensor, max_levels: int | None) -> Levels | None:
    """The levels of every group of ``rewards: [B, G]``; None as soon as some group has more
    than ``max_levels`` distinct values (None: no limit). One host sync per level (the stop test).
    """
    r = rewards.to(work_dtype(rewards.dtype))
    G = r.shape[1]
    hi = r.amax(dim=-1, keepdim=True)  # [B, 1]
    v = r.amin(dim=-1, keepdim=True)  # [B, 1]: level 0
    values, ends, above = [v], [], []
    while not bool((v == hi).all()):
        if max_levels is not None and len(values) >= max_levels:
            return None
        up = (r - v).sign_().clamp_(min=0)  # [B, G]: 1.0 where r > v, else 0.0
        above.append(up)
        ends.append(G - up.sum(dim=-1, keepdim=True).to(torch.int64))
        # Samples at or below v become hi, so the minimum is the next level; an exhausted group
        # (v == hi) has nothing above v and gets hi again (padding).
        v = torch.addcmul(hi * (1 - up), r, up).amin(dim=-1, keepdim=True)
        values.append(v)
    ends.append(torch.full_like(hi, G, dtype=torch.int64))
    return Levels(torch.cat(values, dim=1), torch.cat(ends, dim=1), tuple(above))


def expand(per_level: Tensor, levels: Levels, G: int) -> Tensor:
    """``per_level: [B, L]`` → ``[B, G]``, each sample its level's value, as an exact blend (one
    indicator is 1, the rest 0), in ``per_level``'s dtype; tied samples get identical outputs."""
    B = per_level.shape[0]
    if not levels.above:  # every group is constant: one level
        return per_level[:, :1].expand(B, G).contiguous()
    a = per_level.to(levels.values.dtype)
    out = a[:, :1] * (1 - levels.above[0])
    for index, up in enumerate(levels.above):
        nxt = levels.above[index + 1] if index + 1 < len(levels.above) else None
        only = up if nxt is None else up - nxt  # [B, G]: 1 exactly on level index + 1
        out = torch.addcmul(out, a[:, index + 1 : index + 2], only)
    return out.to(per_level.dtype)
