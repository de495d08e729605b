"""The searched properties of an estimator on rewards ``[B, G]`` (``--convention plain``, and
every row convention through ``RowsAsPlain``): its domain is every batch of 1..3 groups (more
where the estimator needs them) of every accepted size up to the largest N asked, with the
rewards of ``values.group``, in the dtype under check. A property is searched where the explicit
inputs found it to hold ("yes"), so the search can only find what they missed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from ..conventions.harness import Estimator
from ..inputs.values import exact, group, shown, tensor_literal
from ..properties import plain as judged
from ..properties.findings import Failure
from ..properties.plain import Check, Grid, call
from .database import register
from .engine import Searched, quiet


@dataclass(frozen=True)
class Domain:
    """Where the estimator is defined: group sizes ``g_lo..g_hi``, at least ``b_lo`` groups,
    pass/fail rewards only (``binary``), non-negative rewards only (``nonneg``)."""

    g_lo: int
    g_hi: int
    b_lo: int
    binary: bool
    nonneg: bool
    dtype: torch.dtype


register(Grid)  # a drawn input may be kept in the example database


@st.composite
def grids(draw: st.DrawFn, d: Domain) -> Grid:
    G = draw(st.integers(d.g_lo, d.g_hi))
    rows = draw(st.lists(group(G, d.binary), min_size=d.b_lo, max_size=d.b_lo + 2))
    B = len(rows)
    if d.nonneg:
        rows = [[abs(v) for v in row] for row in rows]
    rewards = exact([v for row in rows for v in row], d.dtype).reshape(B, G)
    perm = tuple(draw(st.permutations(range(G))))
    shift = draw(st.sampled_from((0.75, 1.0, 1024.0) if d.nonneg else (0.75, -2.0, 1024.0)))
    return Grid(
        rewards, perm, shift, draw(st.sampled_from((2.0, 0.5, 0.125))), draw(st.integers(0, B - 1))
    )


def _snippet(case: Grid, d: Domain, extra: str = "") -> str:
    return f"rewards = {tensor_literal(case.rewards.to(d.dtype))}{extra}; A = estimator(rewards)"


def _finite(est: Estimator, d: Domain) -> Check:
    def check(case: Grid) -> Failure | None:
        a = call(est, case.rewards, d.dtype)
        if isinstance(a, str):
            return Failure("raises", "advantages for rewards in the estimator's domain", a)
        if not bool(a.isfinite().all()):
            return Failure("non-finite output", "finite advantages for finite rewards", shown(a))
        return None

    return check


def _held(findings: Sequence[object], prop: str) -> str | None:
    """The explicit verdict of ``prop`` where every cell agrees (``"yes"``, ``"invariant"``...),
    else None: a property the explicit inputs already refute, or never checked, is not searched."""
    verdicts = {getattr(f, "verdict", "") for f in findings if getattr(f, "prop", "") == prop}
    if len(verdicts) != 1:
        return None
    return verdicts.pop()


Extra = Callable[[Grid], str]


def _table(est: Estimator, d: Domain, scale: str) -> list[tuple[str, str, Check, Extra]]:
    """(property, the explicit verdict it starts from (a prefix), its check, the snippet's
    extra lines): one row per searched property of ``[B, G]`` estimators."""
    t = d.dtype
    degree = 1 if scale.startswith("yes") else 0
    return [
        ("centred", "yes", judged.centred(est, t, t), lambda c: ""),
        (
            "shift invariant",
            "yes",
            judged.moved(est, t, t, judged.shifted(t), "moves under a shift: A(r + c) = A(r)"),
            lambda c: f"; c = {c.shift!r}; A_after = estimator(rewards + c)",
        ),
        (
            "scale equivariant",
            "yes" if degree else "invariant",
            judged.moved(est, t, t, judged.scaled(t, degree), judged.SCALED[degree]),
            lambda c: f"; a = {c.factor!r}; A_after = estimator(a * rewards)",
        ),
        (
            "permutation equivariant",
            "yes",
            judged.permuted(est, t, t),
            lambda c: f"; perm = {list(c.perm)}; A_after = estimator(rewards[:, perm])",
        ),
        (
            "all-equal groups",
            "yes",
            judged.all_equal(est, t),
            lambda c: f"; rewards[{c.flat}] = rewards[{c.flat}, 0]",
        ),
        (
            "couples groups",
            "no",
            judged.alone(est, t, d.b_lo),
            lambda c: "; A_alone = estimator(rewards[:1])",
        ),
    ]


def properties(est: Estimator, d: Domain, findings: Sequence[object]) -> list[Searched[Grid]]:
    """The searched properties for ``est`` on ``d``: finite output always; centring, shift,
    scale, permutation, all-equal groups and group independence where the explicit inputs
    found them to hold (their verdict in every cell starts as the table's)."""
    strategy = grids(d)
    kinds = "0/1" if d.binary else "ties, offsets to 2^20, spreads to 2^-20, outliers"
    words = f"N {d.g_lo}..{d.g_hi}, {d.b_lo}+ groups, {kinds}"

    def item(prop: str, check: Check, extra: Extra, holds: str = "yes") -> Searched[Grid]:
        snippet = lambda c: _snippet(c, d, extra(c))  # noqa: E731
        return Searched(prop, strategy, check, snippet, words, "no" if holds == "no" else "yes")

    out = [item("finite output", _finite(est, d), lambda c: "")]
    scale = _held(findings, "scale equivariant") or ""
    for prop, start, check, extra in _table(est, d, scale):
        held = _held(findings, prop)
        if held is not None and (
            held == start or held.startswith(f"{start}:") or held.startswith(f"{start} ")
        ):
            out.append(item(prop, check, extra, start))
    return out


def domain(
    est: Estimator, g_hi: int, dtype: torch.dtype, binary: bool, g_min: int = 1
) -> Domain | None:
    """The estimator's domain from probes with ordinary rewards: the smallest accepted group
    size from ``g_min`` (and number of groups), and whether it takes negative rewards. None
    when it accepts no group size up to ``g_hi``."""
    with quiet():
        return _probe(est, g_hi, dtype, binary, g_min)


def _probe(
    est: Estimator, g_hi: int, dtype: torch.dtype, binary: bool, g_min: int
) -> Domain | None:
    for b_lo in (1, 2):
        for g in range(g_min, g_hi + 1):
            probe = torch.tensor([[float(i % 2) for i in range(g)]] * b_lo, dtype=dtype)
            if not isinstance(call(est, probe, dtype), str):
                nonneg = isinstance(call(est, probe - 3.0, dtype), str)
                return Domain(g, g_hi, b_lo, binary, nonneg, dtype)
    return None
