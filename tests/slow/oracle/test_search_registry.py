"""advest's own estimators under the search (spec/oracle.md, "What a mask promises"): every
registered estimator passes every searched property its claims imply, on [B, G], on flat rows
through ``by_group`` (masked rows holding NaN and ±inf), at the token level and for episodes.
In the slow tier: 29 estimators, each searched on every surface it has (about 2 CPU minutes
with a budget of 12 inputs per property). A deeper sweep, by hand: ``ADVEST_SEARCH_EXAMPLES=150
ADVEST_SEARCH_SEED=1 pytest -m slow tests/slow/oracle/test_search_registry.py`` (such a sweep found
james_stein's lost digits, tests/core/estimators/test_peers.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from advest.fast import by_group, registry
from advest.oracle.conventions.harness import Guard, Plain
from advest.oracle.conventions.rows import RowCall
from advest.oracle.inputs.tolerance import coupled_allowance
from advest.oracle.properties import episodes
from advest.oracle.properties.findings import Finding
from advest.oracle.properties.token_padding import padding_rows
from advest.oracle.reports.token_report import bind
from advest.oracle.search import Budget, plain, rows, search, tokens
from advest.oracle.search import episodes as search_episodes
from advest.spec.scales import zero

BUDGET = Budget(
    examples=int(os.environ.get("ADVEST_SEARCH_EXAMPLES", "12")),
    seed=int(os.environ.get("ADVEST_SEARCH_SEED", "0")),
)
SEQUENCE = [
    n
    for n in registry.names()
    if registry.entry(n).kind == "sequence" and set(registry.entry(n).inputs) <= {"rewards", "k"}
]
TOKEN = [n for n in registry.names() if registry.entry(n).kind == "token"]
EPISODE = [n for n in registry.names() if registry.entry(n).kind == "episode"]


def claimed(name: str) -> list[Finding]:
    """The explicit verdicts ``name``'s claims imply: the search starts from them."""
    c = registry.entry(name).claims
    scale = {1: "yes", 0: "invariant"}.get(c.scale_power or -1, "no")
    return [
        Finding("centred", "yes" if c.centred else "no", ""),
        Finding("shift invariant", "yes" if c.shift is zero else "no", ""),
        Finding("scale equivariant", scale, ""),
        Finding("permutation equivariant", "yes", ""),
        Finding("all-equal groups", "yes: A = 0" if c.exact_zero_on_flat else "no", ""),
        Finding("couples groups", "yes" if c.batch_coupled else "no", ""),
        *[Finding(p, "yes", "") for p in ("masked rows", "ids relabelled", "row order")],
        Finding("ragged groups", "no: refused" if c.batch_coupled else "yes", ""),
    ]


def _no(findings: list[Finding]) -> list[str]:
    """Every searched input that broke a property (a counterexample; ``couples groups`` holds as
    "no", so the verdict alone does not say it), and every verdict that is neither."""
    return [
        f"{f.prop}: {f.verdict}: {f.evidence}"
        for f in findings
        if f.counterexample is not None or f.verdict not in ("yes", "no")
    ]


def _k(name: str) -> int:
    return 2 if registry.entry(name).needs_k else 1


@pytest.mark.parametrize("name", SEQUENCE)
def test_every_sequence_estimator_passes_the_search_on_groups_and_flat_rows(name: str) -> None:
    entry, k = registry.entry(name), _k(name)
    fn: Callable[..., Tensor] = entry.fn
    est = Plain((lambda r: fn(r, k)) if entry.needs_k else fn, ["rewards"], k, Guard())
    d = plain.domain(est, 6, torch.float64, entry.claims.binary_only, g_min=k)
    assert d is not None
    coupled = entry.claims.batch_coupled
    # as ``advest check`` judges a batch-coupled estimator: each output carries the batch's sums
    with coupled_allowance(coupled):
        found = [search(p, BUDGET, name) for p in plain.properties(est, d, claimed(name))]

        def flat(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
            return by_group(name, rewards, index, valid=valid, k=k if entry.needs_k else None)

        row_call = RowCall(flat, Guard())
        row_call.binary = entry.claims.binary_only
        rd = rows.domain(row_call, 6, torch.float64, claimed(name))
        found += [
            search(p, BUDGET, name) for p in rows.properties(row_call, rd, claimed(name), coupled)
        ]
    assert not _no(found), _no(found)


@pytest.mark.parametrize("name", TOKEN)
def test_every_token_estimator_passes_the_search_at_every_mask(name: str) -> None:
    est = bind(registry.entry(name).fn, "plain", {}, Guard())
    # the explicit rows of degenerate masks: a refusal in words there bounds the domain
    held = [Finding("padding values ignored", "yes", ""), *padding_rows(est, 2, torch.float64)]
    found = [search(p, BUDGET, name) for p in tokens.properties(est, held)]
    assert not _no(found), _no(found)


@pytest.mark.parametrize("name", EPISODE)
def test_every_episode_estimator_passes_the_search_whatever_its_unused_slots_hold(
    name: str,
) -> None:
    fn = registry.entry(name).fn
    found = search_episodes.searched(fn, episodes.report(fn), BUDGET)
    assert not _no(found), _no(found)
