"""Which groups carry signal: ``signal(name, rewards, index)`` says, per group, whether the
estimator would give it anything but zeros, by its own rule.

Dynamic sampling (DAPO, arXiv 2503.14476 §3.2) keeps drawing prompts until a step has enough
groups whose advantages are not all zero. Trainers test "all rewards equal" (or std = 0) for
that, which is not the estimator's rule: it misses continuous rewards (verl #4786), rewards whose
spread rounds away in the step's dtype (twinkle #288), an estimator that is not centred (its
all-equal group is not zero), and a max@K estimator's groups whose every K-subset has the same
best (zero although the rewards differ). Here the estimator itself decides: a group has no
signal when every advantage it gives is within the rounding its tolerance class allows
(``spec/tolerances.py``: ``rel · scale + output_floor``) of zero, so a group the exact
reference gives exact zeros is never counted as signal because of rounding.

Notation: flat rows as ``flat.by_group`` takes them, ``rewards [N]``, ``index [N]`` -> ``[N]``
bool (each row: whether its group has signal; False on masked rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from advest.spec.tolerances import F32, output_floor

from . import calling
from .flat import _as_rewards, _keys, by_group, groups, resolve, sample_rows
from .shaping import Transform


def signal(
    estimator: str | calling.Plan,
    rewards: Tensor | Sequence[float],
    index: Sequence[Any] | Any,
    *,
    valid: Tensor | None = None,
    k: int | None = None,
    options: dict[str, Any] | None = None,
    nonfinite: Literal["refuse", "mask"] = "refuse",
    shaping: Transform | None = None,
    **fields: Any,
) -> Tensor:
    """``[N]`` bool: whether each row's group would get advantages that are not all zero from
    ``estimator`` (a name or a ``calling.plan``), called as ``flat.by_group`` calls it (same
    arguments, same refusals). Zero means within the estimator's tolerance for the rewards'
    dtype: ``rel · spread + output_floor`` per group (``rel · batch spread`` for an estimator
    scaled by the batch), the spread of the rewards after ``shaping`` (NeMo-RL #2478 judged
    groups on the unshaped ones). Masked and absent rows are False."""
    plan = resolve(estimator, options, k)
    values = _as_rewards(rewards)
    adv = by_group(plan, values, index, valid=valid, nonfinite=nonfinite, shaping=shaping, **fields)
    N = values.shape[0]
    size = adv.reshape(N, -1).abs().amax(-1).double().cpu()  # [N]: each row's largest |A|
    rows = sample_rows(values, valid, nonfinite).nonzero().squeeze(-1)  # [M]
    r = values.detach().double().cpu()
    tolerance = plan.entry.tolerance.get(values.dtype) or plan.entry.tolerance.get(F32)
    rel = 0.0 if tolerance is None else tolerance.rel
    batch = tolerance is not None and tolerance.scale == "batch"
    floor = output_floor(values.dtype)
    keys = _keys(index)
    out = torch.zeros(N, dtype=torch.bool)
    for order, _ in groups([keys[int(i)] for i in rows]):
        at = rows[order]  # [B_s, G_s]: the caller's rows of each group of this size
        seen = r[at] if shaping is None else shaping(r[at], torch.as_tensor(fields["lengths"])[at])
        spread = seen.amax(-1) - seen.amin(-1)  # [B_s]
        if batch:  # shapings work per group, so a shaped batch is judged on its unshaped spread
            spread = (r[rows].max() - r[rows].min()).expand_as(spread)
        out[at] = (size[at].amax(-1) > rel * spread + floor).unsqueeze(-1).expand_as(at)
    return out
