"""Hista: hidden-state value estimation, literally, for one group.

Source: Chen, Dong, Tian, Yang, Chen, Chen, Cheng, *Hista and Numca: Estimate State Value
Effectively for LLM Reinforcement Learning*, arXiv:2605.29782: Fig. 4 (pipeline: last-layer hidden
states → pooled state representation → MinDist → weighted average of the other rollouts' returns →
baseline) and App. A (MinDistance). Everything beyond those facts is advest's reading, pinned in
spec/hista.md:

    P^i        = means of windows of w tokens of rollout i (final partial block kept)
    k(t)       = ⌊t/w⌋                 (complete blocks that end before token t)
    MD(X₁, X₂) = Σ_{x ∈ X₁} min_{y ∈ X₂} ‖x − y‖₂
    d_ij(k)    = MD(P^i_{1:k}, P^j)/k   (+∞ when rollout j has no blocks)
    τ          = tau_scale · median_{j ≠ i, d finite} d_ij(k)   (midpoint median)
    w_ij(k)    = softmax_j(−d_ij(k)/τ)  (uniform over the finite d when τ = 0)
    V̂_i(0)     = (1/(G−1)) Σ_{j≠i} R_j,   V̂_i(k) = Σ_j w_ij(k) R_j,   A_{i,t} = R_i − V̂_i(k(t))

Block means, squared distances, medians of rationals and the leave-one-out mean are exact
``Fraction``s; the square roots (``reference._exact.sqrt``, 60 digits, exact on perfect squares)
and the exponentials (50 digits) are the only inexact steps. So MD(X, X) = 0 exactly, ties are
exact, and a result is accurate far beyond float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ._exact import Number, exp, mean, public, sqrt, to_fractions

Vector = list[Fraction]
Rollout = Sequence[Sequence[Number]]  # one rollout's valid response tokens, each a d-vector


def _vectors(rollout: Rollout, j: int) -> list[Vector]:
    """Rollout j's token vectors as exact rationals; a NaN or infinity names rollout and token."""
    out = []
    for t, h in enumerate(rollout):
        if any(isinstance(x, float) and not math.isfinite(x) for x in h):
            raise ValueError(f"hidden has a non-finite value in group 0 (sample {j}, token {t})")
        out.append(to_fractions(h, f"hidden[{j}][{t}]"))
    return out


def pool(tokens: Sequence[Vector], w: int) -> list[Vector]:
    """Block means of non-overlapping windows [b·w, (b+1)·w), including a final partial block
    (arXiv:2605.29782, Fig. 4: "pools them to state representation")."""
    blocks = []
    for start in range(0, len(tokens), w):
        window = tokens[start : start + w]
        blocks.append([sum(col, Fraction(0)) / len(window) for col in zip(*window, strict=True)])
    return blocks


def _squared(x: Vector, y: Vector) -> Fraction:
    return sum(((a - b) ** 2 for a, b in zip(x, y, strict=True)), Fraction(0))


def min_distance(x1: Sequence[Vector], x2: Sequence[Vector]) -> Fraction:
    """MD(X₁, X₂) = Σ_{x ∈ X₁} min_{y ∈ X₂} ‖x − y‖₂ (arXiv:2605.29782, App. A, MinDistance).

    The minimum is taken over exact squared distances (the square root is monotone), so only the
    chosen distance is rounded. Raises ``ValueError`` when X₂ is empty and X₁ is not.
    """
    if x1 and not x2:
        raise ValueError("min_distance needs at least one row in X₂ (no blocks to match)")
    return sum((sqrt(min(_squared(x, y) for y in x2)) for x in x1), Fraction(0))


