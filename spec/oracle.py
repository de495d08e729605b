"""The correctness oracle behind ``advest check``: which properties does *any* advantage
estimator have? It takes a callable on rewards ``[B, G]`` (plus K for max@K), or one with verl's
signature, and reports, with evidence: centring, shift/scale/permutation behaviour,
exact-enumeration unbiasedness on small bandits, its relation to ``canonical`` (max@K), what it
does on bad input, and whether it modifies its inputs.

It trusts nothing: every call gets copies of the inputs (a changed copy is reported), the output
must have the input's shape, dtype and device, and K and N are validated before the user's code
runs. Every check runs in the estimator's own dtype (``dtype``) and again in float64 when the
estimator accepts float64 rewards; the tolerance follows the dtype and the rewards' spread
(``allowance``, stated in spec/oracle.md).
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.spec import bandit

Family = Literal["outcome", "maxk", "maxrl"]
Convention = Literal["plain", "verl"]
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
USABLE = 0.25
"""A test batch is used in a dtype only if its relative allowance (``allowance / |A|``) is at
most this: beyond it (e.g. rewards 1000 + k/8 in bfloat16) the dtype cannot resolve the spread."""
BANDIT_MAX_ROWS = 200_000
"""Exact enumeration of A^N reward tuples is done up to this many tuples (N ≤ 11 for A = 3)."""


class OracleError(ValueError):
    """The oracle's own arguments, or what the user's callable returned, are unusable; the
    message says what was got and what was expected."""


class Estimator(Protocol):
    """A bound estimator: rewards ``[B, G]`` -> advantages ``[B, G]`` (K already bound)."""

    def __call__(self, rewards: Tensor) -> Tensor: ...


@dataclass
class Finding:
    """One property in one dtype at one N: a short verdict and the evidence behind it."""

    prop: str
    verdict: str
    evidence: str
    dtype: str = ""
    n: int | None = None
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


# ---------------------------------------------------------------- calling the user's code


def _first_change(before: Tensor, after: Tensor) -> str:
    changed = ~((before == after) | (before.isnan() & after.isnan()))
    idx = tuple(int(i) for i in changed.nonzero()[0].tolist())
    return f"at {list(idx)}: {before[idx].item():.6g} → {after[idx].item():.6g}"


class Guard:
    """Records in-place modification of the inputs a callable receives (``mutations``)."""

    def __init__(self) -> None:
        self.mutations: list[str] = []

    def copies(self, **inputs: Any) -> dict[str, Any]:
        """Independent copies of the tensors (and numpy arrays) in ``inputs``."""
        return {k: (v.clone() if isinstance(v, Tensor) else _copy(v)) for k, v in inputs.items()}

    def compare(self, originals: dict[str, Any], given: dict[str, Any]) -> None:
        for name, before in originals.items():
            after = given[name]
            if isinstance(before, Tensor):
                same = before.shape == after.shape and bool(
                    ((before == after) | (before.isnan() & after.isnan())).all()
                )
                seen = any(m.startswith(f"{name} ") for m in self.mutations)
                if not same and not seen:
                    self.mutations.append(f"{name} changed in place {_first_change(before, after)}")
            elif not _equal(before, after) and len(self.mutations) < 3:
                self.mutations.append(f"{name} changed in place")


def _copy(value: Any) -> Any:
    copy = getattr(value, "copy", None)
    return copy() if callable(copy) else value


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool((a == b).all())
    except AttributeError:
        return bool(a == b)


def check_output(out: object, like: Tensor, what: str = "the output") -> Tensor:
    """``out`` itself, if it is a tensor of ``like``'s shape, dtype and device; else OracleError
    saying what was got and what was expected."""
    if not isinstance(out, Tensor):
        raise OracleError(f"{what}: got a {type(out).__name__}, expected a torch.Tensor")
    if out.shape != like.shape:
        hint = " (transposed: [G, B] instead of [B, G]?)" if out.shape == like.shape[::-1] else ""
        raise OracleError(
            f"{what}: got shape {list(out.shape)}, expected {list(like.shape)} = [B, G]{hint}"
        )
    if out.dtype != like.dtype:
        raise OracleError(f"{what}: got dtype {out.dtype}, expected {like.dtype} (the rewards')")
    if out.device != like.device:
        raise OracleError(f"{what}: got device {out.device}, expected {like.device}")
    return out


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None


def resolve_signature(fn: Callable[..., Any], family: Family, signature: str | None) -> list[str]:
    """The argument order to call ``fn`` with: ``rewards``, ``k`` (positional), ``k=`` (keyword
    ``k``), ``lengths`` (all ones). Without ``signature``, K goes only into a parameter named
    ``k``: OracleError if ``fn``'s parameter in that place has another name."""
    if signature is not None:
        parts = [p.strip() for p in signature.split(",") if p.strip()]
        bad = [p for p in parts if p not in ("rewards", "k", "k=", "lengths")]
        if "rewards" not in parts or bad:
            raise OracleError(f"--signature: use rewards, k, k= and lengths; got {signature!r}")
    else:
        parts = ["rewards"]
        params = _parameters(fn)
        if family == "maxk":
            positional = [
                p
                for p in params or []
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            ]
            keyword_k = any(p.name == "k" and p.kind == p.KEYWORD_ONLY for p in params or [])
            if params is None or (len(positional) >= 2 and positional[1].name.lower() == "k"):
                parts.append("k")
            elif keyword_k:
                parts.append("k=")
            else:
                where = (
                    f"its second parameter is {positional[1].name!r}"
                    if len(positional) >= 2
                    else "it has no second positional parameter"
                )
                raise OracleError(
                    f"will not pass K to {getattr(fn, '__name__', fn)}: {where}, not 'k'. If K "
                    "belongs there, say so with --signature 'rewards, k' (or 'rewards, k=' for a "
                    "keyword); for an estimator without K use --family outcome"
                )
    params = _parameters(fn)
    if params is not None:
        dummy_args = [0 for p in parts if p != "k="]
        dummy_kwargs = {"k": 0} if "k=" in parts else {}
        try:
            inspect.signature(fn).bind(*dummy_args, **dummy_kwargs)
        except TypeError as error:
            raise OracleError(
                f"cannot call {getattr(fn, '__name__', fn)}{inspect.signature(fn)} with "
                f"({', '.join(parts)}): {error}"
            ) from None
    return parts


