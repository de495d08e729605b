"""Covariance-aware reweighting of token advantages (Gaussian kernel), batched.

Notation: ``logprobs: [B, G, T]`` (rollout-time log-probs of the sampled tokens, detached),
``advantages: [B, G]`` (broadcast to tokens) or ``[B, G, T]``, ``mask: [B, G, T]`` (valid response
tokens). A scope is one prompt's G responses (``scope="group"``, default) or the whole call
(``scope="batch"``). Definitions and degenerate cases: spec/covariance.md. All reductions are
masked sums in float64 (two-pass variance), O(B·G·T), no Python loop over tokens.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from advest.spec.hyperparams import clip_range, decimal  # one parser of hyperparameters
from advest.spec.tolerances import pair

from ._checks import check_ddof
from .registry import defined_in, register

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


@register(
    kind="token",
    extends="grpo",
    inputs=("logprobs", "advantages", "mask"),
    tolerance=pair(
        "output", "w̃ = exp(−c²/2σ²)·N/Σw in float64, mean 1 per scope: ulps of max w̃ (>= 1)"
    ),
)
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

    # c is computed in float64 from centred inputs whose rounding is relative to the inputs, not
    # to their spread: ℓ − ℓ̄ is off by ~ε·max|ℓ|, so c by ~ε(|ℓ−ℓ̄|·max|A| + |A−Ā|·max|ℓ|). A
    # spread of c within that is rounding, not signal (at G = 2 the exact c are always equal:
    # ℓ = [−1, −0.5]·1e-4, A = [2.5, 2.671875]·1e-4 gave weights 0 and 2 for the exact 1 and 1)
    def top(x: Tensor) -> Tensor:
        return torch.where(m, x.abs(), zero).amax(dim=(1, 2), keepdim=True)

    reach = top(c) + top(l_c) * top(a) + top(a_c) * top(ell)
    noise = (16 * torch.finfo(torch.float64).eps * reach) ** 2
    degenerate = (n_s - d <= 0) | _constant(a, m) | _constant(ell, m) | (var <= noise)
    # w̃ is normalised per scope, so shifting the exponent by the scope's smallest c² changes
    # nothing exactly, and keeps one weight at 1 when σ² is tiny (else all underflow: 0/0)
    c2 = c**2
    c2_min = torch.where(m, c2, torch.inf).amin(dim=(1, 2), keepdim=True)
    w = torch.exp(-(c2 - c2_min) / (2 * torch.where(degenerate, 1.0, var)))
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


# --- Peers: Clip-Cov and KL-Cov (Cui et al., arXiv:2505.22617; PRIME-RL/Entropy-Mechanism-of-RL
# `compute_policy_loss_clip_cov` / `compute_policy_loss_kl_cov`). Policy losses, not advantage
# estimators: kept out of ``__all__`` and out of the registry. The selection population is every
# valid token of one call (the trainer's micro-batch); flat order is row-major over [B, G, T].


class CovLoss(NamedTuple):
    loss: Tensor  # [B, G, T] per-token loss, 0 on invalid tokens; aggregate as configured
    selected: Tensor  # [B, G, T] bool; Clip-Cov: zeroed tokens, KL-Cov: penalised tokens


def _count(fraction: object, name: str, n_valid: int) -> int:
    """⌊fraction · N⌋, exactly, for a fraction in [0, 1]."""
    q = decimal(fraction, name)
    if not 0 <= q <= 1:
        raise ValueError(f"{name} must be a fraction in [0, 1]; got {fraction!r}")
    return math.floor(q * n_valid)


def _check_loss_inputs(
    logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """Validate; return (ℓ, ℓ_old, A) with 0 on invalid tokens (so padding cannot make a NaN
    gradient), the bool mask, and N = #valid tokens."""
    if not isinstance(old_logprobs, Tensor):
        raise TypeError(f"old_logprobs must be a torch.Tensor; got {type(old_logprobs)}")
    adv, valid = _check(logprobs, advantages, mask)
    if old_logprobs.shape != logprobs.shape:
        raise ValueError(
            f"old_logprobs has shape {tuple(old_logprobs.shape)} "
            f"but logprobs has {tuple(logprobs.shape)}"
        )
    if old_logprobs.device != logprobs.device:
        raise ValueError(
            f"old_logprobs is on {old_logprobs.device} but logprobs is on {logprobs.device}"
        )
    if not old_logprobs.is_floating_point():
        raise TypeError("old_logprobs must be a floating-point tensor")
    bad = valid & ~torch.isfinite(old_logprobs)
    if bool(bad.any()):
        b, g, tok = bad.nonzero()[0].tolist()
        raise ValueError(
            f"old_logprobs has a non-finite value in group {b} (sample {g}, token {tok})"
        )
    n_valid = int(valid.sum())
    if n_valid == 0:
        raise ValueError("mask leaves the population (group 0) without valid tokens")
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    ell = torch.where(valid, logprobs, zero)
    old = torch.where(valid, old_logprobs.detach().to(logprobs.dtype), zero)
    adv = torch.where(valid, adv.detach().to(logprobs.dtype), zero)
    return ell, old, adv, valid, n_valid


