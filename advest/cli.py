"""The ``advest`` command line: one subcommand per job, each parsed by jsonargparse
(``advest.parsing`` fixes the conventions: described settings, ``--flag``/``--no_flag``
switches, snake_case flags, errors to stderr with exit code 2 naming the flag).

The first word picks the subcommand, and only that subcommand's parser is built: ``train``'s
parser imports Lightning (seconds), which ``advest list`` or ``advest check`` must not pay.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
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


def run_list(ns: Any) -> int:
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


# ----------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Command:
    """One subcommand, declared here once: ``advest --help``, ``advest experiment --help``, the
    README's Commands section and the documentation's command pages are generated from
    ``COMMANDS`` and ``EXPERIMENTS``. Modules are named, not imported, so that a command loads
    only its own (``train``'s parser imports Lightning, which ``advest list`` must not pay)."""

    name: str
    summary: str
    """One line, for ``--help`` and the README."""
    parser: str | None
    """``module:function`` building its parser, beside the code it runs (None: a group of
    subcommands, ``experiment``)."""
    run: str
    """``module:function``: ``run(namespace) -> exit code``; with ``argv``, ``main(arguments)``."""
    argv: bool = False
    """The run parses its own arguments (``train`` re-reads a resumed run's settings; list flags
    such as ``--reward a b`` are gathered first)."""


def _at(where: str) -> Any:
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


EXPERIMENTS = (
    Command("bandit", "the MaxPO softmax bandit: bias and variance of every estimator's gradient",
            "advest.experiments.bandit:parser", "advest.experiments.bandit:main", True),
    Command("compare", "the embedded task trained with several estimators, same seeds and budget",
            "advest.experiments.compare:parser", "advest.experiments.compare:main", True),
    Command("values", "an SVEB-style benchmark of the baselines as value estimates",
            "advest.experiments.values:parser", "advest.experiments.values:main", True),
    Command("real", "SmolLM2-135M-Instruct on reasoning-gym tasks, every seed paper's estimator",
            "advest.experiments.real:parser", "advest.experiments.real:main", True),
    Command("grid", "the choosing page's paired pass/fail design, resumable across sessions",
            "advest.experiments.grid:parser", "advest.experiments.grid:main", True),
    Command("turns", "two-turn episodes: a turn-level against an episode-level estimator",
            "advest.experiments.turns:parser", "advest.experiments.turns:main", True),
    Command("cost", "time and peak memory of every estimator as G, K, B, T grow, against its order",
            "advest.experiments.cost:parser", "advest.experiments.cost:main", True),
)  # fmt: skip
EXPERIMENTS_DOC = """Each writes its settings, metrics, plots and a summary under the folder
its --out names, and has a --quick smoke mode."""


def experiment(argv: Sequence[str]) -> int:
    """``advest experiment NAME [flags]``."""
    return dispatch("advest experiment", argv)


COMMANDS = (
    Command("train", "RL training of a local checkpoint with any registered estimator",
            "advest.training.command:parser", "advest.training.command:main", True),
    Command("eval", "held-out pass@k curves of a checkpoint",
            "advest.training.evaluate:parser", "advest.training.evaluate:main", True),
    Command("experiment", "reproduce the papers' claims: " + ", ".join(e.name for e in EXPERIMENTS),
            None, "advest.cli:experiment", True),
    Command("list", "every registered estimator: family, inputs, K domain, cost, spec page",
            "advest.cli:list_parser", "advest.cli:run_list"),
    Command("demo", "the max@K estimators side by side on one group, exact and fast",
            "advest.oracle.reports.commands:demo_parser",
            "advest.oracle.reports.commands:run_demo"),
    Command("bench", "estimator benchmarks that print numbers and ratios",
            "advest.experiments.cost.bench:parser", "advest.experiments.cost:run_bench"),
    Command("prove", "run the machine-checked proofs and print the claims",
            "advest.proofs.command:prove_parser", "advest.proofs.command:run_prove"),
    Command("check", "report the properties of any advantage estimator (MODULE:FUNCTION)",
            "advest.oracle.reports.commands:check_parser",
            "advest.oracle.reports.commands:run_check"),
)  # fmt: skip
"""Every subcommand of ``advest``, in the order ``advest --help`` lists them."""


def groups() -> dict[str, tuple[Sequence[Command], str]]:
    """The commands that pick a subcommand: their table, and what their help says first (read
    when called, so that a command added to a table is seen everywhere)."""
    experiments = "Reproduce the papers' claims. " + " ".join(EXPERIMENTS_DOC.split())
    return {
        "advest": (COMMANDS, "Verified advantage estimators for LLM RL."),
        "advest experiment": (EXPERIMENTS, experiments),
    }


def usage(prog: str = "advest") -> str:
    """The help of a command that picks a subcommand: each one with its summary."""
    table, head = groups()[prog]
    width = max(len(c.name) for c in table)
    lines = [f"  {c.name:<{width}}  {c.summary}" for c in table]
    return (
        f"usage: {prog} COMMAND [options]   ({prog} COMMAND -h: its settings)\n\n"
        f"{textwrap.fill(head, 100)}\n\ncommands:\n" + "\n".join(lines)
    )


def dispatch(prog: str, argv: Sequence[str]) -> int:
    """Run the subcommand of ``prog`` that ``argv[0]`` names, with the rest of ``argv``."""
    argv = list(argv)
    if argv and argv[0] in ("-h", "--help"):
        print(usage(prog))
        return 0
    by_name = {c.name: c for c in groups()[prog][0]}
    if not argv or argv[0] not in by_name:
        got = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(usage(prog), file=sys.stderr)
        return fail(prog, f"{got}; valid: {', '.join(by_name)}")
    command, rest = by_name[argv[0]], argv[1:]
    if command.argv:
        code: int = _at(command.run)(rest)
        return code
    assert command.parser is not None  # only a group (run with argv) has none
    ns = _at(command.parser)().parse_args(rest)
    try:
        code = _at(command.run)(ns)
    except ValueError as error:  # bad user input found while running: say what, no traceback
        return fail(f"{prog} {command.name}", str(error))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--version":
        from advest import __version__

        print(f"advest {__version__}")
        return 0
    return dispatch("advest", argv)


if __name__ == "__main__":
    raise SystemExit(main())
