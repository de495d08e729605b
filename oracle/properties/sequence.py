"""The property rows of ``[B, G]`` estimators on the explicit test batches, one function per
property, each returning a ``Finding``: centring, shift / scale / permutation behaviour (judged
by the checks of ``oracle.properties.plain``, which the search runs too), the relation to
``canonical`` (max@K), all-equal and singleton groups, accuracy and the behaviour on bad input.
Unbiasedness by exact enumeration is ``oracle.properties.unbiased``."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast

from ..conventions.harness import Estimator, OracleError
from ..inputs.tolerance import _verdict, allowance
from . import plain
from .findings import NON_FINITE, Failure, Finding


def _explicit(prop: str, check: plain.Check, cases: list[tuple[str, plain.Grid]]) -> Finding:
    """``prop`` on the explicit test batches ``cases``, judged by the same check the search runs
    on every drawn input: "yes" when each keeps it, else "no" with the batch that breaks it most
    (its excess over the allowance in ``data``)."""
    worst: tuple[float, str, Failure] | None = None
    for name, case in cases:
        failure = check(case)
        e = math.inf if failure is None or failure.excess is None else failure.excess
        if failure is not None and (worst is None or e > worst[0]):
            worst = (e, name, failure)
    if worst is None:
        names = sorted({name for name, _ in cases})
        return Finding(prop, "yes", f"held on the test batches ({', '.join(names)})")
    e, name, failure = worst
    evidence = f"{name}: expected {failure.expected}; got {failure.measured}"
    return Finding(prop, "no", evidence, data={"excess": e})


def _cases(batches: list[tuple[str, Tensor]], **fields: Any) -> list[tuple[str, plain.Grid]]:
    return [(name, plain.Grid(r.double(), **fields)) for name, r in batches]


def centred(est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype) -> Finding:
    """Σ_i A_i = 0 in every group. ``batches``: in the dtype called; ``dtype``: the allowance's."""
    return _explicit("centred", plain.centred(est, _dtype(batches), dtype), _cases(batches))


def _dtype(batches: list[tuple[str, Tensor]]) -> torch.dtype:
    return batches[0][1].dtype if batches else torch.float64


def shift_invariant(
    est: Estimator, batches: list[tuple[str, Tensor]], binary: bool, dtype: torch.dtype
) -> Finding:
    if binary:
        return Finding("shift invariant", "not checked", "binary rewards only")
    t = _dtype(batches)
    check = plain.moved(est, t, dtype, plain.shifted(t), "moves under a shift: A(r + c) = A(r)")
    return _explicit("shift invariant", check, _cases(batches, shift=0.75))


def scale_behaviour(
    est: Estimator, batches: list[tuple[str, Tensor]], binary: bool, dtype: torch.dtype
) -> Finding:
    """A(a·r) = a^d A(r) for a > 0 (2 and 1/8: exact in every dtype): d = 1 (equivariant),
    d = 0 (invariant), or neither."""
    if binary:
        return Finding("scale equivariant", "not checked", "binary rewards only")
    t = _dtype(batches)
    cases = _cases(batches, factor=2.0) + _cases(batches, factor=0.125)
    found = {
        degree: _explicit(
            "scale equivariant",
            plain.moved(est, t, dtype, plain.scaled(t, degree), plain.SCALED[degree]),
            cases,
        )
        for degree in (1, 0)
    }
    excess = {d: float(f.data.get("excess", 0.0)) for d, f in found.items()}
    shown = f"× allowance: degree 1 {excess[1]:.2g}, degree 0 {excess[0]:.2g}"
    data = {"excess": min(excess.values())}
    if found[1].verdict == "yes":
        return Finding("scale equivariant", "yes (A(a r) = a A(r))", shown, data=data)
    if found[0].verdict == "yes":
        return Finding("scale equivariant", "invariant (A(a r) = A(r))", shown, data=data)
    return Finding("scale equivariant", "no", f"{shown}; {found[1].evidence}", data=data)


def permutation_equivariant(
    est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype
) -> Finding:
    """A(r P) = A(r) P for a permutation P of each group's samples (one per batch, seeded)."""
    gen = torch.Generator().manual_seed(1)
    cases = [
        (
            name,
            plain.Grid(r.double(), perm=tuple(torch.randperm(r.shape[1], generator=gen).tolist())),
        )
        for name, r in batches
    ]
    return _explicit("permutation equivariant", plain.permuted(est, _dtype(batches), dtype), cases)


