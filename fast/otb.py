"""The optimal token baseline (OTB), batched: one baseline per group and token position.

Notation: ``rewards: [B, G]`` (outcome rewards), ``mask, logprobs, sum_pi_squared: [B, G, T]``
(valid response tokens, the sampled token's log π, and Σ_v π(v)² at each position). Output
``[B, G, T]`` in the rewards' dtype, 0 at padding. Definitions and conventions: spec/otb.md;
source arXiv:2602.07078 as shipped in verl 0.9.1. Arithmetic in float64 whatever the input
dtype: w = 1 − 2π + Σπ² cancels when π ≈ 1, and B_t is a ratio of sums over the group.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from advest.spec.tolerances import pair

from ._checks import bool_mask, check_finite, check_rewards
from .registry import defined_in, register

SLACK = 1e-4
"""Rounding slack of the input checks (as reference.otb.SLACK): log π ≤ 1e-4 and
Σπ² ∈ [−1e-4, 1 + 1e-4]."""


def _check(
    rewards: Tensor, mask: Tensor, logprobs: Tensor, sum_pi_squared: Tensor, eps: object
) -> Tensor:
    check_rewards(rewards)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < math.inf:
        raise ValueError(f"optimal_token_baseline needs a finite eps >= 0; got eps={eps!r}")
    B, G = rewards.shape
    for name, t in (("mask", mask), ("logprobs", logprobs), ("sum_pi_squared", sum_pi_squared)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape [B, G, T]; got {type(t)}")
        if t.dim() != 3 or t.shape[:2] != (B, G) or t.shape != mask.shape:
            raise ValueError(
                f"{name} must have shape [B, G, T] with [B, G] = {(B, G)} and the mask's T; "
                f"got {tuple(t.shape)}"
            )
        if t.device != rewards.device:
            raise ValueError(f"{name} is on {t.device} but rewards is on {rewards.device}")
    valid = bool_mask(mask)
    for name, t in (("logprobs", logprobs), ("sum_pi_squared", sum_pi_squared)):
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor; got {t.dtype}")
        # padding may hold anything (NaN included): only valid positions are read
        check_finite(torch.where(valid, t, 0.0), name)
    bad = valid & (logprobs > SLACK)
    if bool(bad.any()):
        b, i, j = (int(x) for x in bad.nonzero()[0])
        raise ValueError(
            f"logprobs must be log-probabilities (<= 0); group {b}, response {i} has "
            f"{float(logprobs[b, i, j])} at token {j}"
        )
    bad = valid & ((sum_pi_squared < -SLACK) | (sum_pi_squared > 1 + SLACK))
    if bool(bad.any()):
        b, i, j = (int(x) for x in bad.nonzero()[0])
        raise ValueError(
            f"sum_pi_squared must lie in [0, 1] (Σ_v π(v)²); group {b}, response {i} has "
            f"{float(sum_pi_squared[b, i, j])} at token {j}"
        )
    return valid


@register(
    kind="token",
    extends="dr_grpo",
    inputs=("rewards", "mask", "logprobs", "sum_pi_squared"),
    # A ratio of sums of path weights: ill-conditioned where Σ W + ε is tiny (π ≈ 1 everywhere),
    # which no output scale covers: tests/core/estimators/test_otb.py bounds each position by its
    # condition.
    tolerance=pair(
        "output", "R − Σ R·W/(Σ W + ε) in float64, W a cumsum of 1 − 2π + Σπ²: ulps of max|R|"
    ),
)
def optimal_token_baseline(
    rewards: Tensor,
    mask: Tensor,
    logprobs: Tensor,
    sum_pi_squared: Tensor,
    *,
    eps: float = 1e-8,
    zero_tail: bool = True,
    cumulative: bool = True,
) -> Tensor:
    """A_{b,i,t} = (R_{b,i} − B_{b,t})·m_{b,i,t} with B_{b,t} = Σ_i R W / (Σ_i W + ε) over the
    responses valid at t, W the cumulative logit-gradient proxy Σ_{j≤t} (1 − 2π_j + Σπ²_j).
    ``[B, G, T]``. Defaults are verl 0.9.1's (ε = 1e-8, ``handle_zero_tail=True``)."""
    valid = _check(rewards, mask, logprobs, sum_pi_squared, eps)
    B, G, T = valid.shape
    r = rewards.to(torch.float64)  # [B, G]
    pi = logprobs.to(torch.float64).exp()
    w = (1 - 2 * pi + sum_pi_squared.to(torch.float64)).clamp(min=0.0)
    w = torch.where(valid, w, 0.0)  # [B, G, T]
    W = w.cumsum(-1) if cumulative else w
    W = torch.where(valid, W, 0.0)  # [B, G, T]: weight of response i in B_t, 0 if not alive
    num = (r[..., None] * W).sum(1)  # [B, T]
    den = W.sum(1) + eps  # [B, T]
    base = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)  # [B, T]
    if G == 1:
        base = torch.zeros_like(base)  # a lone response has no baseline: A = R
    baselines = base[:, None, :].expand(B, G, T)  # [B, G, T]
    if zero_tail and G >= 2:
        lengths = valid.sum(-1)  # [B, G]
        top2 = lengths.topk(2, dim=1).values  # [B, 2]
        unique_longest = (lengths == top2[:, :1]) & (top2[:, :1] > top2[:, 1:])  # [B, G]
        past = torch.arange(T, device=valid.device) >= top2[:, 1, None, None]  # [B, 1, T]
        baselines = torch.where(unique_longest[..., None] & past, 0.0, baselines)
    return torch.where(valid, r[..., None] - baselines, 0.0).to(rewards.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
