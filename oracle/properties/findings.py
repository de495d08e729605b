"""What a property check hands back: a ``Finding`` (one property in one dtype at one N, its
verdict and evidence), and, for a property written as a check of one input, the ``Failure`` of an
input that breaks it (the explicit inputs and the search share those checks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    """One property in one dtype at one N: a short verdict and the evidence behind it."""

    prop: str
    verdict: str
    evidence: str
    dtype: str = ""
    n: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    searched: int = 0
    """Inputs the search drew for this finding (``oracle.search``); 0: judged on explicit inputs."""
    counterexample: dict[str, str] | None = None
    """A searched "no": the shrunk input as a snippet to paste (``input``), ``expected`` and
    ``measured``. Readers of reports written before it existed never see it (schema 1 adds it)."""


@dataclass(frozen=True)
class Failure:
    """Why one input breaks a property: a short verdict (after "no: "), what the property
    expected and what the estimator gave. A property written as a check of one input returns
    it (None: the input keeps the property); the explicit inputs and the search share that check."""

    verdict: str
    expected: str
    measured: str
    excess: float | None = None
    """The error over its allowance (> 1), where the property is a bound."""


NON_FINITE = "no: non-finite output"
"""The verdict of every check that saw NaN or inf advantages for finite rewards."""
