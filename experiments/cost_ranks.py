"""The cost of the collectives under data parallelism: every estimator that needs one
(``Entry.collective``), and ``by_group`` on rows whose groups are split over the ranks, called on
a batch sharded over N gloo processes on the CPU, beside the same call on the rank's share alone
(no collective) and on the whole batch in one process. Results go to
``docs/results/cost_ranks.json``; ``docs/cost.md`` renders them (``section``) under the
cost-growth table.

    python -m advest.experiments.cost --ranks   # measure N = 2 and 3 (about a minute), render

Times are wall-clock medians of ``REPEATS`` calls after ``WARMUP``, one torch thread per process,
every rank released by a barrier before each call; a sharded call's time is the slowest rank's
(a collective ends when the last rank arrives).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from advest.fast import calling, flat, registry

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "cost_ranks.json"
COMMAND = "python -m advest.experiments.cost --ranks"
B, G, WORLDS, WARMUP, REPEATS = 96, 16, (2, 3), 5, 30
BY_GROUP = "by_group(grpo), split groups"
ONE = "one all_reduce of a float64"
"""The unit: what one collective costs here, so each estimator's added time reads as a count."""


def _inputs(B_: int, seed: int) -> dict[str, Any]:
    """A ``[B_, G]`` batch of the fields the collective estimators read."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 5, (B_, G), generator=gen).double() / 4
    return {
        "rewards": rewards,
        "mask": torch.ones(B_, G, 1, dtype=torch.bool),
        "prompt_ids": torch.arange(B_) % 40,
        "reward_parts": torch.stack([rewards, torch.rand(B_, G, generator=gen).double()], -1),
        "reward_weights": torch.tensor([1.0, 0.5], dtype=torch.float64),
    }


def _median_ms(call: Callable[[], Any], group: Any) -> float:
    import torch.distributed as dist

    times = []
    for i in range(WARMUP + REPEATS):
        if group is not None:
            dist.barrier()
        start = time.perf_counter()
        call()
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _cases() -> list[str]:
    return [e.name for e in registry.entries() if e.collective] + [BY_GROUP, ONE]


def _timer(case: str, source: dict[str, Any], group: Any) -> Callable[[], Any]:
    """One call of ``case`` on ``source`` (the rank's share), over ``group`` (None: local)."""
    if case == ONE:
        import torch.distributed as dist

        number = torch.zeros(1, dtype=torch.float64)
        return lambda: None if group is None else dist.all_reduce(number, group=group)
    if case == BY_GROUP:
        rows = source["rewards"].reshape(-1)  # [N]: the share's rows, groups cut at its ends
        ids = (torch.arange(rows.shape[0]) + source["offset"]) // G
        plan = calling.plan("grpo")
        return lambda: flat.by_group(plan, rows, ids, group=group)
    plan = calling.plan(case).over(group)
    return lambda: plan.advantages(source)


def _collectives(call: Callable[[], Any]) -> int:
    """How many collectives one call makes (``fast._ranks`` looks them up on the module)."""
    import torch.distributed as dist

    names = ("all_reduce", "all_gather", "all_gather_object")
    real = {name: getattr(dist, name) for name in names}
    count = [0]

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call_it(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return fn(*args, **kwargs)

        return call_it

    for name in names:
        setattr(dist, name, counted(real[name]))
    try:
        call()
    finally:
        for name in names:
            setattr(dist, name, real[name])
    return count[0]


def _worker(rank: int, world: int, folder: Path) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{folder}/store", rank=rank, world_size=world
    )
    share = B // world
    source = _inputs(B, 0)
    mine = {
        k: v if k == "reward_weights" else v[rank * share : (rank + 1) * share]
        for k, v in source.items()
    }
    # split groups: the rows shifted by G/2, so every shard boundary cuts a group in two
    mine["offset"] = rank * share * G + G // 2
    out = {}
    for case in _cases():
        count = _collectives(_timer(case, mine, dist.group.WORLD))
        alone = _median_ms(_timer(case, mine, None), dist.group.WORLD)
        shared = torch.tensor([_median_ms(_timer(case, mine, dist.group.WORLD), dist.group.WORLD)])
        dist.all_reduce(shared, op=dist.ReduceOp.MAX)
        out[case] = {"share_ms": alone, "collective_ms": float(shared), "collectives": count}
    if rank == 0:
        (folder / "result.json").write_text(json.dumps(out))
    dist.destroy_process_group()


def measure() -> dict[str, Any]:
    """``{"setting": ..., "whole_ms": {case: ms}, "worlds": {N: {case: {...}}}}``."""
    torch.set_num_threads(1)
    whole = _inputs(B, 0) | {"offset": G // 2}
    found: dict[str, Any] = {
        "setting": {
            "B": B,
            "G": G,
            "repeats": REPEATS,
            "torch": torch.__version__,
            "cores": os.cpu_count(),
            "backend": "gloo",
            # other jobs on the machine share its cores with the N processes
            "load": round(os.getloadavg()[0], 1),
        },
        "whole_ms": {case: _median_ms(_timer(case, whole, None), None) for case in _cases()},
        "worlds": {},
    }
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for world in WORLDS:
        with tempfile.TemporaryDirectory() as folder:
            command = [sys.executable, "-m", "advest.experiments.cost_ranks"]
            procs = [subprocess.Popen([*command, str(r), str(world), folder], env=env, cwd=ROOT)
                     for r in range(world)]  # fmt: skip
            if any(p.wait(timeout=600) != 0 for p in procs):
                raise RuntimeError(f"a worker of the {world}-process run failed")
            found["worlds"][str(world)] = json.loads((Path(folder) / "result.json").read_text())
    return found


def load(path: Path = RESULTS) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def section(found: dict[str, Any] | None) -> list[str]:
    """The page's lines on the collectives' cost (none before a measurement)."""
    if found is None:
        return []
    s, worlds = found["setting"], list(found["worlds"])
    head = ["estimator", "collectives per call", "one process, whole batch"]
    for w in worlds:
        head += [f"N = {w}: share alone", f"N = {w}: with collective", f"N = {w}: added"]
    lines = [
        "## Collectives under data parallelism",
        "",
        f"A batch of B = {s['B']} prompts × G = {s['G']} samples split over N {s['backend']} "
        f"processes on the CPU ({s['cores']} cores, load average {s.get('load')} when it began, "
        f"torch {s['torch']}, one thread each); "
        f"milliseconds per call, the median of {s['repeats']}. *Share alone*: the rank's B/N "
        "prompts with no process group (what each rank computed before the ranks shared their "
        "statistics, wrong for these estimators); *with collective*: the same call over the "
        "group, the slowest rank; "
        "*added*: the difference, the price of the right answer. KAE and `by_group` with split "
        "groups gather the rows and compute the whole batch on every rank; the others all-reduce "
        "a few float64 numbers per collective. The last row is one collective alone, right after "
        "a barrier: the added time beyond collectives × that is each collective waiting for the "
        "slowest rank's compute before it, which on cores shared with other jobs (the load "
        "average) is most of it. A group-local estimator is handed no group and pays nothing. "
        "Regenerate: "
        f"`{COMMAND}`.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for case, ms in found["whole_ms"].items():
        count = found["worlds"][worlds[0]][case].get("collectives", "")
        cells = [f"`{case}`", str(count), f"{ms:.3f}"]
        for w in worlds:
            r = found["worlds"][w][case]
            added = r["collective_ms"] - r["share_ms"]
            cells += [f"{r['share_ms']:.3f}", f"{r['collective_ms']:.3f}", f"{added:+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def measure_and_save() -> None:
    """Measure, and write the results file (``docs/cost.md`` is rendered by ``cost``)."""
    RESULTS.write_text(json.dumps(measure(), indent=1) + "\n")


if __name__ == "__main__":  # one rank of ``measure``: python -m ... RANK WORLD FOLDER
    _worker(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
