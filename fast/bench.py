"""``advest bench``: median time per call of every fast estimator, side by side.

Ratios are to ``fast.group.grpo`` on the same tensor, and for ``canonical`` also to a
straightforward per-group Python loop (the same sorted prefix-sum formulas, one group at a time,
in Python floats) and to the MaxPO paper's dense O(G²) forms (Thms E.1/E.2, batched in torch,
chunked over groups to bound memory). Numbers are printed, never asserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor

from advest.fast import maxk_dense, registry
from advest.spec.maxk_weights import BinomRatio

SHAPES = [(4096, 8), (4096, 64), (256, 1024)]
QUICK_SHAPES = [(256, 8), (256, 64), (16, 1024)]


def _k_for(g: int) -> int:
    return {8: 4, 64: 16}.get(g, 64)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time_round_robin(
    calls: dict[str, Callable[[], Any]], repeats: int, device: torch.device
) -> dict[str, float]:
    """Median wall seconds per call, timing every call once per round so that machine drift
    (frequency, other load) falls on all of them alike; one warm-up round first."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeats + 1):
        for name, fn in calls.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            if round_:
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def _time(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    return _time_round_robin({"fn": fn}, repeats, device)["fn"]


def outcome_names() -> list[str]:
    """The estimators that take only rewards (and K, lengths): the maxk and group families."""
    return [n for n in registry.names() if registry.entry(n).family in ("maxk", "group")]


def _call(name: str, rewards: Tensor, binary: Tensor, k: int) -> Tensor:
    entry = registry.entry(name)
    if name == "chen_passk":
        out: Tensor = entry.fn(binary, k)
    elif entry.needs_lengths:
        out = entry.fn(rewards, torch.ones_like(rewards))
    elif entry.needs_k:
        out = entry.fn(rewards, k)
    else:
        out = entry.fn(rewards)
    return out


def python_loop_canonical(rewards: Tensor, k: int) -> list[list[float]]:
    """Δ one group at a time in plain Python: sort, the O(G) prefix/suffix sums, unsort."""
    # The loop baseline is the reference's own sorted form; imported here so that only this
    # benchmark column, never an estimator, loads advest.reference.
    from advest.reference.maxk_closed import sorted_blocks

    _, g = rewards.shape
    table: dict[BinomRatio, list[float]] = {}

    def weight(ratio: BinomRatio, q: int, n: int, kk: int) -> float:
        if ratio not in table:
            ok = kk + ratio.den_k <= n + ratio.den_n
            table[ratio] = [float(ratio.exact(p, n, kk)) if ok else 0.0 for p in range(1, n + 1)]
        return table[ratio][q - 1]

    out = []
    for group in rewards.tolist():
        order = sorted(range(g), key=group.__getitem__)
        blocks = sorted_blocks([group[t] for t in order], k, weight)
        delta = [0.0] * g
        for p, t in enumerate(order):
            delta[t] = blocks.m_plus[p] - blocks.m_minus[p]
        out.append(delta)
    return out


def dense_maxpo(rewards: Tensor, k: int, chunk_bytes: int = 256 * 2**20) -> Tensor:
    """EI − b by the MaxPO paper's dense forms, in chunks of ~``chunk_bytes`` of groups each."""
    g = rewards.shape[1]
    step = max(1, chunk_bytes // (8 * g * g))
    parts = [
        maxk_dense.ei_dense(part, k) - maxk_dense.l2o_dense(part, k)
        for part in torch.split(rewards, step, dim=0)
    ]
    return torch.cat(parts)


def _measure(rewards: Tensor, k: int, repeats: int, dev: torch.device) -> dict[str, float]:
    """Median seconds per call of every registered estimator and the two comparisons."""
    binary = (rewards > 0.5).float()
    calls: dict[str, Callable[[], Any]] = {
        name: partial(_call, name, rewards, binary, k) for name in outcome_names()
    }
    out = _time_round_robin(calls, repeats, dev)
    out["dense O(G²) maxpo"] = _time(lambda: dense_maxpo(rewards, k), 3, dev)
    host = rewards.cpu()
    loop_reps = 1 if rewards.numel() > 2**17 else 3
    out["python loop canonical"] = _time(lambda: python_loop_canonical(host, k), loop_reps, dev)
    return out


def run(
    repeats: int = 15, quick: bool = False, device: str | None = None, threads: int | None = None
) -> None:
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if threads:
        torch.set_num_threads(threads)
    threads = torch.get_num_threads()
    print(f"advest bench: device={dev}, torch {torch.__version__}, threads={threads}")
    print(f"median of {repeats} calls; float32 input; '× grpo' = time / grpo's on the same tensor")
    names = outcome_names()
    shapes = QUICK_SHAPES if quick else SHAPES
    gen = torch.Generator().manual_seed(0)
    times = {
        s: _measure(torch.rand(*s, generator=gen).to(dev), _k_for(s[1]), repeats, dev)
        for s in shapes
    }
    head = f"{'estimator':<24}" + "".join(f"{f'B={b},G={g},K={_k_for(g)}':>28}" for b, g in shapes)
    print(head)
    print(f"{'':<24}" + "".join(f"{'ms':>14}{'× grpo':>14}" for _ in shapes))
    for name in [*names, "dense O(G²) maxpo", "python loop canonical"]:
        row = f"{name:<24}"
        for shape in shapes:
            t, base = times[shape][name], times[shape]["grpo"]
            row += f"{t * 1e3:>14.3f}{t / base:>14.2f}"
        print(row)
    print("\nfast canonical speed-up over:")
    for shape in shapes:
        fast_t = times[shape]["canonical"]
        loop = times[shape]["python loop canonical"] / fast_t
        dense = times[shape]["dense O(G²) maxpo"] / fast_t
        where = f"B={shape[0]:>5}, G={shape[1]:>5}"
        print(f"  {where}: python loop {loop:8.1f}×   dense O(G²) {dense:8.1f}×")
    maxk = [n for n in names if registry.entry(n).family == "maxk"]
    mid = shapes[1]
    worst = max(maxk, key=lambda n: times[mid][n])
    ratio = times[mid][worst] / times[mid]["grpo"]
    where = f"B={mid[0]}, G={mid[1]}"
    print(f"\nslowest max@K estimator at {where}: {worst}, {ratio:.2f}× grpo (target ≤ 4×)")
