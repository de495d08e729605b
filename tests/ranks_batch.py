"""Every registered estimator on one batch sharded over N gloo processes (issue 55; STYLE.md rule
31): the batch, its shards, the worker each process runs and the comparison with one process.

Two layouts per estimator: "grid", the trainer's ``[B_r, G]`` rollout per rank (whole groups,
uneven shares), called through ``calling.Plan.over``; and "flat", rows ``[N_r]`` with a group id
each in a shuffled order, so one group's rows lie on several ranks, called through
``flat.by_group(group=...)``. A stateful estimator (KAE) is called for ``STEPS`` iterations and
its history is compared too. Each worker also computes the defect the comparison must catch,
"planted": no process group is passed, so each rank computes its batch statistics, histories and
groups over its own share only.

Run as ``python -m tests.ranks_batch RANK WORLD OUT`` (``launch`` starts them): most of a
worker's time is importing torch (torch._dynamo included), so one launch computes both.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from advest.fast import calling, flat, registry
from advest.training.rollout import synthetic

B, G, T, K, STEPS = 6, 4, 6, 2, 3
PLACEHOLDERS, NO_ID = 3, 99
"""Flat rows that are no sample (``valid`` False), under an id no prompt has."""
ROOT = Path(__file__).resolve().parents[1]
SHARES = {2: [2, 4], 3: [1, 2, 3]}
"""Groups per rank in the grid layout (uneven, so no rank's share is the mean one)."""


def whole(entry: registry.Entry, step: int) -> dict[str, Any]:
    """Every input field of a ``[B, G]`` batch for ``entry`` (float64 rewards in four levels,
    0/1 for a binary-only estimator; responses of 1..T tokens; two turns), seeded by ``step``."""
    rollout = synthetic(B, G, T, seed=step)
    gen = torch.Generator().manual_seed(1000 + step)
    levels = torch.randint(0, 4, (B, G), generator=gen).to(torch.float64) / 3
    rewards = (levels > 0.5).to(torch.float64) if entry.claims.binary_only else levels
    lengths = torch.randint(1, T + 1, (B, G), generator=gen)
    tokens = torch.arange(T)
    mask = tokens < lengths[..., None]  # [B, G, T]
    turn = (tokens >= (lengths[..., None] + 1) // 2).long()  # the second half: turn 1
    return {
        "rewards": rewards,
        "lengths": lengths,
        "token_ids": rollout.token_ids,
        "mask": mask,
        "logprobs": rollout.logprobs.to(torch.float64),
        "hidden": rollout.hidden.to(torch.float64) if rollout.hidden is not None else None,
        "texts": rollout.texts,
        "offsets": rollout.offsets,
        "prompt_ids": (torch.arange(B) + 2 * step) % 9,  # prompts recur across iterations
        "reward_parts": torch.stack([rewards, torch.rand(B, G, generator=gen).double()], -1),
        "reward_weights": torch.tensor([1.0, 0.5], dtype=torch.float64),
        "sum_pi_squared": rollout.sum_pi_squared.to(torch.float64)
        if rollout.sum_pi_squared is not None
        else None,
        "turn_rewards": torch.rand(B, G, K, generator=gen).double(),
        "turn_ids": torch.where(mask, turn, -1),
    }


def grid_share(source: dict[str, Any], world: int, rank: int) -> dict[str, Any]:
    """Rank ``rank``'s groups (``SHARES``) of every per-group field."""
    start = sum(SHARES[world][:rank])
    rows = slice(start, start + SHARES[world][rank])
    return {
        name: value if name == "reward_weights" else value[rows] for name, value in source.items()
    }


def flat_rows(source: dict[str, Any]) -> tuple[Tensor, list[int], dict[str, Any]]:
    """``(rewards [N], index [N], fields)``: the batch as rows in a fixed shuffled order, the
    group id of a row its prompt id, with ``PLACEHOLDERS`` rows that are no sample among them
    (``fields["valid"]`` False; copies of sample rows under an id no sample has)."""
    n = B * G + PLACEHOLDERS
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(7))  # [N]
    order = torch.cat([torch.arange(B * G), torch.arange(PLACEHOLDERS)])[perm]  # source rows
    placeholder = (torch.arange(n) >= B * G)[perm]  # [N] bool
    fields: dict[str, Any] = {}
    for name, value in source.items():
        if name in ("prompt_ids", "reward_weights"):
            continue
        if isinstance(value, list):
            rows = [text for group in value for text in group]
            fields[name] = [rows[int(i)] for i in order]
        else:
            fields[name] = value.reshape(B * G, *value.shape[2:])[order]
    ids = torch.where(placeholder, NO_ID, source["prompt_ids"].repeat_interleave(G)[order])
    fields["valid"] = ~placeholder
    if "reward_weights" in source:
        fields["reward_weights"] = source["reward_weights"]
    return fields.pop("rewards"), ids.tolist(), fields


def flat_share(
    rows: tuple[Tensor, list[int], dict[str, Any]], world: int, rank: int
) -> tuple[Tensor, list[int], dict[str, Any]]:
    """Rank ``rank``'s contiguous chunk of the shuffled rows (``N·(rank + 1)/Σ`` apart: uneven),
    so most groups have rows on two ranks."""
    rewards, ids, fields = rows
    N = rewards.shape[0]
    cuts = [0, *(N * sum(range(1, r + 2)) // sum(range(1, world + 1)) for r in range(world))]
    mine = slice(cuts[rank], cuts[rank + 1])
    share = {n: v if n == "reward_weights" else v[mine] for n, v in fields.items()}
    return rewards[mine], ids[mine], share


def k_of(entry: registry.Entry) -> int | None:
    return 2 if entry.needs_k else None


def used(entry: registry.Entry, source: dict[str, Any]) -> dict[str, Any]:
    """The fields the estimator (and a reweighter's base, grpo) reads."""
    plan = calling.plan(entry.name, k=k_of(entry))
    keep = ("rewards", "mask", "prompt_ids")  # by_group's rows and ids; a sequence output's tokens
    return {name: value for name, value in source.items() if plan.needs(name) or name in keep}


def one_process(entry: registry.Entry) -> dict[str, list[Any]]:
    """Each layout's advantages per step, and the final state, on one process holding it all."""
    grid = calling.plan(entry.name, k=k_of(entry))
    by_rows = calling.plan(entry.name, k=k_of(entry))
    out: dict[str, list[Any]] = {"grid": [], "flat": []}
    for step in range(STEPS if entry.stateful else 1):
        source = used(entry, whole(entry, step))
        out["grid"].append(grid.advantages(source))
        rewards, ids, fields = flat_rows(source)
        out["flat"].append(flat.by_group(by_rows, rewards, ids, k=k_of(entry), **fields))
    out["state"] = [_state(grid), _state(by_rows)]
    return out


def sharded(entry: registry.Entry, world: int, rank: int, group: Any) -> dict[str, list[Any]]:
    """This rank's advantages per step on its share of each layout, and its final state."""
    grid = calling.plan(entry.name, k=k_of(entry)).over(group)
    by_rows = calling.plan(entry.name, k=k_of(entry))
    out: dict[str, list[Any]] = {"grid": [], "flat": []}
    for step in range(STEPS if entry.stateful else 1):
        source = used(entry, whole(entry, step))
        out["grid"].append(_try(grid.advantages, grid_share(source, world, rank)))
        rewards, ids, fields = flat_share(flat_rows(source), world, rank)
        call = flat.by_group
        out["flat"].append(_try(call, by_rows, rewards, ids, k=k_of(entry), group=group, **fields))
    out["state"] = [_state(grid), _state(by_rows)]
    return out


def _try(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except (ValueError, TypeError, KeyError) as error:  # recorded; the test names it
        return f"{type(error).__name__}: {error}"


def _state(plan: calling.Plan) -> dict[str, Any] | None:
    return plan.instance.state_dict() if plan.entry.stateful else None


def allowed(entry: registry.Entry, rewards: Tensor, expected: Tensor) -> Tensor:
    """The estimator's float64 tolerance, rel · scale (``spec.tolerances``), broadcastable to
    ``expected``: the scale of its rule ("group": each group's spread or |A|; "batch": the whole
    batch's; "output": max |A|)."""
    tol = entry.tolerance[torch.float64]
    a = expected.abs().reshape(expected.shape[0], -1).amax(dim=1)  # [rows]
    if tol.scale == "group" and rewards.dim() == 2:
        spread = rewards.amax(dim=1) - rewards.amin(dim=1)
        scale = torch.maximum(spread, a)
    else:
        scale = torch.maximum(rewards.amax() - rewards.amin(), a.amax()).expand(a.shape)
    bound = tol.rel * scale + tol.offset_rel * rewards.abs().amax() + 1e-300
    return bound.reshape(-1, *[1] * (expected.dim() - 1))


def mismatch(entry: registry.Entry, expected: Tensor, got: Any, rewards: Tensor) -> str | None:
    """None when ``got`` equals ``expected`` to the estimator's tolerance, else why not."""
    if isinstance(got, str):
        return got
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)}, one process gave {tuple(expected.shape)}"
    error = (got.double() - expected.double()).abs()
    over = error > allowed(entry, rewards, expected)
    if not bool(over.any()):
        return None
    return f"{int(over.sum())} values off by up to {float(error.max()):.3g}"


def problems(name: str, world: int, ranks: list[Any], expected: dict[str, list[Any]]) -> list[str]:
    """Every way the ranks' results differ from one process's, as sentences."""
    entry = registry.entry(name)
    found: list[str] = []
    for step, want in enumerate(expected["grid"]):
        rewards = whole(entry, step)["rewards"]
        cuts = [0, *torch.tensor(SHARES[world]).cumsum(0).tolist()]
        for rank, result in enumerate(ranks):
            mine = slice(cuts[rank], cuts[rank + 1])
            why = mismatch(entry, want[mine], result[name]["grid"][step], rewards[mine])
            if why:
                found.append(f"grid, step {step}, rank {rank}: {why}")
        flat_rewards = flat_rows(whole(entry, step))[0]
        got = [result[name]["flat"][step] for result in ranks]
        if any(isinstance(g, str) for g in got):
            found.append(f"flat, step {step}: {next(g for g in got if isinstance(g, str))}")
            continue
        why = mismatch(entry, expected["flat"][step], torch.cat(got), flat_rewards.reshape(-1, 1))
        if why:
            found.append(f"flat, step {step}: {why}")
    for layout, want_state in zip(("grid", "flat"), expected["state"], strict=True):
        if want_state is None:
            continue
        for rank, result in enumerate(ranks):
            state = result[name]["state"][("grid", "flat").index(layout)]
            if not same_state(state, want_state):
                found.append(f"{layout}: rank {rank}'s history is not one process's")
    return found


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    return all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
    )


def launch(world: int, out: Path, fresh: bool = True) -> list[dict[str, Any]]:
    """``world`` gloo processes on the CPU; each rank's results, ``{"plain": {name: ...},
    "planted": {name: ...}}`` (also in ``out/rank{r}.pt``). ``fresh``: each a new interpreter,
    as DDP starts them (about 10 s importing torch on 2 busy cores); else forked from this one
    (a second: the core tier's run)."""
    if not fresh:
        return _forked(world, out)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "PYTHONWARNINGS": "ignore",
    }
    args = [str(world), str(out)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ranks_batch", str(r), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (proc, log) in enumerate(zip(procs, logs, strict=True)):
        if proc.returncode != 0:
            raise RuntimeError(f"rank {rank} of {world} exited {proc.returncode}:\n{log}")
    return [torch.load(out / f"rank{r}.pt") for r in range(world)]


def _forked(world: int, out: Path) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=main, args=(r, world, out)) for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(300)
    for rank, proc in enumerate(procs):
        if proc.is_alive():
            proc.kill()
        if proc.exitcode != 0:
            raise RuntimeError(f"rank {rank} of {world} exited {proc.exitcode} (its stderr above)")
    return [torch.load(out / f"rank{r}.pt") for r in range(world)]


def main(rank: int, world: int, out: Path) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out}/store", rank=rank, world_size=world)
    results = {
        mode: {e.name: sharded(e, world, rank, group) for e in registry.entries()}
        for mode, group in (("plain", dist.group.WORLD), ("planted", None))
    }
    torch.save(results, out / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