class Plain:
    """``fn(rewards [B, G], ...)`` -> ``[B, G]``, called on copies, output checked."""

    def __init__(self, fn: Callable[..., Any], parts: list[str], k: int, guard: Guard) -> None:
        self.fn, self.parts, self.k, self.guard = fn, parts, k, guard

    def __call__(self, rewards: Tensor) -> Tensor:
        inputs: dict[str, Any] = {"rewards": rewards}
        if "lengths" in self.parts:
            inputs["lengths"] = torch.ones_like(rewards, dtype=torch.int64)
        given = self.guard.copies(**inputs)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in self.parts:
            if p == "k":
                args.append(self.k)
            elif p == "k=":
                kwargs["k"] = self.k
            else:
                args.append(given[p])
        out = self.fn(*args, **kwargs)
        self.guard.compare(inputs, given)
        return check_output(out, rewards)


# ---------------------------------------------------------------- tolerances


def allowance(rewards: Tensor, *outs: Tensor, dtype: torch.dtype) -> Tensor:
    """``[B, 1]``: the error each output element of a group may carry in ``dtype``.

    e_g = G · u · (m_g / s_g) · a_g, with u the unit roundoff of ``dtype``, m_g = max |r| of the
    group, s_g = max r − min r (m_g when the group is constant), a_g = max |A| over ``outs``.
    A sum of G terms carries at most (G − 1)·u relative error in the worst case, plus one
    rounding of the output; dividing by the spread turns an error in the rewards' magnitude into
    one in the advantage's (offset rewards lose digits to the offset). float64 carries a floor
    of 1e-12 relative (lgamma-based weights and enumeration sums are not correctly rounded).
    """
    G = rewards.shape[-1]
    u = torch.finfo(dtype).eps / 2
    r = rewards.to(torch.float64)
    m = r.abs().amax(-1, keepdim=True)
    s = r.amax(-1, keepdim=True) - r.amin(-1, keepdim=True)
    s = torch.where(s > 0, s, torch.where(m > 0, m, 1.0))
    a = torch.stack([o.to(torch.float64).abs().amax(-1, keepdim=True) for o in outs]).amax(0)
    rel = G * u * m / s + (1e-12 if dtype == torch.float64 else 0.0)
    return rel * a + torch.finfo(dtype).tiny


