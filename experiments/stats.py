"""The statistics every experiment shares: unbiased pass@k (Chen et al. 2021, arXiv:2107.03374
eq. 1), bootstrap intervals (paired over seeds and prompts, over seeds alone, over clusters
such as a problem's states), the two-sided bootstrap p-value, Holm's correction and the verdict
an interval gives. Each experiment's own tests (the grid's comparison with its reference, the
bandit's fits) build on these.

Notation: ``S`` seeds, ``P`` prompts (or problems), ``R`` bootstrap resamples."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import Any

import numpy as np

REPS = 4000
"""Bootstrap resamples."""
ALPHA = 0.05
"""The family-wise error rate each declared family is held to (Holm 1979)."""
NO_DIFFERENCE = "no measured difference"


def pass_at(counts: list[int], n: int, k: int) -> np.ndarray:
    """Unbiased pass@k of each prompt from its pass count of ``n`` samples: ``[P]``. Raises
    ``ValueError`` for k > n (no estimate exists)."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples; got n = {n}")
    return np.array([1 - comb(n - c, k) / comb(n, k) for c in counts])


def resampled(d: np.ndarray, reps: int = REPS, seed: int = 0) -> np.ndarray:
    """``[R]`` bootstrap means of ``d`` ``[S, P]``, resampling seeds (rows) and then prompts
    (columns) with replacement; each resample weights every cell by how often its seed and its
    prompt were drawn."""
    S, P = d.shape
    rng = np.random.default_rng(seed)
    ws = rng.multinomial(S, np.full(S, 1 / S), size=reps)  # [R, S]
    wp = rng.multinomial(P, np.full(P, 1 / P), size=reps)  # [R, P]
    return np.asarray(np.einsum("rs,sp,rp->r", ws, d, wp) / (S * P))  # [R]


def paired_bootstrap(d: np.ndarray, reps: int = REPS, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``d`` ``[S, P]`` and its 95% percentile interval (``resampled``)."""
    lo, hi = np.percentile(resampled(d, reps, seed), [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def seed_bootstrap(x: np.ndarray, reps: int = REPS, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``x`` ``[S]`` (one value per seed) and its 95% interval resampling seeds."""
    S = len(x)
    pick = np.random.default_rng(seed).integers(0, S, size=(reps, S))
    lo, hi = np.percentile(x[pick].mean(axis=1), [2.5, 97.5])
    return float(x.mean()), float(lo), float(hi)


def cluster_bootstrap(
    x: np.ndarray, clusters: np.ndarray, reps: int = REPS, seed: int = 0
) -> tuple[float, float]:
    """95% percentile interval of the mean of ``x`` ``[N]``, resampling the clusters (``[N]``
    labels: a problem's states, which share its rollouts) with their rows together."""
    keys, which = np.unique(clusters, return_inverse=True)  # which [N]: each row's cluster
    total = np.bincount(which, weights=x, minlength=len(keys))  # [P]: summed per cluster
    size = np.bincount(which, minlength=len(keys))  # [P]: rows per cluster
    pick = np.random.default_rng(seed).integers(0, len(keys), (reps, len(keys)))  # [R, P]
    lo, hi = np.percentile(total[pick].sum(axis=1) / size[pick].sum(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def p_value(stats: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a mean difference of 0: twice the smaller share of the
    resampled means on either side of 0 (at most 1). Up to the percentiles' interpolation it is
    below 0.05 when the 95% percentile interval excludes 0, and only then."""
    low, high = float(np.mean(stats <= 0)), float(np.mean(stats >= 0))
    return min(1.0, 2 * min(low, high))


def holm(ps: dict[Any, float], alpha: float = ALPHA) -> dict[Any, bool]:
    """Holm's step-down procedure (Holm 1979, Scand. J. Statist. 6:65-70): sort the family's
    p-values, reject the i-th smallest (i = 1..m) while p ≤ alpha / (m − i + 1), stop at the
    first that is not. Key → whether its null is rejected; the family-wise error rate is at
    most ``alpha`` whatever the dependence between the tests."""
    m, out = len(ps), {key: False for key in ps}
    for i, key in enumerate(sorted(ps, key=lambda key: ps[key])):
        if ps[key] > alpha / (m - i):
            break
        out[key] = True
    return out


def holm_adjusted(ps: dict[Any, float]) -> dict[Any, float]:
    """Holm-adjusted p-values: max over j ≤ i of (m − j + 1)·p_(j), capped at 1; a key's null
    is rejected at level alpha exactly when its adjusted p-value is at most alpha."""
    m, out, run = len(ps), {}, 0.0
    for i, key in enumerate(sorted(ps, key=lambda key: ps[key])):
        run = max(run, min(1.0, (m - i) * ps[key]))
        out[key] = run
    return out


def cell(v: Sequence[float], sign: str = "") -> str:
    """An estimate and its interval, ``(mean, lo, hi)``, as ``mean [lo, hi]`` at three decimals
    (``sign="+"``: signed, as a difference is written)."""
    return f"{v[0]:{sign}.3f} [{v[1]:{sign}.3f}, {v[2]:{sign}.3f}]"


def verdict(lo: float, hi: float, words: tuple[str, str] = ("above", "below")) -> str:
    """``words[0]`` when the interval lies above 0, ``words[1]`` below, else "no measured
    difference"."""
    return words[0] if lo > 0 else words[1] if hi < 0 else NO_DIFFERENCE
