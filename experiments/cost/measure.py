"""Measure how the time and peak memory of one call of each registered estimator grow with its
sizes: G (samples per prompt), K (the K of max@K, for the estimators that take one), B (prompts)
and T (response tokens, for the token and episode kinds), one axis at a time, the others fixed.

Time: the median over repeated calls (at least 3, more while a per-point budget lasts) after a
warm-up call (which fills the caches, e.g. the max@K weights of a (G, K)). On CPU it is this
process's CPU time with one thread, so that the other jobs of a shared machine neither add their
time nor take cores from the call; on CUDA, wall time between device synchronisations.

Peak memory: the most bytes the call holds at once through torch's allocator, above what was
held when it began: on CPU from the allocation and free events of torch's profiler (every
tensor and every buffer an operator takes from the CPU allocator, in order; Python objects such
as numca's strings are not counted), on CUDA ``torch.cuda.max_memory_allocated``. Both are
deterministic for a given call.

Inputs (``[B, G]`` rewards, ``[B, G, T]`` token fields): general uniform rewards for the outcome
kinds (the max@K estimators' sorted path, their costliest), 0/1 for a binary-only estimator and
for the token kinds (each group both passes and fails, so KTAE's tests run), token ids from a
vocabulary of ``VOCAB`` (so that KTAE meets as many distinct ids as a real model gives it),
hidden states of width ``HIDDEN``, two reward functions, episodes of two turns with the
environment's tokens between them, and a KAE that has seen ``HISTORY`` earlier calls of the same
prompts (each timed call gets a fresh copy of it).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from torch import Tensor

from advest.fast import calling, registry
from advest.spec import cost as orders

VOCAB, HIDDEN, REWARDS, HISTORY = 32000, 8, 2, 4
OUTCOME = ("sequence", "multi_reward", "history")
"""The kinds whose inputs are ``[B, G]`` per prompt and sample (no tokens)."""

SCALES: dict[str, dict[str, list[int]]] = {
    "full": {
        "G": [2**i for i in range(1, 11)],
        "K": [2**i for i in range(0, 10)],
        "B": [2**i for i in range(0, 13)],
        "T": [2**i for i in range(2, 11)],
    },
    "quick": {
        "G": [2**i for i in range(6, 11)],
        "K": [2**i for i in range(6, 10)],
        "B": [2**i for i in range(6, 11)],
        "T": [2**i for i in range(6, 11)],
    },
    "tiny": {"G": [2, 4, 8], "K": [1, 2], "B": [1, 2, 4], "T": [4, 8, 16]},
}
"""The sizes of each axis. The fit reads the top decade of an axis (``fit``), so "full"
and "quick" reach the same largest sizes; "tiny" only runs the code path."""

BASE = {
    "outcome": {"G": {}, "K": {"G": 1024}, "B": {"G": 64}},
    "token": {"G": {"T": 8}, "B": {"G": 8, "T": 16}, "T": {"G": 8}},
}
"""The sizes other than B held fixed along each axis (G = 8, T = 16 where not named)."""
B_MAX = {"cpu": {"outcome": 256, "token": 64}, "cuda": {"outcome": 4096, "token": 256}}
WORK = {"cpu": 2**24, "cuda": 2**26}
"""B along the G, K and T axes: the largest power of two up to ``B_MAX`` of the device and kind
at which the estimator's stated order at the axis's largest size stays within ``WORK``. Large
enough that the top decade measures the work, not the fixed cost of a call (a GPU's is larger);
small enough that the quadratic estimators (KTAE's ``[distinct ids, G + 1]`` grid, Hista's block
pairs) fit in memory and the CPU table takes a few minutes on 2 cores."""
BUDGET = {"full": 0.1, "quick": 0.03, "tiny": 0.002}
"""Seconds of repeated calls per point (at least 3 calls whatever it costs)."""


def axes(entry: registry.Entry) -> list[str]:
    """The axes measured for ``entry``: G and B always, K when it takes one, T when it reads
    tokens."""
    return ["G", *(["K"] if entry.needs_k else []), "B"] + ([] if entry.kind in OUTCOME else ["T"])


def _sizes(entry: registry.Entry, fixed: dict[str, int], axis: str, x: int) -> dict[str, int]:
    """Every symbol an order may name (``spec.cost.SYMBOLS``) at one point: K = 4 (at most the
    top of the domain) unless K is the axis, 1 without K."""
    s = {"B": 1, "G": 8, "T": 16, **fixed, axis: x}
    if entry.kind in OUTCOME:
        s["T"] = 1
    if not entry.needs_k:
        s["K"] = 1
    elif axis != "K":
        s["K"] = max(1, min(4, entry.k_max(s["G"])))
    return {**s, "D": HIDDEN, "R": REWARDS, "L": HISTORY, "V": s["B"] * HISTORY}


def points(
    entry: registry.Entry, axis: str, scale: str, device: str = "cpu"
) -> list[dict[str, int]]:
    """The sizes measured along ``axis`` (ascending) on a ``device`` type, those below the
    entry's smallest group or batch left out; along K the sizes up to the top of its domain,
    which is added."""
    group = "outcome" if entry.kind in OUTCOME else "token"
    fixed = dict(BASE[group][axis])
    grid = SCALES[scale][axis]
    if scale == "tiny":  # the code path only
        fixed = {k: min(v, 8) for k, v in fixed.items()}
    if axis != "B":
        order, _ = orders.parse(entry.cost)
        b = 2 if scale == "tiny" else B_MAX[device][group]
        while b > 1 and order(_sizes(entry, {**fixed, "B": b}, axis, grid[-1])) > WORK[device]:
            b //= 2
        fixed["B"] = b
    if axis == "K":
        top = entry.k_max(fixed["G"])
        grid = sorted({min(x, top) for x in grid} | ({top} if scale != "tiny" else set()))
    smallest = {"G": max(2, entry.claims.min_n), "B": entry.claims.min_b, "K": 1, "T": 3}
    return [_sizes(entry, fixed, axis, x) for x in grid if x >= smallest[axis]]


ALPHABET = "0123456789+= "
"""The responses' characters, one per token (numca finds numbers among them)."""


def _texts(chars: Tensor) -> list[list[str]]:
    """``[B][G]`` strings of ``ALPHABET[chars]`` (``chars: [B, G, T]``), built in one pass."""
    B, G, T = chars.shape
    flat = bytes(ALPHABET.encode())  # one byte per character
    table = torch.tensor(list(flat), dtype=torch.uint8)
    text = bytes(table[chars].flatten().tolist()).decode("ascii")
    return [[text[(b * G + g) * T : (b * G + g + 1) * T] for g in range(G)] for b in range(B)]


def inputs(entry: registry.Entry, s: dict[str, int], device: torch.device) -> dict[str, Any]:
    """Every field ``entry`` and a reweighter's base estimator read, at sizes ``s``; only those
    are built."""
    gen = torch.Generator().manual_seed(0)
    B, G, T = s["B"], s["G"], s["T"]
    chars = torch.randint(len(ALPHABET), (B, G, T), generator=gen)
    logprobs = -torch.rand(B, G, T, generator=gen) * 3
    # Σπ² of a distribution that spreads the rest of the mass evenly over the other ids
    p, others = logprobs.exp(), len(ALPHABET) + 2
    rewards = torch.rand(B, G, generator=gen)
    if entry.claims.binary_only or entry.kind not in OUTCOME:
        rewards = (torch.arange(G) % 2).float().repeat(B, 1)  # each group passes and fails
    third = torch.arange(T) * 3 // T  # two turns, the environment's answer between them
    build: dict[str, Callable[[], Any]] = {
        "rewards": lambda: rewards,
        "lengths": lambda: torch.randint(1, 100, (B, G), generator=gen),
        "prompt_ids": lambda: torch.arange(B),
        "reward_parts": lambda: torch.rand(B, G, REWARDS, generator=gen),
        "reward_weights": lambda: torch.ones(REWARDS, dtype=torch.float64),
        "mask": lambda: torch.ones(B, G, T, dtype=torch.bool),
        "logprobs": lambda: logprobs,
        "sum_pi_squared": lambda: p**2 + (1 - p) ** 2 / others,
        "hidden": lambda: torch.randn(B, G, T, HIDDEN, generator=gen),
        "token_ids": lambda: torch.randint(3, VOCAB, (B, G, T), generator=gen),
        "texts": lambda: _texts(chars),
        "offsets": lambda: torch.stack([torch.arange(T), torch.arange(T) + 1], -1).expand(
            B, G, T, 2
        ),
        "turn_ids": lambda: torch.tensor([0, -1, 1])[third].expand(B, G, T).contiguous(),
        "turn_rewards": lambda: torch.rand(B, G, 2, generator=gen),
    }
    needed = set(entry.inputs) | ({"rewards", "mask"} if "advantages" in entry.inputs else set())
    out = {name: build[name]() for name in sorted(needed - {"k", "advantages"})}
    return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in out.items()}


