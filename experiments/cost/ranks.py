"""The cost of the collectives under data parallelism: every estimator that needs one
(``Entry.collective``), and ``by_group`` on rows whose groups are split over the ranks, called on
a batch sharded over N gloo processes on the CPU, beside the same call on the rank's share alone
(no collective) and on the whole batch in one process: ``advest experiment cost --ranks``
(N = 2 and 3, about a minute) writes them to ``OUT/cost_ranks.json``, and the report renders
them under the cost-growth table (``report.ranks_section``).

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

import advest
from advest.fast import calling, flat, registry

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
    # the workers import the advest this process imported (a checkout's or an installed one)
    home = str(Path(advest.__file__).resolve().parents[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": home}
    for world in WORLDS:
        with tempfile.TemporaryDirectory() as folder:
            command = [sys.executable, "-m", "advest.experiments.cost.ranks"]
            procs = [subprocess.Popen([*command, str(r), str(world), folder], env=env)
                     for r in range(world)]  # fmt: skip
            if any(p.wait(timeout=600) != 0 for p in procs):
                raise RuntimeError(f"a worker of the {world}-process run failed")
            found["worlds"][str(world)] = json.loads((Path(folder) / "result.json").read_text())
    return found


if __name__ == "__main__":  # one rank of ``measure``: python -m ... RANK WORLD FOLDER
    _worker(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
