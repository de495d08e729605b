"""What the bounded z3 proofs share: z3 as the algebra of ``proofs.definitions``, symbolic
reward vectors, and the record parameters."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import z3

from .definitions import Definitions


class Z3Algebra:
    """Real-valued rewards r0..r{n−1} as z3 variables; max as nested if-then-else."""

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = list(values)
        self._max: dict[tuple[int, ...], Any] = {}

    def const(self, q: Fraction) -> Any:
        return z3.Q(q.numerator, q.denominator)

    def value(self, i: int) -> Any:
        return self.values[i]

    def max_of(self, items: Sequence[int]) -> Any:
        key = tuple(sorted(items))
        if not key:
            return z3.RealVal(0)
        if key not in self._max:
            best = self.values[key[0]]
            for t in key[1:]:
                best = z3.If(self.values[t] > best, self.values[t], best)
            self._max[key] = best
        return self._max[key]


def _rewards(n: int, name: str = "r") -> list[Any]:
    return [z3.Real(f"{name}{i}") for i in range(n)]


def _defs(n: int, k: int, values: Sequence[Any] | None = None) -> Definitions:
    return Definitions(Z3Algebra(values if values is not None else _rewards(n)), n, k)


def _q(x: Fraction) -> Any:
    return z3.Q(x.numerator, x.denominator)


def _all_equal(pairs: list[tuple[Any, Any]]) -> Any:
    return z3.And([a == b for a, b in pairs])


def _params(n: int, k: int) -> dict[str, int]:
    return {"N": n, "K": k}


# --- identities (spec/maxk.md §Claimed properties) --------------------------------------------
