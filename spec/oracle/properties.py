"""The property checks, one function per property, each returning a ``Finding``:
centring, shift / scale / permutation behaviour, the relation to ``canonical`` (max@K) and the
behaviour on bad input. Unbiasedness by exact enumeration is ``oracle.unbiased``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)

from ... import fast
from .calling import Estimator, OracleError
from .tolerance import _excess, _verdict, allowance


@dataclass
class Finding:
    """One property in one dtype at one N: a short verdict and the evidence behind it."""

    prop: str
    verdict: str
    evidence: str
    dtype: str = ""
    n: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


NON_FINITE = "no: non-finite output"
"""The verdict of every check that saw NaN or inf advantages for finite rewards."""


def centred(est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype) -> Finding:
    worst = 0.0
    for _, r in batches:
        a = est(r)
        total = a.to(torch.float64).sum(-1, keepdim=True).abs()
        worst = max(worst, _excess(total, r.shape[-1] * allowance(r, a, dtype=dtype)))
    return Finding("centred", _verdict(worst), f"max |Σ_i A_i| = {worst:.2g} × allowance")


def shift_invariant(
    est: Estimator, batches: list[tuple[str, Tensor]], binary: bool, dtype: torch.dtype
) -> Finding:
    if binary:
        return Finding("shift invariant", "not checked", "binary rewards only")
    worst = 0.0
    for _, r in batches:
        shifted = r + 0.75
        a, b = est(r), est(shifted)
        err = (a.double() - b.double()).abs()
        worst = max(
            worst, _excess(err, allowance(r, a, dtype=dtype) + allowance(shifted, b, dtype=dtype))
        )
    return Finding(
        "shift invariant", _verdict(worst), f"max |A(r + 0.75) − A(r)| = {worst:.2g} × allowance"
    )


def scale_behaviour(
    est: Estimator, batches: list[tuple[str, Tensor]], binary: bool, dtype: torch.dtype
) -> Finding:
    """A(a·r) = a^d A(r) for a > 0: d = 1 (equivariant), d = 0 (invariant), or neither."""
    if binary:
        return Finding("scale equivariant", "not checked", "binary rewards only")
    errs = {1: 0.0, 0: 0.0}
    for _, r in batches:
        a = est(r)
        for factor in (2.0, 0.125):  # powers of two: exact in every dtype
            scaled_r = factor * r
            scaled = est(scaled_r)
            for degree in errs:
                err = (scaled.double() - factor**degree * a.double()).abs()
                allowed = allowance(scaled_r, scaled, dtype=dtype) + factor**degree * allowance(
                    r, a, dtype=dtype
                )
                errs[degree] = max(errs[degree], _excess(err, allowed))
    shown = f"× allowance: degree 1 {errs[1]:.2g}, degree 0 {errs[0]:.2g}"
    if errs[1] <= 1:
        return Finding("scale equivariant", "yes (A(a r) = a A(r))", shown)
    if errs[0] <= 1:
        return Finding("scale equivariant", "invariant (A(a r) = A(r))", shown)
    return Finding("scale equivariant", "no", shown)


def permutation_equivariant(
    est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype
) -> Finding:
    gen = torch.Generator().manual_seed(1)
    worst = 0.0
    for _, r in batches:
        perm = torch.randperm(r.shape[1], generator=gen)
        a = est(r)
        b = est(r[:, perm])
        err = (b.double() - a[:, perm].double()).abs()
        worst = max(worst, _excess(err, 2 * allowance(r, a, b, dtype=dtype)))
    return Finding("permutation equivariant", _verdict(worst), f"max error {worst:.2g} × allowance")


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
