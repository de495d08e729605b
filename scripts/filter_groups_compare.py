"""Dynamic sampling on the embedded design, paired: ``grpo`` against ``grpo_filter`` (grpo with
``--filter_groups``), the same seeds and one held-out set (``advest experiment grid --design
embedded --arms grpo grpo_filter --results docs/results/grid_filter``). Its section of the
page the grids generate (``docs/choosing.md``, ``scripts/choosing.py``), from the per-run files:
steps, prompts and samples drawn, held-out pass@1 and pass@8 of each arm, and the paired
difference (the grid's bootstrap over seeds and prompts, ``experiments/stats.py``) with its
verdict; and, where ``docs/results/grid_filter_samples`` holds grpo trained on as many samples
(``--steps 392``), the filtered arm against that too. ``python scripts/filter_groups_compare.py``
prints it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from advest.experiments.grid import stats as grid_stats
from advest.experiments.stats import pass_at

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("docs") / "results" / "grid_filter"
MATCHED = Path("docs") / "results" / "grid_filter_samples"
"""Under the repository's root."""
ARM = "grpo_filter"


def drawn(record: dict[str, Any], design: dict[str, Any]) -> float:
    """Prompts sampled over the run: the logged count per step, or the step's own prompts."""
    per_step = record.get("drawn_prompts") or []
    if any(per_step):
        return float(sum(per_step))
    return float(design["steps"] * design["prompts"])


def render(grid: dict[str, Any], matched: dict[str, Any] | None = None) -> str:
    """The page; ``matched``: grpo trained for as many samples as the filtered arm drew (its
    own design folder, ``--steps`` raised), compared with the filtered arm the same way."""
    design, runs = grid["design"], grid["runs"]
    G = design["group_size"]
    seeds = sorted(set(runs.get(ARM, {})) & set(runs.get(grid_stats.REFERENCE, {})))
    lines = [
        "## Dynamic sampling (`--filter_groups`) on the embedded design, paired",
        "",
        f"From `docs/results/grid_filter/` (`scripts/filter_groups_compare.py`). Design: "
        f"{design['steps']} steps of "
        f"{design['prompts']} prompts × G = {G}, pass/fail reward, seeds {seeds}; "
        f"held-out {design['eval_prompts']} prompts × {design['eval_samples']} samples.",
        "",
        "| arm | steps | prompts drawn (mean per run) | samples drawn | held-out pass@1 | "
        "held-out pass@8 |",
        "|---|---|---|---|---|---|",
    ]
    for arm in (grid_stats.REFERENCE, ARM):
        records = [runs[arm][s] for s in seeds]
        prompts = float(np.mean([drawn(r, design) for r in records]))
        at = {k: np.mean([pass_at(r["after"], r["samples"], k).mean()
                          for r in records]) for k in (1, 8)}  # fmt: skip
        steps = len(records[0]["train_pass1"]) if records else 0
        lines.append(f"| {arm} | {steps} | {prompts:.0f} | {prompts * G:.0f} | "
                     f"{at[1]:.3f} | {at[8]:.3f} |")  # fmt: skip
    lines += ["", f"Paired difference, {ARM} − {grid_stats.REFERENCE} (95% bootstrap interval "
              "over seeds and prompts):", ""]  # fmt: skip
    lines += _differences(runs)
    if matched is not None and grid_stats.REFERENCE in matched["runs"]:
        steps = matched["design"]["steps"]
        other = {grid_stats.REFERENCE: matched["runs"][grid_stats.REFERENCE], ARM: runs[ARM]}
        lines += ["", f"Against grpo trained {steps} steps ({steps * design['prompts'] * G} "
                  f"samples, about what {ARM} drew in {design['steps']}; chosen after the "
                  "comparison above was seen, so exploratory until it replicates; on these 64 "
                  "training rows longer training lowers held-out pass@k):", ""]  # fmt: skip
        lines += _differences(other)
    return "\n".join(lines) + "\n"


def _differences(runs: dict[str, Any]) -> list[str]:
    lines = []
    for k in (1, 8):
        c = grid_stats.compare(runs, ARM, k)
        if "mean" not in c:
            lines.append(f"- pass@{k}: {c['verdict']}")
            continue
        lines.append(f"- pass@{k}: {c['mean']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}] over "
                     f"{c['seeds']} seeds: {c['verdict']}")  # fmt: skip
    return lines


def section(root: Path) -> str:
    """The page's section from ``root``'s results ("": no runs yet)."""
    grid = grid_stats.load(root / RESULTS).get("embedded")
    return "" if grid is None else render(grid, grid_stats.load(root / MATCHED).get("embedded"))


def main(argv: list[str]) -> int:
    text = section(ROOT)
    if not text:
        print(f"no results under {ROOT / RESULTS}/embedded", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
