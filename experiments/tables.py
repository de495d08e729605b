"""Markdown shared by the experiments' summaries, the choosing page and the README's generated
blocks: table rows, and the splice of a block between its markers."""

from __future__ import annotations

from typing import Any

MSE_HEAD = (
    "| MSE vs V_MC [95% CI] | noise-corrected MSE [95% CI] | Spearman | spread (V̂ − group mean) |"
)


def mse_rows(first: str, estimators: dict[str, Any]) -> list[str]:
    """The values benchmark's table, one row per baseline: MSE against V_MC with its bootstrap
    interval, the noise-corrected MSE, Spearman's ρ and the spread against the group mean.
    ``first`` heads the name column."""
    lines = [f"| {first} {MSE_HEAD}", "|---|---|---|---|---|"]
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


def splice(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from the marker ``begin`` to the marker ``end`` (both included)
    replaced by ``block`` (which carries the markers itself)."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + block + text[stop:]
