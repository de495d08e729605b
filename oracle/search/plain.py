"""The searched properties of an estimator on rewards ``[B, G]`` (``--convention plain``, and
every row convention through ``RowsAsPlain``): its domain is every batch of 1..3 groups (more
where the estimator needs them) of every accepted size up to the largest N asked, with the
rewards of ``values.group``, in the dtype under check. A property is searched where the explicit
inputs found it to hold ("yes"), so the search can only find what they missed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import Tensor

from ..conventions.harness import Estimator, OracleError
from ..inputs.tolerance import allowance, sample_lengths
from .database import register
from .engine import Failure, Searched, quiet
from .values import exact, group, shown, tensor_literal


@dataclass(frozen=True)
class Domain:
    """Where the estimator is defined: group sizes ``g_lo..g_hi``, at least ``b_lo`` groups,
    pass/fail rewards only (``binary``), non-negative rewards only (``nonneg``)."""

    g_lo: int
    g_hi: int
    b_lo: int
    binary: bool
    nonneg: bool
    dtype: torch.dtype


@register
@dataclass(frozen=True)
class Grid:
    """One drawn input: ``rewards [B, G]`` (float64, exact in the dtype), a permutation of each
    group's samples, a shift, a scale factor and the row made all-equal."""

    rewards: Tensor
    perm: tuple[int, ...]
    shift: float
    factor: float
    flat: int


@st.composite
def grids(draw: st.DrawFn, d: Domain) -> Grid:
    G = draw(st.integers(d.g_lo, d.g_hi))
    rows = draw(st.lists(group(G, d.binary), min_size=d.b_lo, max_size=d.b_lo + 2))
    B = len(rows)
    if d.nonneg:
        rows = [[abs(v) for v in row] for row in rows]
    rewards = exact([v for row in rows for v in row], d.dtype).reshape(B, G)
    perm = tuple(draw(st.permutations(range(G))))
    shift = draw(st.sampled_from((0.75, 1.0, 1024.0) if d.nonneg else (0.75, -2.0, 1024.0)))
    return Grid(
        rewards, perm, shift, draw(st.sampled_from((2.0, 0.5, 0.125))), draw(st.integers(0, B - 1))
    )


def _call(est: Estimator, r: Tensor, d: Domain, lengths: Tensor | None = None) -> Tensor | str:
    """``est`` on ``r`` in the dtype, as float64; the error's text where it raises."""
    try:
        return est(r.to(d.dtype), lengths).double()
    except OracleError:
        raise
    except Exception as error:  # the estimator's own failure is the finding
        return f"{type(error).__name__}: {str(error)[:160]}"


def _snippet(case: Grid, d: Domain, extra: str = "") -> str:
    return f"rewards = {tensor_literal(case.rewards.to(d.dtype))}{extra}; A = estimator(rewards)"


def _finite(est: Estimator, d: Domain) -> Callable[[Grid], Failure | None]:
    def check(case: Grid) -> Failure | None:
        a = _call(est, case.rewards, d)
        if isinstance(a, str):
            return Failure("raises", "advantages for rewards in the estimator's domain", a)
        if not bool(a.isfinite().all()):
            return Failure("non-finite output", "finite advantages for finite rewards", shown(a))
        return None

    return check


def _centred(est: Estimator, d: Domain) -> Callable[[Grid], Failure | None]:
    def check(case: Grid) -> Failure | None:
        a = _call(est, case.rewards, d)
        if isinstance(a, str) or not bool(a.isfinite().all()):
            return None  # the finite-output search reports it
        G = case.rewards.shape[-1]
        total = a.sum(-1, keepdim=True).abs()
        if bool((total <= G * allowance(case.rewards, a, dtype=d.dtype)).all()):
            return None
        g = int(total.argmax())
        return Failure(
            "a group's advantages do not sum to 0",
            "Σ_i A_i = 0 in every group",
            f"group {g}: A = {shown(a[g])}, Σ = {float(a[g].sum()):.6g}",
        )

    return check


