"""The oracle's subcommands of the ``advest`` command line: ``check``, ``demo`` and ``bench``,
each a parser (``*_parser``) and a run (``run_*``) that ``advest.cli`` dispatches to. The parsers
follow ``advest.parsing``'s conventions; each imports what its run needs only when it runs."""

from __future__ import annotations

from typing import Any

from advest.parsing import Parser, new_parser, switch


# ----------------------------------------------------------------------------- check
def check_parser() -> Parser:
    from .cli import add_arguments

    p = new_parser("advest check", "Report the properties of any advantage estimator.")
    add_arguments(p, switch)
    return p


def run_check(ns: Any) -> int:
    from .cli import command

    return command(ns)


# ----------------------------------------------------------------------------- demo
def demo_parser() -> Parser:
    p = new_parser("advest demo", "The max@K estimators side by side on one group.")
    p.add_argument(
        "--rewards",
        type=float,
        nargs="+",
        default=[3.0, 1.0, 4.0, 1.0, 5.0],
        help="one group of rewards",
    )
    p.add_argument("--k", type=int, default=2, help="comparator size K")
    return p


def run_demo(ns: Any) -> int:
    from .demo import run

    run(list(ns.rewards), ns.k)
    return 0


# ----------------------------------------------------------------------------- bench
def bench_parser() -> Parser:
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


def run_bench(ns: Any) -> int:
    """The sequence-level estimator benchmark; ``advest bench`` follows it with the token-level
    one (``advest.experiments.cost.tokens``), which needs the trainer's model."""
    import torch

    from ..bench import run

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
