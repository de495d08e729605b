"""The correctness oracle behind ``advest check``: which properties does *any* advantage
estimator have? It takes a callable on rewards ``[B, G]`` (plus K for max@K) and reports, with
evidence: centring, shift/scale/permutation behaviour, exact-enumeration unbiasedness on small
bandits, its relation to ``canonical`` (max@K), and what it does on bad input.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from itertools import product
from typing import Any, Literal

import torch
from torch import Tensor

import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.spec import bandit

Family = Literal["outcome", "maxk"]
Estimator = Callable[[Tensor], Tensor]  # rewards [B, G] -> advantages [B, G], K already bound
TOL = 1e-9  # relative to max(|r|, |A|): the float64 budget of the fast estimators


@dataclass
class Finding:
    """One property: a short verdict and the evidence behind it."""

    prop: str
    verdict: str
    evidence: str
    data: dict[str, Any] = field(default_factory=dict)


def load(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (the function may be a dotted attribute path)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ImportError(f"expected MODULE:FUNCTION, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ImportError(f"{spec} is not callable")
    return obj  # type: ignore[no-any-return]


def bind(fn: Callable[..., Any], signature: str, k: int) -> Estimator:
    """Adapt a user callable to rewards -> advantages. ``signature`` lists the arguments in
    order: ``rewards``, ``k`` (positional), ``k=`` (keyword ``k``), ``lengths`` (all ones)."""
    parts = [p.strip() for p in signature.split(",") if p.strip()]
    if "rewards" not in parts or any(p not in ("rewards", "k", "k=", "lengths") for p in parts):
        raise ValueError(f"--signature: use rewards, k, k= and lengths; got {signature!r}")

    def call(rewards: Tensor) -> Tensor:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in parts:
            if p == "rewards":
                args.append(rewards)
            elif p == "k":
                args.append(k)
            elif p == "k=":
                kwargs["k"] = k
            else:
                args.append(torch.ones_like(rewards))
        out = fn(*args, **kwargs)
        return torch.as_tensor(out, dtype=torch.float64).reshape(rewards.shape)

    return call


def _batches(g: int, binary: bool) -> list[Tensor]:
    """Deterministic test batches [B, g] in float64: integer ties, continuous, offset."""
    gen = torch.Generator().manual_seed(0)
    if binary:
        return [torch.randint(0, 2, (32, g), generator=gen).double()]
    return [
        torch.randint(0, 4, (32, g), generator=gen).double(),
        torch.randn(32, g, generator=gen, dtype=torch.float64),
        1000 + torch.randint(0, 5, (32, g), generator=gen).double() / 8,
    ]


def _scale(*ts: Tensor) -> float:
    return max(float(t.abs().max()) for t in ts) or 1.0


def _max_err(a: Tensor, b: Tensor) -> float:
    return float((a - b).abs().max())


def _inputs(est: Estimator, g: int) -> tuple[list[Tensor], bool]:
    """Test batches the estimator accepts: continuous ones, or binary ones if it rejects those."""
    try:
        est(_batches(g, binary=False)[0])
        return _batches(g, binary=False), False
    except ValueError:
        return _batches(g, binary=True), True


def centred(est: Estimator, batches: list[Tensor]) -> Finding:
    worst = max(float(est(r).sum(-1).abs().max()) / _scale(r, est(r)) for r in batches)
    ok = worst <= TOL * 64
    return Finding(
        "centred",
        "yes" if ok else "no",
        f"max |Σ_i A_i| / scale = {worst:.2e} (tolerance {TOL * 64:.0e})",
    )


def shift_invariant(est: Estimator, batches: list[Tensor], binary: bool) -> Finding:
    if binary:
        return Finding("shift invariant", "not checked", "binary rewards only")
    worst = 0.0
    for r in batches:
        a, b = est(r), est(r + 0.75)
        worst = max(worst, _max_err(a, b) / _scale(r, a))
    ok = worst <= TOL * 64
    return Finding(
        "shift invariant", "yes" if ok else "no", f"max |A(r + 0.75) − A(r)| / scale = {worst:.2e}"
    )


def scale_behaviour(est: Estimator, batches: list[Tensor], binary: bool) -> Finding:
    """A(a·r) = a^d A(r) for a > 0: d = 1 (equivariant), d = 0 (invariant), or neither."""
    if binary:
        return Finding("scale equivariant", "not checked", "binary rewards only")
    errs = {1: 0.0, 0: 0.0}
    for r in batches:
        a = est(r)
        for factor in (2.0, 0.125):
            scaled = est(factor * r)
            for degree in errs:
                err = _max_err(scaled, factor**degree * a) / _scale(r, a, scaled)
                errs[degree] = max(errs[degree], err)
    if errs[1] <= TOL * 64:
        return Finding("scale equivariant", "yes (A(a r) = a A(r))", f"max error {errs[1]:.2e}")
    if errs[0] <= TOL * 64:
        return Finding("scale equivariant", "invariant (A(a r) = A(r))", f"max error {errs[0]:.2e}")
    return Finding(
        "scale equivariant", "no", f"errors: degree 1 {errs[1]:.2e}, degree 0 {errs[0]:.2e}"
    )


def permutation_equivariant(est: Estimator, batches: list[Tensor]) -> Finding:
    gen = torch.Generator().manual_seed(1)
    worst = 0.0
    for r in batches:
        perm = torch.randperm(r.shape[1], generator=gen)
        a = est(r)
        worst = max(worst, _max_err(est(r[:, perm]), a[:, perm]) / _scale(r, a))
    ok = worst <= TOL * 64
    return Finding("permutation equivariant", "yes" if ok else "no", f"max error {worst:.2e}")


BANDITS: list[tuple[list[Fraction], list[Fraction]]] = [
    ([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], [Fraction(1), Fraction(-1, 2), Fraction(2)]),
    (
        [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)],
        [Fraction(3, 2), Fraction(0), Fraction(1, 3)],
    ),
    ([Fraction(1, 5), Fraction(2, 5), Fraction(2, 5)], [Fraction(0), Fraction(1), Fraction(1)]),
]


def _expected(est: Estimator, pi: list[Fraction], r: list[Fraction], n: int) -> list[float]:
    """E[Σ_i A_i (e_{a_i} − π)] by enumerating all A^N tuples, in one batched call."""
    tuples = list(product(range(len(pi)), repeat=n))
    rewards = torch.tensor([[float(r[a]) for a in t] for t in tuples], dtype=torch.float64)
    adv = est(rewards).tolist()
    total = [0.0] * len(pi)
    for t, a_row in zip(tuples, adv, strict=True):
        prob = math.prod(float(pi[a]) for a in t)
        for a_i, value in zip(t, a_row, strict=True):
            for c in range(len(pi)):
                total[c] += prob * value * ((1.0 if c == a_i else 0.0) - float(pi[c]))
    return total


def unbiasedness(est: Estimator, n: int, k: int, binary: bool, objective: str) -> Finding:
    """E[Σ A_i ∇log π(a_i)] = c·∇J with one constant c for every bandit tried?"""
    ratios, residuals = [], []
    for pi, r in BANDITS:
        rr = [Fraction(int(x > Fraction(1, 2))) for x in r] if binary else r
        grad = [float(g) for g in bandit.gradient(pi, rr, k)]
        got = _expected(est, pi, rr, n)
        norm = math.sqrt(sum(g * g for g in grad))
        if norm == 0:
            continue
        c = sum(x * g for x, g in zip(got, grad, strict=True)) / norm**2
        resid = math.sqrt(sum((x - c * g) ** 2 for x, g in zip(got, grad, strict=True))) / norm
        ratios.append(c)
        residuals.append(resid)
    spread = (max(ratios) - min(ratios)) / max(abs(max(ratios)), 1e-300)
    tol = 1e-9
    data = {"c": ratios, "residual": residuals, "N": n, "K": k}
    what = f"for {objective} (N={n}, K={k})"
    if max(residuals) <= tol and spread <= tol and abs(ratios[0]) > tol:
        c = ratios[0]
        frac = Fraction(c).limit_denominator(1000)
        shown = str(frac) if abs(float(frac) - c) <= 1e-9 * abs(c) else f"{c:.6g}"
        return Finding(
            "unbiased",
            f"yes, E[ĝ] = {shown}·∇J {what}",
            f"{len(ratios)} bandits, exact enumeration, tolerance {tol:.0e}",
            data,
        )
    return Finding(
        "unbiased",
        f"no {what}",
        f"E[ĝ] vs c·∇J: c = {[f'{x:.4g}' for x in ratios]}, "
        f"off-direction residual up to {max(residuals):.2e}",
        data,
    )


def relation_to_canonical(est: Estimator, batches: list[Tensor], k: int) -> Finding:
    """canonical; c·canonical with one constant c; per-group positive scale; or none."""
    ratios: list[float] = []
    for r in batches:
        a, d = est(r), fast.maxk.canonical(r, k)
        for a_row, d_row in zip(a, d, strict=True):
            big = d_row.abs() > 1e-12 * _scale(d_row)
            if not bool(big.any()):
                if float(a_row.abs().max()) > TOL * _scale(r):
                    return Finding(
                        "relation to canonical", "none", "nonzero where canonical is identically 0"
                    )
                continue
            s = a_row[big] / d_row[big]
            if float((a_row - s[0] * d_row).abs().max()) > 1e-8 * _scale(a_row, d_row):
                return Finding("relation to canonical", "none", "not a multiple of Δ in some group")
            ratios.append(float(s[0]))
    if not ratios:
        return Finding("relation to canonical", "not checked", "every test group is degenerate")
    lo, hi = min(ratios), max(ratios)
    if lo <= 0:
        return Finding("relation to canonical", "none", f"a non-positive multiple ({lo:.3g}) of Δ")
    if hi - lo <= 1e-8 * hi:
        if abs(lo - 1) <= 1e-8:
            return Finding("relation to canonical", "canonical", "A = Δ in every group")
        frac = Fraction(lo).limit_denominator(1000)
        return Finding(
            "relation to canonical",
            f"proportional, c = {frac} ({lo:.6g})",
            "A = c·Δ with one constant c in every group",
            {"c": lo},
        )
    return Finding(
        "relation to canonical",
        "normalised canonical (per-group positive scale)",
        f"A = s_g·Δ with s_g in [{lo:.3g}, {hi:.3g}]",
        {"min": lo, "max": hi},
    )


def _behaviour(est: Estimator, rewards: Tensor) -> str:
    try:
        out = est(rewards)
    except Exception as error:  # reporting what the user's code does is the point here
        return f"error: {type(error).__name__}: {str(error)[:80]}"
    if bool(torch.isnan(out).any()):
        return "NaN in the output"
    return f"value {[round(x, 6) for x in out[0].tolist()]}"


def bad_input(est: Estimator, g: int, binary: bool) -> list[Finding]:
    base = [1.0, 0.0] * g
    nan = torch.tensor([base[:g]], dtype=torch.float64)
    nan[0, 0] = math.nan
    equal = torch.ones(1, g, dtype=torch.float64) * (1.0 if binary else 0.7)
    single = torch.tensor([[1.0]], dtype=torch.float64)
    return [
        Finding("on NaN rewards", _behaviour(est, nan), "one group with a NaN"),
        Finding("on an all-equal group", _behaviour(est, equal), f"G = {g}"),
        Finding("on G = 1", _behaviour(est, single), "one sample per group"),
    ]


def check(
    fn: Callable[..., Any], family: Family, k: int = 2, signature: str | None = None
) -> list[Finding]:
    """Every finding for the user callable ``fn``."""
    sig = signature or ("rewards, k" if family == "maxk" else "rewards")
    k_used = k if family == "maxk" else 1
    est = bind(fn, sig, k_used)
    g = 8
    batches, binary = _inputs(est, g)
    objective = f"max@{k_used}" if family == "maxk" else "the mean reward"
    n_bandit = max(k_used + 1, 4) if family == "maxk" else 4
    findings = [
        centred(est, batches),
        shift_invariant(est, batches, binary),
        scale_behaviour(est, batches, binary),
        permutation_equivariant(est, batches),
        unbiasedness(est, n_bandit, k_used, binary, objective),
    ]
    if family == "maxk":
        findings.append(relation_to_canonical(est, batches, k_used))
    return findings + bad_input(est, g, binary)


def as_json(findings: list[Finding]) -> list[dict[str, Any]]:
    return [asdict(f) for f in findings]
