"""``advest experiment grid``: the choosing page's pass/fail design, spanning sessions.

Arms grpo, maxpo and pkpo_sloo (K = 4, G = 8), ten seeds each, trained on a reasoning-gym task
whose graded score is turned pass/fail (``--reward_threshold 1``: full credit passes), every arm
and seed evaluated on ONE held-out set (``--data_seed`` fixes the training rows and the held-out
rows for every seed; ``--seed`` still orders the prompts and seeds the sampling). Few training
rows and many steps, so each prompt recurs (``kae`` gets a history, pass@1 has time to level off).

Advantage scale: every arm trains with AdamW, whose update is invariant to a constant factor on
the loss (its first moment and the root of its second scale together; ε = 1e-8 is far below the
gradients' root mean square), so a constant scale that separates the arms (maxpo's N/K) does
not change the step size; what is left is direction and the relative weight of groups and
steps (grpo's division by each group's spread), which the comparison measures. Clipping would
break the invariance (measured: on the embedded model clipping at 1 bound grpo's every step and
none of chen_passk's), so it is off (``NO_CLIP``); every run keeps its per-step gradient norm.

The starting weights are the same for every run (LoRA's B starts at zero), so the "before"
counts are measured once, by the first run, and shared by every arm and seed.

Each finished run is one file, ``<results>/<design>/<arm>/seed<k>.json``, holding per held-out
prompt the pass count out of n before and after, and per step the training pass rate. Running
the same command again skips finished runs (a file with other settings is refused) and starts
an unfinished one again. Everything is written under ``--results`` and ``--runs``; the
repository's own grid (``docs/results/grid/``, committed run by run with the page regenerated)
is run by the maintainers' ``scripts/grid.py``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from advest.training.settings import RLConfig

from .designs import ARMS, DESIGN_ARMS

NO_CLIP = 1e9
"""``max_grad_norm`` of every run: far above any gradient norm, so clipping never binds and
AdamW's invariance to the advantages' scale holds (the page counts the steps it bound: 0)."""


@dataclass(frozen=True)
class Design:
    """Everything a grid fixes but the arm and the seed."""

    model: str | None
    """``--model`` (None: the embedded tiny model)."""
    task: str | None
    """reasoning-gym task (None: the embedded addition task, written to JSONL files)."""
    options: tuple[tuple[str, int], ...]
    """The task's settings."""
    reward: str
    """The graded verifier that ``--reward_threshold 1`` turns pass/fail."""
    train_rows: int
    steps: int
    prompts: int
    group_size: int
    tokens: int
    lr: float
    lora_r: int
    eval_prompts: int
    eval_samples: int
    data_seed: int = 0


ONE_DIGIT = (("min_terms", 2), ("max_terms", 2), ("min_digits", 1), ("max_digits", 1))
ONE_TWO_DIGITS = (("min_terms", 2), ("max_terms", 2), ("min_digits", 1), ("max_digits", 2))

