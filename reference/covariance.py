"""Covariance-aware reweighting of token advantages (Gaussian kernel), exactly, for one scope.

Source: covariance-aware GRPO (seed 001_…), motivated by Cui et al., arXiv:2505.22617 (ΔH ≈
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

from collections.abc import Sequence
from decimal import Decimal, localcontext
from fractions import Fraction

from reference._exact import Number, to_fractions

__all__ = ["covariance_weights"]


def _exp(x: Fraction) -> Fraction:
    with localcontext() as ctx:
        ctx.prec = 50
        return Fraction((Decimal(x.numerator) / Decimal(x.denominator)).exp())


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
    w = [[_exp(-(x * x) / (2 * var)) for x in row] for row in c]
    total = sum((x for row in w for x in row), Fraction(0))
    return [[x * n_s / total for x in row] for row in w]
