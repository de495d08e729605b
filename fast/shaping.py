"""Reward shaping before the estimator: transforms of a group's rewards by its samples' lengths
(or costs), each declaring the invariants it keeps (``spec/shaping.md``; exact twins in
``reference/shaping.py``).

A shaping is a callable ``(rewards [B, G], lengths [B, G]) -> [B, G]`` (float rewards; lengths or
costs, integer or float, ≥ 0) that works on each group alone, so that ``flat.by_group`` may hand
it the groups of each size and a masked row is never seen. It runs before the estimator, whose
baseline then comes from the shaped rewards (prime-rl #2040 took it from the unshaped ones).

    gr3          r / (1 + α·L/L̄)                  GR³, arXiv 2603.10535; prime-rl #2029
    overlong     r + soft penalty past L_max − L_c  DAPO, arXiv 2503.14476 eq. 13
    length_penalty  r + w·λ, λ = ½ − (L − L_min)/(L_max − L_min)   Kimi k1.5, 2501.12599
    efficiency   r·(1 + bonus·[r = max r])        prime-rl #2265 / #2377

The invariants (``KEEPS``): "centred": with a centred estimator after it, each group's
advantages still sum to zero (they do whenever the shaped rewards are finite and the estimator
sees them; what breaks it is a composition that does not); "pass_over_fail": for rewards in
[0, 1], a sample of reward 1 never gets a lower shaped reward than one of reward 0 in its group;
"finite": finite rewards and lengths ≥ 0 give finite shaped rewards (no division by a quantity
that can be zero: all-zero lengths or costs); "per_group": a group's shaped rewards depend on
that group alone (what masking and regrouping need).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch
from torch import Tensor

KEEPS = ("centred", "pass_over_fail", "finite", "per_group")
"""Every invariant a shaping may declare (the module docstring says what each means)."""


Transform = Callable[[Tensor, Tensor], Tensor]
"""What ``by_group(..., shaping=...)`` takes: any ``(rewards [B, G], lengths [B, G]) -> [B, G]``
that works per group, a user's function included (``oracle/properties/shaping.py`` checks one)."""


class Shaping(Protocol):
    """A reward transform before the estimator: ``rewards [B, G]``, ``lengths [B, G]`` ->
    ``[B, G]`` in the rewards' dtype, and the invariants it declares."""

    keeps: ClassVar[tuple[str, ...]]

    def __call__(self, rewards: Tensor, lengths: Tensor) -> Tensor: ...


