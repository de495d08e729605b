"""The report of ``advest experiment real``: per-arm held-out pass@k (k = 1..n) before and after
with 95% bootstrap intervals over prompts, the step at which pass@1 levels off, and how pass@1
and pass@64 rank the arms; written as ``summary.json``, ``passk.csv``, ``summary.md`` and
``passk.png`` next to the experiment's ``metrics.json``.

``python -m advest.experiments.real.report OUT`` rewrites them from ``OUT/metrics.json``
(an experiment still running included: the report then covers the runs finished so far).

Notation: ``S`` seeds, ``N`` held-out prompts, ``n`` samples per prompt, ``R`` bootstrap
resamples.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from advest.experiments.stats import cell, pass_at

Results = dict[str, dict[str, list[dict[str, Any]]]]
"""task → arm → one record per seed (``real.Record``: ``before``/``after`` passes per prompt)."""

WINDOW = 5
"""Steps per window of the training pass@1 curve (4 prompts × G samples a step is too noisy to
read one step at a time)."""


def passk_table(counts: list[list[int]], samples: int) -> np.ndarray:
    """``counts[s][i]`` passes of prompt i in seed s → unbiased pass@k ``[n, S, N]`` for
    k = 1..n (Chen et al. 2021, arXiv:2107.03374 eq. 1, exact binomials)."""
    return np.array([[pass_at(seed, samples, k) for seed in counts]
                     for k in range(1, samples + 1)])  # fmt: skip


def bootstrap_all(
    counts: list[list[int]], samples: int, reps: int = 2000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean pass@k over seeds and prompts for k = 1..n, and its 95% percentile interval from
    resampling the prompts (the same resampled prompts in every seed): three ``[n]`` arrays."""
    table = passk_table(counts, samples)  # [n, S, N]
    N = table.shape[2]
    pick = np.random.default_rng(0).integers(0, N, size=(reps, N))  # [R, N]
    means = table[:, :, pick].mean(axis=(1, 3))  # [n, S, R, N] -> [n, R]
    means.sort(axis=1)
    lo, hi = means[:, int(0.025 * reps)], means[:, int(0.975 * reps) - 1]
    return table.mean(axis=(1, 2)), lo, hi


def level_off(curves: list[list[float]], window: int = WINDOW) -> dict[str, Any]:
    """When training pass@1 (``curves[s][t]``: pass@1 of step t's own samples in seed s) stops
    rising: the first window j whose mean no later window exceeds by two standard errors of
    their difference; ``step`` is the last step of that window, None when only the last window
    qualifies (still rising within the budget)."""
    T = min(len(c) for c in curves)
    wins = []
    for j in range(T // window):
        vals = [c[t] for c in curves for t in range(j * window, (j + 1) * window)]
        se = statistics.stdev(vals) / len(vals) ** 0.5 if len(vals) > 1 else 0.0
        wins.append((statistics.fmean(vals), se))
    step = None
    for j, (m, se) in enumerate(wins[:-1]):
        if all(m2 - m <= 2 * (se**2 + se2**2) ** 0.5 for m2, se2 in wins[j + 1 :]):
            step = (j + 1) * window
            break
    return {"window": window, "means": [w[0] for w in wins], "ses": [w[1] for w in wins],
            "step": step, "steps": T}  # fmt: skip


def summarise_results(results: Results) -> dict[str, Any]:
    """Results → ``{task: {arm: {...}}}``: seeds, prompts, samples, G, seconds per step, pass@k
    before/after ``[mean, lo, hi]`` for k = 1..n, and the training pass@1 ``level_off``."""
    out: dict[str, Any] = {}
    for task, arms in results.items():
        out[task] = {}
        for arm, runs in arms.items():
            if not runs:
                continue
            n = runs[0]["samples"]
            entry: dict[str, Any] = {
                "seeds": len(runs), "prompts": len(runs[0]["after"]), "samples": n,
                "group_size": runs[0].get("group_size", 8),
                "seconds_per_step": statistics.fmean(r["seconds_per_step"] for r in runs),
                "level_off": level_off([r["train_pass1"] for r in runs]),
            }  # fmt: skip
            for when in ("before", "after"):
                m, lo, hi = bootstrap_all([r[when] for r in runs], n)
                rows = zip(m, lo, hi, strict=True)
                entry[when] = [[float(a), float(b), float(c)] for a, b, c in rows]
            out[task][arm] = entry
    return out


def on_common_seeds(results: Results) -> tuple[Results, dict[str, list[int]]]:
    """Each task's runs cut to the seeds every one of its arms has, and those seeds: arms
    compared on the same held-out prompts (each seed draws its own) and the same start."""
    cut: Results = {}
    seeds: dict[str, list[int]] = {}
    for task, arms in results.items():
        have = [{int(r["seed"]) for r in runs} for runs in arms.values() if runs]
        shared = sorted(set.intersection(*have)) if have else []
        cut[task] = {a: [r for r in runs if int(r["seed"]) in shared] for a, runs in arms.items()}
        seeds[task] = shared
    return cut, seeds


def table(summary: dict[str, Any], ks: tuple[int, ...] = (1, 8, 64)) -> str:
    """The Markdown table: per task and arm, pass@k before and after at each k ≤ n."""
    ks = tuple(
        k for k in ks if all(e["samples"] >= k for a in summary.values() for e in a.values())
    )
    head = "| task | arm | seeds | " + " | ".join(f"pass@{k} before | pass@{k} after" for k in ks)
    lines = [head + " |", "|---" * (3 + 2 * len(ks)) + "|"]
    for task, arms in summary.items():
        for arm, e in arms.items():
            cells = [f"{cell(e['before'][k - 1])} | {cell(e['after'][k - 1])}" for k in ks]
            lines.append(f"| {task} | {arm} | {e['seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def rankings(summary: dict[str, Any], ks: tuple[int, ...] = (1, 64)) -> str:
    """Per task, the arms ordered by pass@k after training at each k, best first."""
    lines = []
    for task, arms in summary.items():
        for k in ks:
            if not arms or any(e["samples"] < k for e in arms.values()):
                continue
            order = sorted(arms, key=lambda a: -arms[a]["after"][k - 1][0])
            lines.append(f"* {task}, pass@{k}: " + " > ".join(order))
    return "\n".join(lines) + "\n"


def levels(summary: dict[str, Any]) -> str:
    lines = []
    for task, arms in summary.items():
        for arm, e in arms.items():
            lv = e["level_off"]
            seq = ", ".join(f"{m:.2f}" for m in lv["means"])
            when = (
                f"levels off at step {lv['step']}"
                if lv["step"] is not None
                else f"still rising at step {lv['steps']}"
            )
            lines.append(f"* {task} {arm}: training pass@1 per {lv['window']} steps {seq}: {when}")
    return "\n".join(lines) + "\n"


def write_csv(summary: dict[str, Any], path: Path) -> None:
    """One row per (task, arm, when, k): the mean pass@k and its interval."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "arm", "seeds", "when", "k", "pass_at_k", "lo95", "hi95"])
        for task, arms in summary.items():
            for arm, e in arms.items():
                for when in ("before", "after"):
                    for k, (m, lo, hi) in enumerate(e[when], start=1):
                        w.writerow([task, arm, e["seeds"], when, k, f"{m:.6f}", f"{lo:.6f}",
                                    f"{hi:.6f}"])  # fmt: skip


def plot(summary: dict[str, Any], path: Path) -> None:
    """Held-out pass@k after training against k (log scale), per arm, one panel per task, the
    starting weights dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summary), figsize=(6.5 * len(summary), 4.2), squeeze=False)
    for ax, (task, arms) in zip(axes[0], summary.items(), strict=True):
        first = next(iter(arms.values()))
        ks = np.arange(1, first["samples"] + 1)
        ax.plot(ks, [v[0] for v in first["before"]], "k--", label="before")
        for arm, e in arms.items():
            ax.plot(ks, [v[0] for v in e["after"]], label=f"{arm} ({e['seeds']} seeds)")
        ax.set_xscale("log", base=2)
        ax.set_title(task)
        ax.set_xlabel("k")
        ax.set_ylabel("held-out pass@k")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(summary: dict[str, Any]) -> str:
    return (
        "# advest experiment real\n\n" + table(summary) + "\nArms ranked after training:\n\n"
        + rankings(summary) + "\nTraining pass@1 (each step's own samples, mean over seeds):\n\n"
        + levels(summary)
    )  # fmt: skip


