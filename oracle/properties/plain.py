"""The properties of an estimator on rewards ``[B, G]``, each one check of one input (``Grid``),
written once: ``oracle.properties.sequence`` runs centring, shift, scale and permutation on the
explicit test batches, and ``oracle.search.plain`` runs every check here on each batch it draws.
A check returns None where the input keeps the property, else a ``Failure`` with its excess
(the error over the allowance of spec/oracle.md, judged in ``tol``: the dtype's own, or float32's
for an estimator that computes in float32 whatever its input)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..conventions.harness import Estimator, attempt
from ..inputs.tolerance import allowance, sample_lengths
from ..inputs.values import exact, shown
from .findings import Failure


@dataclass(frozen=True)
class Grid:
    """One input: ``rewards [B, G]`` (float64, exact in the dtype), a permutation of each
    group's samples, a shift, a scale factor and the row made all-equal."""

    rewards: Tensor
    perm: tuple[int, ...] = ()
    shift: float = 0.75
    factor: float = 2.0
    flat: int = 0


Check = Callable[[Grid], Failure | None]


def call(
    est: Estimator, r: Tensor, dtype: torch.dtype, lengths: Tensor | None = None
) -> Tensor | str:
    """``est`` on ``r`` in ``dtype``, as float64; the error's text where it raises."""
    return attempt(lambda: est(r.to(dtype), lengths).double())


def _usable(*outs: Tensor | str) -> bool:
    """Every output computed and finite (else the finite-output property reports it, once)."""
    return all(not isinstance(o, str) and bool(o.isfinite().all()) for o in outs)


def _ratio(err: Tensor, allowed: Tensor) -> tuple[float, int]:
    """(max err / allowed, the group where it is largest)."""
    ratio = (err / allowed).amax(-1)
    return float(ratio.max()), int(ratio.argmax())


def centred(est: Estimator, dtype: torch.dtype, tol: torch.dtype) -> Check:
    """Σ_i A_i = 0 in every group, within G allowances."""

    def check(case: Grid) -> Failure | None:
        a = call(est, case.rewards, dtype)
        if isinstance(a, str) or not _usable(a):
            return None
        G = case.rewards.shape[-1]
        total = a.sum(-1, keepdim=True).abs()
        e, g = _ratio(total, G * allowance(case.rewards.to(dtype), a, dtype=tol))
        if e <= 1:
            return None
        return Failure(
            "a group's advantages do not sum to 0",
            "Σ_i A_i = 0 in every group",
            f"group {g}: A = {shown(a[g])}, Σ = {float(a[g].sum()):.6g} ({e:.2g} × allowance)",
            e,
        )

    return check


def moved(
    est: Estimator,
    dtype: torch.dtype,
    tol: torch.dtype,
    change: Callable[[Grid], tuple[Tensor, float] | None],
    what: str,
) -> Check:
    """A property A(f(r)) = c·A(r): ``change`` gives f(r) and c (None: f(r) leaves the dtype);
    ``what`` is "verdict: expected"."""

    def check(case: Grid) -> Failure | None:
        changed = change(case)
        if changed is None:
            return None
        r2, c = changed
        a, b = call(est, case.rewards, dtype), call(est, r2, dtype)
        if isinstance(a, str) or isinstance(b, str) or not _usable(a, b):
            return None
        r1 = case.rewards.to(dtype)
        allowed = allowance(r2.to(dtype), b, dtype=tol) + abs(c) * allowance(r1, a, dtype=tol)
        e, g = _ratio((b - c * a).abs(), allowed)
        if e <= 1:
            return None
        verdict, expected = what.split(":")
        measured = f"group {g}: A(r) = {shown(a[g])}, after {shown(b[g])} ({e:.2g} × allowance)"
        return Failure(verdict, expected.strip(), measured, e)

    return check


def _holds(values: Tensor, dtype: torch.dtype) -> bool:
    return bool((exact(values.reshape(-1).tolist(), dtype) == values.reshape(-1)).all())