def relation_to_canonical(
    est: Estimator, batches: list[tuple[str, Tensor]], k: int, dtype: torch.dtype
) -> Finding:
    """canonical; c·canonical with one constant c; per-group positive scale; or none."""
    ratios: list[tuple[float, float]] = []  # (scale s_g, its error bound)
    for _, r in batches:
        a = est(r).double()
        d = fast.maxk.canonical(r.double(), k)
        e = allowance(r, a, dtype=dtype)
        for a_row, d_row, e_g in zip(a, d, e, strict=True):
            big = d_row.abs() > 1e-12 * float(d_row.abs().max())
            if not bool(big.any()):
                if float(a_row.abs().max()) > float(e_g):
                    return Finding(
                        "relation to canonical", "none", "nonzero where canonical is identically 0"
                    )
                continue
            s = float(a_row @ d_row) / float(d_row @ d_row)
            if float((a_row - s * d_row).abs().max()) > 2 * float(e_g):
                return Finding("relation to canonical", "none", "not a multiple of Δ in some group")
            ratios.append((s, 2 * float(e_g) / float(d_row.abs().max())))
    if not ratios:
        return Finding("relation to canonical", "not checked", "every test group is degenerate")
    lo, hi = min(s for s, _ in ratios), max(s for s, _ in ratios)
    slack = 2 * max(t for _, t in ratios)
    if lo <= 0:
        return Finding("relation to canonical", "none", f"a non-positive multiple ({lo:.3g}) of Δ")
    if hi - lo <= slack:
        if abs(lo - 1) <= slack:
            return Finding("relation to canonical", "canonical", "A = Δ in every group")
        frac = Fraction(lo).limit_denominator(1000)
        return Finding(
            "relation to canonical",
            f"proportional, c = {frac} ({lo:.6g})",
            "A = c·Δ with one constant c in every group",
            data={"c": lo},
        )
    return Finding(
        "relation to canonical",
        "normalised canonical (per-group positive scale)",
        f"A = s_g·Δ with s_g in [{lo:.3g}, {hi:.3g}]",
        data={"min": lo, "max": hi},
    )


def _behaviour(est: Estimator, rewards: Tensor) -> str:
    try:
        out = est(rewards)
    except OracleError:
        raise
    except Exception as error:  # reporting what the user's code does is the point here
        return f"error: {type(error).__name__}: {str(error)[:80]}"
    if bool(torch.isnan(out).any()):
        return "NaN in the output"
    if bool(torch.isinf(out).any()):
        return "inf in the output"
    return f"value {[round(x, 6) for x in out[0].tolist()]}"


def bad_input(est: Estimator, g: int, binary: bool, dtype: torch.dtype) -> list[Finding]:
    base = [1.0, 0.0] * g
    nan = torch.tensor([base[:g]], dtype=dtype)
    nan[0, 0] = math.nan
    equal = torch.ones(1, g, dtype=dtype) * (1.0 if binary else 0.75)
    single = torch.tensor([[1.0]], dtype=dtype)
    return [
        Finding("on NaN rewards", _behaviour(est, nan), "one group with a NaN"),
        Finding("on an all-equal group", _behaviour(est, equal), f"G = {g}"),
        Finding("on G = 1", _behaviour(est, single), "one sample per group"),
    ]


def _shown(x: Tensor) -> list[float]:
    return [round(v, 6) for v in x.reshape(-1).tolist()]


def singleton(est: Estimator, dtype: torch.dtype) -> Finding:
    """Groups of one sample (G = 1) have no other sample to compare with: a baseline estimator
    has no signal there. "yes" when the advantage does not move with a shift of the rewards
    (0, usually), "refused" for an error, "no" when it moves (e.g. A = r, the raw reward)."""
    r = torch.tensor([[0.0], [0.25], [1.0], [3.0]], dtype=dtype)  # [4, 1]: four lone samples
    try:
        a, b = est(r), est(r + 0.75)
    except OracleError:
        raise
    except Exception as error:  # a refusal is an answer here
        return Finding("singleton group", "refused", f"{type(error).__name__}: {str(error)[:100]}")
    shown = f"rewards {_shown(r)} → {_shown(a)}"
    if not bool(a.isfinite().all() and b.isfinite().all()):
        return Finding("singleton group", NON_FINITE, shown)
    moved = (b.double() - a.double()).abs()
    if bool((moved <= allowance(r, a, b, dtype=dtype)).all()):
        verdict = "yes: A = 0" if bool((a == 0).all()) else "yes: shift invariant"
        return Finding("singleton group", verdict, shown)
    nonzero = r[:, 0] != 0
    c = a.double()[nonzero, 0] / r.double()[nonzero, 0]  # [3]: A / r where r != 0
    if bool(((c - c[0]).abs() <= 4 * torch.finfo(dtype).eps).all()) and float(a[0, 0]) == 0:
        why = "A = r, the raw reward" if float(c[0]) == 1 else f"A = {float(c[0]):.7g}·r"
    else:
        why = "A moves with the rewards"
    return Finding(
        "singleton group",
        f"no: {why}",
        f"{shown}; A(r + 0.75) − A(r) up to {float(moved.max()):.3g}: not shift invariant",
    )


