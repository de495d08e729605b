"""How long ``advest check`` takes, search included (the bound: one sequence estimator
under a minute on 2 cores with the default budget): each command timed whole, from the start
of the process to its exit, ``--repeats`` times; the median, and the ratio of the default
search (``--examples 60``) to a one-input search (``--examples 1``, about the explicit checks
alone). Run: ``python scripts/check_bench.py [--repeats 3]``; the README quotes its numbers."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGETS = [
    ("grpo, [B, G]", ["advest.fast.group:grpo"]),
    ("maxpo, K = 4", ["advest.fast.maxk:maxpo", "--family", "maxk", "--k", "4"]),
]
"""(label, the ``advest check`` arguments): a baseline and a max@K estimator."""


def seconds(args: list[str], repeats: int) -> float:
    """The median wall time of ``advest check ARGS`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "advest", "check", *args], check=True, capture_output=True
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (3)")
    repeats = parser.parse_args(argv).repeats
    print("| estimator | default search (s) | --examples 1 (s) | ratio |")
    print("|---|---|---|---|")
    for label, args in TARGETS:
        full = seconds(args, repeats)
        one = seconds([*args, "--examples", "1"], repeats)
        print(f"| {label} | {full:.1f} | {one:.1f} | {full / one:.2f}× |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
