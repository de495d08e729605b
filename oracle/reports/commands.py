"""The oracle's subcommands of the ``advest`` command line: ``check`` and ``demo``, each a parser
(``*_parser``) and a run (``run_*``) that ``advest.cli`` dispatches to. The parsers follow
``advest.parsing``'s conventions; each imports what its run needs only when it runs."""

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
