"""``assert_estimator``: the oracle inside a user's own test suite (``advest.testing``). It runs
``check`` on the user's callable and fails with the expected and the measured verdict of every
property that does not match, so a CI run names the property a change broke.

An expected verdict is matched against the start of the measured one: ``"yes"`` accepts
``"yes: exact"``; ``"no"`` accepts ``"no: biased"``. A property not named in ``expect`` is not
asserted. Each named property must hold in every dtype and at every N where it was checked."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast, get_args

from advest.spec.bounds import Bound

from .harness import Convention, Objective
from .properties import Finding
from .report import check

FAMILIES: tuple[str, ...] = (*get_args(Objective), "token")
"""The families ``assert_estimator`` and ``advest check --family`` judge."""
CONVENTIONS: tuple[str, ...] = get_args(Convention)
"""The calling conventions (``advest check --convention``)."""


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
) -> list[Finding]:
    """Run the oracle on ``fn`` and raise ``EstimatorMismatch`` listing every property in
    ``expect`` (name -> expected verdict prefix) whose measured verdict differs. Every family
    and convention ``advest check`` takes: ``family`` one of ``FAMILIES`` (``"token"``: the
    token oracle on exact token trees, ``fn(rewards, mask, ...)`` as ``--family token``, with
    ``extends``), ``convention`` one of ``CONVENTIONS`` (``"flat"``: ``fn(rewards [N], index
    [N], valid=...)``). ``bound``: a magnitude bound to hold ``fn`` to (``spec/bounds.py``).
    Default ``expect``: centred and finite (token family: unbiased), the least a baseline
    estimator owes. Returns the findings; an unknown family or convention is a ValueError
    naming the ones that exist."""
    __tracebackhide__ = True  # pytest shows the mismatch lines, not this function's body
    if family not in FAMILIES:
        raise ValueError(f"family {family!r} is not one the oracle judges; use one of {FAMILIES}")
    if convention not in CONVENTIONS:
        raise ValueError(f"convention {convention!r} is unknown; use one of {CONVENTIONS}")
    if family == "token":
        from .token_report import check_tokens

        if expect is None:
            expect = {"unbiased": "yes"}
        findings = check_tokens(
            fn, convention="verl" if convention == "verl" else "plain", extends=extends
        )
    else:
        if expect is None:
            expect = {"centred": "yes", "finite output": "yes"}
        findings = check(
            fn,
            cast(Objective, family),
            k,
            ns=ns,
            dtype=dtype,
            convention=cast(Convention, convention),
            bound=bound,
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
