"""The searched properties of an estimator on flat rows with a group id per row (the ``flat``,
``verl``, ``skyrl``, ``nemo_rl`` and ``prime_rl`` conventions, through
``oracle.conventions.rows.RowCall``): its domain is every batch of 1..4 groups of accepted sizes up
to the largest N asked, ragged where the convention allows, rows interleaved, ids of every kind
trainers use, and masked rows (inside a group, or a whole group of them) holding anything: NaN,
±inf, huge numbers, where the convention carries a masked row's reward (``flat``, ``nemo_rl``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st
from torch import Tensor

from ..conventions.harness import OracleError
from ..conventions.rows import RowCall, TokenRows, labellings
from ..inputs.tolerance import relative_floor
from .database import register
from .engine import Failure, Searched, quiet
from .values import exact, garbage, group, shown, tensor_literal


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


@register
@dataclass(frozen=True)
class Rows:
    """One drawn input: ``rewards [N]`` (float64: exact in the dtype at valid rows, anything at
    masked ones), ``ids`` 0..B (B: the group of masked rows only), ``valid [N]`` (None: no mask),
    a relabelling of the ids and a permutation of the rows."""

    rewards: Tensor
    ids: list[int]
    valid: Tensor | None
    labels: str
    perm: tuple[int, ...]


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


def _call(
    est: RowCall, case: Rows, d: RowDomain, ids: Any = None, rows: Any = None
) -> Tensor | str:
    """``est`` on ``case`` (``rows``: a subset, in that order; ``ids``: other labels), in the
    dtype, as float64; the error's text where it raises."""
    r, valid = case.rewards, case.valid
    ids = case.ids if ids is None else ids
    if rows is not None:
        r, ids = r[rows], [ids[int(i)] for i in rows]
        valid = None if valid is None else valid[rows]
    try:
        return est(r.to(d.dtype), ids, valid).double()
    except OracleError:
        raise
    except Exception as error:  # the estimator's own failure is the finding
        return f"{type(error).__name__}: {str(error)[:160]}"


def _snippet(case: Rows, d: RowDomain) -> str:
    mask = "" if case.valid is None else f"; valid = {tensor_literal(case.valid)}"
    return f"rewards = {tensor_literal(case.rewards.to(d.dtype))}; index = {case.ids}{mask}"


def _ok(case: Rows) -> Tensor:
    return torch.ones(len(case.ids), dtype=torch.bool) if case.valid is None else case.valid


def _finite(est: RowCall, d: RowDomain) -> Callable[[Rows], Failure | None]:
    def check(case: Rows) -> Failure | None:
        a = _call(est, case, d)
        if isinstance(a, str):
            return Failure("raises", "advantages for every batch in the domain", a)
        if not bool(a[_ok(case)].isfinite().all()):
            return Failure("non-finite output", "finite advantages at valid rows", shown(a))
        return None

    return check


def _close(a: Tensor, b: Tensor, r: Tensor, ids: list[Any], d: RowDomain) -> bool:
    """``a`` and ``b`` (outputs for rows with rewards ``r`` and group ``ids``) within the batch's
    allowance: (N·u·max_g(m_g/s_g) + float64's floor)·max|A|, the rule of spec/oracle.md
    (``allowance``) with every row a term (rows of one group may meet rows of others in a batch
    statistic) and the worst group's magnitude over spread. True where either is not finite (the
    finite-output search reports that, once)."""
    if not bool(a.isfinite().all() & b.isfinite().all()):
        return True
    ratio = 1.0
    for j in set(ids):
        g = r[torch.tensor([x == j for x in ids], dtype=torch.bool)]
        g = g[g.isfinite()]
        if g.numel():
            m, spread = float(g.abs().max()), float(g.max() - g.min())
            ratio = max(ratio, m / spread if spread > 0 else 1.0)
    u = torch.finfo(d.dtype).eps / 2
    top = max([0.0, *a.abs().tolist(), *b.abs().tolist()])
    allowed = (len(ids) * u * ratio + relative_floor(d.dtype)) * top + torch.finfo(d.dtype).tiny
    return bool(((a - b).abs() <= 2 * allowed).all())


def _sub(ids: list[Any], keep: Tensor) -> list[Any]:
    return [x for x, k in zip(ids, keep.tolist(), strict=True) if k]


def _masked(est: RowCall, d: RowDomain) -> Callable[[Rows], Failure | None]:
    """What a mask promises: each masked row gets 0 and the valid rows get what they get
    without the masked rows, whatever the masked rows hold (NaN included)."""

    def check(case: Rows) -> Failure | None:
        ok = _ok(case)
        if bool(ok.all()):
            return None
        a = _call(est, case, d)
        if isinstance(a, str):
            return Failure("refused", "advantages for a batch with masked rows", a)
        if bool((a[~ok] != 0).any()):
            return Failure(
                "a masked row's advantage is not 0",
                "0 at every masked row",
                f"at the masked rows: {shown(a[~ok])}",
            )
        keep = ok.nonzero()[:, 0]
        if not keep.numel():
            return None
        clean = Rows(case.rewards, case.ids, torch.ones_like(ok), case.labels, ())
        alone = _call(est, clean, d, rows=keep)
        if isinstance(alone, str):
            return None  # refused without the masked rows: not a question of the mask
        err = (a[ok] - alone).abs()
        leaked = bool((alone.isfinite() & ~a[ok].isfinite()).any())
        if not leaked and _close(a[ok], alone, case.rewards[ok], _sub(case.ids, ok), d):
            return None
        return Failure(
            "a masked row's value reaches the valid rows",
            f"the valid rows' advantages without the masked rows: {shown(alone)}",
            f"{shown(a[ok])} (largest move {float(err.nan_to_num(float('inf')).max()):.3g})",
        )

    return check