def rule(dtype: torch.dtype) -> str:
    u = torch.finfo(dtype).eps / 2
    return f"G·u·(m/s)·|A| per element, u = {u:.2g} ({str(dtype).removeprefix('torch.')})"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---------------------------------------------------------------- test data


def _batches(g: int, binary: bool) -> list[tuple[str, Tensor]]:
    """Deterministic named test batches ``[32, g]`` in float64, on dyadic grids: each value, its
    shift by 0.75 and its scalings by 2 and 1/8 are exact in every dtype that holds the value, so
    the checks see only the estimator's own arithmetic error."""
    gen = torch.Generator().manual_seed(0)
    if binary:
        return [("binary", torch.randint(0, 2, (32, g), generator=gen).double())]
    normal = torch.randn(32, g, generator=gen, dtype=torch.float64).clamp(-3.9, 3.9)
    return [
        ("integers 0..3", torch.randint(0, 4, (32, g), generator=gen).double()),
        ("normal on a 1/32 grid", torch.round(normal * 32) / 32),
        ("offset 1000 + k/8", 1000 + torch.randint(0, 5, (32, g), generator=gen).double() / 8),
    ]


def _cast(
    batches: list[tuple[str, Tensor]], dtype: torch.dtype
) -> tuple[list[tuple[str, Tensor]], list[str]]:
    """The batches in ``dtype``, keeping the groups ``dtype`` holds exactly and whose relative
    allowance is at most ``USABLE``; and a note for each batch that lost groups."""
    kept, notes = [], []
    for name, r in batches:
        rd = r.to(dtype)
        e = allowance(rd, torch.ones_like(rd), dtype=dtype)[:, 0]
        ok = (rd.double() == r).all(-1) & (e <= USABLE)
        if not bool(ok.all()):
            notes.append(f"{name}: {int((~ok).sum())} of {len(ok)} groups")
        if bool(ok.any()):
            kept.append((name, rd[ok]))
    return kept, notes


def _excess(err: Tensor, allowed: Tensor) -> float:
    """max of err / allowed: ≤ 1 means within the allowance."""
    return float((err / allowed).max())


def _verdict(ratio: float) -> str:
    return "yes" if ratio <= 1 else "no"


# ---------------------------------------------------------------- the checks


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


BANDITS: list[tuple[list[Fraction], list[Fraction]]] = [
    ([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], [Fraction(1), Fraction(-1, 2), Fraction(2)]),
    (
        [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)],
        [Fraction(3, 2), Fraction(0), Fraction(1, 3)],
    ),
    ([Fraction(1, 5), Fraction(2, 5), Fraction(2, 5)], [Fraction(0), Fraction(1), Fraction(1)]),
]


