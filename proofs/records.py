"""The record every proof returns, and the z3 helper that turns a goal into one."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import z3

Status = Literal["proved", "refuted", "unknown"]

RLIMIT = 1_000_000_000
"""z3 resources per query (``rlimit``): deterministic, unlike a timeout. Measured: the costliest
query in CI's range uses about 61M (shift rules, N = 6, K = 3); N = 7's permutation claim uses
1.8G over 20 queries at K = 4 (see ``proofs.bounded.CI_EXCLUDED``)."""


_rlimit_seen = [0]


def _rlimit_used(solver: Any) -> int:
    """Resources used since the previous ``z3_prove`` query, i.e. by this one unless other
    solvers ran in between. z3 counts per context, cumulatively across solvers (the limit itself
    is relative to the count at the start of each check), hence the difference."""
    stats = solver.statistics()
    try:
        total = int(stats.get_key_value("rlimit count"))
    except z3.Z3Exception:  # a query settled before any search reports no count
        total = _rlimit_seen[0]
    used, _rlimit_seen[0] = total - _rlimit_seen[0], total
    return max(used, 0)


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
    missing: str = ""  # the prover that could not run, and how to install it

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
    rlimit: int | None = None,
) -> Record:
    """Prove ``goal`` for all real values of its free variables (under ``premises``) by showing
    that its negation is unsatisfiable; a model of the negation is a counterexample.

    The solver is limited by z3's resource count (``rlimit``, default ``RLIMIT``), not by
    seconds, so the answer is the same on a busy and an idle machine; running out gives
    ``unknown``, which is never counted as proved. The resources used go into ``evidence``."""
    start = time.perf_counter()
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT if rlimit is None else rlimit)
    solver.add(*(premises or []))
    solver.add(z3.Not(goal))
    result = solver.check()
    seconds = time.perf_counter() - start
    used = f"rlimit {_rlimit_used(solver)}"
    # The three answers share every field but the method, the status and what is shown.
    head = (claim, statement, spec)
    if result == z3.unsat:
        status: Status = "proved"
        return Record(
            *head, "z3 (negation unsat)", parameters, status, seconds, None, used, expected
        )
    if result == z3.sat:
        model = solver.model()
        example = {str(d): str(model[d]) for d in sorted(model.decls(), key=str)}
        return Record(
            *head, "z3 (negation sat)", parameters, "refuted", seconds, example, used, expected
        )
    unknown = f"{solver.reason_unknown()} ({used})"
    return Record(*head, "z3", parameters, "unknown", seconds, None, unknown, expected)
