"""The verdict rows of the grouped input model (``oracle.conventions.rows``) on explicit inputs:
each property of ``oracle.properties.rows`` (ids relabelled, row order, ragged groups, masked rows,
dropped groups) judged by its one check on hand-built batches, and two rows of verl's and SkyRL's
conventions (response length, the std option). Each row is a ``Finding`` whose evidence holds the
input that decided it. Rewards lie on a 1/8 grid in [0, 1], exact in every dtype.

The magnitude bound and low-precision rows, which apply to ``[B, G]`` estimators too, are
``oracle.properties.extremes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import Tensor

from ..conventions.harness import attempt
from ..conventions.rows import RowCall, TokenRows, _lengths, labellings
from . import rows
from .findings import Finding
from .rows import excess


def batch(sizes: list[int], seed: int = 0, binary: bool = False) -> tuple[Tensor, list[int]]:
    """Rewards ``[N]`` (float64, on a 1/8 grid in [0, 1], or 0/1 where ``binary``; no group
    constant but the size-1 ones) and ids 0..B−1, one group per entry of ``sizes``, its rows
    interleaved with the others'."""
    gen = torch.Generator().manual_seed(seed)
    ids = [j for j, size in enumerate(sizes) for _ in range(size)]
    order = torch.randperm(len(ids), generator=gen)
    ids = [ids[int(i)] for i in order]
    top = 1 if binary else 8  # 0/1 for an estimator defined on pass/fail rewards only
    rewards = torch.randint(0, top + 1, (len(ids),), generator=gen).double() / top
    for j in range(len(sizes)):
        rows = [i for i, g in enumerate(ids) if g == j]
        if len(rows) > 1 and bool((rewards[rows] == rewards[rows[0]]).all()):
            rewards[rows[0]] = 1.0 - rewards[rows[0]] if rewards[rows[0]] != 0.5 else 0.0
    return rewards, ids


def _explicit(what: str, check: rows.Check, cases: Sequence[rows.Rows], words: str) -> Finding:
    """``what`` on the explicit inputs ``cases`` (``words`` says what they are), judged by the
    same check the search runs on every drawn input: "yes" when each input keeps the property;
    else "no" (or "no: raises" / "no: refused", the estimator's error) with the first that breaks
    it."""
    for case in cases:
        failure = check(case)
        if failure is not None:
            error = failure.verdict in ("raises", "refused")
            verdict = f"no: {failure.verdict}" if error else "no"
            detail = f"{words}: expected {failure.expected}; got {failure.measured}"
            return Finding(what, verdict, detail)
    return Finding(what, "yes", f"{words}: held")


def _case(sizes: list[int], seed: int, est: RowCall, dtype: torch.dtype) -> rows.Rows:
    r, ids = batch(sizes, seed=seed, binary=est.binary)
    return rows.Rows(r.to(dtype).double(), ids)


