"""Covariance-aware reweighting of token advantages (Gaussian kernel), exactly, for one scope.

Source: Wang, Liu, Zhou, Chen, *Taming Extreme Tokens: Covariance-Aware GRPO with Gaussian-Kernel
Advantage Reweighting*, arXiv:2605.11538, motivated by Cui et al., arXiv:2505.22617 (ΔH ≈
−η·Cov(log π, A)); conventions pinned in spec/covariance.md. One scope = the valid tokens of
one prompt's G responses (``scope="group"``) or of a whole batch (``scope="batch"``): either way a
list of responses, each the list of its valid tokens.

    ℓ̄ = mean ℓ,  Ā = mean A          (token-weighted over the scope)
    c_t = (ℓ_t − ℓ̄)(A_t − Ā),  c̄ = mean c,  σ = sqrt(Σ (c − c̄)² / (N_S − ddof))
    w_t = exp(−c_t² / (2σ²)),  w̃_t = w_t · N_S / Σ w

Degenerate scopes (N_S − ddof <= 0, constant A, constant ℓ, or σ = 0) give w ≡ 1, decided on
the inputs. c, c̄ and σ² are exact rationals; σ and exp are evaluated to 50 digits (the only
inexact steps), so results are Fractions accurate far beyond float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from advest.spec.hyperparams import clip_range, decimal

from ._exact import Number, exp, public, to_fractions


def _tokens(
    logprobs: Sequence[Sequence[Number]], advantages: Sequence[object]
) -> tuple[list[list[Fraction]], list[list[Fraction]]]:
    """Per-response token log-probs and advantages, a scalar advantage broadcast to its tokens."""
    if len(advantages) != len(logprobs):
        raise ValueError(
            f"advantages has {len(advantages)} responses but logprobs has {len(logprobs)}"
        )
    ells, adv = [], []
    for i, (ell, a) in enumerate(zip(logprobs, advantages, strict=True)):
        ell_q = to_fractions(ell, f"logprobs[{i}]") if len(ell) else []
        if isinstance(a, Sequence):
            a_q = to_fractions(a, f"advantages[{i}]") if len(a) else []
            if len(a_q) != len(ell_q):
                raise ValueError(
                    f"advantages[{i}] has {len(a_q)} tokens but logprobs[{i}] has {len(ell_q)}"
                )
        else:
            a_q = to_fractions([a], f"advantages[{i}]") * len(ell_q)  # type: ignore[list-item]
        ells.append(ell_q)
        adv.append(a_q)
    return ells, adv


def covariance_weights(
    logprobs: Sequence[Sequence[Number]], advantages: Sequence[object], *, ddof: int = 1
) -> list[list[Fraction]]:
    """w̃ for every valid token of one scope; ``logprobs[i]`` are response i's valid tokens, and
    ``advantages[i]`` is a scalar (broadcast) or one value per valid token."""
    if ddof not in (0, 1):
        raise ValueError(f"covariance_weights needs ddof in (0, 1); got ddof={ddof!r}")
    ells, adv = _tokens(logprobs, advantages)
    flat_l = [x for row in ells for x in row]
    flat_a = [x for row in adv for x in row]
    n_s = len(flat_l)
    if n_s == 0:
        raise ValueError("the scope has no valid tokens (group 0): the mask leaves it empty")
    ones = [[Fraction(1)] * len(row) for row in ells]
    if n_s - ddof <= 0 or max(flat_a) == min(flat_a) or max(flat_l) == min(flat_l):
        return ones
    l_bar, a_bar = sum(flat_l, Fraction(0)) / n_s, sum(flat_a, Fraction(0)) / n_s
    c = [
        [(x - l_bar) * (y - a_bar) for x, y in zip(lr, ar, strict=True)]
        for lr, ar in zip(ells, adv, strict=True)
    ]
    flat_c = [x for row in c for x in row]
    c_bar = sum(flat_c, Fraction(0)) / n_s
    var = sum(((x - c_bar) ** 2 for x in flat_c), Fraction(0)) / (n_s - ddof)
    if var == 0:
        return ones
    w = [[exp(-(x * x) / (2 * var)) for x in row] for row in c]
    total = sum((x for row in w for x in row), Fraction(0))
    return [[x * n_s / total for x in row] for row in w]


# --- Peers: Clip-Cov and KL-Cov (Cui et al., arXiv:2505.22617, PRIME-RL/Entropy-Mechanism-of-RL
# `compute_policy_loss_clip_cov` / `compute_policy_loss_kl_cov`). These are policy losses, not
# advantage estimators: they are kept out of the registry (and public, in ``__all__``).
#
# One population = every valid token passed to one call (the trainer's micro-batch), given as a
# list of responses, each the list of its valid tokens; flat order = response-major, token-minor.


class CovLoss(NamedTuple):
    loss: list[list[Fraction]]  # per valid token
    selected: list[list[bool]]  # Clip-Cov: zeroed; KL-Cov: penalised


def _fraction_in_unit(x: Number, name: str) -> Fraction:
    q = decimal(x, name)
    if not 0 <= q <= 1:
        raise ValueError(f"{name} must be a fraction in [0, 1]; got {x!r}")
    return q


def _population(
    logprobs: Sequence[Sequence[Number]],
    old_logprobs: Sequence[Sequence[Number]],
    advantages: Sequence[object],
) -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
    """(ℓ, ℓ_old, A) per valid token; raises on ragged mismatch or an empty population."""
    ells, adv = _tokens(logprobs, advantages)
    if len(old_logprobs) != len(logprobs):
        raise ValueError(
            f"old_logprobs has {len(old_logprobs)} responses but logprobs has {len(logprobs)}"
        )
    olds = []
    for i, (row, ell) in enumerate(zip(old_logprobs, ells, strict=True)):
        old = to_fractions(row, f"old_logprobs[{i}]") if len(row) else []
        if len(old) != len(ell):
            raise ValueError(
                f"old_logprobs[{i}] has {len(old)} tokens but logprobs[{i}] has {len(ell)}"
            )
        olds.append(old)
    if sum(len(row) for row in ells) == 0:
        raise ValueError("the population has no valid tokens (group 0): the mask leaves it empty")
    return ells, olds, adv


def token_covariance(ells: list[list[Fraction]], adv: list[list[Fraction]]) -> list[list[Fraction]]:
    """Cov_t = (A_t − Ā)(ℓ_t − ℓ̄), token-weighted means over the population (Cui et al.)."""
    flat_l = [x for row in ells for x in row]
    flat_a = [x for row in adv for x in row]
    l_bar = sum(flat_l, Fraction(0)) / len(flat_l)
    a_bar = sum(flat_a, Fraction(0)) / len(flat_a)
    return [
        [(a - a_bar) * (ell - l_bar) for ell, a in zip(lr, ar, strict=True)]
        for lr, ar in zip(ells, adv, strict=True)
    ]


def _ratio(ell: Fraction, old: Fraction) -> Fraction:
    return Fraction(1) if ell == old else exp(ell - old)


def clip_cov(
    logprobs: Sequence[Sequence[Number]],
    old_logprobs: Sequence[Sequence[Number]],
    advantages: Sequence[object],
    draws: Sequence[Sequence[float]],
    *,
    clip_cov_ratio: Number = 2e-4,
    clip_cov_lb: Number = 1.0,
    clip_cov_ub: Number = 5.0,
    clip_low: Number = 0.2,
    clip_high: Number = 0.2,
) -> CovLoss:
    """Clip-Cov (Cui et al., arXiv:2505.22617 §4; PRIME `compute_policy_loss_clip_cov`).

    L1 = −Aρ, L2 = −A·clip(ρ, 1 − ε_low, 1 + ε_high); candidates: not PPO-clipped (L2 ≤ L1)
    and lb < Cov < ub; n = max(1, ⌊r·N⌋); the min(n, #candidates) candidates with the smallest
    ``draws`` (one uniform per valid token, ties to the earlier token) get loss 0, every other
    token max(L1, L2).
    """
    ells, olds, adv = _population(logprobs, old_logprobs, advantages)
    r = _fraction_in_unit(clip_cov_ratio, "clip_cov_ratio")
    lb, ub = decimal(clip_cov_lb, "clip_cov_lb"), decimal(clip_cov_ub, "clip_cov_ub")
    lo, hi = clip_range(clip_low, clip_high)
    if len(draws) != len(ells) or any(len(d) != len(e) for d, e in zip(draws, ells, strict=True)):
        raise ValueError("draws must hold one number per valid token, shaped like logprobs")
    cov = token_covariance(ells, adv)
    l1, l2 = [], []
    for ell_row, old_row, a_row in zip(ells, olds, adv, strict=True):
        rho = [_ratio(x, y) for x, y in zip(ell_row, old_row, strict=True)]
        l1.append([-a * p for a, p in zip(a_row, rho, strict=True)])
        l2.append([-a * min(max(p, lo), hi) for a, p in zip(a_row, rho, strict=True)])
    # (draw, flat index, response, token) of every candidate: sorting picks the smallest draws,
    # ties going to the earlier token in flat order
    positions = [(i, t) for i in range(len(ells)) for t in range(len(ells[i]))]
    candidates = [
        (Fraction(draws[i][t]), k, i, t)
        for k, (i, t) in enumerate(positions)
        if not l2[i][t] > l1[i][t] and lb < cov[i][t] < ub
    ]
    n_valid = sum(len(row) for row in ells)
    n = max(1, math.floor(r * n_valid))
    chosen = {(i, t) for _, _, i, t in sorted(candidates)[:n]}
    selected = [[(i, t) in chosen for t in range(len(row))] for i, row in enumerate(ells)]
    loss = [
        [Fraction(0) if selected[i][t] else max(l1[i][t], l2[i][t]) for t in range(len(row))]
        for i, row in enumerate(ells)
    ]
    return CovLoss(loss, selected)


def kl_cov(
    logprobs: Sequence[Sequence[Number]],
    old_logprobs: Sequence[Sequence[Number]],
    advantages: Sequence[object],
    *,
    kl_cov_fraction: Number = 0.002,
    kl_cov_coef: Number = 1.0,
) -> CovLoss:
    """KL-Cov (Cui et al., arXiv:2505.22617 §4; PRIME `compute_policy_loss_kl_cov`).

    Base loss −Aρ (no PPO clipping); the n = max(1, ⌊k·N⌋) tokens with the largest Cov (ties to
    the earlier token) get + β·|ℓ − ℓ_old|. ``kl_cov_fraction = 0`` selects none (PRIME's
    ``if k != 0`` guard).
    """
    ells, olds, adv = _population(logprobs, old_logprobs, advantages)
    k = _fraction_in_unit(kl_cov_fraction, "kl_cov_fraction")
    beta = decimal(kl_cov_coef, "kl_cov_coef")
    if beta < 0:
        raise ValueError(f"kl_cov_coef must be >= 0; got {kl_cov_coef!r}")
    cov = token_covariance(ells, adv)
    positions = [(i, t) for i in range(len(ells)) for t in range(len(ells[i]))]
    n = 0 if k == 0 else max(1, math.floor(k * len(positions)))
    # sort by −Cov, then flat index: the top n, ties to the earlier token
    ranked = sorted(
        range(len(positions)), key=lambda j: (-cov[positions[j][0]][positions[j][1]], j)
    )
    chosen = {positions[j] for j in ranked[:n]}
    selected = [[(i, t) in chosen for t in range(len(row))] for i, row in enumerate(ells)]
    loss = []
    for i, (ell_row, old_row, a_row) in enumerate(zip(ells, olds, adv, strict=True)):
        row = []
        for t, (x, y, a) in enumerate(zip(ell_row, old_row, a_row, strict=True)):
            penalty = beta * abs(x - y) if selected[i][t] else Fraction(0)
            row.append(-a * _ratio(x, y) + penalty)
        loss.append(row)
    return CovLoss(loss, selected)


__all__ = public(globals())  # every public function and class above
