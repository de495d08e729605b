"""The values benchmark's tables: each baseline's MSE against V_MC with its interval, and the
paired comparisons: each baseline's MSE minus the group mean's, on the same states, with a 95%
bootstrap interval that resamples problems (a problem's states share its rollouts, so they are
resampled together). Computed from the per-state rows (``docs/results/values.json`` in the
repository); the per-baseline intervals beside them cannot show this, as the baselines' errors
on one state are correlated."""

from __future__ import annotations

from typing import Any

import numpy as np

from advest.experiments.stats import REPS, cluster_bootstrap, verdict


def mse_rows(first: str, estimators: dict[str, Any]) -> list[str]:
    """The values benchmark's table, one row per baseline: MSE against V_MC with its bootstrap
    interval, the noise-corrected MSE, Spearman's ρ and the spread against the group mean.
    ``first`` heads the name column."""
    head = (
        "MSE vs V_MC [95% CI] | noise-corrected MSE [95% CI] | Spearman | spread (V̂ − group mean)"
    )
    lines = [f"| {first} | {head} |", "|---|---|---|---|---|"]
    for name, v in estimators.items():
        lo, hi = v["mse_95ci"]
        got = v.get("mse_noise_corrected_95ci")  # absent in a record made before it was kept
        nc = "" if got is None else f" [{got[0]:.4f}, {got[1]:.4f}]"
        lines.append(
            f"| {name} | {v['mse']:.4f} [{lo:.4f}, {hi:.4f}] | "
            f"{v['mse_noise_corrected']:.4f}{nc} | "
            f"{v['spearman']:.3f} | {v['spread_vs_group_mean']:.3f} |"
        )
    return lines


REFERENCE = "group_mean"
HONEST = "loo_mean"
"""The leave-one-out group mean: unlike ``group_mean`` it does not see the state's own return,
so a baseline found "higher" than the group mean is compared with it too."""


def paired(
    rows: list[dict[str, Any]], key: str, reps: int = REPS, seed: int = 0, ref: str = REFERENCE
) -> tuple[float, float, float]:
    """MSE of ``key`` minus MSE of ``ref`` (the group mean) against ``v_mc``, over ``rows`` (one
    per state, each with ``problem``), and its 95% percentile interval resampling problems."""
    truth = np.array([r["v_mc"] for r in rows])
    d = (np.array([r[key] for r in rows]) - truth) ** 2 - (
        np.array([r[ref] for r in rows]) - truth
    ) ** 2  # [S]: squared-error difference per state
    lo, hi = cluster_bootstrap(d, np.array([r["problem"] for r in rows]), reps, seed)
    return float(d.mean()), lo, hi


def word(lo: float, hi: float) -> str:
    """An MSE difference's verdict: lower or higher only when its whole interval is."""
    return verdict(lo, hi, ("higher", "lower"))


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


def all_zero(row: dict[str, Any], keys: list[str]) -> bool:
    """A state where V_MC and every baseline are 0 (no continuation and no return passed): every
    baseline's error there is 0, so it dilutes a difference without informing it."""
    return row["v_mc"] == 0 and all(row[k] == 0 for k in keys)


def honest_table(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """Markdown: each baseline's paired MSE difference from ``loo_mean``, over every state and
    over the states that are not all zero."""
    rest = [r for r in rows if not all_zero(r, keys)]
    lines = [
        f"Paired against `{HONEST}` (which, unlike `{REFERENCE}`, leaves the state's own return "
        f"out): each baseline's MSE minus `{HONEST}`'s on the same states, the same bootstrap; "
        f"over all {len(rows)} states, of which {len(rows) - len(rest)} are all zero (V_MC and "
        f"every baseline 0), and over the {len(rest)} others:",
        "",
        f"| baseline − {HONEST} | all {len(rows)} states [95%] | verdict | without the all-zero "
        "states [95%] | verdict |",
        "|---|---|---|---|---|",
    ]
    for key in keys:
        if key == HONEST:
            continue
        cells = []
        for part in (rows, rest):
            mean, lo, hi = paired(part, key, ref=HONEST)
            cells.append(f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}] | {word(lo, hi)}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines
