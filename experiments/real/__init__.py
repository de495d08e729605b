"""``advest experiment real``: SmolLM2-135M-Instruct (the real GGUF model) trained on reasoning-gym
tasks with every seed paper's estimator, same seeds, steps, prompts and sampling; held-out pass@k
for k = 1..64 before and after, with 95% bootstrap intervals over prompts.

Arms: the mean-reward baselines (grpo, rloo, dr_grpo, maxrl), the pass@K / max@K estimators
(maxpo, pkpo_sloo, chen_passk at K = 4 with G = 8; maxpo_k8 and pkpo_sloo_k8 at K = 8 with
G = 16) and the token and state estimators (ktae, hista, numca, covariance_weights over grpo,
kae). LoRA, not full fine-tuning: on CPU a full AdamW step over 135 M weights and a 1.6 GB
checkpoint per save cost more than the rollout itself; the adapters (r = 16 on the attention
projections) are what the estimators move.

Each (task, seed) pair shares one held-out set and one "before" evaluation (the same model for
every arm); each arm then trains from the same weights with the same prompts. Runs go seed by
seed (every arm's seed 0 first), so a stopped experiment has the most arms covered; running the
same command again reuses the finished runs and restarts an unfinished one. The report
(``report``) reads ``metrics.json``, which is rewritten after every run.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from advest.training.config import RLConfig

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"estimator": "grpo"},
    "maxpo": {"estimator": "maxpo", "k": 4},
    "pkpo_sloo": {"estimator": "pkpo_sloo", "k": 4},
    "rloo": {"estimator": "rloo"},
    "chen_passk": {"estimator": "chen_passk", "k": 4},
    "maxrl": {"estimator": "maxrl"},
    "dr_grpo": {"estimator": "dr_grpo", "loss_aggregation": "dr-grpo"},
    "numca": {"estimator": "numca"},
    "hista": {"estimator": "hista", "estimator_options": {"w": 4}},
    "ktae": {"estimator": "ktae"},
    "kae": {"estimator": "kae"},
    "covariance_weights": {"estimator": "covariance_weights", "base_estimator": "grpo"},
    "maxpo_k8": {"estimator": "maxpo", "k": 8, "group_size": 16},
    "pkpo_sloo_k8": {"estimator": "pkpo_sloo", "k": 8, "group_size": 16},
}
"""Arm → settings over the experiment's base config, in the order they run (the comparisons a
user asks first come first). ``maxrl`` is the p-normalised form trainers ship; ``dr_grpo`` uses
its own loss aggregation; ``hista`` pools blocks of w = 4 tokens (answers are a few dozen
tokens); ``kae`` keeps its history across steps (the training rows recur every
``data_size / prompts`` steps). GDPO has no arm: these tasks have one verifiable reward, and GDPO
of one reward is ``grpo`` whitened over the batch."""

CPU_ARMS = [a for a in ARMS if not a.endswith("_k8")]
"""The default: every arm but the K = 8 ones, whose G = 16 doubles a step's cost."""

TASKS: dict[str, dict[str, Any]] = {
    "chain_sum": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "products": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
}
"""reasoning-gym task → its options: one-digit sums and products, where the untrained model
starts at about 7% and 14% pass@1. Both hold numbers in their reasoning (Numca's milestones)."""

SIZES = {"chain_sum": 100, "products": 30}
"""Training rows per task: the one-digit tasks have 200 and 100 distinct questions, and the
held-out prompts must be new ones."""

Record = dict[str, Any]
"""One run: ``seed``, ``samples``, ``before`` and ``after`` (passes per held-out prompt),
``train_pass1`` (pass@1 of each step's own samples), ``seconds_per_step``, ``group_size``."""


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
        lora_export="adapter",  # a merged 135 M model per run would fill the disk
        eval_prompts=args.eval_prompts,
        eval_samples=args.samples,
        checkpoint_every=0,
        mask_truncated=False,
        out=str(args.out_path / "runs"),
    )


def arm_config(base: RLConfig, task: str, arm: str, seed: int) -> RLConfig:
    return replace(
        base,
        data=f"reasoning_gym:{task}",
        data_options=TASKS[task],
        data_size=SIZES[task],
        seed=seed,
        **ARMS[arm],
    )


def run(task: str, arm: str, seed: int, base: RLConfig, before: list[int] | None) -> Record:
    """One arm's run, or the finished run already in ``runs/`` under the same settings (an
    experiment that stopped is continued by running the same command again; a run it stopped
    in the middle has no checkpoint and starts again)."""
    from advest.training.train import train

    cfg = arm_config(base, task, arm, seed)
    name = f"{task}-{arm}-seed{seed}"
    folder = Path(cfg.out) / name
    if finished(folder, asdict(cfg)):
        print(f"{name}: finished earlier, its counts are reused", flush=True)
    else:
        if folder.exists():
            print(f"{name}: unfinished earlier, started again", flush=True)
            shutil.rmtree(folder)
        print(f"{name}: training", flush=True)
        folder = train(cfg, {"enable_progress_bar": False}, name=name, before=before)
    return record(folder, seed, cfg.group_size)


def record(folder: Path, seed: int, group_size: int) -> Record:
    """A finished run folder → its ``Record`` (read from ``passk_counts.json`` and
    ``metrics.csv``)."""
    counts = json.loads((folder / "passk_counts.json").read_text())
    rows = list(csv.DictReader((folder / "metrics.csv").read_text().splitlines()))
    phases = ("generate", "reward", "forward", "advantage", "update")
    seconds = [sum(float(r.get(f"time/{p}") or 0) for p in phases) for r in rows]
    return {
        "seed": seed,
        "samples": counts["samples"],
        "group_size": group_size,
        "before": counts["before"],
        "after": counts["after"],
        "train_pass1": [float(r["pass@1"]) for r in rows if r.get("pass@1")],
        "seconds_per_step": sum(seconds) / max(len(seconds), 1),
    }