def _median(values: Sequence[Fraction]) -> Fraction:
    """The midpoint median (the mean of the two middle values of an even count)."""
    s = sorted(values)
    n = len(s)
    return (s[(n - 1) // 2] + s[n // 2]) / 2


def _weights(d: Sequence[Fraction | None], tau_scale: Fraction) -> list[Fraction]:
    """softmax(−d/τ) over the finite d (``None`` = +∞ gets weight 0), τ = tau_scale · median;
    uniform over the finite d when τ = 0; uniform over all when none is finite."""
    finite = [x for x in d if x is not None]
    if not finite:
        return [Fraction(1, len(d))] * len(d)
    tau = tau_scale * _median(finite)
    if tau == 0:
        return [Fraction(int(x is not None), len(finite)) for x in d]
    nearest = min(finite)  # shift the logits so that the largest term is exactly 1
    e = [Fraction(0) if x is None else exp(-(x - nearest) / tau) for x in d]
    total = sum(e, Fraction(0))
    return [x / total for x in e]


def block_distances(
    hidden: Sequence[Rollout], i: int, k: int, *, w: int = 16
) -> list[Fraction | None]:
    """d_ij(k) = MD(P^i_{1:k}, P^j)/k for every j ≠ i, in order of j; ``None`` stands for +∞ (a
    rollout j without blocks). ``k`` counts complete blocks of rollout i, k >= 1."""
    if k < 1 or len(hidden[i]) < k * w:
        raise ValueError(f"rollout {i} has fewer than k={k} complete blocks of w={w} tokens")
    blocks = [pool(_vectors(h, j), w) for j, h in enumerate(hidden)]
    prefix = blocks[i][:k]
    return [min_distance(prefix, p) / k if p else None for j, p in enumerate(blocks) if j != i]


def _check(hidden: Sequence[Rollout], r: Sequence[Fraction], w: int, tau_scale: float) -> None:
    if len(hidden) != len(r):
        raise ValueError(f"hidden has {len(hidden)} rollouts but rewards has {len(r)}")
    if len(r) < 2:
        raise ValueError(f"hista needs G >= 2 (there are no other rollouts); got G={len(r)}")
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise ValueError(f"hista needs an integer block width w >= 1; got w={w!r}")
    if not math.isfinite(tau_scale) or tau_scale <= 0:
        raise ValueError(f"hista needs a finite tau_scale > 0; got tau_scale={tau_scale!r}")
    if all(len(h) == 0 for h in hidden):
        raise ValueError("the mask leaves group 0 without valid tokens")
    dims = {len(v) for h in hidden for v in h}
    if len(dims) != 1 or 0 in dims:
        raise ValueError(f"hidden states must all have one dimension d >= 1; got {sorted(dims)}")


def state_values(
    hidden: Sequence[Rollout],
    rewards: Sequence[Number],
    *,
    w: int = 16,
    tau_scale: float = 1.0,
) -> list[list[Fraction]]:
    """V̂_i(k(t)) for every valid token t of every rollout i; ``hidden[i]`` lists rollout i's
    valid response tokens, each a d-vector of last-layer hidden states."""
    r = to_fractions(rewards)
    _check(hidden, r, w, tau_scale)
    g = len(r)
    blocks = [pool(_vectors(h, j), w) for j, h in enumerate(hidden)]
    values = []
    for i, h in enumerate(hidden):
        others = [j for j in range(g) if j != i]
        by_k: dict[int, Fraction] = {0: mean([r[j] for j in others])}  # the LOO mean
        row = []
        for t in range(len(h)):
            k = t // w
            if k not in by_k:
                prefix = blocks[i][:k]  # complete blocks only: k·w <= t < L_i
                d = [min_distance(prefix, blocks[j]) / k if blocks[j] else None for j in others]
                weights = _weights(d, Fraction(tau_scale))
                by_k[k] = sum(
                    (wt * r[j] for wt, j in zip(weights, others, strict=True)), Fraction(0)
                )
            row.append(by_k[k])
        values.append(row)
    return values


def hista(
    hidden: Sequence[Rollout],
    rewards: Sequence[Number],
    *,
    w: int = 16,
    tau_scale: float = 1.0,
) -> list[list[Fraction]]:
    """A_{i,t} = R_i − V̂_i(⌊t/w⌋) for every valid token t of every rollout i (no std
    normalisation); ``hidden[i]`` lists rollout i's valid response tokens, each a d-vector."""
    r = to_fractions(rewards)
    values = state_values(hidden, rewards, w=w, tau_scale=tau_scale)
    return [[r_i - v for v in row] for r_i, row in zip(r, values, strict=True)]


__all__ = public(globals())  # every public function and class above