def _expected(
    est: Estimator, pi: list[Fraction], r: list[Fraction], n: int, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """``(E[Σ_i A_i (e_{a_i} − π)], its error bound)``, both ``[A]``, by enumerating all A^N
    action tuples in one batched call; the bound sums each output's allowance."""
    A = len(pi)
    actions = torch.cartesian_prod(*[torch.arange(A)] * n).reshape(-1, n)  # [A^N, N]
    rewards = torch.tensor([float(x) for x in r], dtype=torch.float64)[actions].to(dtype)
    adv = est(rewards)
    p = torch.tensor([float(x) for x in pi], dtype=torch.float64)
    prob = p[actions].prod(-1)  # [A^N]
    direction = torch.nn.functional.one_hot(actions, A).double() - p  # [A^N, N, A]
    total = torch.einsum("t,tn,tna->a", prob, adv.double(), direction)
    err = allowance(rewards, adv, dtype=dtype).expand_as(adv)
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
) -> Finding:
    """E[Σ A_i ∇log π(a_i)] = c·∇J with one constant c for every bandit tried? A bandit whose
    rewards the estimator refuses (a ValueError, e.g. MaxRL's negative rewards) is shifted to a
    minimum of 0, which leaves ∇J unchanged."""
    what = f"for {objective}" if harmonic else f"for {objective} (K={k})"
    if 3**n > BANDIT_MAX_ROWS:
        return Finding("unbiased", "not checked", f"3^{n} reward tuples is too many to enumerate")
    ratios, residuals, deltas = [], [], []
    shifted = 0
    for pi, r in BANDITS:
        rr = [Fraction(int(x > Fraction(1, 2))) for x in r] if binary else r
        grad_q = _objective_gradient(pi, rr, n, k, harmonic)
        grad = torch.tensor([float(g) for g in grad_q], dtype=torch.float64)
        try:
            got, bound = _expected(est, pi, rr, n, dtype)
        except OracleError:
            raise
        except ValueError:
            rr = [x - min(rr) for x in rr]
            got, bound = _expected(est, pi, rr, n, dtype)
            shifted += 1
        if not bool(got.isfinite().all()):
            return Finding("unbiased", "no: NaN or inf in the advantages", f"{what}, N={n}")
        norm = float(grad.norm())
        if norm == 0:
            continue
        c = float(got @ grad) / norm**2
        ratios.append(c)
        residuals.append(float((got - c * grad).norm()) / norm)
        deltas.append(float(bound.norm()) / norm + 1e-12)
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
    if min(abs(c) for c in ratios) <= max(deltas):
        return Finding("unbiased", f"inconclusive {what}", f"c ≈ 0 within {precision}", data=data)
    shown = _simplest(ratios[0], max(deltas) + 1e-9 * abs(ratios[0]))
    return Finding("unbiased", f"yes, E[ĝ] = {shown}·∇J {what}", precision, data=data)


def _simplest(x: float, tol: float) -> str:
    """The fraction with the smallest denominator (≤ 1000) within ``tol`` of ``x``, else x."""
    for d in range(1, 1001):
        frac = Fraction(round(x * d), d)
        if abs(float(frac) - x) <= tol:
            return str(frac)
    return f"{x:.6g}"


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


# ---------------------------------------------------------------- the whole report


def default_ns(family: Family, k: int) -> list[int]:
    """N = K, K + 1 and a larger N (max@K); 2, 3 and 8 for outcome and MaxRL estimators."""
    return sorted({k, k + 1, max(2 * k + 2, 8)}) if family == "maxk" else [2, 3, 8]


