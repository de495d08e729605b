"""The oracle's "split over ranks" row: is a user's estimator right
under data parallelism, does it need a collective, or does it need each group on one rank?

The estimator is a callable on flat rows, ``fn(rewards [N], index [N]) -> [N]`` (the ``flat``
convention of ``oracle.conventions.rows``). ``split_over_ranks`` starts a gloo process group of
2 to 4 processes on the CPU (the default group, so an estimator that reduces over
``torch.distributed`` itself, as slime's whitening does, runs its own collectives), calls the
estimator on each rank's shard of one batch, and compares the shards' advantages, put back
together, with one call on the whole batch in this process (no process group). Two layouts:

* whole groups: each rank holds some groups, all their rows (the trainer's layout; uneven
  shares, so no rank holds the mean share);
* split groups: the rows in a shuffled order cut into contiguous shards, so most groups have
  rows on two ranks (sequence balancing, packing, multi-output agent loops).

Verdicts: equal in both layouts: "yes" (right under data parallelism, however rows are placed);
equal with whole groups only: "yes, with each group on one rank" (group-local, as GRPO: place a
group's rows on one rank, or call ``advest.fast.by_group(group=...)``); other advantages with
whole groups: "no: needs a collective" (a statistic over the batch, a whitening, a history,
computed per rank: all-reduce it over the data-parallel group). Equality is to 1e-9 of the
batch's largest |A| in float64: a correct collective changes only the order of float64 sums.

The processes are forked (no re-import of torch, so a row costs about a second, and any
callable works, a closure included); a rank that raises, or hangs past ``timeout`` (a collective
that only some ranks enter), gives a "fails" verdict naming it.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

FlatFn = Callable[[Tensor, Tensor], Tensor]
"""``fn(rewards [N] float64, index [N] int64) -> advantages [N]``."""
REL = 1e-9
"""Allowed |sharded − whole| relative to the whole batch's max |A| (float64 sum order only)."""
YES = "yes"
GROUPS_ON_ONE_RANK = "yes, with each group on one rank"
NEEDS_COLLECTIVE = "no: needs a collective"
FAILS = "fails"


@dataclass(frozen=True)
class RanksVerdict:
    """The row's verdict, the sentence of evidence behind it, and its numbers."""

    verdict: str
    evidence: str
    data: dict[str, Any] = field(default_factory=dict)


