"""The ``advest`` command line: one subcommand per job, each parsed by jsonargparse
(``advest.parsing`` fixes the conventions: described settings, ``--flag``/``--no_flag``
switches, snake_case flags, errors to stderr with exit code 2 naming the flag).

The first word picks the subcommand, and only that subcommand's parser is built: ``train``'s
parser imports Lightning (seconds), which ``advest list`` or ``advest check`` must not pay.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .parsing import Parser, fail, new_parser, switch


# ----------------------------------------------------------------------------- list
def list_parser() -> Parser:
    p = new_parser(
        "advest list",
        "Every registered estimator: family, kind, inputs, K domain, unbiasedness scale, cost "
        "and spec page, read from its registry entry.",
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

    head = ("name", "family", "kind", "inputs", "K", "unbiased for", "cost", "spec")
    rows: list[tuple[str, ...]] = [
        (
            e.name,
            e.family,
            e.kind,
            ", ".join(e.inputs),
            e.k_domain or "-",
            _scale_text(e.scale),
            f"O({e.cost})",
            e.spec,
        )
        for e in registry.entries()
    ]
    if ns.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| `{r[0]}` | {' | '.join(r[1:7])} | [{r[7]}]({r[7]}) |")
        return 0
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0


# ----------------------------------------------------------------------------- bench
def _bench(ns: Any) -> int:
    """Both benchmarks: the oracle's (sequence level), then the token level against the
    trainer's forward pass."""
    from advest.experiments.bench_tokens import run as run_tokens
    from advest.oracle.commands import run_bench

    code = run_bench(ns)
    run_tokens(T=64 if ns.quick else 256, repeats=3 if ns.quick else 5)
    return code


# ----------------------------------------------------------------------------- dispatch
Local = tuple[str, str, Callable[[Any], int] | str]
LOCAL: dict[str, Local] = {
    "list": ("advest.cli", "list_parser", _list),
    "demo": ("advest.oracle.commands", "demo_parser", "run_demo"),
    "bench": ("advest.oracle.commands", "bench_parser", _bench),
    "prove": ("advest.proofs.command", "prove_parser", "run_prove"),
    "check": ("advest.oracle.commands", "check_parser", "run_check"),
}
"""Subcommands parsed here: (module, its parser function, the run: a function here or the
module's function of that name). Each parser lives with its package; its module is imported only
when its command runs."""


def parsers() -> dict[str, Callable[[], Parser]]:
    """Each locally parsed subcommand's parser function, from its own package."""
    return {
        name: getattr(importlib.import_module(module), parser)
        for name, (module, parser, _) in LOCAL.items()
    }


DELEGATED = {
    "train": "advest.training.train",
    "eval": "advest.training.evaluate",
    "experiment": "advest.experiments",
}
"""Subcommands whose module builds its own jsonargparse parser in ``main(argv)``."""

SUMMARY = {
    "train": "RL training of a local checkpoint with any registered estimator",
    "eval": "held-out pass@k curves of a checkpoint",
    "experiment": "reproduce the papers' claims: bandit, compare, values, real",
    "list": "every registered estimator: family, inputs, K domain, cost, spec page",
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
        code: int = importlib.import_module(DELEGATED[command]).main(rest)
        return code
    module_name, parser_name, named = LOCAL[command]
    module = importlib.import_module(module_name)
    ns = getattr(module, parser_name)().parse_args(rest)
    run: Callable[[Any], int] = getattr(module, named) if isinstance(named, str) else named
    try:
        return run(ns)
    except ValueError as error:  # bad user input found while running: say what, no traceback
        return fail(f"advest {command}", str(error))


if __name__ == "__main__":
    raise SystemExit(main())