EMBEDDED = Design(
    None, None, (), "digits",
    train_rows=64, steps=200, prompts=8, group_size=8, tokens=5, lr=3e-4, lora_r=0,
    eval_prompts=64, eval_samples=32,
)  # fmt: skip
PRODUCTS12_PILOT = Design(
    "smollm2-135m-instruct", "products", ONE_TWO_DIGITS, "reasoning_gym",
    train_rows=128, steps=48, prompts=4, group_size=8, tokens=16, lr=2e-4, lora_r=16,
    eval_prompts=64, eval_samples=16, data_seed=1,
)  # fmt: skip
DESIGNS: dict[str, Design] = {
    "smollm2": Design(
        "smollm2-135m-instruct", "products", ONE_DIGIT, "reasoning_gym",
        train_rows=16, steps=32, prompts=4, group_size=8, tokens=16, lr=2e-4, lora_r=16,
        eval_prompts=64, eval_samples=32,
    ),
    "embedded": EMBEDDED,
    # the same design, longer: only the steps differ (the same held-out prompts)
    "embedded_long": replace(EMBEDDED, steps=1000),
    "embedded_3000": replace(EMBEDDED, steps=3000),
    # 2000 training rows instead of 64: each recurs every 250 steps (kae has a history), and
    # held-out pass@k rises with training instead of falling as on the 64 rows
    "embedded_rows2000": replace(EMBEDDED, steps=1000, train_rows=2000),
    # declared in docs/results/designs/ before any run: fresh seeds (--first_seed 100), K = 8
    # arms beside K = 4; and three learning rates for grpo and maxpo (--first_seed 200)
    "embedded_rows2000_replication": replace(EMBEDDED, steps=1000, train_rows=2000),
    **{f"embedded_rows2000_lr{lr}": replace(EMBEDDED, steps=1000, train_rows=2000, lr=float(lr))
       for lr in ("1e-4", "3e-4", "1e-3")},
    # a PILOT (docs/results/designs/smollm2_products12_pilot.toml): one- and two-digit
    # products, held-out and training rows from data_seed 1, which no grid design uses
    "smollm2_products12_pilot": PRODUCTS12_PILOT,
    # the real model off the ceiling: the pilot's task and budget on data_seed 0 (a held-out
    # set the pilot never saw); runs only if the pilot meets its declared rule
    "smollm2_products12": replace(PRODUCTS12_PILOT, data_seed=0),
}  # fmt: skip
"""``smollm2``: the question of the page (SmolLM2-135M-Instruct, one-digit products, 16 new
tokens). Measured on one thread of a 2-core machine: about 25 s a step (8 s sampling, 17 s
update) and 7 min an evaluation of 64 × 32 with the other core lightly used; 50 s a step and
19 min an evaluation with it busy (load average 4.8): 30 to 45 min a run, 11 to 22 hours for
the 30 runs, so the grid spans sessions (``scripts/grid_gpu.sh`` runs it on one GPU).
``embedded``: the same design on the embedded model (10 to 30 s a run), the whole grid in
minutes; its training pass@1 is still rising after 200 steps. ``embedded_long``: the same for
1000 steps (about a minute of training a run on one quiet thread; the same held-out prompts),
where training pass@1 rises more slowly (a pilot, grpo seed 0, per 100 steps: 0.44, 0.61,
0.69, ..., 0.88, 0.91, 0.90) but the page's test still finds it rising between the last two
quarters. ``embedded_3000``: 3000 steps (about 2 minutes a run on one quiet thread, 4 to 6
with the other core busy), where grpo's training pass@1 levels off near 0.96 by the page's
equivalence test; pkpo_sloo's, whose objective is pass@4, still rises near 0.73. On these 64
rows every arm ends below the starting weights' held-out pass@8. ``embedded_rows2000``: 2000
training rows, 1000 steps, where held-out pass@k rises with training (a pilot, seed 0: grpo's
pass@1 0.226 → 0.373 and pass@8 0.711 → 0.744, maxpo's 0.385 and 0.837)."""


def config(d: Design, arm: str, seed: int, data: Path, out: Path) -> RLConfig:
    """One run's settings; ``data`` is the folder of the embedded design's JSONL files."""
    if d.task is None:
        where: dict[str, Any] = {"data": str(data / "train.jsonl"),
                                 "eval_data": str(data / "held_out.jsonl")}  # fmt: skip
    else:
        where = {"data": f"reasoning_gym:{d.task}", "data_options": dict(d.options),
                 "data_size": d.train_rows, "data_seed": d.data_seed}  # fmt: skip
    cfg = RLConfig(
        model=d.model,
        reward=d.reward,
        reward_threshold=1.0,
        reward_workers=0,  # the verifier is cheap; the other core is not ours
        steps=d.steps,
        prompts_per_step=d.prompts,
        group_size=d.group_size,
        max_new_tokens=d.tokens,
        ppo_epochs=1,
        lr=d.lr,
        max_grad_norm=NO_CLIP,
        lora_r=d.lora_r,
        lora_alpha=2 * d.lora_r if d.lora_r else 16,
        lora_export="adapter",
        eval_prompts=d.eval_prompts,
        eval_samples=d.eval_samples,
        checkpoint_every=0,
        seed=seed,
        out=str(out),
        **where,
    )
    return replace(cfg, **ARMS[arm])