def _relabelled(est: RowCall, d: RowDomain) -> Callable[[Rows], Failure | None]:
    def check(case: Rows) -> Failure | None:
        kinds = labellings(sorted(set(case.ids)))
        mapping = dict(zip(sorted(set(case.ids)), list(kinds[case.labels]), strict=True))
        labels = [mapping[j] for j in case.ids]
        if case.labels == "numpy int64" or case.labels.startswith("numpy object"):
            import numpy as np

            labels = np.array(labels, dtype=kinds[case.labels].dtype)  # type: ignore[assignment]
        a, b = _call(est, case, d), _call(est, case, d, ids=labels)
        if isinstance(a, str):
            return None
        if isinstance(b, str):
            return Failure("raises", f"the same advantages with ids as {case.labels}", b)
        ok = _ok(case)
        if _close(a[ok], b[ok], case.rewards[ok], _sub(case.ids, ok), d):
            return None
        return Failure(
            "relabelling the ids moves the advantages",
            f"with ids as {case.labels} ({list(labels)[:4]}...): {shown(a[ok])}",
            shown(b[ok]),
        )

    return check


def _row_order(est: RowCall, d: RowDomain) -> Callable[[Rows], Failure | None]:
    def check(case: Rows) -> Failure | None:
        perm = torch.tensor(case.perm, dtype=torch.int64)
        a, b = _call(est, case, d), _call(est, case, d, rows=perm)
        if isinstance(a, str) or isinstance(b, str):
            return None
        ok = _ok(case)[perm]
        if _close(
            a[perm][ok],
            b[ok],
            case.rewards[perm][ok],
            _sub([case.ids[int(i)] for i in perm], ok),
            d,
        ):
            return None
        return Failure(
            "permuting the rows does not permute the advantages",
            f"rows in order {list(case.perm)}: {shown(a[perm])}",
            shown(b),
        )

    return check


def _ragged(est: RowCall, d: RowDomain) -> Callable[[Rows], Failure | None]:
    """Each group's advantages in the batch equal the group's alone (its valid rows)."""

    def check(case: Rows) -> Failure | None:
        a = _call(est, case, d)
        if isinstance(a, str):
            return None
        ok = _ok(case)
        for j in sorted(set(case.ids)):
            rows = torch.tensor(
                [i for i, g in enumerate(case.ids) if g == j and bool(ok[i])], dtype=torch.int64
            )
            if not rows.numel():
                continue
            alone = _call(
                est,
                Rows(
                    case.rewards,
                    case.ids,
                    None if case.valid is None else torch.ones_like(ok),
                    case.labels,
                    (),
                ),
                d,
                rows=rows,
            )
            if isinstance(alone, str):
                continue  # a group the estimator refuses alone is not a question of the batch
            if not _close(a[rows], alone, case.rewards[rows], [j] * len(rows), d):
                return Failure(
                    "a group's advantages depend on the rest of the batch",
                    f"group {j} alone: {shown(alone)}",
                    f"in the batch: {shown(a[rows])}",
                )
        return None

    return check


def _held(findings: list[Any], prop: str) -> bool:
    verdicts = {f.verdict for f in findings if f.prop == prop}
    return verdicts == {"yes"}


def properties(
    est: RowCall, d: RowDomain, findings: list[Any], coupled: bool
) -> list[Searched[Rows]]:
    """Finite output always; masked rows (where the convention has a mask), ids relabelled,
    row order and ragged groups (group-local estimators) where the explicit rows held."""
    strategy = batches(d)
    kind = "ragged, " if d.ragged else ""
    masks = (
        ", masked rows holding NaN, ±inf, 1e30" if d.dirty else (", masked rows" if d.masks else "")
    )
    words = f"{kind}groups of {d.g_lo}..{d.g_hi} rows, interleaved, any ids{masks}"

    def item(prop: str, check: Callable[[Rows], Failure | None]) -> Searched[Rows]:
        return Searched(prop, strategy, check, lambda c: _snippet(c, d), words)

    out = [item("finite output", _finite(est, d))]
    if d.masks and _held(findings, "masked rows"):
        out.append(item("masked rows", _masked(est, d)))
    if est.takes_ids and _held(findings, "ids relabelled"):
        out.append(item("ids relabelled", _relabelled(est, d)))
    if _held(findings, "row order"):
        out.append(item("row order", _row_order(est, d)))
    if not coupled and (_held(findings, "ragged groups") or _held(findings, "dropped groups")):
        out.append(item("ragged groups", _ragged(est, d)))
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
    try:
        est(rewards, ids)
    except OracleError:
        raise
    except Exception:  # a refusal of this batch: the domain leaves it out
        return False
    return True
