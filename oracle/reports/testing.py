"""``assert_estimator``: the oracle inside a user's own test suite (``advest.testing``). It runs
``check`` on the user's callable and fails with the expected and the measured verdict of every
property that does not match, so a CI run names the property a change broke.

An expected verdict is matched against the start of the measured one: ``"yes"`` accepts
``"yes: exact"``; ``"no"`` accepts ``"no: biased"``. A property not named in ``expect`` is not
asserted. Each named property must hold in every dtype and at every N where it was checked."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from advest.spec.bounds import Bound

from ..conventions.harness import CONVENTIONS, FAMILIES, Objective
from ..properties.findings import Finding
from ..search import Budget
from .report import DEFAULT_BUDGET, check

DEFAULT_EXPECT: dict[str, dict[str, str]] = {
    **{family: {"centred": "yes", "finite output": "yes"} for family in FAMILIES},
    "token": {"unbiased": "yes"},
    "episode": {"finite output": "yes", "observation tokens": "yes"},
    "shaping": {"finite": "yes", "centred": "yes"},
}
"""What ``assert_estimator`` asserts when told nothing: the least each family's estimator owes."""


class EstimatorMismatch(AssertionError):
    """The oracle's verdicts differ from the expected ones; ``findings`` holds all of them."""

    def __init__(self, message: str, findings: list[Finding]) -> None:
        super().__init__(message)
        self.findings = findings


def _where(f: Finding) -> str:
    at = ", ".join(x for x in (f.dtype, "" if f.n is None else f"N={f.n}") if x)
    return f" [{at}]" if at else ""


def mismatches(findings: list[Finding], expect: Mapping[str, str]) -> list[str]:
    """One line per expected property whose verdict differs somewhere, or that was never checked."""
    lines = []
    for prop, wanted in expect.items():
        seen = [f for f in findings if f.prop == prop]
        if not seen:
            known = sorted({f.prop for f in findings})
            lines.append(f"{prop}: expected {wanted!r}, not checked (properties: {known})")
        for f in seen:
            if not f.verdict.startswith(wanted):
                lines.append(
                    f"{prop}{_where(f)}: expected {wanted!r}, measured {f.verdict!r} ({f.evidence})"
                )
    return lines


def assert_estimator(
    fn: Callable[..., Any],
    family: str = "outcome",
    expect: Mapping[str, str] | None = None,
    *,
    k: int = 2,
    ns: Sequence[int] | None = None,
    dtype: str = "float32",
    convention: str = "plain",
    extends: str | None = None,
    bound: Bound | None = None,
    one_turn: str | None = None,
    budget: Budget | None = DEFAULT_BUDGET,
) -> list[Finding]:
    """Run the oracle on ``fn`` and raise ``EstimatorMismatch`` listing every property in
    ``expect`` (name -> expected verdict prefix) whose measured verdict differs. Every family
    and convention ``advest check`` takes: ``family`` one of ``FAMILIES`` (``"token"``: the
    token oracle on exact token trees, ``fn(rewards, mask, ...)`` as ``--family token``, with
    ``extends``), ``convention`` one of ``CONVENTIONS`` (``"flat"``: ``fn(rewards [N], index
    [N], valid=...)``), ``"episode"`` (``fn(turn_rewards, turn_ids)``, with ``one_turn``).
    ``"shaping"`` (``fn(rewards, lengths)``). ``bound``: a magnitude bound (``spec/bounds.py``);
    ``budget``: the search (None: the explicit inputs only). Default ``expect``:
    ``DEFAULT_EXPECT``. Returns the findings; an unknown family or convention is a ValueError."""
    __tracebackhide__ = True  # pytest shows the mismatch lines, not this function's body
    if family not in FAMILIES:
        raise ValueError(f"family {family!r} is not one the oracle judges; use one of {FAMILIES}")
    if convention not in CONVENTIONS:
        raise ValueError(f"convention {convention!r} is unknown; use one of {CONVENTIONS}")
    expect = DEFAULT_EXPECT[family] if expect is None else expect
    if family == "token":
        from .token_report import check_tokens

        findings = check_tokens(
            fn,
            convention="verl" if convention == "verl" else "plain",
            extends=extends,
            budget=budget,
        )
    elif family == "episode":
        from .cli import _episode_report

        findings = _episode_report(fn, one_turn, budget)
    elif family == "shaping":  # a trainer's shaped advantage, fn(rewards, lengths)
        from ..search.shaping import checked

        findings = checked(fn, budget)
    else:
        objective = cast(Objective, family)
        findings = check(
            fn, objective, k, ns=ns, dtype=dtype, convention=convention, bound=bound, budget=budget
        )
    lines = mismatches(findings, expect)
    if lines:
        name = getattr(fn, "__qualname__", repr(fn))
        raise EstimatorMismatch(
            f"advest oracle: {name} (family {family}, K={k}) differs from the expected verdicts:\n"
            + "\n".join(f"  {line}" for line in lines),
            findings,
        )
    return findings
