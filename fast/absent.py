"""Samples whose reward never arrived (a verifier that timed out, raised or returned NaN): absent
from their group, not scored 0.

Scoring such a sample 0 moves its group's baseline as if the answer had failed (TRL #5902, AReaL
#1347). Here it is left out: the estimator sees its group without it, exactly as if it had never
been drawn, and its advantage is 0. A group left with fewer samples than the estimator needs
(``needed``: K + 1 for a max@K estimator on 1 ≤ K ≤ G − 1, two for a leave-one-out baseline) is
dropped for the step. Notation: ``B`` prompts, ``G`` samples, ``T`` response tokens,
``N = B·G`` rows::

    valid [B, G] bool (False: absent)  ->  admit  ->  valid [B, G], dropped [B] bool
    source (a Rollout or a mapping of [B, G, ...] inputs), valid  ->  advantages  ->  [B, G, T]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from . import calling
from .flat import PER_ROW, by_group
from .shaping import Transform


def needed(plan: calling.Plan) -> int:
    """The fewest samples a group may keep for ``plan``'s estimator: its ``claims.min_n`` and,
    with a K, the smallest group whose K domain holds the plan's K."""
    entry = plan.entry
    need = max(entry.claims.min_n, 1)
    if plan.k is not None:
        need = max(need, plan.k - entry.k_max(0))  # k_max(n) = n − offset
    return need


def admit(plan: calling.Plan, valid: Tensor) -> tuple[Tensor, Tensor]:
    """``(valid [B, G], dropped [B])``: the groups of ``valid [B, G]`` (False: an absent sample)
    that keep fewer than ``needed(plan)`` samples are dropped whole (every row False) and
    flagged in ``dropped``. An estimator whose statistics span the batch
    (``claims.batch_coupled``) takes groups of one size only, so there every group with an
    absent sample is dropped."""
    if valid.dim() != 2 or valid.dtype != torch.bool:
        raise ValueError(
            f"valid must be a bool tensor [B, G]; got {valid.dtype} {list(valid.shape)}"
        )
    G = valid.shape[1]
    kept = valid.sum(-1)  # [B]
    short = kept < needed(plan)
    if plan.entry.claims.batch_coupled:
        short = short | (kept < G)
    return valid & ~short.unsqueeze(-1), short


def advantages(
    plan: calling.Plan, source: Any, valid: Tensor, shaping: Transform | None = None
) -> Tensor:
    """``plan.advantages(source)`` (``[B, G, T]`` float32, 0 off ``source``'s mask) with the
    samples where ``valid [B, G]`` is False absent: each group is estimated on its valid samples
    alone (``flat.by_group``), and absent samples get 0. The values read at absent samples (a
    NaN reward, an empty mask) are never looked at. A history estimator's groups are keyed by
    ``source``'s ``prompt_ids [B]``; other estimators' by position. ``shaping``
    (``fast.shaping``) transforms each group's rewards by its lengths first."""
    mask: Tensor = _get(source, "mask")
    B, G, T = mask.shape
    if bool(valid.all()) and shaping is None:
        return plan.advantages(source)
    if not bool(valid.any()):
        return torch.zeros(B, G, T, dtype=torch.float32, device=mask.device)
    ids = _get(source, "prompt_ids") if plan.needs("prompt_ids") else torch.arange(B)
    index = torch.as_tensor(ids).cpu().repeat_interleave(G)  # [N]: each row's group
    fields = {name: _flat(_field(source, name), B * G) for name in plan.fields & PER_ROW}
    rewards = _flat(_get(source, "rewards"), B * G)
    fields.pop("rewards", None)
    if shaping is not None:
        fields["lengths"] = _flat(_field(source, "lengths"), B * G)
    if "reward_weights" in plan.fields:
        fields["reward_weights"] = _get(source, "reward_weights")
    keep = valid.reshape(-1).cpu()
    out = by_group(plan, rewards, index, valid=keep, shaping=shaping, **fields)  # [N(, T)]
    out = out.reshape(B, G, *out.shape[1:])
    if out.dim() == 2:
        out = out.unsqueeze(-1).expand(B, G, T)
    return (out * (mask & valid.unsqueeze(-1))).to(torch.float32)


def _field(source: Any, name: str) -> Any:
    if name == "lengths" and _get(source, "lengths", None) is None:
        return _get(source, "mask").sum(-1)  # as ``calling.Plan`` fills it
    return _get(source, name)


def _flat(value: Any, n: int) -> Any:
    """``[B, G, ...]`` -> ``[N, ...]``; ``[B][G]`` nested lists (texts) -> a list of N."""
    if isinstance(value, list):
        return [item for row in value for item in row]
    tensor: Tensor = value
    return tensor.reshape(n, *tensor.shape[2:])


_MISSING = object()


def _get(source: Any, name: str, default: Any = _MISSING) -> Any:
    if isinstance(source, Mapping):
        found = source.get(name, default)
    else:
        found = getattr(source, name, default)
    if found is _MISSING:
        raise KeyError(f"the estimator needs {name!r}, which the caller did not give")
    return found
