"""The clipped policy-gradient loss, KL estimators and loss aggregation.

Notation: ``logprobs, old_logprobs, ref_logprobs, advantages, mask: [S, T]`` for S sequences
(one micro-batch) of T response tokens. No advantage math here: advantages come from ``fast``.

Aggregation is exact under gradient accumulation: each micro-batch's loss is its share of the
whole mini-batch's loss (``Normaliser`` holds the mini-batch denominators), so splitting a
mini-batch into micro-batches changes the gradient only by float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .settings import Aggregation, KLEstimator


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: KLEstimator) -> Tensor:
    """Per-token estimate of KL(π‖π_ref) from samples of π (Schulman, "Approximating KL
    divergence", 2020): k1 = log r, k2 = ½ (log r)², k3 = (1/r − 1) + log r, with
    r = π / π_ref. k3 is unbiased and non-negative."""
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio.square()
    # k3 with log(1/r) clamped so that exp() cannot overflow on a wild sample
    neg = (-log_ratio).clamp(max=20.0)
    return neg.exp() - 1 - neg


@dataclass(frozen=True)
class Normaliser:
    """Denominators for one mini-batch: its valid token count, its sequence count, and the
    constant response budget L (Dr.GRPO divides by S·L, independent of lengths)."""

    tokens: float
    sequences: float
    max_tokens: float

    @staticmethod
    def of(mask: Tensor, max_tokens: int) -> Normaliser:
        """``mask: [S, T]`` of the whole mini-batch."""
        return Normaliser(float(mask.sum().clamp(min=1)), float(mask.shape[0]), float(max_tokens))


def aggregate(loss: Tensor, mask: Tensor, how: Aggregation, norm: Normaliser) -> Tensor:
    """This micro-batch's share of the mini-batch loss. ``loss, mask: [S, T]``."""
    masked = loss * mask
    if how == "token-mean":
        return masked.sum() / norm.tokens
    if how == "seq-mean-token-sum":
        return masked.sum() / norm.sequences
    if how == "seq-mean-token-mean":
        per_seq = masked.sum(-1) / mask.sum(-1).clamp(min=1)
        return per_seq.sum() / norm.sequences
    if how == "dr-grpo":
        return masked.sum() / (norm.sequences * norm.max_tokens)
    raise ValueError(f"unknown loss aggregation {how!r}")


@dataclass(frozen=True)
class LossParts:
    loss: Tensor  # scalar, this micro-batch's share
    clipped: Tensor  # [S, T] bool: tokens whose clipped term was the active one
    kl: Tensor  # [S, T] per-token KL estimate (0 when no reference)


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    aggregation: Aggregation,
    norm: Normaliser,
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: KLEstimator = "k3",
) -> LossParts:
    """PPO-clip with separate low/high ranges (DAPO's clip-higher, arXiv 2503.14476 §3.1):
    −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) + β·KL, ρ = exp(logπ − logπ_old)."""
    ratio = (logprobs - old_logprobs).exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - clip_low, 1 + clip_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(logprobs)
    if ref_logprobs is not None and kl_coef != 0.0:
        kl = kl_penalty(logprobs, ref_logprobs, kl_estimator)
        per_token = per_token + kl_coef * kl
    active_clip = (clipped < unclipped) & mask
    return LossParts(aggregate(per_token, mask, aggregation, norm), active_clip, kl.detach())
