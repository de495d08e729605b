"""The token oracle's whole report (``check_tokens``): which checks run at which group size and
dtype, for an estimator in advest's ``[B, G, T]`` form or verl's token-level convention. The
findings render with ``report.table``. Definitions of every row: spec/oracle.md, "Token-level
estimators"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ..conventions.harness import Convention, Guard, OracleError
from ..conventions.tokens import Declared, TokenEstimator, VerlTokens, cast
from ..inputs.token_trees import TREES, enumerate_groups, inputs
from ..properties import token_checks as find
from ..properties import token_padding as pad
from ..properties.findings import Finding
from ..search.engine import Budget, search
from ..search.tokens import properties as searched
from .report import DEFAULT_BUDGET

GROUP_SIZES = (2, 3)
"""G for every check: 2 and 3 rollouts (3375 groups of the 15-response tree at G = 3)."""


class PerGroup:
    """``est`` called on one group at a time: for an estimator whose groups are coupled (verl's
    batch whitening), the checks judge each group as a batch of its own."""

    def __init__(self, est: TokenEstimator) -> None:
        self.est, self.name = est, est.name

    def __call__(self, fields: dict[str, Any]) -> Tensor:
        B = fields["mask"].shape[0]
        parts = []
        for b in range(B):
            one = {k: v[b : b + 1] for k, v in fields.items()}  # tensors and texts alike
            parts.append(self.est(one))
        return torch.cat(parts)


def coupling(est: TokenEstimator) -> Finding:
    """Does any of 32 groups' advantage change when the other groups are left out?"""
    groups, r, _, _ = enumerate_groups(TREES[0], 3)
    step = len(groups) // 32  # spread over the enumeration: most groups have varied rewards
    fields = cast(inputs(TREES[0], groups[::step][:32], r[::step][:32]), torch.float64)
    A = est(fields).double()
    alone = PerGroup(est)(fields).double()
    diff = float((A - alone).abs().max())
    tol = find.allowed(fields["rewards"], A, alone, dtype=torch.float64)  # [32, 1, 1]
    if find._excess((A - alone).abs(), 2 * tol) > 1:
        return Finding(
            "couples groups",
            "yes: judged one group per batch",
            f"a group alone vs beside 31 others: up to {diff:.3g} apart",
        )
    return Finding(
        "couples groups", "no", f"each of 32 groups alone vs beside 31 others: {diff:.3g}"
    )


def bind(
    fn: Callable[..., Any], convention: Convention, options: dict[str, Any], guard: Guard
) -> TokenEstimator:
    """``fn`` as a ``TokenEstimator`` in its ``convention`` (``options``: advest's form only)."""
    if convention == "verl":
        return VerlTokens(fn, guard)
    return Declared(fn, guard, options)


def check_tokens(
    fn: Callable[..., Any],
    *,
    convention: Convention = "plain",
    options: dict[str, Any] | None = None,
    extends: str | None = None,
    dtypes: Sequence[str] = ("float32", "bfloat16"),
    budget: Budget | None = DEFAULT_BUDGET,
) -> list[Finding]:
    """Every token-level finding for ``fn``: properties in float64 at G = 2 and 3, accuracy in
    each of ``dtypes`` against float64, and (``extends``, a registered sequence estimator)
    agreement with it when no token discriminates. OracleError for unusable outputs."""
    guard = Guard()
    est = bind(fn, convention, dict(options or {}), guard)
    couple = coupling(est)
    if couple.verdict.startswith("yes"):
        est = PerGroup(est)
    f64 = torch.float64
    findings = [couple]
    for G in GROUP_SIZES:
        fields = find.probe_fields(G, f64)
        rows = [
            find.unbiasedness(est, G, f64),
            find.centred(est, fields, f64),
            *find.shift_scale(est, fields, f64),
            find.permutation(est, fields, f64),
            *(find.accuracy(est, fields, getattr(torch, d)) for d in dtypes),
            *pad.layouts(est, G, f64),
            pad.all_equal(est, G, f64),
            *pad.padding_rows(est, G, f64),
        ]
        if extends is not None:
            rows.append(find.extends(est, extends, G, torch.float32))
        for f in rows:
            f.dtype, f.n = "float64", G
        findings += rows
    own = find.reads_own_tokens(est, 3, f64)
    own.dtype, own.n = "float64", 3
    findings.insert(1, own)
    if budget is not None:  # the search starts from what the explicit inputs found
        for f in [search(p, budget, "token/float64") for p in searched(est, findings)]:
            f.dtype = "float64"
            findings.append(f)
    mutated = guard.mutations
    verdict = "yes: every check ran on copies" if mutated else "no"
    findings.insert(
        0,
        Finding("modifies its inputs", verdict, "; ".join(mutated) or "compared after every call"),
    )
    return findings


