"""``python -m advest.experiments.cost.bench_sort``: every general max@K form against ``torch.sort``
of the same tensor alone, and the counting path on binary rewards against grpo, under both
allocators.

Each call is made as a trainer makes it: through ``fast.calling`` (the plan resolved once,
outside the timing), on a fresh input tensor (a copy made just before the call, untimed), so
that every buffer the call allocates and frees is as a trainer's would be. The reference call,
``torch.sort(rewards, dim=-1)``, gets its own fresh copy the same way. One round times every
call once, in a shuffled order (so that no call always follows the one whose freed memory it
reuses); rounds continue until every cell's median ratio moved less than ``rel_tol`` over the
last block of rounds, or a cap is reached. The ratio of a cell is the median over rounds of
(its time / the reference's time in the same round), so drifts in machine load cancel.

The two allocator modes cannot share a process (``bench.retain_freed_memory`` is process-wide and
cannot be undone), so each runs in its own child process and the parent prints them side by side:
``default``: glibc as configured, where whether a freed multi-MB buffer goes back to the OS (to
be page-faulted in again by a later call) depends on thresholds the process's own frees move;
``retain``: freed memory kept in the process, as jemalloc, tcmalloc and PyTorch's CUDA caching
allocator keep it. CPU only. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from advest.fast import calling, registry

from .bench import CLOCKS, MALLOC, retain_freed_memory

SORT, GRPO = "torch.sort", "grpo"
KEY_SORT = "torch.sort (bit keys)"
"""The sort the forms themselves run: the rewards' bit patterns as integers (``fast._maxk_core``),
printed as the floor under every general form."""


def general_forms() -> list[str]:
    """The max@K family's entries that take ``k`` and accept any real rewards (registry order)."""
    return [
        n
        for n in registry.names()
        if registry.entry(n).family == "maxk"
        and registry.entry(n).needs_k
        and not registry.entry(n).claims.binary_only
    ]


def binary_forms() -> list[str]:
    """Every max@K family entry that takes ``k``: on 0/1 rewards (G >= 16) they count levels
    instead of sorting (``chen_passk`` never sorts)."""
    return [
        n
        for n in registry.names()
        if registry.entry(n).family == "maxk" and registry.entry(n).needs_k
    ]


def _form_call(name: str, k: int) -> Callable[[Tensor], Any]:
    plan = calling.plan(name, k=k)
    return lambda rewards: plan.per_sample({"rewards": rewards})


def _sort_call(rewards: Tensor) -> Any:
    return torch.sort(rewards, dim=-1)


def _key_sort_call(rewards: Tensor) -> Any:
    bits = torch.finfo(rewards.dtype).bits
    return torch.sort(
        rewards.view({16: torch.int16, 32: torch.int32, 64: torch.int64}[bits]), dim=-1
    )


def _calls(k: int) -> dict[str, dict[str, Callable[[Tensor], Any]]]:
    """``{input kind: {name: call}}``; the first name of each kind is its reference."""
    general: dict[str, Callable[[Tensor], Any]] = {SORT: _sort_call, KEY_SORT: _key_sort_call}
    general |= {n: _form_call(n, k) for n in general_forms()}
    binary = {GRPO: _form_call(GRPO, k)} | {n: _form_call(n, k) for n in binary_forms()}
    return {"general": general, "binary": binary}


def _one_round(
    calls: list[tuple[str, str, Callable[[Tensor], Any]]],
    inputs: dict[str, Tensor],
    clock: Callable[[], float],
    order: random.Random,
) -> dict[tuple[str, str], float]:
    """Seconds of each call on its own fresh copy of its input kind, in a shuffled order."""
    out = {}
    for kind, name, fn in order.sample(calls, len(calls)):
        fresh = inputs[kind].clone()
        start = clock()
        fn(fresh)
        out[(kind, name)] = clock() - start
        del fresh
    return out


