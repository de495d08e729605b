"""``advest experiment compare``: the embedded task trained with several estimators, same seeds
and budget; held-out pass@k for k = 1..n, token entropy over training, the Adam-moment gradient
variance proxy, response length.

Claims under test (Takashiro et al. for MaxPO, Wang et al. for covariance, Sun et al. for
KTAE; see the spec pages): MaxPO beats PKPO at large k and lowers the variance
proxy; covariance reweighting keeps entropy stable; KTAE shortens responses. The summary reports
what was measured, whichever way it goes.
"""

from __future__ import annotations

import csv
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from advest.training.config import RLConfig, eval_sizes, sized

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"estimator": "grpo"},
    "dr_grpo": {"estimator": "dr_grpo", "loss_aggregation": "dr-grpo"},
    "rloo": {"estimator": "rloo"},
    "pkpo_sloo_minus_one": {"estimator": "pkpo_sloo_minus_one", "k": 4},  # same K as maxpo
    "maxpo": {"estimator": "maxpo", "k": 4},
    "ktae": {"estimator": "ktae"},
    "covariance_grpo": {"estimator": "covariance_weights", "base_estimator": "grpo"},
    "kae": {"estimator": "kae"},
}
"""Arm name → settings over the default ``RLConfig``."""


def _series(folder: Path, column: str) -> list[float]:
    rows = list(csv.DictReader((folder / "metrics.csv").open()))
    return [float(r[column]) for r in rows if r.get(column)]


def _mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error over seeds (SE is NaN, shown as "±n/a", for one seed)."""
    if len(values) < 2:
        return (values[0] if values else float("nan")), float("nan")
    return statistics.fmean(values), statistics.stdev(values) / len(values) ** 0.5


def run_arm(name: str, seed: int, base: RLConfig, out: Path) -> dict[str, Any]:
    from advest.training.train import train

    cfg = replace(base, seed=seed, out=str(out), **ARMS[name])
    folder = train(cfg, {"enable_progress_bar": False}, name=f"{name}-seed{seed}")
    curves = json.loads((folder / "passk.json").read_text())
    entropy = _series(folder, "entropy")
    third = max(1, len(entropy) // 3)
    return {
        "passk_before": curves["before"],
        "passk_after": curves["after"],
        "entropy_first_third": statistics.fmean(entropy[:third]),
        "entropy_last_third": statistics.fmean(entropy[-third:]),
        "grad_variance_proxy_last_third": statistics.fmean(
            _series(folder, "grad_variance_proxy")[-third:]
        ),
        "response_length_last_third": statistics.fmean(_series(folder, "response_length")[-third:]),
        "seconds": sum(
            sum(_series(folder, f"time/{p}"))
            for p in ("generate", "reward", "forward", "advantage", "update")
        ),
    }


def summarise(results: dict[str, list[dict[str, Any]]], samples: int) -> str:
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= samples]
    head = (
        "| arm | "
        + " | ".join(f"pass@{k}" for k in ks)
        + " | entropy first→last | var proxy | length |"
    )
    lines = [head, "|---" * (len(ks) + 4) + "|"]
    for arm, runs in results.items():
        cells = []
        for k in ks:
            m, se = _mean_se([r["passk_after"][str(k)] for r in runs])
            cells.append(f"{m:.3f}±{se:.3f}" if se == se else f"{m:.3f}±n/a")
        e0, _ = _mean_se([r["entropy_first_third"] for r in runs])
        e1, _ = _mean_se([r["entropy_last_third"] for r in runs])
        v, _ = _mean_se([r["grad_variance_proxy_last_third"] for r in runs])
        n, _ = _mean_se([r["response_length_last_third"] for r in runs])
        lines.append(
            f"| {arm} | " + " | ".join(cells) + f" | {e0:.3f}→{e1:.3f} | {v:.3g} | {n:.2f} |"
        )
    before = next(iter(results.values()))[0]["passk_before"]
    lines.append("| (before RL) | " + " | ".join(f"{before[str(k)]:.3f}" for k in ks) + " | | | |")
    return "\n".join(lines) + "\n"


def parser() -> Any:
    from advest.parsing import new_parser, switch

    p = new_parser("advest experiment compare", __doc__ or "")
    p.add_argument(
        "--arms", type=str, nargs="+", choices=list(ARMS), default=list(ARMS), help="arms to train"
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds per arm")
    p.add_argument("--steps", type=int, default=RLConfig().steps, help="rollout steps per run")
    p.add_argument("--samples", type=int, default=64, help="held-out samples per prompt (pass@k)")
    p.add_argument(
        "--model", type=str | None, default=None, help="checkpoint folder (default: embedded)"
    )
    p.add_argument("--pool", type=int, default=1024, help="training prompts (recurring)")
    switch(p, "quick", False, "2 arms, 1 seed, 3 steps: a smoke run")
    p.add_argument("--out", type=str | None, default=None, help="default runs/compare/<timestamp>")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out or f"runs/compare/{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    # a finite pool so that prompts recur (kae's history needs it), the same for every arm
    base = RLConfig(
        model=args.model, steps=args.steps, eval_samples=args.samples, train_pool=args.pool
    )
    base = sized(base)
    arms, seeds = args.arms, args.seeds
    if args.quick:
        arms, seeds = ["grpo", "maxpo"], 1
        base = replace(base, steps=3, prompts_per_step=4, eval_prompts=8, eval_samples=4)
    config = {"arms": {a: ARMS[a] for a in arms}, "seeds": seeds, "base": base.__dict__}
    (out / "config.json").write_text(json.dumps(config, indent=1, default=str))
    results: dict[str, list[dict[str, Any]]] = {}
    for arm in arms:
        results[arm] = [run_arm(arm, seed, base, out / "runs") for seed in range(seeds)]
        (out / "metrics.json").write_text(json.dumps(results, indent=1))
    table = summarise(results, eval_sizes(base)[1])
    (out / "summary.md").write_text(f"# advest experiment compare\n\n{table}")
    _plot(results, out)
    print(table)
    return 0


def _plot(results: dict[str, list[dict[str, Any]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for arm, runs in results.items():
        ks = sorted(int(k) for k in runs[0]["passk_after"])
        ax.plot(
            ks, [statistics.fmean(r["passk_after"][str(k)] for r in runs) for k in ks], label=arm
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("held-out pass@k after RL")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "passk.png", dpi=120)
    plt.close(fig)