def _pair(
    est: Estimator, d: Domain, change: Callable[[Grid], tuple[Tensor, float] | None], what: str
) -> Callable[[Grid], Failure | None]:
    """A property A(f(r)) = c·A(r): ``change`` gives f(r) and c (None: f(r) leaves the dtype)."""

    def check(case: Grid) -> Failure | None:
        moved = change(case)
        if moved is None:
            return None
        r2, c = moved
        a, b = _call(est, case.rewards, d), _call(est, r2, d)
        if (
            isinstance(a, str)
            or isinstance(b, str)
            or not bool(a.isfinite().all() & b.isfinite().all())
        ):
            return None
        allowed = allowance(r2, b, dtype=d.dtype) + abs(c) * allowance(
            case.rewards, a, dtype=d.dtype
        )
        err = (b - c * a).abs()
        if bool((err <= allowed).all()):
            return None
        g = int((err / allowed).amax(-1).argmax())
        return Failure(
            what.split(":")[0],
            what.split(":")[1].strip(),
            f"group {g}: A(r) = {shown(a[g])}, after {shown(b[g])}",
        )

    return check


def _shifted(d: Domain) -> Callable[[Grid], tuple[Tensor, float] | None]:
    def change(case: Grid) -> tuple[Tensor, float] | None:
        r2 = case.rewards + case.shift
        return (
            None
            if bool((exact(r2.reshape(-1).tolist(), d.dtype) != r2.reshape(-1)).any())
            else (r2, 1.0)
        )

    return change


def _scaled(d: Domain, degree: int) -> Callable[[Grid], tuple[Tensor, float] | None]:
    def change(case: Grid) -> tuple[Tensor, float] | None:
        r2 = case.rewards * case.factor
        if bool((exact(r2.reshape(-1).tolist(), d.dtype) != r2.reshape(-1)).any()):
            return None
        return r2, case.factor**degree

    return change


def _permuted(est: Estimator, d: Domain) -> Callable[[Grid], Failure | None]:
    def check(case: Grid) -> Failure | None:
        r, p = case.rewards, list(case.perm)
        lengths = sample_lengths(r.shape)
        a, b = _call(est, r, d, lengths), _call(est, r[:, p], d, lengths[:, p])
        if (
            isinstance(a, str)
            or isinstance(b, str)
            or not bool(a.isfinite().all() & b.isfinite().all())
        ):
            return None
        err = (b - a[:, p]).abs()
        allowed = 2 * allowance(r, a, b, dtype=d.dtype)
        if bool((err <= allowed).all()):
            return None
        return Failure(
            "permuting a group's samples does not permute its advantages",
            f"A(r[:, perm]) = A(r)[:, perm], perm = {p}",
            f"A(r)[:, perm] = {shown(a[:, p])}, A(r[:, perm]) = {shown(b)}",
        )

    return check


def _all_equal(est: Estimator, d: Domain) -> Callable[[Grid], Failure | None]:
    def check(case: Grid) -> Failure | None:
        r = case.rewards.clone()
        r[case.flat] = r[case.flat, 0]
        a = _call(est, r, d)
        if isinstance(a, str) or not bool(a.isfinite().all()):
            return None
        G = r.shape[-1]
        floor = G * torch.finfo(d.dtype).eps * float(a.abs().max()) + torch.finfo(d.dtype).tiny
        if float(a[case.flat].abs().max()) <= floor:
            return None
        return Failure(
            "nonzero advantages in an all-equal group",
            f"A = 0 in group {case.flat} (all rewards {float(r[case.flat, 0])!r})",
            f"A = {shown(a[case.flat])}",
        )

    return check


def _alone(est: Estimator, d: Domain) -> Callable[[Grid], Failure | None]:
    def check(case: Grid) -> Failure | None:
        r = case.rewards
        if r.shape[0] < 2 or d.b_lo > 1:
            return None
        a, alone = _call(est, r, d), _call(est, r[:1], d)
        if isinstance(a, str) or isinstance(alone, str):
            return None
        if not bool(a.isfinite().all() & alone.isfinite().all()):
            return None  # the finite-output search reports it
        err = (a[:1] - alone).abs()
        if bool((err <= allowance(r[:1], a[:1], alone, dtype=d.dtype)).all()):
            return None
        return Failure(
            "a group's advantages depend on the other groups",
            "group 0 alone = group 0 beside the others",
            f"alone {shown(alone)}, beside {r.shape[0] - 1} others {shown(a[0])}",
        )

    return check


