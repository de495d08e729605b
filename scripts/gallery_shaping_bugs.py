"""Shaping bugs that shipped in review: each a trainer's shaped advantage,
``fn(rewards [B, G], lengths [B, G]) -> advantages [B, G]``, beside its fixed twin; each pair
reproduces the thread's arithmetic, not the trainer's plumbing. scripts/bug_gallery.py judges
both with the oracle's shaping family (``oracle/properties/shaping.py``, the shaped-advantage
form)."""

from __future__ import annotations

import torch
from gallery_bugs import Bug
from torch import Tensor

from advest.fast.shaping import GR3

ALPHA = 0.5


def _gr3(rewards: Tensor, lengths: Tensor) -> Tensor:
    """GR³'s rescaled rewards, r / (1 + α·L/L̄), as ``fast.shaping.GR3`` computes them."""
    return GR3(ALPHA)(rewards, lengths)


def prime_rl_2040_buggy(rewards: Tensor, lengths: Tensor) -> Tensor:
    """GR³ with the baseline from the raw rewards: ``r̃ − mean(r)``. The advantages no longer
    sum to zero, and in a mostly correct group a correct but long answer goes negative."""
    return _gr3(rewards, lengths) - rewards.mean(-1, keepdim=True)


def prime_rl_2040_fixed(rewards: Tensor, lengths: Tensor) -> Tensor:
    """PR 2040: the baseline from the rescaled rewards, ``r̃ − mean(r̃)``."""
    shaped = _gr3(rewards, lengths)
    return shaped - shaped.mean(-1, keepdim=True)


def _efficiency(rewards: Tensor, costs: Tensor, guard: bool) -> Tensor:
    """The correctness-gated bonus, ``bonus = clamp(1 − c/c̄, 0, 1)`` on the top-reward
    samples, c̄ their mean cost; then ``R_shaped − mean(R_shaped)``."""
    r, c = rewards.double(), costs.double()
    top = r.amax(-1, keepdim=True)
    best = ((r == top) & (top > 0)).double()
    mean = (c * best).sum(-1, keepdim=True) / best.sum(-1, keepdim=True).clamp(min=1)
    if guard:  # zero mean cost: no bonus
        bonus = torch.where(mean > 0, (1 - c / torch.where(mean > 0, mean, 1.0)).clamp(0, 1), 0.0)
    else:
        bonus = (1 - c / mean).clamp(0, 1)
    shaped = r * (1 + bonus * best)
    return (shaped - shaped.mean(-1, keepdim=True)).to(rewards.dtype)


def prime_rl_2377_buggy(rewards: Tensor, lengths: Tensor) -> Tensor:
    """Costs that are all zero for the top-reward samples (tool-only shaping with no tool
    tokens): ``c / c̄`` is 0/0, and the group's advantages are NaN."""
    return _efficiency(rewards, lengths, guard=False)


def prime_rl_2377_fixed(rewards: Tensor, lengths: Tensor) -> Tensor:
    """A zero mean cost gives no bonus (the no-op the thread expects)."""
    return _efficiency(rewards, lengths, guard=True)


SHAPING_BUGS = [
    Bug(
        "GR³ baseline from the unshaped rewards",
        "prime-rl #2040",
        "https://github.com/PrimeIntellect-ai/prime-rl/pull/2040",
        "the length-rescaled rewards minus the mean of the raw ones: advantages that do not sum "
        "to zero, and correct long answers pushed down in a mostly correct group",
        prime_rl_2040_buggy,
        prime_rl_2040_fixed,
        convention="shaping",
    ),
    Bug(
        "0/0 when every top-reward rollout has zero cost",
        "prime-rl #2377",
        "https://github.com/PrimeIntellect-ai/prime-rl/pull/2377",
        "the efficiency bonus divides by the top samples' mean cost, zero when none has a "
        "cost: NaN advantages for the whole group",
        prime_rl_2377_buggy,
        prime_rl_2377_fixed,
        convention="shaping",
    ),
]
