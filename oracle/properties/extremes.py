"""Two rows that judge an estimator's output against the rewards' own size, in any convention:

* **magnitude bound**: for rewards in [0, 1], the largest |A| over hostile groups (one apart
  from ties, near ties, a spread of 1e-6, groups of one) against a bound at the group size
  (``spec/bounds.py``): a registered estimator's declared bound, else the larger of the rewards'
  range (1) and the largest standardised value, √(N − 1), N the rows of the call (loose on
  purpose: it admits every estimator advest ships and no division by ε). NeMo-RL #1518's
  leave-one-out std (±1e6 when the others tie) and AReaL PR 1673's leftover rows (divided by ε)
  fail it.
* **low-precision rewards**: rewards given in bfloat16 and float16, near ties included
  (``[1, 1, 1, 1 + 2⁻⁷]``, OpenRLHF PR 1334), against the same rewards in float64: the error
  may be the output's own rounding (2 u of the low dtype) plus float32 arithmetic's allowance,
  not the low dtype's arithmetic, which rounds a near-tie's baseline away.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from advest.spec.bounds import Bound

from ..conventions.harness import CALL_ERRORS
from ..conventions.rows import RowCall
from ..inputs.tolerance import allowance, coupled_allowance
from .findings import Finding
from .grouped import accepted_sizes

NEAR = 2.0**-7
"""The smallest step above 1 in bfloat16: ``[1, 1, 1, 1 + 2⁻⁷]`` is OpenRLHF PR 1334's group."""


def generic_bound(n: int, k: int) -> float:
    """The bound of an estimator that declares none: max(1, √(N − 1))."""
    return max(1.0, math.sqrt(max(n - 1, 0)))


def hostile_groups(size: int) -> list[tuple[str, list[float]]]:
    """Rewards in [0, 1] of one ``size`` that push a normalisation to its extremes."""
    if size == 1:
        return [("one sample", [1.0]), ("one sample", [0.25])]
    rest = size - 1
    return [
        ("one success", [0.0] * rest + [1.0]),
        ("one failure", [1.0] * rest + [0.0]),
        ("near tie", [1.0] * rest + [1.0 - NEAR]),
        ("spread 1e-6", [0.5 + 1e-6 * i / rest for i in range(size)]),
        ("two halves", [float(i % 2) for i in range(size)]),
    ]


def magnitude(
    est: RowCall,
    n: int,
    dtype: torch.dtype,
    bound: Bound | None = None,
    k: int = 1,
    coupled: bool = False,
) -> Finding:
    """The worst |A| / bound over ``hostile_groups`` of every accepted size up to ``n`` (groups
    of one size per call where the convention is not ragged; all sizes in one call otherwise,
    as AReaL's leftover rows are). ``coupled``: the bound is taken at the call's rows (B·G)."""
    own = bound if bound is not None else generic_bound
    name = "declared" if bound is not None else "max(1, √(N − 1))"
    sizes = accepted_sizes(est, n, dtype)
    if not sizes and not est.binary:  # pass/fail rewards only: the 0/1 hostile groups
        est.binary = True
        sizes = accepted_sizes(est, n, dtype)
    # largest groups first: a reshape to the first group's size leaves the small ones over
    # (AReaL PR 1673)
    sizes = sorted(sizes, reverse=True)
    calls = [sizes] if est.ragged and _takes_ragged(est, sizes, dtype) else [[s] for s in sizes]
    worst, where = 0.0, "no group accepted"
    for call_sizes in calls:
        groups = [
            (s, label, g)
            for s in call_sizes
            for label, g in hostile_groups(s)
            if not est.binary or set(g) <= {0.0, 1.0}
        ]
        rewards = torch.tensor([x for _, _, g in groups for x in g], dtype=dtype)
        ids = [j for j, (_, _, g) in enumerate(groups) for _ in g]
        try:
            out = est(rewards, ids).double()
        except CALL_ERRORS as error:
            return Finding("magnitude bound", "no: refused", f"{type(error).__name__}: {error}")
        start = 0
        for s, label, g in groups:
            a = out[start : start + s]
            start += s
            limit = own(len(ids) if (coupled or bound is None) else s, k)
            top = float(a.abs().max())
            if not math.isfinite(top):
                continue  # NaN or inf is the "finite output" row's verdict, not a size
            ratio = 0.0 if top == 0 else (top / limit if limit > 0 else math.inf)
            if ratio > worst or where == "no group accepted":
                worst = max(ratio, worst)
                where = (
                    f"{label}, N = {s}: rewards {[round(x, 7) for x in g]} → "
                    f"{[round(float(x), 4) for x in a]} (bound {limit:.4g})"
                )
    verdict = "yes" if worst <= 1 + 1e-6 else "no"
    detail = f"worst |A| / bound ({name}) = {worst:.4g} at {where}"
    return Finding("magnitude bound", verdict, detail, data={"ratio": worst})


