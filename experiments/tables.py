"""Markdown table rows shared by the experiments' summaries and the choosing page."""

from __future__ import annotations

from typing import Any

MSE_HEAD = "| MSE vs V_MC [95% CI] | noise-corrected MSE | Spearman | spread (V̂ − group mean) |"


def mse_rows(first: str, estimators: dict[str, Any]) -> list[str]:
    """The values benchmark's table, one row per baseline: MSE against V_MC with its bootstrap
    interval, the noise-corrected MSE, Spearman's ρ and the spread against the group mean.
    ``first`` heads the name column."""
    lines = [f"| {first} {MSE_HEAD}", "|---|---|---|---|---|"]
    for name, v in estimators.items():
        lo, hi = v["mse_95ci"]
        lines.append(
            f"| {name} | {v['mse']:.4f} [{lo:.4f}, {hi:.4f}] | {v['mse_noise_corrected']:.4f} | "
            f"{v['spearman']:.3f} | {v['spread_vs_group_mean']:.3f} |"
        )
    return lines
