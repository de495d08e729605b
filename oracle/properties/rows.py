"""The properties of the grouped input model (``oracle.conventions.rows``): what trainers' data
does to an estimator that the ``[B, G]`` rows cannot see. Each property is one check of one input
(``Rows``), written once: ``oracle.properties.grouped`` runs it on hand-built batches (its rows of
the report) and ``oracle.search.rows`` on every batch it draws.

* ids relabelled: any relabelling of the group ids leaves the advantages unchanged;
* row order: permuting the rows permutes the advantages;
* ragged groups: in a batch of groups of sizes 1..N, each group's advantages equal that group's
  alone, at its own size;
* masked rows: a masked row gets 0 and changes nothing of the other rows;
* dropped groups: removing a group changes nothing of the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ..conventions.harness import attempt
from ..conventions.rows import RowCall, labellings
from ..inputs.tolerance import relative_floor
from ..inputs.values import shown
from .findings import Failure


@dataclass(frozen=True)
class Rows:
    """One input: ``rewards [N]`` (float64: exact in the dtype at valid rows, anything at masked
    ones), ``ids`` 0..B (one per row), ``valid [N]`` (None: no mask), the kind of id the call
    gets (a key of ``labellings``) and a permutation of the rows (for ``row order``)."""

    rewards: Tensor
    ids: list[int]
    valid: Tensor | None = None
    labels: str = "ints 0..B−1"
    perm: tuple[int, ...] = ()

    @property
    def ok(self) -> Tensor:
        """``[N]`` bool: the rows that are samples."""
        return torch.ones(len(self.ids), dtype=torch.bool) if self.valid is None else self.valid


Check = Callable[[Rows], Failure | None]


def call(
    est: RowCall, case: Rows, dtype: torch.dtype, ids: Any = None, rows: Any = None
) -> Tensor | str:
    """``est`` on ``case`` (``rows``: a subset, in that order; ``ids``: other labels), in
    ``dtype``, as float64; the error's text where it raises."""
    r, valid = case.rewards, case.valid
    ids = case.ids if ids is None else ids
    if rows is not None:
        r, ids = r[rows], [ids[int(i)] for i in rows]
        valid = None if valid is None else valid[rows]
    return attempt(lambda: est(r.to(dtype), ids, valid).double())


def excess(a: Tensor, b: Tensor, r: Tensor, ids: list[Any], dtype: torch.dtype) -> float:
    """max |a − b| over the allowance of two outputs for rows with rewards ``r`` and group
    ``ids``: 2·(N·u·max_g(m_g/s_g) + float64's floor)·max|A|, the rule of spec/oracle.md
    (``allowance``) with every row a term (rows of one group may meet rows of others in a batch
    statistic) and the worst group's magnitude over spread. 0 where either is not finite (the
    finite-output property reports that, once)."""
    if not bool(a.isfinite().all() & b.isfinite().all()):
        return 0.0
    ratio = 1.0
    for j in set(ids):
        g = r[torch.tensor([x == j for x in ids], dtype=torch.bool)]
        g = g[g.isfinite()]
        if g.numel():
            m, spread = float(g.abs().max()), float(g.max() - g.min())
            ratio = max(ratio, m / spread if spread > 0 else 1.0)
    u = torch.finfo(dtype).eps / 2
    top = max([0.0, *a.abs().tolist(), *b.abs().tolist()])
    allowed = (len(ids) * u * ratio + relative_floor(dtype)) * top + torch.finfo(dtype).tiny
    return float((a - b).abs().max()) / (2 * allowed) if a.numel() else 0.0


SHOWN = 8
"""Outputs of at most this many rows are shown whole; of a larger batch, the row that moved most."""


def _compared(what: str, a: Tensor, b: Tensor, e: float) -> tuple[str, str]:
    """(expected, measured) of a failure where ``b`` should have been ``a`` (``what``: whose
    advantages ``a`` are)."""
    moved = (
        f"largest move {float((a - b).abs().nan_to_num(math.inf).max()):.3g}, {e:.2g} × allowance"
    )
    if len(a) <= SHOWN:
        return f"{what}: {shown(a)}", f"{shown(b)} ({moved})"
    i = int((a - b).abs().nan_to_num(math.inf).argmax())
    return (
        f"{what}, at the row that moved most (of {len(a)}): {float(a[i])!r}",
        f"{float(b[i])!r} ({moved})",
    )


def _sub(ids: list[Any], keep: Tensor) -> list[Any]:
    return [x for x, k in zip(ids, keep.tolist(), strict=True) if k]


