"""The ``advest`` command line: one subcommand per job, each parsed by jsonargparse
(``advest.training.parsing`` fixes the conventions: described settings, ``--flag``/``--no_flag``
switches, snake_case flags, errors to stderr with exit code 2 naming the flag).

The first word picks the subcommand, and only that subcommand's parser is built: ``train``'s
parser imports Lightning (seconds), which ``advest list`` or ``advest check`` must not pay.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from .parsing import Parser, fail, new_parser, switch

ESTIMATOR_HELP = "registered advantage estimator (`advest list` shows every name)"


# ----------------------------------------------------------------------------- list
def list_parser() -> Parser:
    p = new_parser(
        "advest list",
        "Every registered estimator: family, kind, inputs, K domain, unbiasedness scale and spec "
        "page, read from its registry entry.",
    )
    switch(p, "markdown", False, "a Markdown table (the docs' Estimators page)")
    return p


def _scale_text(scale: Any) -> str:
    # the named scales of spec/scales.py say their value first in their docstrings ("N/K: ...")
    if scale is None:
        return "-"
    doc = (scale.__doc__ or scale.__name__).split(":")[0].split(" (")[0].strip().rstrip(".")
    if doc == "1":
        return "∇J"
    return f"({doc})·∇J" if " " in doc and not doc.startswith("(") else f"{doc}·∇J"


def _list(ns: Any) -> int:
    from advest.fast import registry

    head = ("name", "family", "kind", "inputs", "K", "unbiased for", "spec")
    rows: list[tuple[str, ...]] = [
        (
            e.name,
            e.family,
            e.kind,
            ", ".join(e.inputs),
            e.k_domain or "-",
            _scale_text(e.scale),
            e.spec,
        )
        for e in registry.entries()
    ]
    if ns.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| `{r[0]}` | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | [{r[6]}]({r[6]}) |")
        return 0
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0


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


def _demo(ns: Any) -> int:
    from advest.oracle.demo import run

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


def _bench(ns: Any) -> int:
    import torch

    from advest.oracle.bench import run

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
    from .bench import run as run_tokens

    run_tokens(T=64 if ns.quick else 256, repeats=3 if ns.quick else 5)
    return 0


# ----------------------------------------------------------------------------- prove
def prove_parser() -> Parser:
    p = new_parser("advest prove", "Run the machine-checked proofs and print the claims.")
    p.add_argument("--max_n", type=int, default=7, help="largest N for the z3 proofs")
    p.add_argument(
        "--unbiased_max_n", type=int, default=4, help="largest N for the bandit identities"
    )
    p.add_argument("--json", type=str | None, default=None, help="write every record to this file")
    switch(p, "progress", True, "show a progress bar")
    switch(p, "ci", False, "only CI's range (each claim's largest N in proofs.bounded.CLAIMS)")
    return p


def _prove(ns: Any) -> int:
    import sys
    from pathlib import Path

    try:
        from advest.proofs.run import missing, print_table, run, write_json
    except ModuleNotFoundError as error:  # z3 comes with the test extra, not the core install
        if error.name != "z3":
            raise
        print(
            "advest prove: the z3 prover is not installed. Install it with: pip install "
            "z3-solver (or pip install 'advest[test]')",
            file=sys.stderr,
        )
        return 2
    records = run(ns.max_n, ns.unbiased_max_n, progress=ns.progress, ci=ns.ci)
    print_table(records)
    if ns.json:
        write_json(records, Path(ns.json))
        print(f"wrote {len(records)} records to {ns.json}")
    failed = [r for r in records if r.status != r.expected]
    print(f"{len(records) - len(failed)} of {len(records)} claims as expected")
    for why in missing(records):  # one line where a script looks for errors, too
        print(f"advest prove: {why}", file=sys.stderr)
    return 1 if failed else 0


# ----------------------------------------------------------------------------- check
# The check command's options live in this one function (advest.oracle grows them).
def check_parser() -> Parser:
    from advest.oracle import add_arguments

    p = new_parser("advest check", "Report the properties of any advantage estimator.")
    add_arguments(p, switch)
    return p


def _check(ns: Any) -> int:
    from advest import oracle

    return oracle.command(ns)


# ----------------------------------------------------------------------------- dispatch
Local = tuple[Callable[[], Parser], Callable[[Any], int]]
LOCAL: dict[str, Local] = {
    "list": (list_parser, _list),
    "demo": (demo_parser, _demo),
    "bench": (bench_parser, _bench),
    "prove": (prove_parser, _prove),
    "check": (check_parser, _check),
}
"""Subcommands parsed here: (parser, run)."""

DELEGATED = {
    "train": "advest.training.train",
    "eval": "advest.training.evaluate",
    "experiment": "advest.training.experiments",
}
"""Subcommands whose module builds its own jsonargparse parser in ``main(argv)``."""

SUMMARY = {
    "train": "RL training of a local checkpoint with any registered estimator",
    "eval": "held-out pass@k curves of a checkpoint",
    "experiment": "reproduce the papers' claims: bandit, compare, values, real",
    "list": "every registered estimator: family, inputs, K domain, spec page",
    "demo": "the max@K estimators side by side on one group",
    "bench": "estimator benchmarks that print numbers and ratios",
    "prove": "run the machine-checked proofs and print the claims",
    "check": "report the properties of any advantage estimator (MODULE:FUNCTION)",
}


def usage() -> str:
    width = max(map(len, SUMMARY))
    lines = [f"  {name:<{width}}  {text}" for name, text in SUMMARY.items()]
    return (
        "usage: advest COMMAND [options]   (advest COMMAND -h: the command's settings)\n\n"
        "Verified advantage estimators for LLM RL.\n\ncommands:\n" + "\n".join(lines)
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv and argv[0] == "--version":
        from advest import __version__

        print(f"advest {__version__}")
        return 0
    if not argv or argv[0] not in SUMMARY:
        got = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(usage(), file=sys.stderr)
        return fail("advest", f"{got}; valid: {', '.join(SUMMARY)}")
    command, rest = argv[0], argv[1:]
    if command in DELEGATED:
        import importlib

        code: int = importlib.import_module(DELEGATED[command]).main(rest)
        return code
    build, run = LOCAL[command]
    ns = build().parse_args(rest)
    try:
        return run(ns)
    except ValueError as error:  # bad user input found while running: say what, no traceback
        return fail(f"advest {command}", str(error))


if __name__ == "__main__":
    raise SystemExit(main())
