"""``advest experiment real``: SmolLM2-135M-Instruct (the real GGUF model) trained on reasoning-gym
tasks with grpo, rloo, maxpo (K = 4), pkpo_sloo (K = 4) and maxrl, same seeds, steps and sampling;
held-out pass@1 and pass@K before and after, with 95% bootstrap intervals over prompts.

LoRA, not full fine-tuning: on CPU a full AdamW step over 135 M weights and a 1.6 GB checkpoint
per save cost more than the rollout itself, and at equal wall time LoRA takes several times more
rollout steps; the adapters (r = 16 on the attention projections) are what the estimators move.

Each (task, seed) pair shares one held-out set and one "before" evaluation (the same model for
every arm); each arm then trains from the same weights with the same prompts. Sized for about
two hours on 2 CPU cores by default; ``--quick`` is a smoke run, and the GPU form of the same
command is in the README.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from advest.training.config import RLConfig

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"estimator": "grpo"},
    "rloo": {"estimator": "rloo"},
    "maxpo": {"estimator": "maxpo", "k": 4},
    "pkpo_sloo": {"estimator": "pkpo_sloo", "k": 4},
    "maxrl": {"estimator": "maxrl"},
}
"""Arm → settings over the experiment's base config (K = 4 for the pass@K estimators). ``maxrl``
is the p-normalised form trainers ship. GDPO has no arm: these tasks have one verifiable reward,
and GDPO of one reward is ``grpo`` whitened over the batch; a second reward would change what
is being learned, not only the estimator."""

TASKS: dict[str, dict[str, Any]] = {
    "chain_sum": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "products": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
}
"""reasoning-gym task → its options: one-digit sums and products, where the untrained model
starts at about 5% and 7% pass@1 (measured with 32 prompts × 8 samples, 24 new tokens)."""

SIZES = {"chain_sum": 100, "products": 30}
"""Training rows per task: the one-digit tasks have 200 and 100 distinct questions, and the
held-out prompts must be new ones."""


def bootstrap(
    counts: list[list[int]], samples: int, k: int, reps: int = 2000
) -> tuple[float, float, float]:
    """Mean pass@k over seeds and prompts, and its 95% percentile interval from resampling the
    prompts (the same resampled prompts in every seed). ``counts[s][i]``: how many of
    ``samples`` completions of prompt i passed in seed s."""
    from advest.training.metrics import pass_at_k

    rng = random.Random(0)
    n = len(counts[0])
    table = [[pass_at_k(samples, c, k) for c in seed] for seed in counts]
    point = statistics.fmean(v for seed in table for v in seed)
    means = []
    for _ in range(reps):
        pick = [rng.randrange(n) for _ in range(n)]
        means.append(statistics.fmean(seed[i] for seed in table for i in pick))
    means.sort()
    return point, means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def base_config(args: Any) -> RLConfig:
    return RLConfig(
        model=args.model,
        reward="reasoning_gym",
        steps=args.steps,
        prompts_per_step=args.prompts,
        group_size=8,
        max_new_tokens=args.tokens,
        ppo_epochs=1,
        lr=args.lr,
        lora_r=16,
        lora_alpha=32,
        eval_prompts=args.eval_prompts,
        eval_samples=8,
        checkpoint_every=0,
        mask_truncated=False,
        out=str(args.out_path / "runs"),
    )


def run(
    task: str, arm: str, seed: int, base: RLConfig, before: list[int] | None
) -> dict[str, list[int]]:
    """One arm's run, or the finished run already in ``runs/`` under the same settings (an
    experiment that stopped is continued by running the same command again)."""
    from dataclasses import asdict

    from advest.training.train import train

    cfg = replace(
        base,
        data=f"reasoning_gym:{task}",
        data_options=TASKS[task],
        data_size=SIZES[task],
        seed=seed,
        **ARMS[arm],
    )
    name = f"{task}-{arm}-seed{seed}"
    done = finished(Path(cfg.out) / name, asdict(cfg))
    if done is not None:
        print(f"{name}: finished earlier, its counts are reused", flush=True)
        return done
    opts = {"enable_progress_bar": False}
    folder = train(cfg, opts, name=name, before=before)
    counts: dict[str, list[int]] = json.loads((folder / "passk_counts.json").read_text())
    return counts


def finished(folder: Path, settings: dict[str, Any]) -> dict[str, list[int]] | None:
    """The held-out counts of a finished run in ``folder`` whose settings are ``settings`` (the
    output folder aside), else None; a folder with other settings is refused, not mixed in."""
    counts, config = folder / "passk_counts.json", folder / "config.json"
    if not counts.is_file():
        return None
    was = {k: v for k, v in json.loads(config.read_text())["rl"].items() if k != "out"}
    now = {k: v for k, v in json.loads(json.dumps(settings)).items() if k != "out"}
    if was != now:
        diff = sorted(k for k in now if was.get(k) != now[k])
        raise SystemExit(
            f"{folder} holds a run with other settings ({', '.join(diff)}); give another --out"
        )
    got: dict[str, list[int]] = json.loads(counts.read_text())
    return got


def parser() -> Any:
    from advest.training.parsing import new_parser, switch

    p = new_parser("advest experiment real", __doc__ or "")
    p.add_argument("--model", type=str, default="smollm2-135m-instruct", help="--model to train")
    p.add_argument("--tasks", type=str, nargs="+", choices=list(TASKS), default=list(TASKS))
    p.add_argument("--arms", type=str, nargs="+", choices=list(ARMS), default=list(ARMS))
    p.add_argument("--seeds", type=int, default=2, help="seeds per (task, arm)")
    p.add_argument("--steps", type=int, default=10, help="rollout steps per run")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step (× G = 8)")
    p.add_argument("--tokens", type=int, default=24, help="--max_new_tokens")
    p.add_argument("--lr", type=float, default=2e-4, help="LoRA learning rate")
    p.add_argument("--eval_prompts", type=int, default=32, help="held-out prompts (× 8 samples)")
    switch(p, "quick", False, "1 task, 2 arms, 1 seed, 2 steps, 8 held-out prompts: a smoke run")
    p.add_argument("--out", type=str | None, default=None, help="default runs/real/<timestamp>")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    args.out_path = Path(args.out or f"runs/real/{time.strftime('%Y%m%d-%H%M%S')}")
    if args.quick:
        args.tasks, args.arms, args.seeds = args.tasks[:1], ["grpo", "maxpo"], 1
        args.steps, args.eval_prompts = 2, 8
    args.out_path.mkdir(parents=True, exist_ok=True)
    base = base_config(args)
    config = {
        "tasks": {t: TASKS[t] for t in args.tasks},
        "arms": {a: ARMS[a] for a in args.arms},
        "seeds": args.seeds,
        "base": base.__dict__,
    }
    (args.out_path / "config.json").write_text(json.dumps(config, indent=1, default=str))
    results: dict[str, dict[str, list[dict[str, list[int]]]]] = {}
    for task in args.tasks:
        results[task] = {}
        before: dict[int, list[int]] = {}  # seed -> the starting weights' counts, shared by arms
        for arm in args.arms:
            results[task][arm] = []
            for seed in range(args.seeds):
                counts = run(task, arm, seed, base, before.get(seed))
                before.setdefault(seed, counts["before"])
                results[task][arm].append(counts)
                (args.out_path / "metrics.json").write_text(json.dumps(results, indent=1))
    table = summarise(results, base.eval_samples)
    (args.out_path / "summary.md").write_text(f"# advest experiment real\n\n{table}")
    plot(results, base.eval_samples, args.out_path)
    print(table)
    return 0


def summarise(results: dict[str, dict[str, list[dict[str, list[int]]]]], samples: int) -> str:
    lines = [
        "| task | arm | pass@1 before | pass@1 after | pass@4 before | pass@4 after |",
        "|---|---|---|---|---|---|",
    ]
    for task, arms in results.items():
        for arm, runs in arms.items():
            cells = []
            for k in (1, 4):
                for when in ("before", "after"):
                    m, lo, hi = bootstrap([r[when] for r in runs], samples, k)
                    cells.append(f"{m:.3f} [{lo:.3f}, {hi:.3f}]")
            lines.append(f"| {task} | {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


Results = dict[str, dict[str, list[dict[str, list[int]]]]]
"""task → arm → one record per seed: ``{"before": counts, "after": counts}``."""


def plot(results: Results, samples: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from advest.training.evaluate import curve_of

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, (task, arms) in zip(axes[0], results.items(), strict=True):
        first = next(iter(arms.values()))
        before = [curve_of(r["before"], samples) for r in first]
        ks = list(range(1, samples + 1))
        ax.plot(ks, [statistics.fmean(c[k] for c in before) for k in ks], "k--", label="before")
        for arm, runs in arms.items():
            after = [curve_of(r["after"], samples) for r in runs]
            ax.plot(ks, [statistics.fmean(c[k] for c in after) for k in ks], label=arm)
        ax.set_title(task)
        ax.set_xlabel("k")
        ax.set_ylabel("held-out pass@k")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "passk.png", dpi=120)
    plt.close(fig)
