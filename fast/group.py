"""Outcome-level group baselines, batched: GRPO, Dr. GRPO, RLOO, REINFORCE++, OPO.

``rewards: [B, G]`` in, ``[B, G]`` out, same dtype and device. Stability rules (spec/group.md):
subtract the group minimum first (exact by Sterbenz for offset rewards; every estimator here is
shift-invariant), reduce in float64, two-pass variance, and decide constant groups on the raw
rewards (max == min), never by testing a float std against 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fast._checks import check_companion, check_ddof, check_rewards
from fast.registry import register

__all__ = ["dr_grpo", "grpo", "opo", "reinforce_pp", "rloo"]


def _centred(rewards: Tensor) -> Tensor:
    """r − group mean in float64, ``[B, G]``, computed after subtracting the group minimum."""
    x = rewards.to(torch.float64)
    x = x - x.amin(dim=-1, keepdim=True)
    return x - x.mean(dim=-1, keepdim=True)


def _constant(rewards: Tensor) -> Tensor:
    """``[B, 1]`` bool: the group's rewards are all equal."""
    return rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)


def _std(centred: Tensor, ddof: int, dim: int | None) -> Tensor:
    """Two-pass std of already-centred values (mean 0), over ``dim`` or over everything.

    Scaled by max|c| first so that subnormal or huge spreads do not under- or overflow the squares;
    the caller masks groups whose c is all zero (and G − ddof = 0, which gives inf here).
    """
    a = centred.abs()
    top = a.amax() if dim is None else a.amax(dim=dim, keepdim=True)
    unit = centred / torch.where(top > 0, top, 1.0)
    squares = (unit**2).sum() if dim is None else (unit**2).sum(dim=dim, keepdim=True)
    count = centred.numel() if dim is None else centred.shape[dim]
    return top * torch.sqrt(squares / max(count - ddof, 0))


@register("grpo", "group", needs_k=False)
def grpo(rewards: Tensor, *, eps: float = 1e-6, ddof: int = 1) -> Tensor:
    """(r − mean)/(std_ddof + ε) per group; constant groups (and G = 1) give exact zeros."""
    check_rewards(rewards)
    d = check_ddof(ddof, "grpo")
    centred = _centred(rewards)
    constant = _constant(rewards)
    std = torch.where(constant, 1.0, _std(centred, d, dim=-1))
    return torch.where(constant, 0.0, centred / (std + eps)).to(rewards.dtype)


@register("dr_grpo", "group", needs_k=False)
def dr_grpo(rewards: Tensor) -> Tensor:
    """r − group mean (Dr. GRPO, no std); G = 1 gives 0."""
    check_rewards(rewards)
    return _centred(rewards).to(rewards.dtype)


@register("rloo", "group", needs_k=False)
def rloo(rewards: Tensor) -> Tensor:
    """r − mean of the others = G/(G−1)·(r − mean); needs G >= 2."""
    check_rewards(rewards)
    G = rewards.shape[1]
    if G < 2:
        raise ValueError(f"rloo needs groups of G >= 2 samples; got G={G}")
    return (G / (G - 1) * _centred(rewards)).to(rewards.dtype)


@register("reinforce_pp", "group", needs_k=False)
def reinforce_pp(rewards: Tensor, *, eps: float = 1e-6, ddof: int = 1) -> Tensor:
    """REINFORCE++ (group baseline): c = r − group mean; c/(std_ddof over all B·G of c + ε).

    The mean of c is exactly 0, so there is no re-centring; all c = 0 gives exact zeros.
    """
    check_rewards(rewards)
    d = check_ddof(ddof, "reinforce_pp")
    if rewards.shape[0] == 0:
        raise ValueError("reinforce_pp needs at least one group in rewards; got B=0")
    c = torch.where(_constant(rewards), 0.0, _centred(rewards))
    if not bool(c.any()):
        return torch.zeros_like(rewards)
    return (c / (_std(c, d, dim=None) + eps)).to(rewards.dtype)


@register("opo", "group", needs_k=False, needs_lengths=True)
def opo(rewards: Tensor, lengths: Tensor) -> Tensor:
    """r − Σ_j l_j r_j / Σ_j l_j (OPO, self included). lengths: [B, G] valid tokens, each >= 1."""
    check_rewards(rewards)
    check_companion(lengths, rewards, "lengths")
    short = lengths < 1
    if bool(short.any()):
        group, sample = short.nonzero()[0].tolist()
        raise ValueError(
            f"lengths must be >= 1; group {group} has {lengths[group, sample].item()} "
            f"at sample {sample}"
        )
    x = rewards.to(torch.float64)
    x = x - x.amin(dim=-1, keepdim=True)
    w = lengths.to(torch.float64)
    baseline = (w * x).sum(dim=-1, keepdim=True) / w.sum(dim=-1, keepdim=True)
    return (x - baseline).to(rewards.dtype)
