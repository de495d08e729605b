"""The record every proof returns, and the z3 helper that turns a goal into one."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import z3

Status = Literal["proved", "refuted", "unknown"]


@dataclass(frozen=True)
class Record:
    """One checked claim: what, how, for which parameters, with what result and evidence."""

    claim: str
    statement: str
    spec: str  # the spec section the claim comes from
    method: str
    parameters: dict[str, Any]
    status: Status
    seconds: float
    counterexample: dict[str, str] | None = None
    evidence: str = ""
    expected: Status = "proved"
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def z3_prove(
    claim: str,
    statement: str,
    spec: str,
    parameters: dict[str, Any],
    goal: Any,
    premises: list[Any] | None = None,
    *,
    expected: Status = "proved",
    timeout_ms: int = 120_000,
) -> Record:
    """Prove ``goal`` for all real values of its free variables (under ``premises``) by showing
    that its negation is unsatisfiable; a model of the negation is a counterexample."""
    start = time.perf_counter()
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*(premises or []))
    solver.add(z3.Not(goal))
    result = solver.check()
    seconds = time.perf_counter() - start
    if result == z3.unsat:
        return Record(
            claim,
            statement,
            spec,
            "z3 (negation unsat)",
            parameters,
            "proved",
            seconds,
            expected=expected,
        )
    if result == z3.sat:
        model = solver.model()
        example = {str(d): str(model[d]) for d in sorted(model.decls(), key=str)}
        return Record(
            claim,
            statement,
            spec,
            "z3 (negation sat)",
            parameters,
            "refuted",
            seconds,
            counterexample=example,
            expected=expected,
        )
    return Record(
        claim,
        statement,
        spec,
        "z3",
        parameters,
        "unknown",
        seconds,
        evidence=str(solver.reason_unknown()),
        expected=expected,
    )
