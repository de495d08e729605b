"""``python -m advest.experiments.grid.pilot RESULTS``: a finished pilot's numbers and its
declared decision rule (``docs/results/designs/<pilot>.toml``; the rule of
``smollm2_products12_pilot``: the grid runs if grpo's held-out pass@8 after training is above
its start and below ``CEILING``). Prints held-out pass@1 and pass@8 before and after per run,
with the wall time, and writes nothing. Exit status 0 when the rule is met, 1 when not, 2 when
no run has finished: so a script can start the grid only after it (``scripts/grid.py land``
copies a pilot's files into the repository)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from advest.experiments.stats import pass_at

CEILING = 0.9
"""The rule's bound: the grid's question is pass@8, which must stay clearly below 1."""


def summary(record: dict[str, Any]) -> dict[str, float]:
    """Held-out pass@1 and pass@8 before and after (means over prompts), wall time, step time."""
    n = record["samples"]
    out = {f"{when} pass@{k}": float(np.mean(pass_at(record[when], n, k)))
           for when in ("before", "after") for k in (1, 8)}  # fmt: skip
    out["wall minutes"] = record["wall_seconds"] / 60
    out["median step seconds"] = float(np.median(record["seconds"]))
    return out


def rule(s: dict[str, float]) -> tuple[bool, str]:
    """The pilot's declared decision rule on one summary, and why."""
    before, after = s["before pass@8"], s["after pass@8"]
    ok = before < after < CEILING
    return ok, (f"pass@8 {before:.3f} -> {after:.3f}: "
                + ("rises and stays below" if ok else "does not rise, or reaches")
                + f" {CEILING}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser("python -m advest.experiments.grid.pilot", description=__doc__)
    p.add_argument("results", type=Path, help="the pilot's RESULTS/DESIGN folder")
    a = p.parse_args(argv)
    files = sorted(a.results.glob("*/seed*.json"))
    if not files:
        print(f"{a.results}: no finished run")
        return 2
    verdicts = []
    for f in files:
        s = summary(json.loads(f.read_text()))
        ok, why = rule(s) if f.parent.name == "grpo" else (True, "not the rule's arm")
        verdicts.append(ok)
        print(f"{f.parent.name} {f.stem}: " + ", ".join(f"{k} {v:.3f}" for k, v in s.items())
              + f"; rule: {why}")  # fmt: skip
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
