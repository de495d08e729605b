"""The whole report: which checks run at which group size and dtype (``check``), and the
verdict table (``table``) and JSON (``as_json``) they are rendered as."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor

from advest.spec.bounds import Bound

from ..conventions.harness import (
    Convention,
    Estimator,
    Guard,
    Objective,
    OracleError,
    Plain,
    Watch,
    resolve_signature,
)
from ..conventions.rows import PlainRows, RowCall, RowsAsPlain, row_call
from ..inputs.tolerance import (
    DTYPES,
    _batches,
    _cast,
    _dtype_name,
    coupled_allowance,
    sample_lengths,
)
from ..properties import plain as judged
from ..properties import sequence as find
from ..properties.extremes import low_precision, magnitude
from ..properties.findings import NON_FINITE, Finding
from ..properties.grouped import grouped_findings
from ..properties.unbiased import unbiasedness
from ..search.engine import Budget
from ..search.run import searched

DEFAULT_BUDGET = Budget()
"""The search every check runs unless told otherwise (``advest check --examples``, ``--seed``)."""


def default_ns(family: Objective, k: int) -> list[int]:
    """N = K, K + 1 and a larger N (max@K); 1, 2, 3 and 8 for MaxRL (its objective is pass@1 at
    N = 1, where an estimator of groups of one still owes a gradient); 2, 3 and 8 for outcome
    estimators (``--n 1`` checks them at N = 1 too)."""
    if family == "maxk":
        return sorted({k, k + 1, max(2 * k + 2, 8)})
    return [1, 2, 3, 8] if family == "maxrl" else [2, 3, 8]


def validate(family: Objective, k: int, ns: Sequence[int], dtype: str) -> None:
    """OracleError for K, N or dtype values the oracle cannot use, before the user's code runs.
    N = 1 is refused only where the objective is not defined there (max@K with K >= 2)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise OracleError(f"--k must be an integer >= 1; got {k!r}")
    if not ns:
        raise OracleError("--n needs at least one group size")
    for n in ns:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise OracleError(f"--n must be integers >= 1; got {n!r}")
        if family == "maxk" and n < k:
            raise OracleError(
                f"--n {n} is below --k {k}: max@K is not defined for groups of N < K samples"
            )
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


def _run_dtype(
    est: Estimator,
    family: Objective,
    k: int,
    n: int,
    dtype: torch.dtype,
    tol: torch.dtype | None = None,
) -> list[Finding]:
    """Every check at group size ``n`` on rewards in ``dtype``, judged with ``tol``'s allowance
    (``dtype``'s by default; float32's for an estimator that computes in float32 whatever its
    input, see ``check``)."""
    name = _dtype_name(dtype)
    tol = dtype if tol is None else tol
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
    watch = Watch(est)
    checks: list[Callable[[], Finding]] = [
        lambda: find.centred(watch, used, tol),
        lambda: find.shift_invariant(watch, used, binary, tol),
        lambda: find.scale_behaviour(watch, used, binary, tol),
        lambda: find.permutation_equivariant(watch, used, tol),
        lambda: unbiasedness(
            watch, n, k_obj, binary, objective, dtype, harmonic=family == "maxrl", tol=tol
        ),
    ]
    if family == "maxk" and k_obj < n:
        checks.append(lambda: find.relation_to_canonical(watch, used, k_obj, tol))
    findings = _judged(watch, checks)
    if family == "maxk" and k_obj >= n:
        findings.append(Finding("relation to canonical", "not checked", "canonical needs K < N"))
    for f in findings:
        f.dtype, f.n = name, n
        if skipped:
            f.evidence += f"; beyond {name}'s resolution, skipped {'; '.join(skipped)}"
        if refused:
            f.evidence += f"; refused by the estimator: {', '.join(sorted(refused))}"
    return findings


def _judged(watch: Watch, checks: list[Callable[[], Finding]]) -> list[Finding]:
    """Run each check, then the "finite output" finding first: a check during which the
    estimator gave a non-finite output is reported as such (NaN compares false to every bound,
    so it must never read as a "yes")."""
    findings = []
    for run in checks:
        before = len(watch.seen)
        finding = run()
        if len(watch.seen) > before:
            finding.verdict, finding.evidence = NON_FINITE, watch.seen[before]
        findings.append(finding)
    finite = (
        Finding("finite output", NON_FINITE, watch.seen[0])
        if watch.seen
        else Finding("finite output", "yes", "every output finite for finite rewards")
    )
    return [finite, *findings]


