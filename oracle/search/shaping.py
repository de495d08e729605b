"""The searched invariants of a reward shaping (``--family shaping``): its domain is every batch
of 1..3 groups of 1..8 samples, rewards pass/fail or of ``values.group`` (ties, offsets,
outliers), with lengths or costs that are all zero, all equal, one non-zero, whole counts or
fractional costs. Each invariant the explicit inputs found to hold is searched with the same
check (``oracle.properties.shaping``) on one drawn batch at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import Tensor

from advest.fast.shaping import KEEPS

from ..inputs.values import group, tensor_literal
from ..properties import shaping as sh
from ..properties.findings import Failure, Finding
from .database import register
from .engine import Budget, Searched, failure_of, quiet, search


@register
@dataclass(frozen=True)
class Shaped:
    """One drawn input: ``rewards [B, G]`` and ``lengths [B, G]`` (float64)."""

    rewards: Tensor
    lengths: Tensor


@st.composite
def lengths_of(draw: st.DrawFn, size: int) -> list[float]:
    """A group's lengths or costs: all zero, all equal, one non-zero, counts, or costs."""
    kind = draw(st.sampled_from(("zero", "equal", "one", "counts", "costs")))
    if kind == "zero":
        return [0.0] * size
    if kind == "equal":
        return [float(draw(st.integers(1, 64)))] * size
    if kind == "one":
        at = draw(st.integers(0, size - 1))
        return [float(draw(st.integers(1, 64))) if i == at else 0.0 for i in range(size)]
    if kind == "counts":
        return [float(x) for x in draw(st.lists(st.integers(0, 64), min_size=size, max_size=size))]
    costs = st.sampled_from((0.0, 0.125, 0.5, 1.0, 3.25, 1e3))
    return draw(st.lists(costs, min_size=size, max_size=size))


@st.composite
def batches(draw: st.DrawFn, binary: bool) -> Shaped:
    G, B = draw(st.integers(1, 8)), draw(st.integers(1, 3))
    rows = [draw(group(G, binary)) for _ in range(B)]
    lengths = [draw(lengths_of(G)) for _ in range(B)]
    return Shaped(
        torch.tensor(rows, dtype=torch.float64), torch.tensor(lengths, dtype=torch.float64)
    )


def _snippet(case: Shaped) -> str:
    rewards, lengths = tensor_literal(case.rewards), tensor_literal(case.lengths)
    return f"rewards = {rewards}; lengths = {lengths}; A = estimator(rewards, lengths)"


def _held(
    row: Callable[[sh.Target, bool, sh.Batches | None], Finding], fn: sh.Target, advantages: bool
) -> Callable[[Shaped], Failure | None]:
    """``row`` (one of ``sh.CHECKS``) judged on one drawn batch."""

    def check(case: Shaped) -> Failure | None:
        try:
            f = row(fn, advantages, [(case.rewards, case.lengths)])
        except Exception as error:  # the transform's own failure on a batch it must take
            return Failure(
                "raises", "an output for every batch", f"{type(error).__name__}: {error}"
            )
        return failure_of(f)

    return check


def properties(
    fn: sh.Target, findings: Sequence[Finding], advantages: bool
) -> list[Searched[Shaped]]:
    """Each invariant whose explicit finding is "yes", on its domain: pass/fail rewards for
    ``pass_over_fail`` (what it claims), any rewards for the others."""
    out = []
    for prop, row in sh.CHECKS.items():
        if {f.verdict for f in findings if f.prop == prop} != {"yes"}:
            continue
        binary = prop == "pass_over_fail"
        words = "1..3 groups of 1..8, " + (
            "pass/fail rewards" if binary else "rewards with ties, offsets, outliers"
        )
        words += ", lengths all zero, equal, one non-zero, counts, costs"
        out.append(Searched(prop, batches(binary), _held(row, fn, advantages), _snippet, words))
    return out


def searched(
    fn: sh.Target, findings: Sequence[Finding], budget: Budget, advantages: bool = False
) -> list[Finding]:
    """The searched findings of a shaping (or a shaped advantage), after its explicit ones."""
    with quiet():
        return [search(p, budget, "shaping") for p in properties(fn, findings, advantages)]


def checked(
    fn: sh.Target, budget: Budget | None, advantages: bool = True, keeps: tuple[str, ...] = KEEPS
) -> list[Finding]:
    """``advest check --family shaping``: the explicit findings (``oracle.properties.shaping``),
    then each that held searched over ``budget`` (None: the explicit inputs alone)."""
    findings = sh.check(fn, keeps, advantages=advantages)
    return findings + (searched(fn, findings, budget, advantages) if budget else [])
