"""The pass/fail grid's statistics (``advest experiment grid``): the per-run files read back, an
arm's paired difference from the reference over seeds and prompts with its Holm-corrected
verdict, and the equivalence test of whether training pass@1 has levelled off (the bootstrap
and Holm's correction themselves: ``experiments/stats.py``). ``report`` words them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from advest.experiments.stats import (
    NO_DIFFERENCE,
    holm,
    holm_adjusted,
    p_value,
    pass_at,
    resampled,
    seed_bootstrap,
    verdict,
)

REFERENCE = "grpo"
"""The arm every other arm is compared with."""
MIN_SEEDS = 2
"""Fewer common seeds than this: no verdict (one seed cannot show seed-to-seed spread)."""

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