def held_out(d: Design, data: Path) -> tuple[list[str], list[str]]:
    """(training prompts, held-out prompts) of the design, shared by every arm and seed. The
    embedded design's rows are written to ``data`` as JSONL here."""
    from advest.training import tasks
    from advest.training.task import held_out as embedded_held_out
    from advest.training.task import problem

    if d.task is not None:
        name, options = f"reasoning_gym:{d.task}", dict(d.options)
        train = tasks.rows(name, options, d.train_rows, d.data_seed)
        held = tasks.held_out_rows(name, options, d.eval_prompts, d.data_seed, train)
        return [str(r.prompt) for r in train], [str(r.prompt) for r in held]
    rows = [problem(d.data_seed, i) for i in range(d.train_rows)]
    seen = {p.prompt for p in rows}
    fresh = [p for p in embedded_held_out(d.data_seed, 4 * d.eval_prompts) if p.prompt not in seen]
    held_rows = list({p.prompt: p for p in fresh}.values())[: d.eval_prompts]
    data.mkdir(parents=True, exist_ok=True)
    for file, part in (("train.jsonl", rows), ("held_out.jsonl", held_rows)):
        lines = [json.dumps({"prompt": p.prompt, "answer": p.answer}) for p in part]
        (data / file).write_text("\n".join(lines) + "\n")
    return [p.prompt for p in rows], [p.prompt for p in held_rows]


def settings_of(d: Design, arm: str) -> dict[str, Any]:
    """What a finished run's file must match to be reused (JSON-normalised)."""
    out: dict[str, Any] = json.loads(json.dumps({**asdict(d), "arm": ARMS[arm]}))
    return out


def finished(path: Path, settings: dict[str, Any]) -> bool:
    """Whether ``path`` holds a finished run with ``settings``; other settings are refused."""
    if not path.is_file():
        return False
    was = json.loads(path.read_text())["settings"]
    if was != settings:
        diff = sorted(k for k in settings if was.get(k) != settings[k])
        raise SystemExit(f"{path} holds a run with other settings ({', '.join(diff)}); give "
                         "another --results folder or --design")  # fmt: skip
    return True


def steps_of(folder: Path) -> dict[str, list[float]]:
    """Per-step columns of a run's ``metrics.csv``: training pass@1, gradient norm, advantage
    spread, the fraction of completions cut at the token budget, and seconds."""
    rows = list(csv.DictReader((folder / "metrics.csv").read_text().splitlines()))
    rows = [r for r in rows if r.get("pass@1")]
    phases = ("generate", "reward", "forward", "advantage", "update")
    return {
        "train_pass1": [float(r["pass@1"]) for r in rows],
        "grad_norm": [float(r["grad_norm"]) for r in rows],
        "adv_std": [float(r["adv_std"]) for r in rows],
        "truncated": [float(r["truncated"]) for r in rows],
        "seconds": [sum(float(r.get(f"time/{p}") or 0) for p in phases) for r in rows],
        # prompts sampled per step: more than the step's with --filter_groups
        "drawn_prompts": [float(r.get("drawn_prompts") or 0) for r in rows],
    }


def run_one(d: Design, arm: str, seed: int, paths: dict[str, Path], before: list[int] | None
            ) -> dict[str, Any]:  # fmt: skip
    """Train one (arm, seed) and return its record."""
    from advest.training.train import train

    cfg = config(d, arm, seed, paths["data"], paths["runs"])
    name = f"{arm}-seed{seed}"
    if (paths["runs"] / name).exists():
        print(f"{name}: unfinished earlier, started again", flush=True)
        shutil.rmtree(paths["runs"] / name)
    start, load = time.monotonic(), os.getloadavg()[0]
    folder = train(cfg, {"enable_progress_bar": False}, name=name, before=before)
    counts = json.loads((folder / "passk_counts.json").read_text())
    return {
        "settings": settings_of(d, arm),
        "arm": arm,
        "seed": seed,
        "samples": counts["samples"],
        "before": counts["before"],
        "after": counts["after"],
        **steps_of(folder),
        "max_grad_norm": cfg.max_grad_norm,
        "wall_seconds": round(time.monotonic() - start, 1),
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "threads": _threads(),
        "device": _device(),
    }


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _device() -> str:
    """Where the run ran: the GPU's name, or "cpu" (the arms of one seed share one device)."""
    import torch

    return str(torch.cuda.get_device_name()) if torch.cuda.is_available() else "cpu"


def parser() -> Any:
    from advest.parsing import new_parser, switch

    p = new_parser("advest experiment grid", __doc__ or "")
    p.add_argument("--design", type=str, choices=list(DESIGNS), default="smollm2")
    p.add_argument("--arms", type=str, nargs="+", choices=list(ARMS), default=list(DESIGN_ARMS))
    p.add_argument("--seeds", type=int, default=10, help="seeds per arm")
    p.add_argument("--first_seed", type=int, default=0, help="seeds first_seed, first_seed + 1, …")
    p.add_argument("--results", type=str, default="runs/grid/results",
                   help="per-run files go to RESULTS/DESIGN/ARM/seedK.json")  # fmt: skip
    p.add_argument("--runs", type=str, default="runs/grid", help="run folders (not kept)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--model", type=str | None, default=None, help="replace the design's model")
    p.add_argument("--steps", type=int | None, default=None, help="replace the design's steps")
    p.add_argument("--eval_prompts", type=int | None, default=None, help="replace its prompts")
    p.add_argument("--eval_samples", type=int | None, default=None, help="replace its samples")
    switch(p, "quick", False, "the embedded design, grpo, one seed, 2 steps, 4 × 4 held-out")
    return p


