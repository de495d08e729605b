"""Covariance-aware reweighting of token advantages (Gaussian kernel), batched.

Notation: ``logprobs: [B, G, T]`` (rollout-time log-probs of the sampled tokens, detached),
``advantages: [B, G]`` (broadcast to tokens) or ``[B, G, T]``, ``mask: [B, G, T]`` (valid response
tokens). A scope is one prompt's G responses (``scope="group"``, default) or the whole call
(``scope="batch"``). Definitions and degenerate cases: spec/covariance.md. All reductions are
masked sums in float64 (two-pass variance), O(B·G·T), no Python loop over tokens.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor

from fast._checks import check_ddof
from fast.registry import register

__all__ = ["covariance_weights"]

Scope = Literal["group", "batch"]


class Reweighted(NamedTuple):
    weights: Tensor  # [B, G, T], w̃: mean 1 over each scope's valid tokens, 0 elsewhere
    advantages: Tensor  # [B, G, T], w̃ · A (0 on invalid tokens)


def _check(logprobs: Tensor, advantages: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Validate shapes, devices and dtypes; return (advantages as [B, G, T], mask as bool)."""
    for name, t in (("logprobs", logprobs), ("advantages", advantages), ("mask", mask)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(t)}")
        if t.device != logprobs.device:
            raise ValueError(f"{name} is on {t.device} but logprobs is on {logprobs.device}")
    if logprobs.dim() != 3:
        raise ValueError(f"logprobs must have shape [B, G, T]; got {tuple(logprobs.shape)}")
    if not logprobs.is_floating_point() or not advantages.is_floating_point():
        raise TypeError("logprobs and advantages must be floating-point tensors")
    if mask.shape != logprobs.shape:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but logprobs has {tuple(logprobs.shape)}"
        )
    if advantages.shape == logprobs.shape[:2]:
        advantages = advantages.unsqueeze(-1).expand(logprobs.shape)
    elif advantages.shape != logprobs.shape:
        raise ValueError(
            f"advantages must have shape [B, G] or [B, G, T] = {tuple(logprobs.shape)}; "
            f"got {tuple(advantages.shape)}"
        )
    if mask.dtype != torch.bool:
        if bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError("mask must be boolean or hold only 0 and 1")
        mask = mask != 0
    for name, t in (("logprobs", logprobs), ("advantages", advantages)):
        bad = mask & ~torch.isfinite(t)
        if bool(bad.any()):
            b, g, tok = bad.nonzero()[0].tolist()
            raise ValueError(
                f"{name} has a non-finite value in group {b} (sample {g}, token {tok})"
            )
    return advantages, mask


def _scope_sum(x: Tensor) -> Tensor:
    """Σ over each scope's (G, T) block, ``[S, 1, 1]``."""
    return x.sum(dim=(1, 2), keepdim=True)


@register("covariance_weights", "token", needs_k=False, inputs=("logprobs", "advantages", "mask"))
def covariance_weights(
    logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    scope: Scope = "group",
    ddof: int = 1,
) -> Reweighted:
    """w̃ = exp(−c²/(2σ²)) · N_S/Σw with c = (ℓ − ℓ̄)(A − Ā) per scope; and w̃·A. Detached.

    logprobs: [B, G, T]; advantages: [B, G] or [B, G, T]; mask: [B, G, T] -> two [B, G, T].
    """
    d = check_ddof(ddof, "covariance_weights")
    adv, valid = _check(logprobs, advantages, mask)
    B, G, T = logprobs.shape
    if scope not in ("group", "batch"):
        raise ValueError(f"scope must be 'group' or 'batch'; got {scope!r}")
    shape = (1, B * G, T) if scope == "batch" else (B, G, T)  # one row per scope
    ell = logprobs.detach().to(torch.float64).reshape(shape)
    a = adv.detach().to(torch.float64).reshape(shape)
    m = valid.reshape(shape)
    n_s = _scope_sum(m.to(torch.float64))  # [S, 1, 1]
    empty = (n_s == 0).flatten()
    if bool(empty.any()):
        raise ValueError(f"mask leaves group {int(empty.nonzero()[0])} without valid tokens")
    zero = torch.zeros((), dtype=torch.float64, device=ell.device)
    l_c = torch.where(m, ell - _scope_sum(torch.where(m, ell, zero)) / n_s, zero)
    a_c = torch.where(m, a - _scope_sum(torch.where(m, a, zero)) / n_s, zero)
    c = l_c * a_c  # [S, G', T], 0 on invalid tokens
    dev = torch.where(m, c - _scope_sum(c) / n_s, zero)
    var = _scope_sum(dev**2) / torch.clamp(n_s - d, min=1)
    degenerate = (n_s - d <= 0) | _constant(a, m) | _constant(ell, m) | (var == 0)
    w = torch.exp(-(c**2) / (2 * torch.where(degenerate, 1.0, var)))
    w = torch.where(degenerate, 1.0, w)
    w = torch.where(m, w, zero)
    w_tilde = w * n_s / _scope_sum(w)
    weights = w_tilde.reshape(B, G, T).to(logprobs.dtype)
    return Reweighted(weights, (w_tilde * a).reshape(B, G, T).to(advantages.dtype))


def _constant(x: Tensor, m: Tensor) -> Tensor:
    """``[S, 1, 1]`` bool: x takes one value on the scope's valid tokens."""
    big = torch.tensor(torch.inf, dtype=x.dtype, device=x.device)
    hi = torch.where(m, x, -big).amax(dim=(1, 2), keepdim=True)
    lo = torch.where(m, x, big).amin(dim=(1, 2), keepdim=True)
    return hi == lo
