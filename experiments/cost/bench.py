"""``advest bench``: median time per call of every fast estimator, side by side.

Each estimator is timed on three inputs of the same shape, general (uniform), binary (0/1) and
few-valued (4 levels), with ratios to ``fast.group.grpo`` and to a plain reshape mean/std on the
same tensor, all in one round-robin. For ``canonical`` (general input) also a
straightforward per-group Python loop (the same sorted prefix-sum formulas, one group at a time,
in Python floats) and to the MaxPO paper's dense O(G²) forms (its Thms E.1/E.2, batched in torch,
chunked over groups to bound memory). Numbers are printed, never asserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, TypeVar

import torch
from torch import Tensor

from advest.fast import calling, maxk_dense, registry
from advest.parsing import Parser, new_parser, switch
from advest.spec.maxk_weights import BinomRatio

SHAPES = [(4096, 8), (4096, 64), (256, 1024)]
GPU_SHAPES = [(64, 4096)]  # also timed on CUDA (no dense or loop column: G > 1024)
QUICK_SHAPES = [(256, 8), (256, 64), (16, 1024)]


def _k_for(g: int) -> int:
    return {8: 4, 64: 16}.get(g, 64)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


Key = TypeVar("Key", bound=Hashable)


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
"""``wall``: elapsed time (the default). ``cpu``: this process's CPU time, for a machine shared
with other jobs: with ``--threads 1`` it counts only the call's own work, not time spent
descheduled (with more threads it also counts spin-waiting)."""
_clock = time.perf_counter

MALLOC = ("default", "retain")
"""``default``: the C allocator as configured. ``retain`` (glibc): keep freed memory in the
process instead of giving it back to the OS after each call. glibc hands every multi-MB buffer
(a [4096, 64] float64 is 2 MiB) back with munmap/trim when it is freed, so the next call
page-faults it in again; on 2 cores that costs ~3 ms of grpo's ~4 ms at (4096, 64). jemalloc,
tcmalloc and PyTorch's CUDA caching allocator keep such buffers, which is what ``retain`` mimics,
so its ratios are the ones that carry over to a trainer; ``default`` measures allocator churn."""


def retain_freed_memory() -> None:
    """mallopt(M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_TOP_PAD) so glibc keeps freed buffers for the
    next call (process-wide, for the rest of the process: a benchmark setting, never set by the
    estimators)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "mallopt"):
        raise ValueError("--malloc retain needs glibc's mallopt (Linux); use --malloc default")
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    for option, value in ((m_trim_threshold, 2**31 - 1), (m_mmap_threshold, 2**30),
                          (m_top_pad, 2**26)):  # fmt: skip
        if libc.mallopt(option, value) != 1:
            raise ValueError(f"mallopt({option}, {value}) failed; use --malloc default")