def validate(family: Family, k: int, ns: Sequence[int], dtype: str) -> None:
    """OracleError for K, N or dtype values the oracle cannot use, before the user's code runs."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise OracleError(f"--k must be an integer >= 1; got {k!r}")
    if not ns:
        raise OracleError("--n needs at least one group size")
    for n in ns:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise OracleError(
                f"--n must be integers >= 2 (G = 1 is covered by the bad-input checks); got {n!r}"
            )
        if family == "maxk" and n < k:
            raise OracleError(f"--n {n} is below --k {k}: max@K needs groups of N >= K samples")
    if dtype not in DTYPES:
        raise OracleError(f"--dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")


def _accepts(est: Estimator, probe: Tensor, lenient: bool = False) -> str | None:
    """None if ``est`` takes ``probe``; else the ValueError it raised (its own refusal, e.g. of
    N < K). ``lenient`` (the float64 probe) turns every error, ours included, into a reason."""
    try:
        est(probe)
    except Exception as error:
        if lenient:
            return f"{type(error).__name__}: {error}"
        if isinstance(error, OracleError) or not isinstance(error, ValueError):
            raise
        return f"ValueError: {error}"
    return None


def _run_dtype(est: Estimator, family: Family, k: int, n: int, dtype: torch.dtype) -> list[Finding]:
    name = _dtype_name(dtype)
    binary = family == "maxrl"  # MaxRL's claims are for pass/fail rewards
    batches = _batches(n, binary=binary)
    refusal = _accepts(est, batches[0][1].to(dtype))
    if refusal is not None and not binary:
        batches, binary = _batches(n, binary=True), True
        refusal = _accepts(est, batches[0][1].to(dtype))
    if refusal is not None:
        return [Finding("accepts N", "refused", refusal[:160], name, n)]
    # a batch the estimator refuses (e.g. negative rewards for MaxRL) is left out, and said so
    refused = {b[0] for b in batches if _accepts(est, b[1].to(dtype)) is not None}
    used, skipped = _cast([b for b in batches if b[0] not in refused], dtype)
    k_obj = k if family == "maxk" else 1
    objective = {
        "maxk": f"max@{k_obj}",
        "outcome": "the mean reward",
        "maxrl": "Σ_{k≤N} (1/k)·pass@k",
    }[family]
    findings = [
        centred(est, used, dtype),
        shift_invariant(est, used, binary, dtype),
        scale_behaviour(est, used, binary, dtype),
        permutation_equivariant(est, used, dtype),
        unbiasedness(est, n, k_obj, binary, objective, dtype, harmonic=family == "maxrl"),
    ]
    if family == "maxk" and k_obj < n:
        findings.append(relation_to_canonical(est, used, k_obj, dtype))
    elif family == "maxk":
        findings.append(Finding("relation to canonical", "not checked", "canonical needs K < N"))
    for f in findings:
        f.dtype, f.n = name, n
        if skipped:
            f.evidence += f"; beyond {name}'s resolution, skipped {'; '.join(skipped)}"
        if refused:
            f.evidence += f"; refused by the estimator: {', '.join(sorted(refused))}"
    return findings


def check(
    fn: Callable[..., Any],
    family: Family,
    k: int = 2,
    signature: str | None = None,
    *,
    ns: Sequence[int] | None = None,
    dtype: str = "float32",
    convention: Convention = "plain",
) -> list[Finding]:
    """Every finding for the user callable ``fn``, in ``dtype`` and (when accepted) float64, at
    each group size in ``ns`` (default ``default_ns``). Raises OracleError for unusable
    arguments or outputs."""
    ns = list(ns) if ns else default_ns(family, k)
    validate(family, k, ns, dtype)
    guard = Guard()
    est: Estimator
    if convention == "verl":
        from advest.integrations.verl import VerlCall

        est = VerlCall(fn, guard, k=k)
    else:
        est = Plain(fn, resolve_signature(fn, family, signature), k, guard)
    own = DTYPES[dtype]
    findings: list[Finding] = []
    for n in ns:
        findings += _run_dtype(est, family, k, n, own)
        if own != torch.float64:
            probe = _batches(n, binary=False)[0][1]
            why = _accepts(est, probe, True) and _accepts(est, _batches(n, True)[0][1], True)
            if why is None:
                findings += _run_dtype(est, family, k, n, torch.float64)
            else:
                findings.append(Finding("float64", "not accepted", why[:160], "float64", n))
    g = max(ns)
    binary = _accepts(est, _batches(g, binary=False)[0][1].to(own)) is not None
    for f in bad_input(est, g, binary, own):
        f.dtype = dtype
        findings.append(f)
    mutated = guard.mutations
    findings.insert(
        0,
        Finding(
            "modifies its inputs",
            "yes: every check ran on copies" if mutated else "no",
            "; ".join(mutated) if mutated else "every input compared after every call",
        ),
    )
    return findings


def as_json(findings: list[Finding]) -> list[dict[str, Any]]:
    return [asdict(f) for f in findings]


def table(findings: list[Finding]) -> str:
    """Rows: properties; one column per dtype; verdicts merged over N where they agree."""
    dtypes = list(dict.fromkeys(f.dtype for f in findings if f.dtype))
    props = list(dict.fromkeys(f.prop for f in findings))
    cells: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        cells.setdefault((f.prop, f.dtype), []).append(f)
    lines = ["| property | " + " | ".join(dtypes or ["all"]) + " |"]
    lines.append("|---" * (1 + max(len(dtypes), 1)) + "|")
    for prop in props:
        row = []
        for d in dtypes or [""]:
            got = cells.get((prop, d)) or cells.get((prop, ""), [])
            verdicts = list(dict.fromkeys(f.verdict for f in got))
            if not got:
                row.append("")
            elif len(verdicts) == 1:
                ns = [str(f.n) for f in got if f.n is not None]
                row.append(verdicts[0] + (f" (N = {', '.join(ns)})" if ns else ""))
            else:
                row.append("; ".join(f"N={f.n}: {f.verdict}" for f in got))
        lines.append(f"| {prop} | " + " | ".join(row) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the command


def add_arguments(parser: Any) -> None:
    """``advest check``'s options, on any argparse-compatible parser (argparse, jsonargparse)."""
    parser.add_argument(
        "target",
        help="MODULE:FUNCTION (a callable on rewards [B, G], and K for --family maxk), or "
        "verl:NAME for an estimator from verl's registry (implies --convention verl)",
    )
    parser.add_argument(
        "--family",
        choices=["outcome", "maxk", "maxrl"],
        default="outcome",
        help="outcome: a baseline on rewards; maxk: a max@K / pass@K estimator that takes K; "
        "maxrl: unbiasedness for MaxRL's Σ_{k≤N} (1/k)·pass@k, on pass/fail rewards",
    )
    parser.add_argument("--k", type=int, default=2, help="K for the max@K family (2)")
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=None,
        help="group sizes N to check (several allowed); default N = K, K+1 and max(2K+2, 8) "
        "for maxk, 2, 3 and 8 for outcome",
    )
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="the estimator's own dtype (float32); float64 is checked too when accepted",
    )
    parser.add_argument(
        "--convention",
        choices=["plain", "verl"],
        default="plain",
        help="plain: fn(rewards [B, G], ...) -> [B, G]; verl: fn(token_level_rewards, "
        "response_mask, index, config=...) -> (advantages, returns)",
    )
    parser.add_argument(
        "--signature",
        default=None,
        help="argument order for --convention plain, e.g. 'rewards, k' (passes K even to a "
        "parameter not named k), 'rewards', 'rewards, k=', 'rewards, lengths'",
    )
    parser.add_argument("--json", default=None, help="also write the findings to this file")