def masked(est: RowCall, dtype: torch.dtype) -> Check:
    """What a mask promises: each masked row gets 0 and the valid rows get what they get
    without the masked rows, whatever the masked rows hold (NaN included)."""

    def check(case: Rows) -> Failure | None:
        ok = case.ok
        if bool(ok.all()):
            return None
        a = call(est, case, dtype)
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
        alone = call(est, replace(case, valid=torch.ones_like(ok)), dtype, rows=keep)
        if isinstance(alone, str):
            return None  # refused without the masked rows: not a question of the mask
        leaked = bool((alone.isfinite() & ~a[ok].isfinite()).any())
        e = excess(a[ok], alone, case.rewards[ok], _sub(case.ids, ok), dtype)
        if not leaked and e <= 1:
            return None
        what = "the valid rows' advantages without the masked rows"
        return Failure(
            "a masked row's value reaches the valid rows", *_compared(what, alone, a[ok], e)
        )

    return check


def relabelled(est: RowCall, dtype: torch.dtype) -> Check:
    def check(case: Rows) -> Failure | None:
        labels = labellings(case.ids)[case.labels]
        a, b = call(est, replace(case, labels="ints 0..B−1"), dtype), call(est, case, dtype, labels)
        if isinstance(a, str):
            return None
        if isinstance(b, str):
            return Failure("raises", f"the same advantages with ids as {case.labels}", b)
        ok = case.ok
        e = excess(a[ok], b[ok], case.rewards[ok], _sub(case.ids, ok), dtype)
        if e <= 1:
            return None
        what = f"the advantages with ids 0..B−1, also as {case.labels} ({list(labels)[:3]}...)"
        return Failure(
            "relabelling the ids moves the advantages", *_compared(what, a[ok], b[ok], e)
        )

    return check


def row_order(est: RowCall, dtype: torch.dtype) -> Check:
    def check(case: Rows) -> Failure | None:
        perm = torch.tensor(case.perm, dtype=torch.int64)
        a, b = call(est, case, dtype), call(est, case, dtype, rows=perm)
        if isinstance(a, str) or isinstance(b, str):
            return None
        ok = case.ok[perm]
        ids = _sub([case.ids[int(i)] for i in perm], ok)
        e = excess(a[perm][ok], b[ok], case.rewards[perm][ok], ids, dtype)
        if e <= 1:
            return None
        what = f"the advantages permuted with the rows (order {list(case.perm)[:SHOWN]}...)"
        return Failure(
            "permuting the rows does not permute the advantages", *_compared(what, a[perm], b, e)
        )

    return check


def ragged(est: RowCall, dtype: torch.dtype) -> Check:
    """Each group's advantages in the batch equal the group's alone (its valid rows)."""

    def check(case: Rows) -> Failure | None:
        a = call(est, case, dtype)
        if isinstance(a, str):
            return None
        ok = case.ok
        whole = replace(case, valid=None if case.valid is None else torch.ones_like(ok))
        for j in sorted(set(case.ids)):
            rows = [i for i, g in enumerate(case.ids) if g == j and bool(ok[i])]
            alone = call(est, whole, dtype, rows=torch.tensor(rows, dtype=torch.int64))
            if not rows or isinstance(alone, str):
                continue  # a group the estimator refuses alone is not a question of the batch
            e = excess(a[rows], alone, case.rewards[rows], [j] * len(rows), dtype)
            if e > 1:
                what = f"group {j} alone (rewards {shown(case.rewards[rows])})"
                expected, measured = _compared(what, alone, a[rows], e)
                return Failure(
                    "a group's advantages depend on the rest of the batch",
                    expected,
                    f"in the batch: {measured}",
                )
        return None

    return check


def dropped(est: RowCall, dtype: torch.dtype, b_lo: int = 1) -> Check:
    """Removing group 0 (its valid and masked rows) changes nothing of the other groups; not a
    question where fewer than ``b_lo`` groups would be left (a shrinkage needs two)."""

    def check(case: Rows) -> Failure | None:
        keep = torch.tensor([g != 0 for g in case.ids])
        left = {
            g for g, k, v in zip(case.ids, keep.tolist(), case.ok.tolist(), strict=True) if k and v
        }
        a = call(est, case, dtype)
        if isinstance(a, str) or len(left) < max(b_lo, 1):
            return None
        b = call(est, case, dtype, rows=keep.nonzero()[:, 0])
        if isinstance(b, str):
            return Failure("refused", "advantages for the batch without group 0", b)
        ok = case.ok[keep]
        e = excess(
            a[keep][ok], b[ok], case.rewards[keep][ok], _sub(_sub(case.ids, keep), ok), dtype
        )
        if e <= 1:
            return None
        expected, measured = _compared(
            "the other groups' advantages with group 0", a[keep][ok], b[ok], e
        )
        return Failure("dropping a group moves the others", expected, f"without it: {measured}")

    return check