def finished(folder: Path, settings: dict[str, Any]) -> bool:
    """Whether ``folder`` holds a finished run whose settings are ``settings`` (the output
    folder aside); a finished folder with other settings is refused, not mixed in."""
    counts, config = folder / "passk_counts.json", folder / "config.json"
    if not counts.is_file():
        return False
    was = {k: v for k, v in json.loads(config.read_text())["rl"].items() if k != "out"}
    now = {k: v for k, v in json.loads(json.dumps(settings)).items() if k != "out"}
    if was != now:
        diff = sorted(k for k in now if was.get(k) != now[k])
        raise SystemExit(
            f"{folder} holds a run with other settings ({', '.join(diff)}); give another --out"
        )
    return True


def earlier(out: Path, config: dict[str, Any]) -> dict[str, dict[str, list[Record]]]:
    """The results an earlier command left in ``out`` (``metrics.json``), so that the experiment
    grows in pieces: a second command with other arms or seeds adds its runs to the same report
    (same settings: ``config.json``'s base must match, else a clear error); ``config.json``
    then lists the union of tasks and arms."""
    path, conf = out / "metrics.json", out / "config.json"
    piece = {k: config[k] for k in ("tasks", "arms", "seeds", "first_seed")}
    if not path.is_file() or not conf.is_file():
        conf.write_text(json.dumps({**config, "pieces": [piece]}, indent=1, default=str))
        return {}
    was = json.loads(conf.read_text())
    now = json.loads(json.dumps(config, default=str))
    if was["base"] != now["base"]:
        diff = sorted(k for k in now["base"] if was["base"].get(k) != now["base"][k])
        raise SystemExit(f"{out} holds an experiment with other settings ({', '.join(diff)}); "
                         "give another --out")  # fmt: skip
    union = {
        **now,
        "tasks": {**was["tasks"], **now["tasks"]},
        "arms": {**was["arms"], **now["arms"]},
        "seeds": max(int(was["seeds"]), int(now["seeds"])),
        "pieces": [*was.get("pieces", []), piece],  # each command's own plan
    }
    conf.write_text(json.dumps(union, indent=1))
    results: dict[str, dict[str, list[Record]]] = json.loads(path.read_text())
    return results


def parser() -> Any:
    from advest.parsing import new_parser, switch

    p = new_parser("advest experiment real", __doc__ or "")
    p.add_argument("--model", type=str, default="smollm2-135m-instruct", help="--model to train")
    p.add_argument("--tasks", type=str, nargs="+", choices=list(TASKS), default=["chain_sum"])
    p.add_argument("--arms", type=str, nargs="+", choices=list(ARMS), default=CPU_ARMS)
    p.add_argument("--seeds", type=int, default=3, help="seeds per (task, arm)")
    p.add_argument("--first_seed", type=int, default=0, help="seeds first_seed, first_seed + 1, …")
    p.add_argument("--steps", type=int, default=20, help="rollout steps per run")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step (× G)")
    p.add_argument("--tokens", type=int, default=24, help="--max_new_tokens")
    p.add_argument("--lr", type=float, default=2e-4, help="LoRA learning rate")
    p.add_argument("--eval_prompts", type=int, default=16, help="held-out prompts per task")
    p.add_argument("--samples", type=int, default=64, help="held-out samples per prompt (pass@k)")
    switch(p, "quick", False, "1 task, 2 arms, 1 seed, 2 steps, 4 × 8 held-out: a smoke run")
    p.add_argument("--out", type=str | None, default=None, help="default runs/real/<timestamp>")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    args.out_path = Path(args.out or f"runs/real/{time.strftime('%Y%m%d-%H%M%S')}")
    if args.quick:
        args.tasks, args.arms, args.seeds = args.tasks[:1], ["grpo", "maxpo"], 1
        args.steps, args.eval_prompts, args.samples = 2, 4, 8
    args.out_path.mkdir(parents=True, exist_ok=True)
    base = base_config(args)
    config = {
        "tasks": {t: TASKS[t] for t in args.tasks},
        "arms": {a: ARMS[a] for a in args.arms},
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "base": asdict(base),
    }
    results = earlier(args.out_path, config)
    for t in args.tasks:
        for a in args.arms:
            results.setdefault(t, {}).setdefault(a, [])
    start, done = time.monotonic(), 0
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for seed in seeds:  # seed-major: a partial experiment covers every arm
        for task in args.tasks:
            before: list[int] | None = None  # the starting weights' counts, shared by arms
            for arm in args.arms:
                try:
                    rec = run(task, arm, seed, base, before)
                except Exception:  # one arm's failure must not stop a night's grid
                    print(f"{task}-{arm}-seed{seed}: FAILED, the grid goes on:\n"
                          f"{traceback.format_exc()}", flush=True)  # fmt: skip
                    continue
                before = rec["before"]
                kept = [r for r in results[task][arm] if r["seed"] != seed]
                results[task][arm] = sorted([*kept, rec], key=lambda r: int(r["seed"]))
                (args.out_path / "metrics.json").write_text(json.dumps(results, indent=1))
                done += 1  # this command's runs (results also holds earlier commands')
                total = args.seeds * len(args.tasks) * len(args.arms)
                left = (time.monotonic() - start) / done * (total - done)
                print(f"[{done}/{total} runs] {task} {arm} seed {seed}; ~{left / 60:.0f} min left",
                      flush=True)  # fmt: skip
    from . import report as real_report  # imported at the end: a long run
    # picks up the report as it is when the runs finish

    real_report.write(args.out_path)
    return 0