FLOAT32_EXCESS = torch.finfo(torch.float32).eps / torch.finfo(torch.float64).eps
"""An error up to this many times float64's allowance is within float32's (2^29)."""


def _float64(est: Estimator, family: Objective, k: int, n: int) -> list[Finding]:
    """The float64 column at ``n``. An estimator that computes in float32 whatever its input
    (verl's ``grpo_vectorized`` casts to float32) misses float64's allowance by a factor that
    float32's covers: its column is then judged with float32's allowance, and says so in a
    ``working precision`` row, instead of reporting float32 rounding as a broken property."""
    findings = _run_dtype(est, family, k, n, torch.float64)
    exact = ("centred", "shift invariant", "permutation equivariant")  # identities, or far off
    # a finding without a measured excess (an estimator that refuses the batches) is no evidence
    measured = [f for f in findings if f.prop in exact and "excess" in f.data]
    excess = [(f.prop, float(f.data["excess"])) for f in measured]
    near = [(p, e) for p, e in excess if 1 < e <= FLOAT32_EXCESS]
    if not near:
        return findings
    prop, worst = max(near, key=lambda pe: pe[1])
    rerun = _run_dtype(est, family, k, n, torch.float64, tol=torch.float32)
    note = (
        f"float64 rewards give float32-accurate advantages ({prop}: {worst:.3g} × float64's "
        "allowance, within float32's): this column is judged with float32's allowance"
    )
    return [Finding("working precision", "float32", note, "float64", n), *rerun]


def _accuracy(est: Estimator, n: int, dtype: torch.dtype) -> Finding:
    """``accuracy`` at group size ``n`` on the test batches and the outlier batch (the binary
    batch for an estimator that refuses the others)."""
    batches = [*_batches(n, binary=False), find.outlier_batch(n, dtype)]
    ok = [b for b in batches if _accepts(est, b[1].to(dtype), True) is None]
    used, _ = _cast(ok or _batches(n, binary=True), dtype)
    finding = find.accuracy(Watch(est), used, dtype)
    finding.dtype, finding.n = _dtype_name(dtype), n
    return finding


def check(
    fn: Callable[..., Any],
    family: Objective,
    k: int = 2,
    signature: str | None = None,
    *,
    ns: Sequence[int] | None = None,
    dtype: str = "float32",
    convention: Convention = "plain",
    float64: bool = True,
    bound: Bound | None = None,
    algorithm: dict[str, Any] | None = None,
    budget: Budget | None = DEFAULT_BUDGET,
) -> list[Finding]:
    """Every finding for the user callable ``fn``, in ``dtype`` and (when accepted and
    ``float64``) float64, at each group size in ``ns`` (default ``default_ns``); then how
    ``dtype``'s advantages compare with float64's (``accurate (vs float64)``), and singleton
    and all-equal groups; then the rows of trainers' data (``trainer_rows``): groups by id
    (conventions on flat rows), the magnitude bound (``bound``: the estimator's declared one,
    default ``extremes.generic_bound``) and low-precision rewards. ``algorithm``: overrides of
    verl's ``AlgoConfig`` for the verl and SkyRL conventions. Raises OracleError for
    unusable arguments or outputs (``OutOfScope`` for a callable the oracle cannot judge)."""
    ns = list(ns) if ns else default_ns(family, k)
    validate(family, k, ns, dtype)
    guard = Guard()
    est = _bind(fn, family, k, signature, convention, guard, algorithm)
    own = DTYPES[dtype]
    coupling = _coupling(est, max(ns), own)
    coupled = coupling.verdict.startswith("yes")
    with coupled_allowance(coupled):
        findings = [coupling, *_all_checks(est, family, k, ns, own, float64)]
    rows = (
        PlainRows(est) if convention == "plain" else row_call(fn, convention, guard, k, algorithm)
    )
    findings += trainer_rows(rows, max(ns), own, bound, k if family == "maxk" else 1, coupled)
    if convention != "plain" and rows.takes_ids:
        findings.append(over_ranks(rows))
    if budget is not None:  # the search starts from what the explicit inputs found
        with coupled_allowance(coupled):
            findings += searched(est, rows, family, k, ns, own, findings, coupled, budget)
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


def over_ranks(rows: RowCall, world: int = 2) -> Finding:
    """The "split over ranks" row (``oracle.properties.ranks``): the estimator on shards of one
    batch on ``world`` gloo processes, whole groups per rank and groups split across ranks, against
    one call on the whole batch."""
    from ..properties.ranks import split_over_ranks

    # the ids as a list, as trainers hold them (verl keys a dict by each id: a tensor element is
    # a new key every time)
    found = split_over_ranks(lambda r, index: rows(r, index.tolist()), world=world)
    return Finding("split over ranks", found.verdict, found.evidence, "float64", data=found.data)


