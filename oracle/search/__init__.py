"""The oracle's search (spec/oracle.md, "Searched properties"): every property the explicit
inputs found to hold is searched over its whole input domain with hypothesis, and a "no" carries
the smallest input hypothesis shrank it to. ``engine`` runs one searched property (the reward
values it draws are ``oracle.inputs.values``); ``plain`` searches ``[B, G]`` estimators, ``rows``
the conventions on flat rows with group ids, ``tokens`` token-level estimators."""

from __future__ import annotations

from typing import Any

from ..properties.findings import Failure
from .engine import EXAMPLES, Budget, Searched, search

__all__ = ["EXAMPLES", "Budget", "Failure", "Searched", "add_search_arguments", "search"]


def add_search_arguments(parser: Any) -> None:
    """How hard the search looks (spec/oracle.md, "Searched properties")."""
    parser.add_argument(
        "--examples",
        type=int,
        default=EXAMPLES,
        help=f"inputs the search draws per property ({EXAMPLES}); more for a deeper search",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the search's seed (0): the same seed gives the same verdicts on every run and "
        "machine; another seed searches other inputs",
    )
    parser.add_argument(
        "--database",
        default=None,
        metavar="DIR",
        help="keep the failing inputs the search finds in DIR and replay them first next time "
        "(a CI cache), as hypothesis's example database",
    )