def _held(findings: Sequence[object], prop: str) -> str | None:
    """The explicit verdict of ``prop`` where every cell agrees (``"yes"``, ``"invariant"``...),
    else None: a property the explicit inputs already refute, or never checked, is not searched."""
    verdicts = {getattr(f, "verdict", "") for f in findings if getattr(f, "prop", "") == prop}
    if len(verdicts) != 1:
        return None
    return verdicts.pop()


Check = Callable[[Grid], Failure | None]
Extra = Callable[[Grid], str]


def _table(est: Estimator, d: Domain, scale: str) -> list[tuple[str, str, Check, Extra]]:
    """(property, the explicit verdict it starts from (a prefix), its check, the snippet's
    extra lines): one row per searched property of ``[B, G]`` estimators."""
    degree = 1 if scale.startswith("yes") else 0
    moved = "A(a r) ≠ a A(r): A(a r) = a A(r)" if degree else "A(a r) ≠ A(r): A(a r) = A(r)"
    return [
        ("centred", "yes", _centred(est, d), lambda c: ""),
        (
            "shift invariant",
            "yes",
            _pair(est, d, _shifted(d), "moves under a shift: A(r + c) = A(r)"),
            lambda c: f"; c = {c.shift!r}; A_after = estimator(rewards + c)",
        ),
        (
            "scale equivariant",
            "yes" if degree else "invariant",
            _pair(est, d, _scaled(d, degree), moved),
            lambda c: f"; a = {c.factor!r}; A_after = estimator(a * rewards)",
        ),
        (
            "permutation equivariant",
            "yes",
            _permuted(est, d),
            lambda c: f"; perm = {list(c.perm)}; A_after = estimator(rewards[:, perm])",
        ),
        (
            "all-equal groups",
            "yes",
            _all_equal(est, d),
            lambda c: f"; rewards[{c.flat}] = rewards[{c.flat}, 0]",
        ),
        ("couples groups", "no", _alone(est, d), lambda c: "; A_alone = estimator(rewards[:1])"),
    ]


def properties(est: Estimator, d: Domain, findings: Sequence[object]) -> list[Searched[Grid]]:
    """The searched properties for ``est`` on ``d``: finite output always; centring, shift,
    scale, permutation, all-equal groups and group independence where the explicit inputs
    found them to hold (their verdict in every cell starts as the table's)."""
    strategy = grids(d)
    kinds = "0/1" if d.binary else "ties, offsets to 2^20, spreads to 2^-20, outliers"
    words = f"N {d.g_lo}..{d.g_hi}, {d.b_lo}+ groups, {kinds}"

    def item(prop: str, check: Check, extra: Extra, holds: str = "yes") -> Searched[Grid]:
        snippet = lambda c: _snippet(c, d, extra(c))  # noqa: E731
        return Searched(prop, strategy, check, snippet, words, "no" if holds == "no" else "yes")

    out = [item("finite output", _finite(est, d), lambda c: "")]
    scale = _held(findings, "scale equivariant") or ""
    for prop, start, check, extra in _table(est, d, scale):
        held = _held(findings, prop)
        if held is not None and (
            held == start or held.startswith(f"{start}:") or held.startswith(f"{start} ")
        ):
            out.append(item(prop, check, extra, start))
    return out


def domain(
    est: Estimator, g_hi: int, dtype: torch.dtype, binary: bool, g_min: int = 1
) -> Domain | None:
    """The estimator's domain from probes with ordinary rewards: the smallest accepted group
    size from ``g_min`` (and number of groups), and whether it takes negative rewards. None
    when it accepts no group size up to ``g_hi``."""
    with quiet():
        return _probe(est, g_hi, dtype, binary, g_min)


def _probe(
    est: Estimator, g_hi: int, dtype: torch.dtype, binary: bool, g_min: int
) -> Domain | None:
    for b_lo in (1, 2):
        for g in range(g_min, g_hi + 1):
            probe = torch.tensor([[float(i % 2) for i in range(g)]] * b_lo, dtype=dtype)
            if not isinstance(_call(est, probe, Domain(g, g, b_lo, True, True, dtype)), str):
                negative = probe - 3.0
                nonneg = isinstance(
                    _call(est, negative, Domain(g, g, b_lo, True, True, dtype)), str
                )
                return Domain(g, g_hi, b_lo, binary, nonneg, dtype)
    return None
