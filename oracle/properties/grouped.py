"""The verdict rows of the grouped input model (``oracle.conventions.rows``): what trainers' data
does to an estimator that the ``[B, G]`` rows cannot see. Each row is a ``Finding`` whose evidence
holds the input that decided it:

* ids relabelled: any relabelling of the group ids leaves the advantages unchanged;
* row order: permuting the rows permutes the advantages;
* ragged groups: in a batch of groups of sizes 1..N, each group's advantages equal that group's
  alone, at its own size;
* masked rows: a masked row gets 0 and changes nothing of the other rows;
* dropped groups: removing a group changes nothing of the others.

The magnitude bound and low-precision rows, which apply to ``[B, G]`` estimators too, are
``oracle.properties.extremes``. Rewards lie on a 1/8 grid in [0, 1], exact in every dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor

from ..conventions.harness import OracleError
from ..conventions.rows import RowCall, TokenRows, _lengths, labellings
from ..inputs.tolerance import allowance
from .sequence import Finding

CALL_ERRORS = (Exception,)
"""What an estimator may raise on a batch it cannot handle (verl PR 7150's negative uids raised
an IndexError; a user's division by G − 1 a ZeroDivisionError): reported as the row's verdict,
never as the oracle's failure (``_try`` lets the oracle's own ``OracleError`` through)."""


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


def _excess(a: Tensor, b: Tensor, rewards: Tensor, dtype: torch.dtype) -> float:
    """max |a − b| over the batch's allowance for two outputs (the whole call as one group: the
    invariances compare outputs of the same rows, so a batch statistic's rounding is allowed)."""
    allowed = allowance(rewards[None].to(dtype), a[None], b[None], dtype=dtype)
    err = (a.double() - b.double()).abs().max()
    return float(err / (2 * allowed.max()))


def _worst(a: Tensor, b: Tensor, rewards: Tensor, dtype: torch.dtype) -> tuple[float, int]:
    """(``_excess`` of ``b`` against ``a``, the row where they differ most)."""
    return _excess(a, b, rewards, dtype), int((a.double() - b.double()).abs().argmax())


def _shown(x: Tensor) -> list[float]:
    return [round(float(v), 4) for v in x]


def _verdict(worst: float, what: str, detail: str) -> Finding:
    ok = worst <= 1
    return Finding(what, "yes" if ok else "no", detail, data={"excess": worst})


def _try(call: Callable[[], Tensor]) -> Tensor | str:
    try:
        out = call()
    except OracleError:
        raise
    except CALL_ERRORS as error:
        return f"{type(error).__name__}: {str(error)[:160]}"
    return out


