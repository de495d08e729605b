"""The searched properties of an estimator on flat rows with a group id per row (the ``flat``,
``verl``, ``skyrl``, ``nemo_rl`` and ``prime_rl`` conventions, through
``oracle.conventions.rows.RowCall``): its domain is every batch of 1..4 groups of accepted sizes up
to the largest N asked, ragged where the convention allows, rows interleaved, ids of every kind
trainers use, and masked rows (inside a group, or a whole group of them) holding anything: NaN,
±inf, huge numbers, where the convention carries a masked row's reward (``flat``, ``nemo_rl``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st
from torch import Tensor

from ..conventions.harness import attempt
from ..conventions.rows import RowCall, TokenRows, labellings
from ..inputs.values import exact, garbage, group, shown, tensor_literal
from ..properties import rows as judged
from ..properties.findings import Failure
from ..properties.rows import Check, Rows, call
from .database import register
from .engine import Searched, quiet

register(Rows)  # a drawn batch may be kept in the example database


@dataclass(frozen=True)
class RowDomain:
    """Group sizes ``g_lo..g_hi`` (one size per batch unless ``ragged``), pass/fail rewards only
    (``binary``), masked rows (``masks``) and whether they may hold garbage (``dirty``)."""

    g_lo: int
    g_hi: int
    b_lo: int
    """The fewest groups a batch needs (2 for a shrinkage across prompts)."""
    binary: bool
    nonneg: bool
    """Non-negative rewards only (MaxRL divides by the mean reward)."""
    ragged: bool
    masks: bool
    dirty: bool
    dtype: torch.dtype


@st.composite
def batches(draw: st.DrawFn, d: RowDomain) -> Rows:
    size = st.integers(d.g_lo, d.g_hi)
    # a list shrinks by deleting groups, so a counterexample ends with the groups it needs
    sizes = draw(st.lists(size, min_size=d.b_lo, max_size=d.b_lo + 3))
    B = len(sizes)
    if not d.ragged:
        sizes = [sizes[0]] * B
    rows = [(j, v) for j, s in enumerate(sizes) for v in draw(group(s, d.binary))]
    if d.nonneg:
        rows = [(j, abs(v)) for j, v in rows]
    masked: list[tuple[int, float]] = []
    if d.masks:
        value = garbage() if d.dirty else st.sampled_from((0.0, 1.0))
        masked = draw(st.lists(st.tuples(st.integers(0, B), value), max_size=3))
    everything = [(j, v, True) for j, v in rows] + [(j, v, False) for j, v in masked]
    order = draw(st.permutations(range(len(everything))))
    picked = [everything[i] for i in order]
    valid = torch.tensor([ok for _, _, ok in picked])
    values = exact([v if ok else 0.0 for _, v, ok in picked], d.dtype)
    values[~valid] = torch.tensor([v for _, v, ok in picked if not ok], dtype=torch.float64)
    labels = draw(st.sampled_from(list(labellings([0]))))
    perm = tuple(draw(st.permutations(range(len(picked)))))
    return Rows(values, [j for j, _, _ in picked], valid if d.masks else None, labels, perm)


def _snippet(case: Rows, d: RowDomain) -> str:
    mask = "" if case.valid is None else f"; valid = {tensor_literal(case.valid)}"
    return f"rewards = {tensor_literal(case.rewards.to(d.dtype))}; index = {case.ids}{mask}"


def _finite(est: RowCall, d: RowDomain) -> Check:
    def check(case: Rows) -> Failure | None:
        a = call(est, case, d.dtype)
        if isinstance(a, str):
            return Failure("raises", "advantages for every batch in the domain", a)
        if not bool(a[case.ok].isfinite().all()):
            return Failure("non-finite output", "finite advantages at valid rows", shown(a))
        return None

    return check


def _held(findings: list[Any], prop: str) -> bool:
    verdicts = {f.verdict for f in findings if f.prop == prop}
    return verdicts == {"yes"}


def properties(
    est: RowCall, d: RowDomain, findings: list[Any], coupled: bool
) -> list[Searched[Rows]]:
    """Finite output always; masked rows (where the convention has a mask), ids relabelled,
    row order, ragged and dropped groups (group-local estimators) where the explicit rows
    held."""
    strategy = batches(d)
    kind = "ragged, " if d.ragged else ""
    masks = (
        ", masked rows holding NaN, ±inf, 1e30" if d.dirty else (", masked rows" if d.masks else "")
    )
    words = f"{kind}groups of {d.g_lo}..{d.g_hi} rows, interleaved, any ids{masks}"

    def item(prop: str, check: Check) -> Searched[Rows]:
        return Searched(prop, strategy, check, lambda c: _snippet(c, d), words)

    out = [item("finite output", _finite(est, d))]
    if d.masks and _held(findings, "masked rows"):
        out.append(item("masked rows", judged.masked(est, d.dtype)))
    if est.takes_ids and _held(findings, "ids relabelled"):
        out.append(item("ids relabelled", judged.relabelled(est, d.dtype)))
    if _held(findings, "row order"):
        out.append(item("row order", judged.row_order(est, d.dtype)))
    if not coupled and (_held(findings, "ragged groups") or _held(findings, "dropped groups")):
        out.append(item("ragged groups", judged.ragged(est, d.dtype)))
    if not coupled and _held(findings, "dropped groups"):
        out.append(item("dropped groups", judged.dropped(est, d.dtype, d.b_lo)))
    return out


def domain(est: RowCall, g_hi: int, dtype: torch.dtype, findings: Sequence[Any] = ()) -> RowDomain:
    """``est``'s domain: the sizes it accepted in the explicit rows (``grouped.accepted_sizes``
    set ``est.binary`` where it takes pass/fail rewards only), whether one group is a batch and
    negative rewards are taken; dirty masked rows where the convention carries a masked row's
    reward (not verl's and SkyRL's, whose padding holds 0); ragged batches unless the explicit
    row found them refused."""
    from ..properties.grouped import accepted_sizes

    with quiet():
        sizes = accepted_sizes(est, g_hi, dtype) or [g_hi]
        one = torch.tensor([float(i % 2) for i in range(max(sizes))], dtype=dtype)
        b_lo = 1 if _accepts(est, one, [0] * len(one)) else 2
        nonneg = not _accepts(est, torch.cat([one, one]) - 3, [0] * len(one) + [1] * len(one))
    refused = any(f.prop == "ragged groups" and "refused" in f.verdict for f in findings)
    ragged = est.ragged and not refused  # an estimator of one group size: searched on those
    dirty = est.takes_mask and not isinstance(est, TokenRows)
    return RowDomain(
        min(sizes), max(sizes), b_lo, est.binary, nonneg, ragged, est.takes_mask, dirty, dtype
    )


def _accepts(est: RowCall, rewards: Tensor, ids: list[int]) -> bool:
    """Whether ``est`` takes this batch (a refusal: the domain leaves it out)."""
    return not isinstance(attempt(lambda: est(rewards, ids)), str)