def _takes_ragged(est: RowCall, sizes: list[int], dtype: torch.dtype) -> bool:
    """Whether ``est`` takes groups of every size in ``sizes`` in one call (a batch-statistic
    estimator refuses: it is then judged one size per call)."""
    ids = [j for j, s in enumerate(sizes) for _ in range(s)]
    try:
        est(torch.linspace(0, 1, len(ids), dtype=dtype), ids)
    except CALL_ERRORS:
        return False
    return True


def low_precision(est: RowCall, n: int, coupled: bool = False) -> list[Finding]:
    """One row per low dtype (bfloat16, float16): the worst error against float64 on near ties,
    one-apart groups and a constant group, as a multiple of the allowance (``coupled``: the
    batch's, as every output then carries the rounding of the batch's statistics)."""
    sizes = [s for s in accepted_sizes(est, n, torch.float64) if s > 1]
    if not sizes and not est.binary:  # pass/fail rewards only: 0/1 groups
        est.binary = True
        sizes = [s for s in accepted_sizes(est, n, torch.float64) if s > 1]
    size = max(sizes) if sizes else 0
    findings = []
    for low in (torch.bfloat16, torch.float16):
        name = str(low).removeprefix("torch.")
        if not size:
            findings.append(Finding("low-precision rewards", "not checked", "no group accepted"))
            continue
        rest = size - 1
        near = [[1.0] * rest + [1.0 + NEAR], [0.0] * rest + [NEAR], [0.75] * size]
        exact = [[1.0] * rest + [0.0], [0.0] * rest + [1.0], [1.0] * size]
        groups = exact if est.binary else [*near[:2], exact[0], near[2]]
        r64 = torch.tensor(groups, dtype=torch.float64)  # [4, size], exact in both dtypes
        ids = [j for j in range(len(groups)) for _ in range(size)]
        flat = r64.reshape(-1)
        try:
            ref = est(flat, ids).double().reshape(r64.shape)
            got = est(flat.to(low), ids).double().reshape(r64.shape)
        except CALL_ERRORS as error:
            msg = f"{type(error).__name__}: {str(error)[:160]}"
            findings.append(Finding("low-precision rewards", "not accepted", msg, name, n))
            continue
        with coupled_allowance(coupled):
            findings.append(_judge_low(r64, ref, got, low, name, n))
    return findings


def _judge_low(
    r64: Tensor, ref: Tensor, got: Tensor, low: torch.dtype, name: str, n: int
) -> Finding:
    u_low = torch.finfo(low).eps / 2
    allowed = allowance(r64, ref, dtype=torch.float32) + 2 * u_low * ref.abs().amax(-1, True)
    err = (got - ref).abs()
    bad = ~got.isfinite()
    ratio = torch.where(bad, torch.inf, err / allowed)  # [4, size]
    g = int(ratio.amax(-1).argmax())
    worst = float(ratio.max())
    shown = [round(float(x), 7) for x in r64[g]]
    detail = (
        f"worst error {worst:.3g} × allowance at rewards {shown} ({name}): got "
        f"{[round(float(x), 4) for x in got[g]]}, float64 gives "
        f"{[round(float(x), 4) for x in ref[g]]}"
    )
    verdict = "yes" if worst <= 1 else ("no: non-finite" if bool(bad.any()) else "no")
    return Finding("low-precision rewards", verdict, detail, name, n, data={"excess": worst})