def ids_relabelled(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "ids relabelled"
    if not est.takes_ids:
        return Finding(what, "not applicable", "the convention passes no ids")
    r, ids = batch(sizes, binary=est.binary)
    r = r.to(dtype)
    kinds = labellings(ids)
    base = est(r, kinds["ints 0..B−1"])
    worst, where = 0.0, ""
    for name, labels in kinds.items():
        out = _try(partial(est, r, labels))
        if isinstance(out, str):
            shown = list(labels)[:4]
            return Finding(what, "no: raises", f"ids {name} (e.g. {shown}) raise {out}")
        excess = _excess(base, out, r, dtype)
        if excess > worst:
            i = int((base.double() - out.double()).abs().argmax())
            worst = excess
            where = (
                f"; with {name} row {i} got {float(out[i]):.4g}, with 0..B−1 {float(base[i]):.4g}"
            )
    detail = f"{len(kinds)} labellings ({', '.join(kinds)}): max diff {worst:.2g} × allowance"
    return _verdict(worst, what, detail + where)


def row_order(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    r, ids = batch(sizes, seed=1, binary=est.binary)
    r = r.to(dtype)
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(3))
    base = est(r, ids)
    out = est(r[perm], [ids[int(i)] for i in perm])
    worst, i = _worst(base[perm], out, r, dtype)
    detail = (
        f"{len(ids)} rows permuted: max diff {worst:.2g} × allowance (row {int(perm[i])}: "
        f"{float(base[perm][i]):.4g} in place, {float(out[i]):.4g} moved)"
    )
    return _verdict(worst, "row order", detail)


def ragged(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "ragged groups"
    if not est.ragged or len(set(sizes)) < 2:
        return Finding(what, "not applicable", "the convention takes groups of one size")
    r, ids = batch(sizes, seed=2, binary=est.binary)
    r = r.to(dtype)
    out = _try(lambda: est(r, ids))
    if isinstance(out, str):
        return Finding(what, "no: refused", f"groups of sizes {sizes} in one batch: {out}")
    worst, where = 0.0, ""
    for j in range(len(sizes)):
        rows = torch.tensor([i for i, g in enumerate(ids) if g == j])
        alone = _try(partial(est, r[rows], [j] * len(rows)))
        if isinstance(alone, str):
            continue  # a size the estimator refuses alone is not a raggedness question
        excess = _excess(out[rows], alone, r[rows], dtype)
        if excess > worst:
            worst = excess
            where = (
                f"; group {j} (size {len(rows)}, rewards {_shown(r[rows])}): alone "
                f"{_shown(alone)}, in the batch {_shown(out[rows])}"
            )
    detail = f"groups of sizes {sizes} interleaved: max diff {worst:.2g} × allowance{where}"
    return _verdict(worst, what, detail)


def masked_rows(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    what = "masked rows"
    if not est.takes_mask:
        return Finding(what, "not applicable", "the convention passes no valid-row mask")
    r, ids = batch(sizes, seed=4, binary=est.binary)
    extra_ids = [0, 1, len(sizes), len(sizes)]  # one row in group 0 and 1, a whole masked group
    extra = [1.0, 0.0, 0.0 if est.binary else 0.25, 1.0]
    r_m = torch.cat([r, torch.tensor(extra, dtype=torch.float64)]).to(dtype)
    ids_m = ids + extra_ids
    valid = torch.tensor([True] * len(ids) + [False] * len(extra_ids))
    base = est(r.to(dtype), ids, torch.ones(len(ids), dtype=torch.bool))
    out = _try(lambda: est(r_m, ids_m, valid))
    if isinstance(out, str):
        return Finding(what, "no: refused", f"masked rows {extra_ids} refused: {out}")
    leak = float(out[~valid].abs().max())
    worst = _excess(base, out[valid], r.to(dtype), dtype)
    detail = (
        f"4 masked rows (2 inside groups 0 and 1, a masked group of 2; rewards {extra}): "
        f"their largest |A| {leak:.3g}; the other rows moved by {worst:.2g} × allowance"
    )
    if worst > 1:
        i = int((base.double() - out[valid].double()).abs().argmax())
        detail += f" (row {i}, group {ids[i]}: {float(base[i]):.4g} → {float(out[i]):.4g})"
    return _verdict(worst if leak == 0 else max(worst, 2.0), what, detail)


def dropped_groups(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    r, ids = batch(sizes, seed=5, binary=est.binary)
    r = r.to(dtype)
    keep = torch.tensor([g != 0 for g in ids])
    base = est(r, ids)
    out = _try(lambda: est(r[keep], [g for g in ids if g != 0]))
    if isinstance(out, str):
        return Finding("dropped groups", "no: refused", f"group 0 dropped: {out}")
    worst, i = _worst(base[keep], out, r, dtype)
    detail = (
        f"group 0 (size {sizes[0]}) dropped from {len(sizes)}: the others moved by {worst:.2g} × "
        f"allowance (e.g. {float(base[keep][i]):.4g} → {float(out[i]):.4g})"
    )
    return _verdict(worst, "dropped groups", detail)


def response_length(est: RowCall, sizes: list[int], dtype: torch.dtype) -> Finding:
    """verl's and SkyRL's conventions: other response lengths (the rewards and ids unchanged)
    move no advantage of a sequence-level estimator (verl PR 6497: GDPO whitened over tokens,
    so long responses weighed more)."""
    what = "response length"
    if not isinstance(est, TokenRows):
        return Finding(what, "not applicable", "the convention passes no responses")
    r, ids = batch(sizes, seed=6, binary=est.binary)
    r = r.to(dtype)
    base = est(r, ids)
    est.draw = 1
    try:
        out = est(r, ids)
    finally:
        est.draw = 0
    worst, i = _worst(base, out, r, dtype)
    detail = (
        f"two draws of response lengths 1..5 for the same {len(ids)} rows: max diff {worst:.2g} "
        f"× allowance (row {i}: {float(base[i]):.4g} → {float(out[i]):.4g})"
    )
    return _verdict(worst, what, detail)


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
    base = est(r, ids)
    saved = est.config, est.std_flag
    off_config = {**est.algorithm, "norm_adv_by_std_in_grpo": False}
    est.config, est.std_flag = algo_config(est.k, **off_config), False
    est.fixed_lengths = _lengths(r.double())  # 2r: the same responses, twice the reward
    try:
        off, doubled = _try(partial(est, r, ids)), _try(partial(est, 2 * r, ids))
    finally:
        est.config, est.std_flag = saved
        est.fixed_lengths = None
    if isinstance(off, str) or isinstance(doubled, str):  # an estimator may refuse the option
        return Finding(
            what, "refused", f"with the option off: {off if isinstance(off, str) else doubled}"
        )
    scale = _excess(2 * off, doubled, 2 * r, dtype)
    same = _excess(base, off, r, dtype)
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
        if not isinstance(_try(partial(est, r.to(dtype), ids)), str):
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
    mixed = ragged_sizes if not isinstance(_try(lambda: est(r.to(dtype), ids)), str) else equal
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