def all_equal(est: Estimator, g: int, binary: bool, dtype: torch.dtype) -> Finding:
    """Groups whose rewards are all equal carry no signal: their advantages should be 0, also
    beside other groups (an estimator that whitens over the batch moves them)."""
    g = max(g, 2)  # a group of one is all-equal by itself: judged beside groups of two
    levels = (1.0, 0.0) if binary else (0.75, 3.0)
    gen = torch.Generator().manual_seed(g)
    top = 2 if binary else 4
    varied = torch.randint(0, top, (4, g), generator=gen).double()  # [4, g]
    varied[:, 0], varied[:, 1] = 0.0, 1.0  # never equal
    r = torch.cat([torch.full((len(levels), g), x) for x in levels] + [varied]).to(dtype)
    try:
        a = est(r)  # [6, g]: rows 0 and 1 all-equal
    except OracleError:
        raise
    except Exception as error:
        return Finding("all-equal groups", "refused", f"{type(error).__name__}: {str(error)[:100]}")
    shown = f"rewards {_shown(r[0])} → {_shown(a[0])} (beside 4 varied groups)"
    if not bool(a.isfinite().all()):
        return Finding("all-equal groups", NON_FINITE, shown)
    check, case = plain.all_equal(est, dtype), plain.Grid(r.double())
    if all(check(replace(case, flat=i)) is None for i in range(len(levels))):
        return Finding("all-equal groups", "yes: A = 0", shown)
    if check(plain.Grid(r[:1].double())) is None:
        why = "nonzero beside other groups, 0 alone: the groups are coupled (batch statistics)"
    else:
        why = "nonzero advantages for equal rewards"
    return Finding("all-equal groups", f"no: {why}", shown)


def outlier_batch(g: int, dtype: torch.dtype = torch.float32) -> tuple[str, Tensor]:
    """Groups of one reward against G − 1 equal ones ([y, x, …, x]) with x not dyadic (0.95,
    0.35, 0.3 as ``dtype`` holds them): a one-pass variance E[r²] − E[r]² of the equal ones
    leaves a rounding residue where the true spread is 0 (NeMo-RL's leave-one-out std spike)."""
    xs = torch.tensor([0.95, 0.35, 0.3]).to(dtype).double()
    rows = [torch.cat([torch.tensor([y]), x.repeat(g - 1)]) for x in xs for y in (0.0, 1.0)]
    return "one reward against G − 1 equal ones", torch.stack(rows)  # [6, g]


def accuracy(est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype) -> Finding:
    """The estimator in ``dtype`` against itself in float64 on the same rewards (exact in both):
    within ``dtype``'s allowance? ``batches`` are already in ``dtype``."""
    if not batches:
        return Finding("accurate (vs float64)", "not checked", f"no test group fits {dtype}")
    worst, where = 0.0, ""
    for name, r in batches:
        a, ref = est(r), est(r.double())
        if not bool(a.isfinite().all()) and bool(ref.isfinite().all()):
            g = int((~a.isfinite()).any(-1).nonzero()[0, 0])
            return Finding(
                "accurate (vs float64)",
                NON_FINITE,
                f"{name}: rewards {_shown(r[g])} → {_shown(a[g])}, float64 {_shown(ref[g])}",
            )
        ratio = (a.double() - ref).abs() / allowance(r, a, ref, dtype=dtype)  # [B, G]
        ratio = ratio.nan_to_num(0.0)  # NaN where float64 is NaN too: not an accuracy question
        if float(ratio.max()) > worst:
            worst = float(ratio.max())
            g = int(ratio.amax(-1).argmax())
            where = f"{name}: rewards {_shown(r[g])} → {_shown(a[g])}, float64 {_shown(ref[g])}"
    return Finding(
        "accurate (vs float64)",
        _verdict(worst),
        f"max |A − A_float64| = {worst:.2g} × allowance" + (f"; worst {where}" if where else ""),
        data={"excess": worst},
    )
