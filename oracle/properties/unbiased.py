"""Unbiasedness by exact enumeration: E[Σ_i A_i ∇log π(a_i)] over every tuple of N actions of
three small bandits, compared with the exact gradient of the objective (``spec.bandit``)."""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import Tensor

from advest.spec import bandit

from ..conventions.harness import Estimator, OracleError
from ..inputs.tolerance import allowance
from .findings import Finding

ZERO_C = 1e-6
"""An expected estimate whose c (E[ĝ] = c·∇J) is 0 within an error bound below this is 0: the
estimator gives no gradient (e.g. 0 for every group of one, where the objective has one)."""
BANDIT_MAX_ROWS = 200_000
"""Exact enumeration of A^N reward tuples is done up to this many tuples (N ≤ 11 for A = 3)."""


BANDITS: list[tuple[list[Fraction], list[Fraction]]] = [
    ([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], [Fraction(1), Fraction(-1, 2), Fraction(2)]),
    (
        [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)],
        [Fraction(3, 2), Fraction(0), Fraction(1, 3)],
    ),
    ([Fraction(1, 5), Fraction(2, 5), Fraction(2, 5)], [Fraction(0), Fraction(1), Fraction(1)]),
]


def _expected(
    est: Estimator,
    pi: list[Fraction],
    r: list[Fraction],
    n: int,
    dtype: torch.dtype,
    tol: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """``(E[Σ_i A_i (e_{a_i} − π)], its error bound)``, both ``[A]``, by enumerating all A^N
    action tuples in one batched call (rewards in ``dtype``); the bound sums each output's
    allowance in ``tol``."""
    A = len(pi)
    actions = torch.cartesian_prod(*[torch.arange(A)] * n).reshape(-1, n)  # [A^N, N]
    rewards = torch.tensor([float(x) for x in r], dtype=torch.float64)[actions].to(dtype)
    adv = est(rewards)
    p = torch.tensor([float(x) for x in pi], dtype=torch.float64)
    prob = p[actions].prod(-1)  # [A^N]
    direction = torch.nn.functional.one_hot(actions, A).double() - p  # [A^N, N, A]
    total = torch.einsum("t,tn,tna->a", prob, adv.double(), direction)
    err = allowance(rewards, adv, dtype=tol).expand_as(adv)
    bound = torch.einsum("t,tn,tna->a", prob, err, direction.abs())
    return total, bound


def _objective_gradient(
    pi: list[Fraction], r: list[Fraction], n: int, k: int, harmonic: bool
) -> list[Fraction]:
    """∇max@K, or (``harmonic``, MaxRL's objective) Σ_{k=1}^{N} (1/k)·∇max@k."""
    if not harmonic:
        return bandit.gradient(pi, r, k)
    grads = [bandit.gradient(pi, r, j) for j in range(1, n + 1)]
    return [sum((g[c] / j for j, g in enumerate(grads, 1)), Fraction(0)) for c in range(len(pi))]


def unbiasedness(
    est: Estimator,
    n: int,
    k: int,
    binary: bool,
    objective: str,
    dtype: torch.dtype,
    harmonic: bool = False,
    tol: torch.dtype | None = None,
) -> Finding:
    """E[Σ A_i ∇log π(a_i)] = c·∇J with one constant c for every bandit tried? A bandit whose
    rewards the estimator refuses (a ValueError, e.g. MaxRL's negative rewards) is shifted to a
    minimum of 0, which leaves ∇J unchanged. ``tol``: the dtype whose allowance bounds the
    error (``dtype``'s by default)."""
    tol = dtype if tol is None else tol
    what = f"for {objective}" if harmonic else f"for {objective} (K={k})"
    if 3**n > BANDIT_MAX_ROWS:
        return Finding("unbiased", "not checked", f"3^{n} reward tuples is too many to enumerate")
    per = _per_bandit(est, n, k, binary, dtype, tol, harmonic)
    if per is None:
        return Finding("unbiased", "no: NaN or inf in the advantages", f"{what}, N={n}")
    ratios, residuals, deltas, shifted = per
    data = {"c": ratios, "residual": residuals, "bound": deltas, "N": n, "K": k}
    precision = f"exact enumeration, {len(ratios)} bandits, error bound up to {max(deltas):.1e}"
    if shifted:
        precision += f"; {shifted} bandit(s) shifted to rewards >= 0 (refused as given)"
    biased = any(res > d for res, d in zip(residuals, deltas, strict=True)) or any(
        abs(ci - cj) > di + dj
        for ci, di in zip(ratios, deltas, strict=True)
        for cj, dj in zip(ratios, deltas, strict=True)
    )
    if biased:
        return Finding(
            "unbiased",
            f"no {what}",
            f"E[ĝ] vs c·∇J: c = {[f'{x:.4g}' for x in ratios]}, off-direction residual up to "
            f"{max(residuals):.2e}; {precision}",
            data=data,
        )
    if max(abs(c) for c in ratios) <= max(deltas) < ZERO_C:  # E[ĝ] = 0 where ∇J ≠ 0
        return Finding(
            "unbiased",
            f"no: E[ĝ] = 0 {what}",
            f"the expected estimate is 0 on every bandit (it learns nothing at N={n}); {precision}",
            data=data,
        )
    if min(abs(c) for c in ratios) <= max(deltas):
        return Finding("unbiased", f"inconclusive {what}", f"c ≈ 0 within {precision}", data=data)
    shown = _simplest(ratios[0], max(deltas) + 1e-9 * abs(ratios[0]))
    return Finding("unbiased", f"yes, E[ĝ] = {shown}·∇J {what}", precision, data=data)


def _per_bandit(
    est: Estimator,
    n: int,
    k: int,
    binary: bool,
    dtype: torch.dtype,
    tol: torch.dtype,
    harmonic: bool,
) -> tuple[list[float], list[float], list[float], int] | None:
    """For each bandit with ∇J ≠ 0: c = ⟨E[ĝ], ∇J⟩/‖∇J‖², the off-direction residual and the
    error bound, both relative to ‖∇J‖; and how many bandits were shifted to rewards >= 0.
    None when an expectation is not finite."""
    ratios, residuals, deltas = [], [], []
    shifted = 0
    for pi, r in BANDITS:
        rr = [Fraction(int(x > Fraction(1, 2))) for x in r] if binary else r
        grad_q = _objective_gradient(pi, rr, n, k, harmonic)
        grad = torch.tensor([float(g) for g in grad_q], dtype=torch.float64)
        try:
            got, bound = _expected(est, pi, rr, n, dtype, tol)
        except OracleError:
            raise
        except ValueError:
            rr = [x - min(rr) for x in rr]
            got, bound = _expected(est, pi, rr, n, dtype, tol)
            shifted += 1
        if not bool(got.isfinite().all()):
            return None
        norm = float(grad.norm())
        if norm == 0:
            continue
        c = float(got @ grad) / norm**2
        ratios.append(c)
        residuals.append(float((got - c * grad).norm()) / norm)
        deltas.append(float(bound.norm()) / norm + 1e-12)
    return ratios, residuals, deltas, shifted


def _simplest(x: float, tol: float) -> str:
    """The fraction with the smallest denominator (≤ 1000) within ``tol`` of ``x``, else x."""
    for d in range(1, 1001):
        frac = Fraction(round(x * d), d)
        if abs(float(frac) - x) <= tol:
            return str(frac)
    return f"{x:.6g}"