Factory = Callable[[], Callable[[], Any]]
"""Makes one timed call: untimed set-up (a fresh copy of a stateful estimator), then the call."""


def factory(entry: registry.Entry, s: dict[str, int], device: torch.device) -> Factory:
    """The calls of ``entry`` at sizes ``s``, made as every caller makes them (a
    ``fast.calling.Plan``, built here from the entry so that an unregistered one can be measured
    too); a reweighter's base advantages come from ``grpo`` once, outside the timing."""
    source = inputs(entry, s, device)
    base_entry = registry.entry("grpo") if "advantages" in entry.inputs else None
    fields = frozenset(entry.inputs) | frozenset(base_entry.inputs if base_entry else ())
    k = s["K"] if entry.needs_k else None
    plan = calling.Plan(
        entry, base_entry, entry.fn() if entry.stateful else entry.fn, {}, fields, k
    )
    if entry.stateful:
        for _ in range(HISTORY):  # the history a run has built (the points' L and V)
            plan.output(source)
        return lambda: partial(plan.fresh().output, source)
    base = None
    if base_entry is not None:
        base = calling.value(calling.Plan(base_entry, None, base_entry.fn).output(source))
    call = partial(plan.output, source, base)
    return lambda: call


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _clock(device: torch.device) -> Callable[[], float]:
    return time.process_time if device.type == "cpu" else time.perf_counter