def design_of(args: Any) -> Design:
    if args.quick:  # a smoke run, in a folder of its own (``main``): no grid's files touched
        args.design, args.arms, args.seeds = "embedded", ["grpo"], 1
        args.steps, args.eval_prompts, args.eval_samples = 2, 4, 4
    d = DESIGNS[args.design]
    given = {k: getattr(args, k) for k in ("model", "steps", "eval_prompts", "eval_samples")}
    d = replace(d, **{k: v for k, v in given.items() if v is not None})
    if d.steps < 1 or d.eval_prompts < 1 or d.eval_samples < 1 or args.seeds < 1:
        raise SystemExit("--steps, --eval_prompts, --eval_samples and --seeds must be at least 1")
    if args.threads < 1:
        raise SystemExit(f"--threads must be at least 1; got {args.threads}")
    return d


def prepare(d: Design, results: Path, data: Path) -> list[int] | None:
    """Write (or check) ``design.json``, the shared prompts; the shared "before" counts if an
    earlier run measured them."""
    train_prompts, held = held_out(d, data)
    info = {"design": json.loads(json.dumps(asdict(d))), "train": train_prompts, "held_out": held}
    path = results / "design.json"
    if path.is_file() and json.loads(path.read_text()) != info:
        raise SystemExit(f"{path} holds another design; give another --results folder")
    results.mkdir(parents=True, exist_ok=True)
    if not path.is_file():  # whole or absent: processes of one grid may start together
        part = path.with_suffix(f".{os.getpid()}")
        part.write_text(json.dumps(info, indent=1) + "\n")
        part.replace(path)
    before = results / "before.json"
    return list(json.loads(before.read_text())["counts"]) if before.is_file() else None


Finished = Callable[[list[Path], str], None]
"""Called after each run with the files it wrote or changed and a sentence saying which run
(``scripts/grid.py`` regenerates the page and commits them)."""


def main(argv: list[str], finished_run: Finished | None = None) -> int:
    args = parser().parse_args(argv)
    d = design_of(args)
    import torch

    torch.set_num_threads(args.threads)
    folder = f"{args.design}_quick" if args.quick else args.design
    results, runs = Path(args.results) / folder, Path(args.runs) / folder
    paths = {"data": runs / "data", "runs": runs / "runs"}
    before = prepare(d, results, paths["data"])
    plan = [(s, a) for s in range(args.first_seed, args.first_seed + args.seeds) for a in args.arms]
    todo = [(s, a) for s, a in plan if not finished(results / a / f"seed{s}.json",
                                                    settings_of(d, a))]  # fmt: skip
    print(f"grid {args.design}: {len(plan) - len(todo)} of {len(plan)} runs finished earlier; "
          f"{len(todo)} to run", flush=True)  # fmt: skip
    start = time.monotonic()
    for done, (seed, arm) in enumerate(todo, start=1):
        print(f"{arm} seed {seed}: training", flush=True)
        record = run_one(d, arm, seed, paths, before)
        if before is None:
            before = record["before"]
            (results / "before.json").write_text(json.dumps(
                {"counts": before, "measured_by": f"{arm} seed {seed}"}) + "\n")  # fmt: skip
        path = results / arm / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        shutil.rmtree(paths["runs"] / f"{arm}-seed{seed}", ignore_errors=True)
        left = (time.monotonic() - start) / done * (len(todo) - done)
        print(f"[{done}/{len(todo)}] {arm} seed {seed}: after pass@1 "
              f"{sum(record['after']) / (len(record['after']) * record['samples']):.3f}; "
              f"~{left / 60:.0f} min left", flush=True)  # fmt: skip
        if finished_run is not None:
            files = [path, results / "design.json", results / "before.json"]
            finished_run(
                files, f"grid {args.design}: {arm} seed {seed} finished (per-prompt counts)"
            )
    return 0