def _wide(rewards: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Both in float64 (lengths are counts or costs; exact in float64 up to 2**53)."""
    if rewards.shape != lengths.shape or rewards.dim() != 2:
        raise ValueError(
            f"shaping needs rewards and lengths of one shape [B, G]; got "
            f"{list(rewards.shape)} and {list(lengths.shape)}"
        )
    if bool((lengths < 0).any()):
        group, sample = (lengths < 0).nonzero()[0].tolist()
        raise ValueError(f"lengths must be >= 0; group {group} has {lengths[group, sample].item()}")
    return rewards.double(), lengths.double()


@dataclass(frozen=True)
class GR3:
    """Group Relative Reward Rescaling (Li et al., arXiv 2603.10535; prime-rl #2029):
    ``r_i / (1 + α·L_i/L̄)`` with L̄ the group's mean length; a group of zero mean length is
    left as it is (no length to rescale by)."""

    alpha: float = 0.5
    """Strength of the rescaling (≥ 0)."""
    keeps: ClassVar[tuple[str, ...]] = KEEPS

    def __call__(self, rewards: Tensor, lengths: Tensor) -> Tensor:
        r, L = _wide(rewards, lengths)
        mean = L.mean(-1, keepdim=True)  # [B, 1]
        ratio = torch.where(mean > 0, L / torch.where(mean > 0, mean, 1.0), 0.0)
        return (r / (1 + self.alpha * ratio)).to(rewards.dtype)


@dataclass(frozen=True)
class Overlong:
    """DAPO's soft overlong punishment (Yu et al., arXiv 2503.14476, eq. 13), added to the
    reward: 0 up to ``max_length − cache``, then falling linearly to −1 at ``max_length``, −1
    past it. It reads each sample alone."""

    max_length: int = 20
    """L_max: the response budget in tokens."""
    cache: int = 4
    """L_cache: the soft zone before L_max (≥ 1)."""
    keeps: ClassVar[tuple[str, ...]] = KEEPS

    def __call__(self, rewards: Tensor, lengths: Tensor) -> Tensor:
        r, L = _wide(rewards, lengths)
        start = self.max_length - self.cache
        soft = (start - L) / self.cache  # in (−1, 0] inside the zone
        inside = torch.where(L.le(self.max_length), soft, -1.0)
        penalty = torch.where(L.le(start), 0.0, inside)
        return (r + penalty).to(rewards.dtype)


@dataclass(frozen=True)
class LengthPenalty:
    """Kimi k1.5's group-relative length reward (arXiv 2501.12599 §2.3.3), weighted:
    ``λ_i = ½ − (L_i − L_min)/(L_max − L_min)``, added as ``w·λ_i`` to a passing sample
    (reward ≥ ``threshold``) and ``w·min(0, λ_i)`` to the others; all lengths equal: λ = 0.
    Pass over fail holds for ``weight ≤ 2`` (rewards in [0, 1])."""

    weight: float = 0.5
    """w: the length reward's weight (0 ≤ w ≤ 2 keeps pass over fail)."""
    threshold: float = 1.0
    """A sample passes when its reward is at least this."""
    keeps: ClassVar[tuple[str, ...]] = KEEPS

    def __call__(self, rewards: Tensor, lengths: Tensor) -> Tensor:
        r, L = _wide(rewards, lengths)
        low, high = L.amin(-1, keepdim=True), L.amax(-1, keepdim=True)
        span = high - low
        lam = torch.where(span > 0, 0.5 - (L - low) / torch.where(span > 0, span, 1.0), 0.0)
        bonus = torch.where(r >= self.threshold, lam, lam.clamp(max=0))
        return (r + self.weight * bonus).to(rewards.dtype)


@dataclass(frozen=True)
class Efficiency:
    """A correctness-gated efficiency term (prime-rl #2265, #2377): the samples with the group's
    top reward (> 0) get ``r·(1 + b)``, ``b = clamp(1 − c_i/c̄, 0, 1)`` with c̄ the mean cost of
    those samples; the others are untouched. Zero mean cost (every top sample free, the 0/0 of
    prime-rl #2377): b = 0."""

    keeps: ClassVar[tuple[str, ...]] = KEEPS

    def __call__(self, rewards: Tensor, lengths: Tensor) -> Tensor:
        r, c = _wide(rewards, lengths)
        top = r.amax(-1, keepdim=True)
        best = (r == top) & (top > 0)  # [B, G]
        mean = (c * best).sum(-1, keepdim=True) / best.sum(-1, keepdim=True).clamp(min=1)
        bonus = torch.where(mean > 0, (1 - c / torch.where(mean > 0, mean, 1.0)).clamp(0, 1), 0.0)
        return (r * (1 + bonus * best)).to(rewards.dtype)


SHAPINGS: dict[str, type] = {
    "gr3": GR3,
    "overlong": Overlong,
    "length_penalty": LengthPenalty,
    "efficiency": Efficiency,
}
"""Every shaping by the name ``--shaping`` and ``shaping(...)`` take."""


def shaping(name: str, **options: float) -> Shaping:
    """The shaping ``name`` with ``options`` (its dataclass fields); unknown names and options
    are refused listing the valid ones."""
    if name not in SHAPINGS:
        raise KeyError(f"unknown shaping {name!r}; valid: {', '.join(sorted(SHAPINGS))}")
    try:
        made: Shaping = SHAPINGS[name](**options)
    except TypeError:
        fields = [f.name for f in dataclasses.fields(SHAPINGS[name])]
        raise ValueError(
            f"shaping {name!r} takes options {fields or 'none'}; got {sorted(options)}"
        ) from None
    return made