def ids_relabelled(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "ids relabelled"
    if not est.takes_ids:
        return Finding(what, "not applicable", "the convention passes no ids")
    case = _case(sizes, 0, est, dtype)
    kinds = list(labellings(case.ids))
    cases = [replace(case, labels=kind) for kind in kinds]
    return _explicit(
        what, rows.relabelled(est, dtype), cases, f"{len(kinds)} labellings ({', '.join(kinds)})"
    )


def row_order(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    case = _case(sizes, 1, est, dtype)
    perm = torch.randperm(len(case.ids), generator=torch.Generator().manual_seed(3))
    words = f"{len(case.ids)} rows permuted"
    return _explicit(
        "row order", rows.row_order(est, dtype), [replace(case, perm=tuple(perm.tolist()))], words
    )


def ragged(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "ragged groups"
    if not est.ragged or len(set(sizes)) < 2:
        return Finding(what, "not applicable", "the convention takes groups of one size")
    case = _case(sizes, 2, est, dtype)
    words = f"groups of sizes {sizes} interleaved"
    whole = rows.call(est, case, dtype)
    if isinstance(whole, str):
        return Finding(what, "no: refused", f"{words} in one batch: {whole}")
    return _explicit(what, rows.ragged(est, dtype), [case], words)


def masked_rows(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "masked rows"
    if not est.takes_mask:
        return Finding(what, "not applicable", "the convention passes no valid-row mask")
    r, ids = batch(sizes, seed=4, binary=est.binary)
    extra_ids = [0, 1, len(sizes), len(sizes)]  # one row in group 0 and 1, a whole masked group
    extra = [1.0, 0.0, 0.0 if est.binary else 0.25, 1.0]
    valid = torch.tensor([True] * len(ids) + [False] * len(extra_ids))
    r_m = torch.cat([r, torch.tensor(extra, dtype=torch.float64)]).to(dtype).double()
    case = rows.Rows(r_m, ids + extra_ids, valid)
    words = f"4 masked rows (2 inside groups 0 and 1, a masked group of 2; rewards {extra})"
    return _explicit(what, rows.masked(est, dtype), [case], words)


def dropped_groups(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    case = _case(sizes, 5, est, dtype)
    words = f"group 0 (size {sizes[0]}) dropped from {len(sizes)}"
    return _explicit("dropped groups", rows.dropped(est, dtype), [case], words)


def response_length(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    """verl's and SkyRL's conventions: other response lengths (the rewards and ids unchanged)
    move no advantage of a sequence-level estimator (verl PR 6497: GDPO whitened over tokens,
    so long responses weighed more)."""
    what = "response length"
    if not isinstance(est, TokenRows):
        return Finding(what, "not applicable", "the convention passes no responses")
    r, ids = batch(sizes, seed=6, binary=est.binary)
    r = r.to(dtype)
    base = est(r, ids).double()
    est.draw = 1
    try:
        out = est(r, ids).double()
    finally:
        est.draw = 0
    worst, i = excess(base, out, r.double(), ids, dtype), int((base - out).abs().argmax())
    detail = (
        f"two draws of response lengths 1..5 for the same {len(ids)} rows: max diff {worst:.2g} "
        f"× allowance (row {i}: {float(base[i]):.4g} → {float(out[i]):.4g})"
    )
    return Finding(what, "yes" if worst <= 1 else "no", detail, data={"excess": worst})


def std_option(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    """verl's ``algorithm.norm_adv_by_std_in_grpo=False`` (SkyRL's ``grpo_norm_by_std``):
    documented as "do not divide by the group's std", so with it the advantages scale with the
    rewards, A(2r) = 2·A(r). "no effect": the option changed nothing (verl PR 7893: the flag
    never reached ``grpo_vectorized``); an estimator that never divides by a std is "yes"."""
    what = "std division off"
    if not isinstance(est, TokenRows):
        return Finding(what, "not applicable", "the convention has no algorithm config")
    from ..conventions.verl import algo_config

    r, ids = batch(sizes, seed=7, binary=est.binary)
    r = r.to(dtype)
    base = est(r, ids).double()
    saved = est.config, est.std_flag
    off_config = {**est.algorithm, "norm_adv_by_std_in_grpo": False}
    est.config, est.std_flag = algo_config(est.k, **off_config), False
    est.fixed_lengths = _lengths(r.double())  # 2r: the same responses, twice the reward
    try:
        off = attempt(lambda: est(r, ids).double())
        doubled = attempt(lambda: est(2 * r, ids).double())
    finally:
        est.config, est.std_flag = saved
        est.fixed_lengths = None
    if isinstance(off, str) or isinstance(doubled, str):  # an estimator may refuse the option
        return Finding(
            what, "refused", f"with the option off: {off if isinstance(off, str) else doubled}"
        )
    scale = excess(2 * off, doubled, 2 * r.double(), ids, dtype)
    same = excess(base, off, r.double(), ids, dtype)
    detail = (
        f"with the option off, A(2r) vs 2·A(r): {scale:.2g} × allowance; the option moved the "
        f"advantages by {same:.2g} × allowance"
    )
    if scale <= 1:
        return Finding(what, "yes", detail, data={"excess": scale})
    verdict = "no effect" if same <= 1 else "no"
    return Finding(what, verdict, detail + "; still divided by a std", data={"excess": scale})


def accepted_sizes(est: RowCall, n: int, dtype: torch.dtype) -> list[int]:
    """The group sizes 1..n that ``est`` accepts, two groups of the size in a batch (a
    shrinkage across prompts needs two)."""
    ok = []
    for size in range(1, n + 1):
        r, ids = batch([size, size], seed=size, binary=est.binary)
        if not isinstance(attempt(partial(est, r.to(dtype), ids)), str):
            ok.append(size)
    return ok


def grouped_findings(est: RowCall, n: int, dtype: torch.dtype) -> list[Finding]:
    """The five grouped rows at largest group size ``n``: equal groups of ``n`` for relabelling,
    order and dropping, and every accepted size up to ``n`` for the ragged and masked rows."""
    sizes = accepted_sizes(est, n, dtype)
    if not sizes and not est.binary:  # an estimator of pass/fail rewards only: 0/1 batches
        est.binary = True
        sizes = accepted_sizes(est, n, dtype)
    if not sizes:
        return [Finding("grouped rows", "not checked", f"no group of size 1..{n} accepted")]
    equal = [max(sizes)] * 4
    ragged_sizes = sorted(sizes)[-4:] + sorted(sizes)[-4:] if est.ragged else equal
    r, ids = batch(ragged_sizes, seed=2, binary=est.binary)
    # an estimator that refuses ragged batches (a batch statistic needs one size) fails that row
    # alone: the other rows then run on equal groups
    mixed = ragged_sizes if not isinstance(attempt(lambda: est(r.to(dtype), ids)), str) else equal
    checks: list[Callable[[], Finding]] = [
        lambda: ids_relabelled(est, equal, dtype),
        lambda: row_order(est, mixed, dtype),
        lambda: ragged(est, ragged_sizes, dtype),
        lambda: masked_rows(est, mixed, dtype),
        lambda: dropped_groups(est, mixed, dtype),
    ]
    if isinstance(est, TokenRows):
        checks += [
            lambda: response_length(est, mixed, dtype),
            lambda: std_option(est, mixed, dtype),
        ]
    out = []
    for run in checks:
        finding = run()
        finding.dtype, finding.n = str(dtype).removeprefix("torch."), n
        out.append(finding)
    return out


def describe(findings: list[Finding]) -> dict[str, Any]:
    """``{row: verdict}`` of ``findings`` (the table a test compares with the expected)."""
    return {f.prop: f.verdict for f in findings}