def batch(B: int = 6, G: int = 4, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``(rewards [B·G] float64, index [B·G] int64)``: B groups of G rows in four reward levels
    (every group spread, the groups' means apart), rows in a shuffled order."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 4, (B, G), generator=gen).to(torch.float64) / 3  # [B, G]
    rewards[:, 0], rewards[:, 1] = 0.0, 1.0  # a spread in every group
    rewards = rewards + torch.arange(B, dtype=torch.float64)[:, None] / B  # means apart
    order = torch.randperm(B * G, generator=gen)  # [N]
    index = torch.arange(B).repeat_interleave(G)  # [N]
    return rewards.reshape(-1)[order], index[order]


def layouts(index: Tensor, world: int) -> dict[str, list[Tensor]]:
    """Each layout's rows per rank (``[N_r]`` positions into the batch): "whole groups" gives
    rank r the groups of a contiguous, uneven range of ids; "split groups" cuts the shuffled
    rows into uneven contiguous shards."""
    n, ids = index.shape[0], sorted(set(index.tolist()))
    weights = list(range(1, world + 1))  # uneven: rank r gets a share ∝ r + 1
    cuts = [0, *(n * sum(weights[: r + 1]) // sum(weights) for r in range(world))]
    id_cuts = [0, *(len(ids) * sum(weights[: r + 1]) // sum(weights) for r in range(world))]
    whole = []
    for r in range(world):
        mine = torch.tensor(ids[id_cuts[r] : id_cuts[r + 1]], dtype=index.dtype)
        whole.append(torch.isin(index, mine).nonzero().squeeze(-1))
    split = [torch.arange(cuts[r], cuts[r + 1]) for r in range(world)]
    return {"whole groups": whole, "split groups": split}


def _rank(fn: FlatFn, rank: int, world: int, folder: str, rows: dict[str, list[Tensor]]) -> None:
    """One process: join the gloo group, call ``fn`` on this rank's shard of each layout, write
    the advantages (or the error) to ``folder/rank{rank}.pt``."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    rewards, index = batch()
    out: dict[str, Any] = {}
    dist.init_process_group(
        "gloo", init_method=f"file://{folder}/store", rank=rank, world_size=world
    )
    try:
        for name, shards in rows.items():
            mine = shards[rank]
            out[name] = torch.as_tensor(fn(rewards[mine], index[mine])).detach().double()
    except Exception as error:  # the user's code: any exception is its verdict
        out["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"
    try:  # no rank leaves while another is still in a collective of fn's
        dist.barrier()
        dist.destroy_process_group()
    except RuntimeError as error:  # another rank left: its own error says why
        out.setdefault("later", f"{type(error).__name__}: {error}")
    torch.save(out, Path(folder) / f"rank{rank}.pt")


def _run(fn: FlatFn, world: int, timeout: float) -> list[dict[str, Any]] | str:
    """Each rank's results, or why a rank gave none."""
    rows = layouts(batch()[1], world)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as folder:
        procs = [
            context.Process(target=_rank, args=(fn, r, world, folder, rows)) for r in range(world)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout)
        hung = [r for r, proc in enumerate(procs) if proc.is_alive()]
        for r in hung:
            procs[r].kill()
            procs[r].join()
        if hung:
            why = "a collective that not every rank enters?"
            return f"rank {hung[0]} of {world} hung for {timeout:g} s ({why})"
        results = []
        for r in range(world):
            path = Path(folder) / f"rank{r}.pt"
            if not path.exists():
                return f"rank {r} of {world} died (exit code {procs[r].exitcode})"
            results.append(torch.load(path))
    return results


def _worst(fn: FlatFn, shards: list[Tensor], outs: list[Tensor]) -> tuple[float, int, float]:
    """``(max |sharded − whole|, the row, the allowance)`` for one layout."""
    rewards, index = batch()
    whole = torch.as_tensor(fn(rewards, index)).detach().double()  # [N]
    got = torch.full_like(whole, torch.nan)
    for mine, out in zip(shards, outs, strict=True):
        if out.shape != mine.shape:
            raise ValueError(f"a shard of {mine.shape[0]} rows gave shape {tuple(out.shape)}")
        got[mine] = out
    error = (got - whole).abs()
    allow = REL * max(float(whole.abs().max()), 1e-300)
    row = int(error.nan_to_num(torch.inf).argmax())
    return float(error.nan_to_num(torch.inf)[row]), row, allow


def split_over_ranks(fn: FlatFn, world: int = 2, timeout: float = 60.0) -> RanksVerdict:
    """The "split over ranks" verdict of ``fn`` on ``world`` (2 to 4) gloo CPU processes."""
    if isinstance(world, bool) or not isinstance(world, int) or not 2 <= world <= 4:
        raise ValueError(f"world must be 2, 3 or 4 processes; got world={world!r}")
    found = _run(fn, world, timeout)
    if isinstance(found, str):
        return RanksVerdict(FAILS, found)
    # the estimator's own error first: a rank whose partner left then fails in the barrier
    errors = [
        (r, res[key]) for key in ("error", "later") for r, res in enumerate(found) if key in res
    ]
    if errors:
        rank, message = errors[0]
        return RanksVerdict(FAILS, f"rank {rank} of {world} raised {message.splitlines()[0]}")
    index = batch()[1]
    rows = layouts(index, world)
    data: dict[str, Any] = {"world": world}
    for name in rows:
        worst, row, allow = _worst(fn, rows[name], [res[name] for res in found])
        data[name] = {"max_error": worst, "allowance": allow, "row": row}
    whole, split = data["whole groups"], data["split groups"]
    if whole["max_error"] > whole["allowance"]:
        g = int(index[whole["row"]])
        return RanksVerdict(
            NEEDS_COLLECTIVE,
            f"with every group's rows on one rank ({world} ranks), group {g} gets advantages "
            f"{whole['max_error']:.3g} away from one process holding the batch: a statistic "
            "over the batch (a mean, a std, a whitening, a history) is computed per rank; "
            "all-reduce it over the data-parallel group",
            data,
        )
    if split["max_error"] > split["allowance"]:
        g = int(index[split["row"]])
        return RanksVerdict(
            GROUPS_ON_ONE_RANK,
            f"right with every group on one rank; group {g}, its rows split over ranks, gets "
            f"advantages {split['max_error']:.3g} away: place each group's rows on one rank "
            "(or call advest.fast.by_group with group=)",
            data,
        )
    return RanksVerdict(
        YES,
        f"equal to one process on {world} ranks, whole groups or split ones "
        f"(max |Δ| {max(whole['max_error'], split['max_error']):.2g})",
        data,
    )