def _time_round_robin(
    calls: dict[Key, Callable[[], Any]], repeats: int, device: torch.device
) -> dict[Key, float]:
    """Median wall seconds per call, timing every call once per round so that machine drift
    (frequency, other load) falls on all of them alike; one warm-up round first."""
    samples: dict[Key, list[float]] = {name: [] for name in calls}
    for round_ in range(repeats + 1):
        for name, fn in calls.items():
            _sync(device)
            start = _clock()
            fn()
            _sync(device)
            if round_:
                samples[name].append(_clock() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def time_call(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` calls after one warm-up (the device
    synchronised around each call)."""
    return _time_round_robin({"fn": fn}, repeats, device)["fn"]


def outcome_names() -> list[str]:
    """The estimators that take only rewards (and K, lengths): the maxk and group families."""
    return [n for n in registry.names() if registry.entry(n).kind == "sequence"]


def _caller(name: str, rewards: Tensor, binary: Tensor, k: int) -> Callable[[], Tensor]:
    """One timed call of ``name``, made as every caller makes it (``fast.calling``; the plan is
    resolved once, outside the timing). An estimator whose claims say 0/1 rewards only gets the
    binary input; one that reads lengths gets responses of one token."""
    plan = calling.plan(name, k=k)
    given = binary if registry.entry(name).claims.binary_only else rewards
    source = {"rewards": given, "lengths": torch.ones_like(given, dtype=torch.int64)}
    return partial(plan.per_sample, source)


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
    """EI − b by the MaxPO paper's dense forms, in chunks of about ``chunk_bytes`` each."""
    g = rewards.shape[1]
    step = max(1, chunk_bytes // (8 * g * g))
    parts = [
        maxk_dense.ei_dense(part, k) - maxk_dense.l2o_dense(part, k)
        for part in torch.split(rewards, step, dim=0)
    ]
    return torch.cat(parts)


INPUTS = ("general", "binary", "few-valued")
"""The reward kinds timed side by side: uniform floats (the sorted path), pass/fail (0/1), and 4
levels {0, 1/3, 2/3, 1} (both on the counting path)."""


def _inputs(shape: tuple[int, int], gen: torch.Generator, dev: torch.device) -> dict[str, Tensor]:
    r = torch.rand(*shape, generator=gen)
    few = torch.randint(0, 4, shape, generator=gen).float() / 3
    return {"general": r.to(dev), "binary": (r > 0.5).float().to(dev), "few-valued": few.to(dev)}


def plain_mean_std(rewards: Tensor) -> Tensor:
    """The one-line baseline: (r − mean)/(std + ε) on the reshaped [B, G] tensor, no guards."""
    return (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-6)


PLAIN = "plain mean/std"
LOOP, DENSE = "python loop canonical", "dense O(G²) maxpo"


def _measure(
    inputs: dict[str, Tensor], k: int, repeats: int, dev: torch.device
) -> dict[str, dict[str, float]]:
    """Median seconds per call, ``{input kind: {estimator: s}}``: every estimator on every input
    kind in one round-robin (so load drifts fall on all cells alike), then the two slow
    comparisons on the general input (G <= 1024)."""
    binary = inputs["binary"]
    calls: dict[tuple[str, str], Callable[[], Any]] = {}
    for kind, rewards in inputs.items():
        calls[(kind, PLAIN)] = partial(plain_mean_std, rewards)
        for name in outcome_names():
            calls[(kind, name)] = _caller(name, rewards, binary, k)
    out: dict[str, dict[str, float]] = {kind: {} for kind in inputs}
    for (kind, name), t in _time_round_robin(calls, repeats, dev).items():
        out[kind][name] = t
    rewards = inputs["general"]
    if rewards.shape[1] <= 1024:
        out["general"][DENSE] = time_call(lambda: dense_maxpo(rewards, k), 3, dev)
        host = rewards.cpu()
        loop_reps = 1 if rewards.numel() > 2**17 else 3
        out["general"][LOOP] = time_call(lambda: python_loop_canonical(host, k), loop_reps, dev)
    return out


def _print_table(
    B: int, G: int, k: int, times: dict[str, dict[str, float]], names: list[str], maxk: list[str]
) -> None:
    """One shape's table: ms, × grpo and × plain per input kind, then the summary lines."""
    print(f"\nB={B}, G={G}, K={k}")
    print(f"{'':<24}" + "".join(f"{kind:>30}" for kind in INPUTS))
    print(f"{'estimator':<24}" + f"{'ms':>10}{'× grpo':>10}{'× plain':>10}" * len(INPUTS))
    for name in [PLAIN, *names, DENSE, LOOP]:
        row = f"{name:<24}"
        for kind in INPUTS:
            t = times[kind].get(name)
            if t is None:
                row += f"{'—':>10}" * 3
                continue
            grpo, plain = times[kind]["grpo"], times[kind][PLAIN]
            row += f"{t * 1e3:>10.3f}{t / grpo:>10.2f}{t / plain:>10.2f}"
        print(row)
    for kind in INPUTS:
        worst = max(maxk, key=lambda n: times[kind][n])
        print(
            f"  {kind}: slowest max@K estimator {worst}, "
            f"{times[kind][worst] / times[kind]['grpo']:.2f}× grpo; "
            f"grpo {times[kind]['grpo'] / times[kind][PLAIN]:.2f}× plain mean/std"
        )
    if LOOP in times["general"]:
        fast_t = times["general"]["canonical"]
        print(
            f"  fast canonical speed-up over: python loop "
            f"{times['general'][LOOP] / fast_t:.1f}×, dense O(G²) "
            f"{times['general'][DENSE] / fast_t:.1f}×"
        )


def run(
    repeats: int = 15,
    quick: bool = False,
    device: str | None = None,
    threads: int | None = None,
    shapes: list[tuple[int, int]] | None = None,
    clock: str = "wall",
    malloc: str = "default",
) -> dict[tuple[int, int], dict[str, dict[str, float]]]:
    """Print one table per shape and return the medians, ``{(B, G): {kind: {name: s}}}``."""
    global _clock
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}; got {clock!r}")
    if malloc not in MALLOC:
        raise ValueError(f"malloc must be one of {MALLOC}; got {malloc!r}")
    _clock = CLOCKS[clock]
    if malloc == "retain":
        retain_freed_memory()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if threads:
        torch.set_num_threads(threads)
    threads = torch.get_num_threads()
    print(
        f"advest bench: device={dev}, torch {torch.__version__}, threads={threads}, clock={clock}"
        f", malloc={malloc}"
    )
    print(
        f"median of {repeats} calls, float32 input; '× grpo' / '× plain' = time / grpo's / plain "
        "(r − mean)/(std + ε)'s on the same tensor, timed side by side in one round-robin"
    )
    print("inputs: general = uniform floats; binary = 0/1; few-valued = 4 levels (chen_passk: 0/1)")
    if shapes is None:
        shapes = QUICK_SHAPES if quick else (SHAPES + GPU_SHAPES if dev.type == "cuda" else SHAPES)
    names = outcome_names()
    maxk = [n for n in names if registry.entry(n).k_range is not None]
    gen = torch.Generator().manual_seed(0)
    results = {}
    for B, G in shapes:
        k = _k_for(G)
        times = _measure(_inputs((B, G), gen, dev), k, repeats, dev)
        results[(B, G)] = times
        _print_table(B, G, k, times, names, maxk)
    return results


# ----------------------------------------------------------------------------- advest bench
def parser() -> Parser:
    p = new_parser(
        "advest bench",
        "Estimator benchmarks (sequence level, then token level against a forward pass): "
        "printed numbers and ratios.",
    )
    p.add_argument("--repeats", type=int, default=15, help="timed rounds (median per cell)")
    switch(p, "quick", False, "smaller shapes, for a smoke run")
    p.add_argument(
        "--device", type=str | None, default=None, help="cpu or cuda (default: cuda if available)"
    )
    p.add_argument(
        "--threads", type=int | None, default=None, help="torch CPU threads (default: all)"
    )
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall: elapsed time; cpu: process CPU time (a loaded machine, with --threads 1)",
    )
    p.add_argument(
        "--malloc",
        choices=["default", "retain"],
        default="default",
        help="retain: keep freed buffers in the process (glibc mallopt), as jemalloc, tcmalloc "
        "and the CUDA caching allocator do; default: give them back to the OS after each call "
        "(each call then page-faults its buffers in again)",
    )
    return p


def command(ns: Any) -> int:
    """``advest bench``'s sequence-level half (``run``); ``advest.experiments.cost.run_bench``
    follows it with the token-level one."""
    if ns.repeats < 1:
        raise ValueError(f"--repeats must be at least 1; got {ns.repeats}")
    if ns.threads is not None and ns.threads < 1:
        raise ValueError(f"--threads must be at least 1; got {ns.threads} (default: all)")
    device = ns.device or "cpu"
    if device.split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(f"--device {ns.device!r}: choose cpu or cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {ns.device}: no GPU is visible to torch; use --device cpu")
    run(
        repeats=ns.repeats,
        quick=ns.quick,
        device=ns.device,
        threads=ns.threads,
        clock=ns.clock,
        malloc=ns.malloc,
    )
    return 0