def seconds(make: Factory, budget: float, device: torch.device) -> tuple[float, int]:
    """(median seconds of one call, calls timed): a warm-up call, then at least 3 calls and as
    many more as ``budget`` seconds hold (at most 25)."""
    clock = _clock(device)

    def once() -> float:
        call = make()  # untimed: a stateful estimator's fresh copy
        _sync(device)
        start = clock()
        call()
        _sync(device)
        return clock() - start

    once()
    first = once()
    repeats = max(3, min(25, int(budget / max(first, 1e-6))))
    samples = [first] + [once() for _ in range(repeats - 1)]
    return statistics.median(samples), repeats


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: torch's profiler (kineto) writes a start and a stop
    line there on every use, and reads the setting that would silence it only when torch loads."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def peak_bytes(make: Factory, device: torch.device) -> int:
    """The most bytes one call holds at once above what was held when it began (the module's
    docstring says how, on each device)."""
    call = make()
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        call()
        _sync(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    assert results is not None, "the profiler recorded nothing"
    events = [e for e in results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):  # allocations +, frees −, in order
        live += e.nbytes()
        peak = max(peak, live)
    return peak


Progress = Callable[[str], None]


def measure_axis(
    entry: registry.Entry, axis: str, scale: str, device: torch.device
) -> list[dict[str, Any]]:
    """One row per size along ``axis``: the sizes, median seconds, calls timed, peak bytes."""
    rows = []
    for s in points(entry, axis, scale, device.type):
        make = factory(entry, s, device)
        t, repeats = seconds(make, BUDGET[scale], device)
        t = float(f"{t:.4g}")  # four digits: a loaded machine's noise is larger
        rows.append(
            {"sizes": s, "seconds": t, "repeats": repeats, "peak_bytes": peak_bytes(make, device)}
        )
    return rows


def measure(
    entries: list[registry.Entry],
    device: str = "cpu",
    scale: str = "full",
    only_axes: tuple[str, ...] | None = None,
    progress: Progress = print,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{estimator: {axis: rows}}`` for ``entries`` (``measure_axis``). On CPU with one torch
    thread (restored afterwards)."""
    dev = torch.device(device)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for entry in entries:
            start = time.perf_counter()
            wanted = [a for a in axes(entry) if only_axes is None or a in only_axes]
            out[entry.name] = {a: measure_axis(entry, a, scale, dev) for a in wanted}
            progress(f"{entry.name}: {', '.join(wanted)} in {time.perf_counter() - start:.1f} s")
        return out
    finally:
        torch.set_num_threads(threads)