def token_covariance(logprobs: Tensor, advantages: Tensor, valid: Tensor) -> Tensor:
    """Cov = (A − Ā)(ℓ − ℓ̄), token-weighted means over all valid tokens; float64, detached.

    logprobs, advantages: [B, G, T]; valid: [B, G, T] bool -> [B, G, T] (0 on invalid tokens).
    """
    zero = torch.zeros((), dtype=torch.float64, device=logprobs.device)
    ell = torch.where(valid, logprobs.detach().to(torch.float64), zero)
    a = torch.where(valid, advantages.detach().to(torch.float64), zero)
    n = valid.sum()
    return torch.where(valid, (a - a.sum() / n) * (ell - ell.sum() / n), zero)


def _first_n(keys: Tensor, n: int, *, descending: bool) -> Tensor:
    """Bool [B, G, T]: the n positions that come first when ``keys`` is stably sorted (ties go
    to the earlier position in row-major order)."""
    order = torch.sort(keys.flatten(), descending=descending, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    return (rank < n).reshape(keys.shape)


def clip_cov(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    generator: torch.Generator,
    clip_cov_ratio: float = 2e-4,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> CovLoss:
    """Clip-Cov: detach a random few low-covariance-band tokens from the clipped PPO loss.

    logprobs (current, with grad), old_logprobs (rollout), mask: [B, G, T]; advantages: [B, G]
    or [B, G, T]. Candidates: valid, not PPO-clipped (L2 <= L1), clip_cov_lb < Cov < clip_cov_ub;
    n = max(1, ⌊clip_cov_ratio · N⌋) of them, uniformly at random, get loss 0. The randomness is
    one ``torch.rand(B, G, T, dtype=float64, generator=generator)`` draw: the candidates with
    the n smallest draws are chosen. -> CovLoss(loss [B, G, T], selected [B, G, T]).
    """
    ell, old, adv, valid, n_valid = _check_loss_inputs(logprobs, old_logprobs, advantages, mask)
    n = max(1, _count(clip_cov_ratio, "clip_cov_ratio", n_valid))
    lb, ub = (
        float(decimal(clip_cov_lb, "clip_cov_lb")),
        float(decimal(clip_cov_ub, "clip_cov_ub")),
    )
    lo, hi = (float(x) for x in clip_range(clip_low, clip_high))
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator; got {type(generator)}")
    if generator.device.type != logprobs.device.type:
        raise ValueError(f"generator is on {generator.device} but logprobs is on {logprobs.device}")
    ratio = torch.exp(ell - old)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, lo, hi)
    cov = token_covariance(ell, adv, valid)
    candidate = valid & ~(l2 > l1) & (cov > lb) & (cov < ub)
    draws = torch.rand(
        logprobs.shape, dtype=torch.float64, generator=generator, device=logprobs.device
    )
    selected = candidate & _first_n(torch.where(candidate, draws, 2.0), n, descending=False)
    zero = torch.zeros((), dtype=l1.dtype, device=l1.device)
    # torch.where, not ·0: the selected tokens' gradient is exactly 0 even where ρ overflows
    loss = torch.where(valid & ~selected, torch.maximum(l1, l2), zero)
    return CovLoss(loss, selected)


def kl_cov(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    kl_cov_fraction: float = 0.002,
    kl_cov_coef: float = 1.0,
) -> CovLoss:
    """KL-Cov: unclipped −Aρ, plus β·|ℓ − ℓ_old| on the top-covariance tokens.

    logprobs (current, with grad), old_logprobs (rollout), mask: [B, G, T]; advantages: [B, G]
    or [B, G, T]. The n = max(1, ⌊kl_cov_fraction · N⌋) valid tokens with the largest Cov (ties
    to the earlier token, row-major) are penalised; ``kl_cov_fraction = 0`` penalises none.
    -> CovLoss(loss [B, G, T], selected [B, G, T]).
    """
    ell, old, adv, valid, n_valid = _check_loss_inputs(logprobs, old_logprobs, advantages, mask)
    k = _count(kl_cov_fraction, "kl_cov_fraction", n_valid)
    n = 0 if decimal(kl_cov_fraction, "kl_cov_fraction") == 0 else max(1, k)
    beta = float(decimal(kl_cov_coef, "kl_cov_coef"))
    if beta < 0:
        raise ValueError(f"kl_cov_coef must be >= 0; got {kl_cov_coef!r}")
    cov = token_covariance(ell, adv, valid)
    keys = torch.where(valid, cov, -torch.inf)
    selected = valid & _first_n(keys, n, descending=True)
    base = -adv * torch.exp(ell - old)
    zero = torch.zeros((), dtype=base.dtype, device=base.device)
    # d|x|/dx = 0 at x = 0 in torch: at ℓ = ℓ_old the penalty has no gradient (as in PRIME's code)
    penalty = torch.where(selected, beta * (ell - old).abs(), zero)
    return CovLoss(torch.where(valid, base + penalty, zero), selected)


__all__ = defined_in(__name__)  # every estimator registered above
