"""The optimal token baseline (OTB), literally, for one group.

Source: Yingru Li, Jiawei Xu, Ziniu Li et al., *The Optimal Token Baseline: Variance Reduction for
Long-Horizon LLM-RL*, arXiv:2602.07078, as shipped in verl 0.9.1
(``verl/trainer/ppo/core_algos.py``, ``compute_optimal_token_baseline_advantage``). Conventions
pinned in spec/otb.md. Per response i and token t of a group:

* the logit-gradient proxy w_{i,t} = 1 − 2 π_{i,t} + Σ_v π_{i,t}(v)², which is ‖e_y − π‖², the
  squared norm of ∇_z log π(y_t) with respect to that position's logits z (clamped at 0: rounding
  of the inputs is all that can make it negative);
* the path weight W_{i,t} = Σ_{j ≤ t, valid} w_{i,j} (``cumulative=True``) or w_{i,t};
* the baseline B_t = Σ_i R_i W_{i,t} m_{i,t} / (Σ_i W_{i,t} m_{i,t} + ε), 0 when the sum is 0;
* A_{i,t} = (R_i − B_t)·m_{i,t}, with B = 0 for a group of one response and, with ``zero_tail``,
  for the positions of a unique longest response past the second-longest length.

π = exp(log π) is the one inexact step (50 digits, ``_exact.exp``); everything else is rational.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ._exact import Number, exp, public, to_fractions

SLACK = Fraction(1, 10**4)
"""Rounding slack of the input checks: log π ≤ SLACK and −SLACK ≤ Σπ² ≤ 1 + SLACK."""

Rows = Sequence[Sequence[Number]]


def _rows(values: Rows, name: str, G: int, T: int) -> list[list[Fraction]]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) != G:
        raise ValueError(f"{name} must be [G][T] with G = {G} responses (one group)")
    out = []
    for i, row in enumerate(values):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != T:
            raise ValueError(f"{name}[{i}] must hold T = {T} values, like mask[0]")
        out.append(to_fractions(row, f"{name}[{i}]") if T else [])
    return out


def _check(
    rewards: Sequence[Number], mask: Rows, logprobs: Rows, sum_pi_squared: Rows, eps: float
) -> tuple[list[Fraction], list[list[bool]], list[list[Fraction]], list[list[Fraction]]]:
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < math.inf:
        raise ValueError(f"optimal_token_baseline needs a finite eps >= 0; got eps={eps!r}")
    r = to_fractions(rewards)
    G = len(r)
    if isinstance(mask, str | bytes) or not isinstance(mask, Sequence) or len(mask) != G:
        raise ValueError(f"mask must be [G][T] with G = {G} responses, one per reward")
    T = len(mask[0])
    ints = [[int(x) if isinstance(x, bool) else x for x in row] for row in mask]
    if any(x not in (0, 1) for row in _rows(ints, "mask", G, T) for x in row):
        raise ValueError("mask must be boolean or hold only 0 and 1")
    m = [[x == 1 for x in row] for row in ints]
    lp = _rows(logprobs, "logprobs", G, T)
    s = _rows(sum_pi_squared, "sum_pi_squared", G, T)
    for i in range(G):
        for t in range(T):
            if m[i][t] and lp[i][t] > SLACK:
                raise ValueError(
                    f"logprobs must be log-probabilities (<= 0); response {i} has "
                    f"{float(lp[i][t])} at token {t}"
                )
            if m[i][t] and not -SLACK <= s[i][t] <= 1 + SLACK:
                raise ValueError(
                    f"sum_pi_squared must lie in [0, 1] (Σ_v π(v)²); response {i} has "
                    f"{float(s[i][t])} at token {t}"
                )
    return r, m, lp, s


def path_weights(
    mask: Sequence[Sequence[bool]],
    logprobs: Sequence[Sequence[Fraction]],
    sum_pi_squared: Sequence[Sequence[Fraction]],
    *,
    cumulative: bool = True,
) -> list[list[Fraction]]:
    """W_{i,t} = Σ_{j ≤ t} m_{i,j} max(0, 1 − 2π_{i,j} + Σπ²_{i,j}) (arXiv:2602.07078, the
    logit-gradient proxy and its cumulative sum), or the single term when not ``cumulative``;
    ``[G][T]``, and 0 at padding."""
    W: list[list[Fraction]] = []
    for m_i, lp_i, s_i in zip(mask, logprobs, sum_pi_squared, strict=True):
        row, running = [], Fraction(0)
        for m_it, lp_it, s_it in zip(m_i, lp_i, s_i, strict=True):
            w_it = max(Fraction(0), 1 - 2 * exp(lp_it) + s_it) if m_it else Fraction(0)
            running = running + w_it if cumulative else w_it
            row.append(running if m_it else Fraction(0))
        W.append(row)
    return W


def optimal_token_baseline(
    rewards: Sequence[Number],
    mask: Rows,
    logprobs: Rows,
    sum_pi_squared: Rows,
    *,
    eps: float = 1e-8,
    zero_tail: bool = True,
    cumulative: bool = True,
) -> list[list[Fraction]]:
    """A_{i,t} = (R_i − B_t)·m_{i,t} for one group (``rewards [G]``, the rest ``[G][T]``),
    B_t = Σ_i R_i W_{i,t} / (Σ_i W_{i,t} + ε) over the responses valid at t
    (arXiv:2602.07078, the optimal token baseline B*_t = E[G_t W_t]/E[W_t] with the group as the
    sample; the outcome reward R_i is the return G_t of every token of response i)."""
    r, m, lp, s = _check(rewards, mask, logprobs, sum_pi_squared, eps)
    W = path_weights(m, lp, s, cumulative=cumulative)
    return from_weights(r, m, W, eps=Fraction(eps), zero_tail=zero_tail)


def from_weights(
    rewards: Sequence[Fraction],
    mask: Sequence[Sequence[bool]],
    W: Sequence[Sequence[Fraction]],
    *,
    eps: Fraction,
    zero_tail: bool,
) -> list[list[Fraction]]:
    """The advantages ``[G][T]`` of one group from its path weights ``W [G][T]`` (any weights
    >= 0: the exact-enumeration tests pass W computed from rational π)."""
    r, m = rewards, mask
    G, T = len(r), len(m[0])
    B = [Fraction(0)] * T
    if G >= 2:
        for t in range(T):
            num = sum((r[i] * W[i][t] for i in range(G) if m[i][t]), Fraction(0))
            den = sum((W[i][t] for i in range(G) if m[i][t]), Fraction(0)) + eps
            B[t] = num / den if den != 0 else Fraction(0)
    baselines = [list(B) for _ in range(G)]
    lengths = [sum(row) for row in m]
    ranked = sorted(lengths)
    if zero_tail and G >= 2 and ranked[-1] > ranked[-2]:
        # verl's handle_zero_tail: past the second-longest length only the longest response is
        # left, and a baseline made of its own reward would cancel its advantage.
        longest = lengths.index(ranked[-1])
        for t in range(ranked[-2], T):
            baselines[longest][t] = Fraction(0)
    return [
        [(r[i] - baselines[i][t]) if m[i][t] else Fraction(0) for t in range(T)] for i in range(G)
    ]


__all__ = public(globals())  # every public function and class above