def measure(
    shape: tuple[int, int],
    k: int,
    *,
    rel_tol: float = 0.02,
    block: int = 10,
    min_rounds: int = 20,
    max_rounds: int = 200,
    clock: str = "wall",
) -> dict[str, Any]:
    """Ratios (median over rounds) and reference times for one shape, in this process's
    allocator mode: ``{"ratio": {kind: {name: r}}, "ms": {kind: {name: ms}}, "rounds": n,
    "stable": bool}``. Stops when every ratio's median moved < ``rel_tol`` over the last
    ``block`` rounds (after ``min_rounds``), or at ``max_rounds``."""
    gen = torch.Generator().manual_seed(0)
    general = torch.rand(*shape, generator=gen)
    inputs = {"general": general, "binary": (torch.rand(*shape, generator=gen) > 0.5).float()}
    table = _calls(k)
    calls = [(kind, name, fn) for kind, fns in table.items() for name, fn in fns.items()]
    tick, order = CLOCKS[clock], random.Random(0)
    _one_round(calls, inputs, tick, order)  # warm-up: caches, weight tables, first faults
    seconds: dict[tuple[str, str], list[float]] = {(kind, name): [] for kind, name, _ in calls}
    ratios: dict[tuple[str, str], list[float]] = {key: [] for key in seconds}
    previous: dict[tuple[str, str], float] | None = None
    stable, rounds = False, 0
    while rounds < max_rounds and not stable:
        for _ in range(min(block, max_rounds - rounds)):
            times = _one_round(calls, inputs, tick, order)
            for kind, name in seconds:
                seconds[(kind, name)].append(times[(kind, name)])
                reference = next(iter(table[kind]))
                ratios[(kind, name)].append(times[(kind, name)] / times[(kind, reference)])
            rounds += 1
        now = {key: statistics.median(values) for key, values in ratios.items()}
        if previous is not None and rounds >= min_rounds:
            stable = all(abs(now[key] / previous[key] - 1) < rel_tol for key in now)
        previous = now
    assert previous is not None
    return {
        "ratio": {kind: {n: previous[(kind, n)] for n in fns} for kind, fns in table.items()},
        "ms": {
            kind: {n: 1e3 * statistics.median(seconds[(kind, n)]) for n in fns}
            for kind, fns in table.items()
        },
        "rounds": rounds,
        "stable": stable,
    }


def _child(mode: str, shape: tuple[int, int], k: int, options: dict[str, Any]) -> dict[str, Any]:
    """``measure`` in a child process whose allocator is set to ``mode``."""
    argv = [sys.executable, "-m", "advest.experiments.cost.bench_sort", "--child", mode]
    argv += ["--shape", str(shape[0]), str(shape[1]), "--k", str(k)]
    for key, value in options.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} child failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def print_table(shape: tuple[int, int], k: int, results: dict[str, dict[str, Any]]) -> None:
    """Both modes side by side: per kind, each call's median ms and its median ratio."""
    modes = list(results)
    B, G = shape
    print(f"\nB={B}, G={G}, K={k}")
    for mode in modes:
        r = results[mode]
        note = "median stable" if r["stable"] else "stopped at the cap, median not stable"
        print(f"  {mode}: {r['rounds']} rounds ({note})")
    for kind, label in (("general", "× torch.sort"), ("binary", "× grpo")):
        print(f"\n{kind + ' rewards':<24}" + "".join(f"{m:>24}" for m in modes))
        print(f"{'':<24}" + f"{'ms':>10}{label:>14}" * len(modes))
        for name in results[modes[0]]["ratio"][kind]:
            row = f"{name:<24}"
            for mode in modes:
                ms, ratio = results[mode]["ms"][kind][name], results[mode]["ratio"][kind][name]
                row += f"{ms:>10.3f}{ratio:>14.2f}"
            print(row)


def run(
    shape: tuple[int, int] = (4096, 64),
    k: int = 16,
    modes: tuple[str, ...] = MALLOC,
    **options: Any,
) -> dict[str, dict[str, Any]]:
    """Measure every mode in its own child process and print them side by side; ``options`` go
    to ``measure`` (``threads`` sets torch's CPU threads in the children)."""
    unknown = [m for m in modes if m not in MALLOC]
    if unknown:
        raise ValueError(f"modes must be among {MALLOC}; got {unknown}")
    threads = options.get("threads") or torch.get_num_threads()
    print(
        f"max@K forms vs torch.sort: torch {torch.__version__}, cpu, threads={threads}, "
        f"clock={options.get('clock', 'wall')}, float32 input"
    )
    print(
        "each call on a fresh copy of its input (made untimed just before it), through "
        "fast.calling; ratio = median over rounds of time / the reference's in the same round"
    )
    print(
        "default: glibc as configured (freed multi-MB buffers go back to the OS); "
        "retain: freed memory kept in the process (mallopt)"
    )
    results = {mode: _child(mode, shape, k, options) for mode in modes}
    print_table(shape, k, results)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m advest.experiments.cost.bench_sort", description=__doc__
    )
    p.add_argument("--shape", type=int, nargs=2, default=[4096, 64], metavar=("B", "G"))
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    p.add_argument("--rel-tol", type=float, default=0.02, help="stop when medians move less")
    p.add_argument("--min-rounds", type=int, default=20)
    p.add_argument("--max-rounds", type=int, default=200)
    p.add_argument("--modes", nargs="+", choices=MALLOC, default=list(MALLOC))
    p.add_argument("--child", choices=MALLOC, default=None, help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    shape = (ns.shape[0], ns.shape[1])
    options = {"clock": ns.clock, "rel_tol": ns.rel_tol, "min_rounds": ns.min_rounds}
    options["max_rounds"] = ns.max_rounds
    if ns.child is None:
        run(shape, ns.k, tuple(ns.modes), threads=ns.threads, **options)
        return 0
    if ns.child == "retain":
        retain_freed_memory()
    if ns.threads:
        torch.set_num_threads(ns.threads)
    print(json.dumps(measure(shape, ns.k, **options)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
