"""The pass/fail grid's statistics (``advest experiment grid``): the per-run files read back,
unbiased pass@k per prompt (Chen et al. 2021, arXiv:2107.03374 eq. 1), the paired bootstrap of
an arm's difference from the reference over seeds and prompts with its verdict, and the
equivalence test of whether training pass@1 has levelled off. ``grid_report`` words them."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path
from typing import Any

import numpy as np

REFERENCE = "grpo"
"""The arm every other arm is compared with."""
MIN_SEEDS = 2
"""Fewer common seeds than this: no verdict (one seed cannot show seed-to-seed spread)."""

REPS = 4000
"""Bootstrap resamples."""
FLAT = 0.02
"""Training pass@1 has levelled off when the 95% interval of its rise from one quarter of the
steps to the next lies within ±FLAT: an equivalence test, so "levelled off" is measured (a rise
too small to matter), not read from an interval that merely contains 0."""


def load(folder: Path) -> dict[str, Any]:
    """``{design: {**design.json, "runs": {arm: {seed: record}}}}`` of every design
    folder under ``folder`` that has a ``design.json`` (absent folder: empty)."""
    out: dict[str, Any] = {}
    for d in sorted(p for p in folder.glob("*/design.json")) if folder.is_dir() else []:
        runs: dict[str, dict[int, Any]] = {}
        for f in sorted(d.parent.glob("*/seed*.json")):
            record = json.loads(f.read_text())
            runs.setdefault(record["arm"], {})[int(record["seed"])] = record
        out[d.parent.name] = {**json.loads(d.read_text()), "runs": runs}
    return out


def pass_at(counts: list[int], n: int, k: int) -> np.ndarray:
    """Unbiased pass@k of each prompt from its pass count of ``n`` samples: ``[P]``. Raises
    ``ValueError`` for k > n (no estimate exists)."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples; got n = {n}")
    return np.array([1 - comb(n - c, k) / comb(n, k) for c in counts])


def differences(runs: dict[str, dict[int, Any]], arm: str, k: int, ref: str = REFERENCE
                ) -> np.ndarray:  # fmt: skip
    """``[S, P]`` pass@k of ``arm`` minus ``ref``'s, on their common seeds."""
    seeds = sorted(set(runs[arm]) & set(runs.get(ref, {})))
    rows = [
        pass_at(runs[arm][s]["after"], runs[arm][s]["samples"], k)
        - pass_at(runs[ref][s]["after"], runs[ref][s]["samples"], k)
        for s in seeds
    ]
    return np.array(rows).reshape(len(seeds), -1)


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


def p_value(stats: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a mean difference of 0: twice the smaller share of the
    resampled means on either side of 0 (at most 1). Up to the percentiles' interpolation it is
    below 0.05 when the 95% percentile interval excludes 0, and only then."""
    low, high = float(np.mean(stats <= 0)), float(np.mean(stats >= 0))
    return min(1.0, 2 * min(low, high))


ALPHA = 0.05
"""The family-wise error rate each declared family is held to (Holm 1979)."""


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


def verdict(lo: float, hi: float) -> str:
    """ "above" / "below" when the interval excludes 0, else "no measured difference"."""
    return "above" if lo > 0 else "below" if hi < 0 else "no measured difference"


def compare(runs: dict[str, dict[int, Any]], arm: str, k: int, ref: str = REFERENCE
            ) -> dict[str, Any]:  # fmt: skip
    """``arm`` against ``ref`` at pass@k: seeds, mean difference, interval, two-sided bootstrap
    p-value and the uncorrected verdict of the 95% interval."""
    d = differences(runs, arm, k, ref)
    if d.shape[0] < MIN_SEEDS:
        return {"seeds": d.shape[0], "verdict": f"not compared (fewer than {MIN_SEEDS} seeds)"}
    stats = resampled(d)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return {"seeds": d.shape[0], "mean": float(d.mean()), "lo": float(lo), "hi": float(hi),
            "p": p_value(stats), "verdict": verdict(lo, hi)}  # fmt: skip


def corrected(found: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """A declared family of comparisons (key → ``compare``'s record) with Holm's correction:
    each compared record gains ``p_holm`` and its ``verdict`` becomes above / below only where
    Holm rejects (the sign from the mean), else "no measured difference"; the uncorrected
    verdict stays as ``verdict_95``. Records not compared pass through."""
    ps = {key: c["p"] for key, c in found.items() if "p" in c}
    adjusted, rejected = holm_adjusted(ps), holm(ps)
    out = {}
    for key, c in found.items():
        if key not in ps:
            out[key] = c
            continue
        word = ("above" if c["mean"] > 0 else "below") if rejected[key] else NO_DIFFERENCE
        out[key] = {**c, "p_holm": adjusted[key], "verdict_95": c["verdict"], "verdict": word}
    return out


NO_DIFFERENCE = "no measured difference"


def seed_bootstrap(x: np.ndarray, reps: int = REPS, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``x`` ``[S]`` (one value per seed) and its 95% interval resampling seeds."""
    S = len(x)
    pick = np.random.default_rng(seed).integers(0, S, size=(reps, S))
    lo, hi = np.percentile(x[pick].mean(axis=1), [2.5, 97.5])
    return float(x.mean()), float(lo), float(hi)


def levels(records: list[dict[str, Any]]) -> str:
    """Whether training pass@1 still rises: the last quarter of the steps against the quarter
    before it, per seed, every step and seed used, interval over seeds."""
    T = min(len(r["train_pass1"]) for r in records)
    q = T // 4
    if len(records) < MIN_SEEDS or q < 1:
        return "not judged (too few seeds or steps)"
    curves = np.array([r["train_pass1"][:T] for r in records])  # [S, T]
    rise = curves[:, T - q :].mean(axis=1) - curves[:, T - 2 * q : T - q].mean(axis=1)  # [S]
    mean, lo, hi = seed_bootstrap(rise)
    flat = lo > -FLAT and hi < FLAT
    word = ("levelled off" if flat else "still rising" if lo > 0 else "falling" if hi < 0
            else "not determined")  # fmt: skip
    return f"{word} ({mean:+.3f} [{lo:+.3f}, {hi:+.3f}])"


def from_start(records: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """One arm's held-out pass@k after training minus before (the shared starting weights'),
    ``records`` its runs: mean, interval (paired bootstrap over seeds, then prompts), verdict."""
    if len(records) < MIN_SEEDS:
        return {"verdict": f"not compared (fewer than {MIN_SEEDS} seeds)"}
    d = np.array([pass_at(r["after"], r["samples"], k) - pass_at(r["before"], r["samples"], k)
                  for r in records])  # fmt: skip
    stats = resampled(d)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return {"mean": float(d.mean()), "lo": float(lo), "hi": float(hi), "p": p_value(stats),
            "verdict": verdict(lo, hi)}  # fmt: skip
