"""An estimator's stated cost: the order of the time of one call in the sizes of its inputs.

Each registry entry states one (``fast/registry.py``, ``cost=``; a default per kind), its spec
page repeats it in a "Cost" table, and the cost-growth table (``experiments/cost/``,
docs/cost.md) measures every estimator against it. Written as a sum of products of sizes:

    order   := term (" + " term)*
    term    := factor (("·" | " ") factor)*
    factor  := SYMBOL power? | "log " SYMBOL | "log(" SYMBOL ("·" SYMBOL)* ")"
    power   := "²" | "³"

for example ``B·G log G`` or ``B·G·T log(B·G·T) + B·G²·T``. ``log X`` is log₂ max(X, 2), so
that a factor never vanishes at a size of 1. Constant factors are not written: the order is
what the time grows like. Pure (no advest import): the registry parses what it is given here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

SYMBOLS = {
    "B": "prompts per call",
    "G": "samples per prompt",
    "K": "the K of max@K",
    "T": "response tokens per sample",
    "D": "hidden size",
    "R": "reward functions",
    "L": "the most live history rows one prompt has",
    "V": "history rows in all",
}
"""The sizes an order may name."""

Order = Callable[[Mapping[str, float]], float]
"""A parsed order: its value at given sizes (every symbol it names must be given)."""

_POWERS = {"": 1, "²": 2, "³": 3}
_FACTOR = re.compile(r"log\(([A-Z](?:·[A-Z])*)\)|log ([A-Z])|([A-Z])([²³]?)")


def _log(x: float) -> float:
    return math.log2(max(x, 2.0))


def _factor(match: re.Match[str]) -> tuple[Order, set[str]]:
    """One factor: a log of a product, a log of a symbol, or a symbol to a power."""
    product, single, symbol, power = match.groups()
    names = product.split("·") if product else [single or symbol]
    unknown = [n for n in names if n not in SYMBOLS]
    if unknown:
        raise ValueError(f"unknown size {unknown[0]!r}; an order names {', '.join(SYMBOLS)}")
    if symbol:
        p = _POWERS[power]
        return (lambda s: float(s[symbol]) ** p), {symbol}
    return (lambda s: _log(math.prod(float(s[n]) for n in names))), set(names)


def _term(text: str) -> tuple[list[Order], set[str]]:
    factors: list[Order] = []
    names: set[str] = set()
    at = 0
    while True:
        match = _FACTOR.match(text, at)
        if match is None:
            raise ValueError(f"cannot read {text!r} at {text[at:]!r}")
        fn, seen = _factor(match)
        factors.append(fn)
        names |= seen
        at = match.end()
        if at == len(text):
            return factors, names
        if text[at] not in "· ":
            raise ValueError(f"cannot read {text!r} at {text[at:]!r}: factors are joined by '·'")
        at += 1


def parse(text: str) -> tuple[Order, frozenset[str]]:
    """``text`` (the grammar above) as a function of the sizes, with the symbols it names.
    Raises ``ValueError`` naming what it cannot read."""
    if not isinstance(text, str) or not text.strip() or text != text.strip():
        raise ValueError(f"an order is a non-empty string without outer spaces; got {text!r}")
    terms = [_term(part) for part in text.split(" + ")]
    names = frozenset().union(*(seen for _, seen in terms))

    def order(sizes: Mapping[str, float]) -> float:
        return sum(math.prod(f(sizes) for f in factors) for factors, _ in terms)

    return order, names
