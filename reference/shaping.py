"""Exact reward shapings (``spec/shaping.md``): one group's rewards and lengths (or costs) as
``Fraction``, in the papers' symbols, no epsilons; the twins of ``fast/shaping.py``."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

Number = int | float | Fraction


def _exact(values: Sequence[Number]) -> list[Fraction]:
    return [Fraction(v) for v in values]


def gr3(rewards: Sequence[Number], lengths: Sequence[Number], alpha: Number) -> list[Fraction]:
    """GR³ (Li et al., arXiv 2603.10535): r̃_i = r_i / (1 + α·L_i/L̄), L̄ = (1/G)·Σ_j L_j; a
    group with L̄ = 0 is left as it is."""
    r, L, a = _exact(rewards), _exact(lengths), Fraction(alpha)
    L_bar = sum(L, Fraction(0)) / len(L)
    if L_bar == 0:
        return r
    return [r_i / (1 + a * L_i / L_bar) for r_i, L_i in zip(r, L, strict=True)]


def overlong(
    rewards: Sequence[Number], lengths: Sequence[Number], max_length: int, cache: int
) -> list[Fraction]:
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13) added to each reward:
    0 if |y| ≤ L_max − L_cache; ((L_max − L_cache) − |y|)/L_cache if L_max − L_cache < |y| ≤
    L_max; −1 beyond."""
    out = []
    for r_i, y in zip(_exact(rewards), _exact(lengths), strict=True):
        if y <= max_length - cache:
            R_length = Fraction(0)
        elif y <= max_length:
            R_length = Fraction(max_length - cache - y, cache)
        else:
            R_length = Fraction(-1)
        out.append(r_i + R_length)
    return out


def length_penalty(
    rewards: Sequence[Number], lengths: Sequence[Number], weight: Number, threshold: Number
) -> list[Fraction]:
    """Kimi k1.5 (arXiv 2501.12599 §2.3.3): λ_i = ½ − (len_i − min_len)/(max_len − min_len),
    r_i + w·λ_i for a passing sample (r_i ≥ threshold), r_i + w·min(0, λ_i) otherwise; λ = 0
    when max_len = min_len."""
    r, L, w = _exact(rewards), _exact(lengths), Fraction(weight)
    min_len, max_len = min(L), max(L)
    out = []
    for r_i, len_i in zip(r, L, strict=True):
        lam = Fraction(0)
        if max_len != min_len:
            lam = Fraction(1, 2) - (len_i - min_len) / (max_len - min_len)
        out.append(r_i + w * (lam if r_i >= Fraction(threshold) else min(Fraction(0), lam)))
    return out


def efficiency(rewards: Sequence[Number], lengths: Sequence[Number]) -> list[Fraction]:
    """prime-rl #2265 / #2377: the samples with the top reward (> 0) get r_i·(1 + b_i),
    b_i = clamp(1 − c_i/c̄, 0, 1), c̄ their mean cost; b = 0 when c̄ = 0."""
    r, c = _exact(rewards), _exact(lengths)
    top = max(r)
    best = [top > 0 and r_i == top for r_i in r]
    chosen = [c_i for c_i, b in zip(c, best, strict=True) if b]
    c_bar = sum(chosen, Fraction(0)) / len(chosen) if chosen else Fraction(0)
    out = []
    for r_i, c_i, b in zip(r, c, best, strict=True):
        bonus = min(max(1 - c_i / c_bar, Fraction(0)), Fraction(1)) if b and c_bar > 0 else 0
        out.append(r_i * (1 + bonus))
    return out
