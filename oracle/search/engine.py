"""The search behind every searched property: hypothesis draws inputs from a property's domain
(a strategy), the property says whether an input breaks it (a ``Failure``), and hypothesis
shrinks the first input that does to the smallest one it can find (``search``).

Reproducible: each property's search is seeded from ``Budget.seed`` and the property's name
(``_seed``), never from the clock, so the same command gives the same verdicts on every run and
machine; ``Budget.examples`` bounds the inputs drawn per property; ``Budget.database`` (a
directory) keeps every failing input hypothesis found, keyed by the target and the property, and
replays them first on the next run (a user's CI finds again what it found before)."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from random import Random
from typing import Any, Generic, TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, configuration, given, seed, settings
from hypothesis.strategies import SearchStrategy

from ..properties.findings import Failure, Finding
from . import database

Case = TypeVar("Case")

EXAMPLES = 60
"""Inputs drawn per property by default (``advest check --examples``): the whole default search of
one sequence estimator stays well under a minute on 2 cores (README, "The oracle's search")."""


@dataclass(frozen=True)
class Budget:
    """How hard to search: ``examples`` inputs per property, seeded by ``seed``; ``database``: a
    directory of the failing inputs found before (replayed first), or None."""

    examples: int = EXAMPLES
    seed: int = 0
    database: str | None = None
    target: str = ""
    """What is searched (``MODULE:FUNCTION``): part of the database key, so two estimators'
    counterexamples do not replay on each other."""

    def __post_init__(self) -> None:
        if isinstance(self.examples, bool) or not isinstance(self.examples, int):
            raise ValueError(f"--examples must be an integer >= 1; got {self.examples!r}")
        if self.examples < 1:
            raise ValueError(f"--examples must be an integer >= 1; got {self.examples}")


def failure_of(found: Finding) -> Failure | None:
    """An explicit row's finding on one drawn input as the search's ``Failure`` (None: it held;
    a bare "no" is "broken")."""
    if found.verdict == "yes":
        return None
    why = found.verdict.removeprefix("no: ") if found.verdict != "no" else "broken"
    return Failure(why, "yes", found.evidence)


@dataclass(frozen=True)
class Searched(Generic[Case]):
    """One searched property: its name (the ``Finding``'s ``prop``), its domain, the check of
    one input (None: holds) and the snippet that rebuilds an input (``rewards = ...``)."""

    prop: str
    strategy: SearchStrategy[Case]
    check: Callable[[Case], Failure | None]
    snippet: Callable[[Case], str]
    domain: str
    """The domain in words, for the evidence of a "yes"."""
    holds: str = "yes"
    """The verdict when no input breaks it; "no" for a property named for a defect (``couples
    groups``), whose counterexample then reads "yes: ..."."""

    @property
    def broken(self) -> str:
        return "yes" if self.holds == "no" else "no"


def _seed(budget: Budget, where: str, prop: str) -> int:
    """A seed from the budget's seed and the property's place: stable across runs, machines and
    Python's hash randomisation (sha256, not ``hash``)."""
    text = f"{budget.seed}/{where}/{prop}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def _settings(budget: Budget) -> settings:
    return settings(
        max_examples=budget.examples,
        deadline=None,
        database=None,  # under a fixed seed hypothesis keeps none: ``database`` keeps the inputs
        phases=[Phase.generate, Phase.shrink],
        derandomize=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


class quiet(warnings.catch_warnings):
    """Warnings ignored: an estimator's warning (a std of one sample) is no refusal, and what it
    does there is the finding; a user's own filter (``-W error``) would make it one."""

    def __enter__(self) -> None:
        super().__enter__()
        warnings.simplefilter("ignore")


@contextlib.contextmanager
def _private_home() -> Iterator[None]:
    """hypothesis's files (its constants cache) in a temporary directory for the search: an
    ``advest check`` writes nothing where it runs (hypothesis's default is ``./.hypothesis``),
    and a user's own hypothesis home is given back as it was."""
    saved = vars(configuration)["__hypothesis_home_directory"]
    with tempfile.TemporaryDirectory(prefix="advest-search-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(saved)


class _Broken(Exception):
    """Raised by the search's test for an input that breaks the property: hypothesis shrinks it
    and saves it in the database, as for any failing test."""

    def __init__(self, case: object) -> None:
        super().__init__("broken")
        self.case = case


def _find(
    strategy: SearchStrategy[Any], broken: Callable[[Any], bool], budget: Budget, rng: Random
) -> Any:
    """The smallest input of ``strategy`` that is ``broken`` (None: none found). Written as a
    hypothesis test rather than ``hypothesis.find``, which does not save what it finds in the
    example database."""

    @_settings(budget)
    @given(strategy)
    def test(case: Any) -> None:
        if broken(case):
            raise _Broken(case)

    test = seed(rng.getrandbits(64))(test)
    try:
        test()
    except _Broken as found:
        return found.case
    return None


def search(item: Searched[Any], budget: Budget, where: str) -> Finding:
    """The finding of ``item`` over ``budget.examples`` inputs of its domain: "yes" (its
    ``holds``) when none breaks it, else "no: ..." (its ``broken``) with the shrunk input in
    ``counterexample`` (its snippet, what was expected and what was measured). ``where`` names
    the surface (family, convention, dtype)."""
    tried = [0]

    def broken(case: Any) -> bool:
        tried[0] += 1
        return item.check(case) is not None

    key = f"advest-check/{budget.target}/{where}/{item.prop}".encode()
    with quiet(), _private_home():
        kept = database.load(budget.database, key) if budget.database else []
        case = next((c for c in kept if broken(c)), None)  # what was found before, first
        if case is None:
            rng = Random(_seed(budget, where, item.prop))
            case = _find(item.strategy, broken, budget, rng)
            if case is not None and budget.database:
                database.save(budget.database, key, case)
        if case is None:
            evidence = f"no counterexample in {tried[0]} searched inputs ({item.domain})"
            return Finding(item.prop, item.holds, evidence, searched=tried[0])
        failure = item.check(case)
    if failure is None:  # hypothesis hands back an input that broke it once: a flaky estimator
        failure = Failure("not reproducible", "the same output on the same input", "it changed")
    example = {
        "input": item.snippet(case),
        "expected": failure.expected,
        "measured": failure.measured,
    }
    evidence = (
        f"shrunk counterexample: {example['input']}; expected {failure.expected}; "
        f"got {failure.measured}"
    )
    return Finding(
        item.prop,
        f"{item.broken}: {failure.verdict}",
        evidence,
        searched=tried[0],
        counterexample=example,
    )