def shifted(dtype: torch.dtype) -> Callable[[Grid], tuple[Tensor, float] | None]:
    """r + c (the case's shift), where ``dtype`` holds it exactly; A should not move."""

    def change(case: Grid) -> tuple[Tensor, float] | None:
        r2 = case.rewards + case.shift
        return (r2, 1.0) if _holds(r2, dtype) else None

    return change


SCALED = {1: "A(a r) ≠ a A(r): A(a r) = a A(r)", 0: "A(a r) ≠ A(r): A(a r) = A(r)"}
"""``moved``'s ``what`` for scaling at each degree: equivariant (1) and invariant (0)."""


def scaled(dtype: torch.dtype, degree: int) -> Callable[[Grid], tuple[Tensor, float] | None]:
    """a·r (the case's factor), where ``dtype`` holds it exactly; A should scale by a^degree."""

    def change(case: Grid) -> tuple[Tensor, float] | None:
        r2 = case.rewards * case.factor
        return (r2, case.factor**degree) if _holds(r2, dtype) else None

    return change


def permuted(est: Estimator, dtype: torch.dtype, tol: torch.dtype) -> Check:
    """A(r P) = A(r) P for the case's permutation P of each group's samples; each sample's
    response length moves with it (``sample_lengths``), as a length belongs to its response."""

    def check(case: Grid) -> Failure | None:
        r, p = case.rewards, list(case.perm)
        lengths = sample_lengths(r.shape)
        a, b = call(est, r, dtype, lengths), call(est, r[:, p], dtype, lengths[:, p])
        if isinstance(a, str) or isinstance(b, str) or not _usable(a, b):
            return None
        e, g = _ratio((b - a[:, p]).abs(), 2 * allowance(r.to(dtype), a, b, dtype=tol))
        if e <= 1:
            return None
        return Failure(
            "permuting a group's samples does not permute its advantages",
            f"A(r[:, perm]) = A(r)[:, perm], perm = {p}",
            f"group {g}: A(r)[:, perm] = {shown(a[g, p])}, A(r[:, perm]) = {shown(b[g])} "
            f"({e:.2g} × allowance)",
            e,
        )

    return check


def all_equal(est: Estimator, dtype: torch.dtype) -> Check:
    """The case's row ``flat`` made all-equal gets A = 0, also beside the other groups."""

    def check(case: Grid) -> Failure | None:
        r = case.rewards.clone()
        r[case.flat] = r[case.flat, 0]
        a = call(est, r, dtype)
        if isinstance(a, str) or not _usable(a):
            return None
        G = r.shape[-1]
        floor = G * torch.finfo(dtype).eps * float(a.abs().max()) + torch.finfo(dtype).tiny
        if float(a[case.flat].abs().max()) <= floor:
            return None
        return Failure(
            "nonzero advantages in an all-equal group",
            f"A = 0 in group {case.flat} (all rewards {float(r[case.flat, 0])!r})",
            f"A = {shown(a[case.flat])}",
        )

    return check


def alone(est: Estimator, dtype: torch.dtype, b_lo: int = 1) -> Check:
    """Group 0's advantages alone equal group 0's beside the others (a property named for its
    defect, ``couples groups``: a failure here reads "yes"); not a question for an estimator that
    needs ``b_lo`` > 1 groups."""

    def check(case: Grid) -> Failure | None:
        r = case.rewards
        if r.shape[0] < 2 or b_lo > 1:
            return None
        lengths = sample_lengths(r.shape)  # each sample keeps its response length
        a, by_itself = call(est, r, dtype, lengths), call(est, r[:1], dtype, lengths[:1])
        if isinstance(a, str) or isinstance(by_itself, str) or not _usable(a, by_itself):
            return None
        err = (a[:1] - by_itself).abs()
        if bool((err <= allowance(r[:1].to(dtype), a[:1], by_itself, dtype=dtype)).all()):
            return None
        return Failure(
            "a group's advantages depend on the other groups",
            "group 0 alone = group 0 beside the others",
            f"alone {shown(by_itself)}, beside {r.shape[0] - 1} others {shown(a[0])} (up to "
            f"{float(err.max()):.3g} apart)",
        )

    return check
