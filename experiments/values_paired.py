"""The values table's paired comparisons: each baseline's MSE against V_MC minus the group
mean's, on the same states, with a 95% bootstrap interval that resamples problems (a problem's
states share its rollouts, so they are resampled together). Computed from the per-state rows
in ``docs/results/values.json``; the per-baseline intervals beside them cannot show this, as
the baselines' errors on one state are correlated."""

from __future__ import annotations

from typing import Any

import numpy as np

REFERENCE = "group_mean"
REPS = 4000


def paired(
    rows: list[dict[str, Any]], key: str, reps: int = REPS, seed: int = 0
) -> tuple[float, float, float]:
    """MSE of ``key`` minus MSE of the group mean against ``v_mc``, over ``rows`` (one per state,
    each with ``problem``), and its 95% percentile interval resampling problems."""
    problems = sorted({r["problem"] for r in rows})
    index = {p: i for i, p in enumerate(problems)}
    which = np.array([index[r["problem"]] for r in rows])  # [S]: each state's problem
    truth = np.array([r["v_mc"] for r in rows])
    d = (np.array([r[key] for r in rows]) - truth) ** 2 - (
        np.array([r[REFERENCE] for r in rows]) - truth
    ) ** 2  # [S]: squared-error difference per state
    per = np.bincount(which, weights=d, minlength=len(problems))  # [P]: summed per problem
    size = np.bincount(which, minlength=len(problems))  # [P]: states per problem
    pick = np.random.default_rng(seed).integers(0, len(problems), (reps, len(problems)))
    boot = per[pick].sum(axis=1) / size[pick].sum(axis=1)  # mean over the resampled states
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def word(lo: float, hi: float) -> str:
    """An MSE difference's verdict: lower or higher only when its whole interval is."""
    return "lower" if hi < 0 else "higher" if lo > 0 else "no measured difference"


def table(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """Markdown: one row per baseline but the group mean, its paired MSE difference."""
    lines = [
        f"Paired: each baseline's MSE minus `{REFERENCE}`'s on the same states, 95% bootstrap "
        f"interval resampling problems ({REPS} resamples); lower or higher only when the whole "
        "interval is:",
        "",
        f"| baseline − {REFERENCE} | MSE difference [95%] | verdict |",
        "|---|---|---|",
    ]
    for key in keys:
        if key != REFERENCE:
            mean, lo, hi = paired(rows, key)
            lines.append(f"| {key} | {mean:+.4f} [{lo:+.4f}, {hi:+.4f}] | {word(lo, hi)} |")
    return lines