def write(out: Path) -> dict[str, Any]:
    """``out/metrics.json`` → ``summary.json``, ``passk.csv``, ``summary.md``, ``passk.png``."""
    results: Results = json.loads((out / "metrics.json").read_text())
    summary = summarise_results(results)
    summary = {t: a for t, a in summary.items() if a}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    write_csv(summary, out / "passk.csv")
    (out / "summary.md").write_text(markdown(summary))
    plot(summary, out / "passk.png")
    print(markdown(summary), flush=True)
    return summary


def merge(out: Path, parts: list[Path]) -> None:
    """Experiments run side by side (``--first_seed``, ``--arms``, ``--tasks`` apart, e.g. one
    process per GPU share) → one ``out/metrics.json`` and ``out/config.json``: every finished
    run of every part, seeds in order; the settings of the first part (they must agree)."""
    results: Results = {}
    parts = [p for p in parts if (p / "metrics.json").is_file()]  # a part that failed early
    configs = [json.loads((p / "config.json").read_text()) for p in parts]
    for part in parts:
        got: Results = json.loads((part / "metrics.json").read_text())
        for task, arms in got.items():
            for arm, runs in arms.items():
                results.setdefault(task, {}).setdefault(arm, []).extend(runs)
    for arms in results.values():
        for runs in arms.values():
            runs.sort(key=lambda r: int(r["seed"]))
    config = dict(configs[0])
    config["tasks"] = {t: o for c in configs for t, o in c["tasks"].items()}
    config["arms"] = {a: o for c in configs for a, o in c["arms"].items()}
    config["seeds"] = len({c.get("first_seed", 0) + s for c in configs for s in range(c["seeds"])})
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(results, indent=1))
    (out / "config.json").write_text(json.dumps(config, indent=1))


if __name__ == "__main__":
    # report OUT: rewrite OUT's report; report OUT PART...: merge the parts into OUT
    if len(sys.argv) > 2:
        merge(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
    write(Path(sys.argv[1]))


def planned_runs(config: dict[str, Any]) -> set[tuple[str, str, int]]:
    """The (task, arm, seed) runs the experiment's commands asked for: the union of its pieces
    (one per command into the same folder), or its one command's tasks × arms × seeds."""
    pieces = config.get("pieces") or [config]
    return {
        (task, arm, seed)
        for piece in pieces
        for task in piece["tasks"]
        for arm in piece["arms"]
        for seed in range(piece.get("first_seed", 0), piece.get("first_seed", 0) + piece["seeds"])
    }