def command(args: Any) -> int:
    """Run ``advest check`` from parsed ``args``: print the report; 0, or 2 on a usage error."""
    import json
    import sys

    target: str = args.target
    convention: Convention = args.convention
    try:
        if target.startswith("verl:"):
            from advest.integrations.verl import verl_estimator

            fn = verl_estimator(target.removeprefix("verl:"))
            convention = "verl"
        else:
            fn = load(target)
    except (ImportError, AttributeError, ValueError) as error:
        print(f"advest check: cannot import {target}: {error}", file=sys.stderr)
        return 2
    try:
        findings = check(
            fn,
            args.family,
            args.k,
            args.signature,
            ns=args.n,
            dtype=args.dtype,
            convention=convention,
        )
    except OracleError as error:
        print(f"advest check: {target}: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the user's callable could not be called at all
        print(
            f"advest check: cannot call {target}: {type(error).__name__}: {error}", file=sys.stderr
        )
        return 2
    ns = sorted({f.n for f in findings if f.n is not None})
    print(f"advest check {target} (family {args.family}, K={args.k}, N={ns}, {convention})")
    dtypes = list(dict.fromkeys(f.dtype for f in findings if f.dtype))
    print("tolerance: " + "; ".join(rule(DTYPES[d]) for d in dtypes) + " (spec/oracle.md)\n")
    print(table(findings))
    print()
    for f in findings:
        where = f" [{f.dtype}{'' if f.n is None else f', N={f.n}'}]" if f.dtype else ""
        print(f"- {f.prop}{where}: {f.evidence}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(as_json(findings), out, indent=1)
    return 0