def safe_check(fn: Callable[..., Any], **options: Any) -> list[Finding] | str:
    """``check_tokens``, or the one-line reason it could not judge ``fn``."""
    try:
        return check_tokens(fn, **options)
    except OracleError as error:
        return str(error)


def _advest_rows() -> list[tuple[str, str, str, dict[str, Any]]]:
    from advest.fast import registry

    rows: list[tuple[str, str, str, dict[str, Any]]] = []
    for entry in registry.entries():
        if entry.kind != "token" or entry.extends is None:
            continue
        rows.append((entry.name, entry.name, entry.extends, {}))
        for variant in entry.variants:
            shown = ", ".join(f"{key} = {value}" for key, value in variant.options.items())
            rows.append((f"{entry.name} ({shown})", entry.name, entry.extends, variant.options))
    return rows


ADVEST: list[tuple[str, str, str, dict[str, Any]]] = _advest_rows()
"""advest's token-level estimators as the table shows them, derived from their registry entries:
(row, registered name, the sequence estimator it reduces to when no token discriminates
(``Entry.extends``; spec/ktae.md, hista.md, numca.md, covariance.md, otb.md), options), one row
per declared variant too. Hista's default window (w = 16) spans every response of the trees, so
its baseline is the others' mean; its variant w = 1 gives a baseline at every token."""

COLUMNS = {
    "unbiased": "unbiased",
    "reads its own tokens": "reads own rollout",
    "centred": "centred",
    "shift invariant": "shift",
    "scale equivariant": "scale",
    "permutation equivariant": "permutation",
    "accurate in float32": "float32",
    "accurate in bfloat16": "bfloat16",
    "left padding": "left pad",
    "holes in the mask": "holes",
    "extra right padding": "extra pad",
    "padding values ignored": "pad values",
    "0 at padding": "0 at pad",
    "all-equal groups": "all-equal",
    "empty response": "empty row",
    "all-padding group": "padding group",
    "extends": "extends",
}


def searched_cell(findings: list[Finding]) -> str:
    """The search's verdict in one cell: "yes", or "no: " and the properties it broke."""
    broken = [f.prop for f in findings if f.searched and f.counterexample is not None]
    if not any(f.searched for f in findings):
        return ""
    return f"no: {', '.join(dict.fromkeys(broken))}" if broken else "yes"


def counterexamples(shown: str, findings: list[Finding]) -> list[str]:
    """One line per searched "no" of ``shown``: the property, its shrunk input, what was
    expected and what was measured (a row a maintainer can act on)."""
    return [
        f"- `{shown}`, {f.prop} [{f.dtype}]: `{c['input']}`; expected {c['expected']}; "
        f"got {c['measured']}"
        for f in findings
        if f.searched and (c := f.counterexample) is not None
    ]


def cell(findings: list[Finding], prop: str) -> str:
    """One property's verdict, merged over G where the group sizes agree."""
    got = [
        f
        for f in findings
        if not f.searched  # the search has its own column
        and (f.prop == prop or (prop == "extends" and f.prop.startswith(prop)))
    ]
    verdicts = list(dict.fromkeys(f.verdict for f in got))
    if prop == "unbiased" and all(f.verdict == f"yes, E[ĝ] = {f.n}·∇J" for f in got):
        return "yes, E[ĝ] = G·∇J"
    if len(verdicts) == 1:
        return verdicts[0].replace("|", "\\|")
    return "; ".join(f"G={f.n}: {f.verdict}" for f in got).replace("|", "\\|")


def verdict_table(rows: list[tuple[str, list[Finding] | str]]) -> str:
    """The estimator × property table; a row that could not be judged says why."""
    lines = [
        "| estimator | " + " | ".join(COLUMNS.values()) + " |",
        "|---" * (1 + len(COLUMNS)) + "|",
    ]
    for name, found in rows:
        if isinstance(found, str):
            lines.append(f"| `{name}` | out of scope: {found} |" + " |" * (len(COLUMNS) - 1))
            continue
        lines.append(f"| `{name}` | " + " | ".join(cell(found, p) for p in COLUMNS) + " |")
    return "\n".join(lines)


def advest_table() -> str:
    """``verdict_table`` of advest's token-level estimators (``ADVEST``), as spec/oracle.md
    shows it."""
    from advest.fast import registry

    rows: list[tuple[str, list[Finding] | str]] = [
        (row, safe_check(registry.get(name), extends=seq, options=options))
        for row, name, seq, options in ADVEST
    ]
    return verdict_table(rows)
