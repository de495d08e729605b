"""``advest experiment turns``: the embedded task as two-turn episodes (``--turns 2``: a wrong
answer is asked again, spec/episode.md), trained with a turn-level estimator (``turn_rloo``) and
with an episode-level one (``rloo`` on the episode's reward), same seeds and budget.

Per run and held-out prompt it keeps the pass counts after the first turn and after the second,
before and after training (``OUT/turns.json``), and the summary table (``OUT/summary.md``);
the README's block is that table rendered from ``docs/results/turns.json``
(``scripts/choosing.py``, checked by a test). Intervals: a paired bootstrap over seeds, then
prompts (``stats.paired_bootstrap``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from advest.experiments.stats import cell, paired_bootstrap, pass_at, verdict
from advest.training.config import RLConfig

ARMS = ("turn_rloo", "rloo")
SETTINGS: dict[str, Any] = {
    "turns": 2,
    "steps": 40,
    "prompts_per_step": 8,
    "group_size": 8,
    "max_new_tokens": 5,
    "eval_prompts": 64,
    "eval_samples": 16,
    "reward": "exact",
}
"""The design: pass/fail reward (the exact sum), 40 steps of 8 prompts × 8 episodes, the
trainer's defaults otherwise (lr 3e-4; at 1e-3 a first try lost held-out pass@1)."""


def run(seeds: int, out: Path, model: str | None = None) -> dict[str, Any]:
    """Every arm × seed of ``model`` (None: the embedded one); returns the results document
    (per-prompt counts of every run)."""
    from advest.training.train import train

    runs: dict[str, dict[str, Any]] = {arm: {} for arm in ARMS}
    for arm in ARMS:
        for seed in range(seeds):
            cfg = RLConfig(**SETTINGS, model=model, estimator=arm, seed=seed, out=str(out))
            folder = train(cfg, {"enable_progress_bar": False}, name=f"{arm}-seed{seed}")
            counts = json.loads((folder / "passk_counts.json").read_text())
            runs[arm][str(seed)] = {label: counts[label] for label in sorted(counts)}
            print(f"{arm} seed {seed}: done", flush=True)
    return {"settings": SETTINGS, "n": SETTINGS["eval_samples"], "runs": runs}


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """pass@1 after one and after two turns, before and after training, and the paired
    differences with their 95% intervals: the second turn's gain per arm, training's gain per
    arm, and the turn-level arm against the episode-level one."""
    n, runs = doc["n"], doc["runs"]
    turns = doc["settings"]["turns"]
    seeds = sorted(set.intersection(*(set(runs[arm]) for arm in ARMS)), key=int)

    def grid(arm: str, label: str) -> np.ndarray:  # [seeds, prompts]
        return np.stack([pass_at(runs[arm][s][label], n, 1) for s in seeds])

    out: dict[str, Any] = {"seeds": len(seeds), "arms": {}}
    for arm in ARMS:
        first, both = grid(arm, "after"), grid(arm, f"after, {turns} turns")
        out["arms"][arm] = {
            "first turn": float(first.mean()),
            "both turns": float(both.mean()),
            "second turn adds": paired_bootstrap(both - first),
            "training adds (both turns)": paired_bootstrap(
                both - grid(arm, f"before, {turns} turns")
            ),
        }
    a, b = ARMS
    out["turn-level minus episode-level (both turns)"] = paired_bootstrap(
        grid(a, f"after, {turns} turns") - grid(b, f"after, {turns} turns")
    )
    return out


def _interval(x: Sequence[float]) -> str:
    return f"{cell(x, '+')} ({verdict(x[1], x[2])})"


def render(doc: dict[str, Any]) -> str:
    """The summary table (the README's block between its markers)."""
    s = summary(doc)
    cfg = doc["settings"]
    lines = [
        f"The embedded model on two-turn episodes (`advest experiment turns`: `--turns "
        f"{cfg['turns']}`, a wrong sum is asked again; {cfg['steps']} steps of "
        f"{cfg['prompts_per_step']} prompts × {cfg['group_size']} episodes, pass/fail reward, "
        f"{s['seeds']} seeds, {cfg['eval_prompts']} held-out prompts × {cfg['eval_samples']} "
        "samples; `docs/results/turns.json`). pass@1 after training; differences are paired "
        "over seeds and prompts, with 95% bootstrap intervals:",
        "",
        "| estimator | after turn 1 | after turn 2 | the second turn adds | training adds "
        "(after turn 2) |",
        "|---|---|---|---|---|",
    ]
    for arm, v in s["arms"].items():
        lines.append(
            f"| `{arm}` | {v['first turn']:.3f} | {v['both turns']:.3f} | "
            f"{_interval(v['second turn adds'])} | {_interval(v['training adds (both turns)'])} |"
        )
    lines += [
        "",
        f"`{ARMS[0]}` − `{ARMS[1]}` after turn 2: "
        f"{_interval(s['turn-level minus episode-level (both turns)'])}.",
    ]
    return "\n".join(lines)


def parser() -> Any:
    from advest.parsing import new_parser, switch

    p = new_parser("advest experiment turns", __doc__ or "")
    p.add_argument("--seeds", type=int, default=4, help="seeds per estimator")
    p.add_argument("--out", type=str, default="runs/turns", help="run folders (not kept)")
    p.add_argument("--steps", type=int | None, default=None, help="replace the design's steps")
    p.add_argument("--model", type=str | None, default=None, help="checkpoint (default: embedded)")
    switch(p, "quick", False, "2 seeds, 2 steps, 4 held-out prompts × 4 samples: a smoke run")
    return p


def main(argv: Sequence[str]) -> int:
    """``advest experiment turns [--seeds N] [--steps N] [--model M] [--out DIR] [--quick]``."""
    from advest.parsing import fail

    args = parser().parse_args(list(argv))
    if args.seeds < 2 or (args.steps is not None and args.steps < 1):
        return fail("advest experiment turns", "--seeds must be at least 2, --steps at least 1")
    if args.quick:
        args.seeds = 2
        SETTINGS.update(steps=2, eval_prompts=4, eval_samples=4)
    if args.steps is not None:
        SETTINGS["steps"] = args.steps
    out = Path(args.out)
    doc = run(args.seeds, out, args.model)
    out.mkdir(parents=True, exist_ok=True)
    (out / "turns.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "summary.md").write_text(render(doc) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
