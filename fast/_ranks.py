"""Batch statistics over the ranks of a process group, so that N processes holding shards of one
batch get the advantages one process holding all of it gets.

Every function takes ``group``: ``None`` means this process holds the whole batch, and the
function is then the plain local reduction, with no call into ``torch.distributed`` (which need
not be initialised, and ``torch.compile`` traces no collective). A process group means every rank
of it calls the same functions in the same order on its own shard, each call one collective.
Scalars travel as float64: a sum of B·G float32 values over ranks keeps its float64 accuracy, and
every reward dtype (bfloat16 to float64) converts to float64 exactly, so extremes are exact.

Every rank must hold at least one row: a shard without rows has no minimum and would leave the
other ranks waiting in a collective it never enters.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

Group = Any
"""A ``torch.distributed.ProcessGroup`` (``dist.group.WORLD`` for every rank), or None."""


def sums(*values: Tensor | float, group: Group) -> list[Tensor]:
    """Each value (a number or a 0-dim tensor) summed over the ranks, in float64: one all-reduce
    for all of them. With no group, the values themselves (as float64 tensors)."""
    # on the tensors' device: NCCL reduces only tensors on the GPU
    device = next((v.device for v in values if isinstance(v, Tensor)), None)
    stacked = torch.stack([torch.as_tensor(v, dtype=torch.float64, device=device) for v in values])
    if group is not None:
        dist.all_reduce(stacked, op=dist.ReduceOp.SUM, group=group)
    return list(stacked.unbind())


def extremes(x: Tensor, group: Group) -> tuple[Tensor, Tensor]:
    """``(min, max)`` of every element of every rank's ``x``, as 0-dim float64 tensors: one
    all-reduce (the max of −min and max, exact: negation and the float64 cast are)."""
    lo, hi = x.amin().to(torch.float64), x.amax().to(torch.float64)
    if group is None:
        return lo, hi
    both = torch.stack([-lo, hi])  # [2]
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    return -both[0], both[1]


def maximum(x: Tensor, group: Group) -> Tensor:
    """The largest element over every rank's ``x`` (0-dim float64): one all-reduce."""
    top = x.amax().to(torch.float64).reshape(1)  # [1]
    if group is not None:
        dist.all_reduce(top, op=dist.ReduceOp.MAX, group=group)
    return top[0]


def shapes(x: Tensor, group: Group, name: str = "rows", ragged: bool = False) -> list[list[int]]:
    """Every rank's ``x.shape`` in rank order (one collective; ``[x.shape]`` with no group).
    Unless ``ragged``, the ranks' shards must agree beyond their first dim (``ValueError`` naming
    ``name`` otherwise: one process could not hold them in one tensor)."""
    if group is None:
        return [list(x.shape)]
    mine = torch.tensor(x.shape, dtype=torch.int64, device=x.device)  # [ndim]
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(every, mine, group=group)
    found = [[int(n) for n in s.tolist()] for s in every]
    if not ragged and len({tuple(s[1:]) for s in found}) > 1:
        got = ", ".join(f"rank {r}: {tuple(s)}" for r, s in enumerate(found))
        raise ValueError(f"{name}: the ranks' shards differ beyond their first dim ({got})")
    return found


def gather(x: Tensor, group: Group, name: str = "rows", ragged: bool = False) -> tuple[Tensor, int]:
    """Every rank's ``x [N_r, ...]`` concatenated along dim 0 in rank order, ``[Σ N_r, ...]``, and
    where this rank's rows start. The ranks may hold different N_r; the other dims must agree,
    or with ``ragged`` are padded with zeros to the largest (a mask's padding is False). Two
    collectives: the shapes, then the rows padded to the longest shard. No group: ``(x, 0)``."""
    if group is None:
        return x, 0
    if x.dtype == torch.bool:  # not every backend gathers bool (gloo): as bytes, exactly
        whole, start = gather(x.to(torch.uint8), group, name, ragged)
        return whole.bool(), start
    found = shapes(x, group, name, ragged)
    size = [max(s[d] for s in found) for d in range(x.dim())]
    padded = x.new_zeros(size)
    padded[tuple(slice(0, n) for n in x.shape)] = x
    parts = [torch.empty_like(padded) for _ in found]
    dist.all_gather(parts, padded, group=group)
    whole = torch.cat([part[: s[0]] for part, s in zip(parts, found, strict=True)])
    return whole, sum(s[0] for s in found[: dist.get_rank(group)])


def objects(items: list[Any], group: Group) -> tuple[list[Any], int]:
    """Every rank's list of picklable ``items`` concatenated in rank order, and where this rank's
    items start (ids of any hashable type, texts): one collective. With no group: ``(items, 0)``."""
    if group is None:
        return items, 0
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    lists: list[Any] = [None] * world
    dist.all_gather_object(lists, items, group=group)
    whole = [item for part in lists for item in part]
    return whole, sum(len(part) for part in lists[:rank])