def trainer_rows(
    rows: RowCall, n: int, dtype: torch.dtype, bound: Bound | None, k: int, coupled: bool
) -> list[Finding]:
    """The rows of trainers' data at largest group size ``n``: the grouped rows where the
    convention has ids (not ``[B, G]``), the magnitude bound and the low-precision rows."""
    import warnings

    with warnings.catch_warnings():  # groups of one make a user's std warn: the rows judge it
        warnings.simplefilter("ignore")
        findings = grouped_findings(rows, n, dtype) if rows.takes_ids or rows.ragged else []
        mag = magnitude(rows, n, dtype, bound, k, coupled)
        mag.dtype, mag.n = _dtype_name(dtype), n
        return [*findings, mag, *low_precision(rows, n, coupled)]


def _bind(
    fn: Callable[..., Any],
    family: Objective,
    k: int,
    signature: str | None,
    convention: Convention,
    guard: Guard,
    algorithm: dict[str, Any] | None = None,
) -> Estimator:
    if convention == "verl":
        from ..conventions.verl import VerlCall

        return VerlCall(fn, guard, k=k, algorithm=algorithm)
    if convention != "plain":
        return RowsAsPlain(row_call(fn, convention, guard, k, algorithm))
    return Plain(fn, resolve_signature(fn, family, signature), k, guard)


def accuracy_only(
    fn: Callable[..., Any],
    dtype: str,
    ns: Sequence[int],
    *,
    family: Objective = "outcome",
    k: int = 1,
    convention: Convention = "plain",
) -> list[Finding]:
    """Only the ``accurate (vs float64)`` rows of ``check`` (after its ``couples groups`` row):
    for a page that reports each dtype's accuracy without rerunning every property in it."""
    validate(family, k, list(ns), dtype)
    est = _bind(fn, family, k, None, convention, Guard())
    own = DTYPES[dtype]
    coupling = _coupling(est, max(ns), own)
    with coupled_allowance(coupling.verdict.startswith("yes")):
        return [coupling, *(_accuracy(est, n, own) for n in ns)]


def _coupling(est: Estimator, g: int, dtype: torch.dtype) -> Finding:
    """Does group 0's advantage change when the other groups are left out (each sample keeping
    its response length)? Then the groups are coupled (e.g. batch whitening), and every check
    uses the batch's allowance (``COUPLED``)."""
    name = "couples groups"
    for binary in (False, True):
        r = _batches(g, binary=binary)[0][1].to(dtype)  # [32, g]
        try:  # any other error is out of scope for the whole check, and propagates
            est(r, sample_lengths(r.shape))
        except (ValueError, TypeError):
            continue  # refused (e.g. non-binary rewards): try the binary batch
        failure = judged.alone(est, dtype)(judged.Grid(r.double()))
        if failure is not None:
            return Finding(
                name,
                f"yes: {failure.verdict}",
                f"group 0 {failure.measured}; every check uses the batch's allowance",
            )
        return Finding(name, "no", f"group 0 alone and beside {len(r) - 1} others agree")
    return Finding(name, "not checked", "the test batches were refused")


def _all_checks(
    est: Estimator, family: Objective, k: int, ns: list[int], own: torch.dtype, float64: bool
) -> list[Finding]:
    dtype = _dtype_name(own)
    findings: list[Finding] = []
    for n in ns:
        findings += _run_dtype(est, family, k, n, own)
        if own != torch.float64 and float64:
            probe = _batches(n, binary=False)[0][1]
            why = _accepts(est, probe, True) and _accepts(est, _batches(n, True)[0][1], True)
            if why is None:
                findings += _float64(est, family, k, n)
                findings.append(_accuracy(est, n, own))
            else:
                findings.append(Finding("float64", "not accepted", why[:160], "float64", n))
    g = max(ns)
    binary = _accepts(est, _batches(g, binary=False)[0][1].to(own)) is not None
    for f in [
        find.singleton(est, own),
        find.all_equal(est, g, binary, own),
        *find.bad_input(est, g, binary, own),
    ]:
        f.dtype = dtype
        findings.append(f)
    return findings


def as_json(findings: list[Finding]) -> list[dict[str, Any]]:
    return [asdict(f) for f in findings]
