"""Exact unbiasedness on small softmax bandits: enumerate every action tuple with rational
probabilities; E[Σ A_i ∇log π(a_i)] must equal pg_scale(N, K)·∇J exactly for every catalogue row
that claims it, and the biased estimators must show the notes' exact nonzero bias."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import advest.reference.maxk as rm
from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.reference._exact import mean
from advest.spec import bandit

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[3] / "spec" / "golden" / "bandit.json").read_text()
)["cases"]


def _case(c: dict[str, Any]) -> tuple[list[Fraction], list[Fraction], int, int]:
    return [Fraction(p) for p in c["pi"]], [Fraction(x) for x in c["r"]], c["N"], c["K"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"N{c['N']}K{c['K']}A{len(c['pi'])}")
def test_closed_form_objective_and_gradient_match_the_notes(case: dict[str, Any]) -> None:
    pi, r, _, k = _case(case)
    assert bandit.objective(pi, r, k) == Fraction(case["J"])
    assert bandit.gradient(pi, r, k) == [Fraction(g) for g in case["grad"]]


def _k_eff(row: Row, case: dict[str, Any]) -> int:
    """The K the row is called with on this bandit: 1 for group baselines, N for max@N rows."""
    n = case["N"]
    return 1 if row.k_domain is None else (n if row.k_domain == "k=n" else case["K"])


def _unbiased_pairs() -> list[Any]:
    """(row, case) for every row claiming unbiasedness and every bandit it is defined on: rows
    that need lengths or couple the batch, and K outside a row's domain, are not generated (a
    skip would hide a row that silently dropped out of its domain)."""
    return [
        pytest.param(row, case, id=f"{row.id}-N{case['N']}K{case['K']}A{len(case['pi'])}")
        for row in CATALOGUE
        if row.pg_scale is not None and not (row.needs_lengths or row.batch_coupled)
        for case in CASES
        if _k_eff(row, case) in row.k_values(case["N"])
    ]


def test_every_row_claiming_unbiasedness_is_checked_on_some_bandit() -> None:
    claimed = {row.id for row in CATALOGUE if row.pg_scale is not None}
    checked = {p.values[0].id for p in _unbiased_pairs()}
    coupled = {r.id for r in CATALOGUE if r.needs_lengths or r.batch_coupled}
    assert claimed - coupled <= checked


@pytest.mark.parametrize(("row", "case"), _unbiased_pairs())
def test_claimed_unbiased_estimators_are_exactly_unbiased(row: Row, case: dict[str, Any]) -> None:
    pi, r, n, _ = _case(case)
    if row.binary_only:
        r = [Fraction(int(x > 0)) for x in r]  # the same bandit with pass/fail rewards
    k_eff = _k_eff(row, case)
    expected = bandit.expected_estimate(pi, r, n, lambda g: row.call_reference([g], k_eff, None)[0])
    grad = bandit.gradient(pi, r, k_eff)
    scale = row.pg_scale(n, k_eff)  # type: ignore[misc]
    assert expected == [scale * g for g in grad]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"N{c['N']}K{c['K']}A{len(c['pi'])}")
def test_ei_l1o_and_batch_centred_ei_have_the_exact_bias_of_the_notes(case: dict[str, Any]) -> None:
    pi, r, n, k = _case(case)
    grad = bandit.gradient(pi, r, k)
    scale = Fraction(k, n)
    l1o = bandit.expected_estimate(pi, r, n, lambda g: rm.ei_l1o(g, k))
    assert [scale * e - g for e, g in zip(l1o, grad, strict=True)] == [
        Fraction(b) for b in case["bias_ei_l1o"]
    ]

    def centred_ei(g: list[Fraction]) -> list[Fraction]:
        e = rm.ei(g, k)
        return [x - mean(e) for x in e]

    centred = bandit.expected_estimate(pi, r, n, centred_ei)
    want = [Fraction(b) for b in case["bias_ei_batch_centred"]]
    assert [scale * e - g for e, g in zip(centred, grad, strict=True)] == want


def test_group_baselines_are_biased_for_max_at_k_with_k_at_least_two() -> None:
    pi, r, n, k = _case(CASES[0])
    grad = bandit.gradient(pi, r, k)
    for row in CATALOGUE:
        if row.k_domain is None and not (row.needs_lengths or row.batch_coupled):
            if row.nonnegative:  # MaxRL: the same bandit moved to r >= 0 (∇J does not move)
                r = [x - min(r) for x in r]
            expected = bandit.expected_estimate(
                pi, r, n, lambda g, row=row: row.call_reference([g], 1, None)[0]
            )
            # not proportional to ∇J: the cross ratios differ
            assert expected[0] * grad[1] != expected[1] * grad[0], row.id


def test_grpo_std_division_biases_the_mean_reward_gradient() -> None:
    """GRPO's per-group std is a random, sample-correlated scale: E[ĝ] is not parallel to ∇J."""
    pi, r, n, _ = _case(CASES[2])
    grad = bandit.gradient(pi, r, 1)
    row = next(row for row in CATALOGUE if row.id == "grpo")
    expected = bandit.expected_estimate(pi, r, n, lambda g: row.call_reference([g], 1, None)[0])
    ratios = {float(e / g) for e, g in zip(expected, grad, strict=True)}
    assert max(ratios) - min(ratios) > 1e-3, ratios


def test_what_the_bandit_does_with_each_arm_comes_from_its_registry_entry() -> None:
    """Which arms run on pass/fail rewards, are compared with MaxRL's objective, enter the
    variance sweeps and are drawn dashed: read from each entry's family and Claims."""
    from advest.experiments import bandit

    arms = bandit.ARMS
    assert [n for n in arms if bandit.harmonic(n)] == ["maxrl", "maxrl_unbiased"]
    assert [n for n in arms if bandit.binary_only(n)] == ["chen_passk", "maxrl", "maxrl_unbiased"]
    assert [n for n in arms if bandit.scaled(n)] == [
        "ei",
        "maxpo",
        "canonical",
        "pkpo_sloo",
        "ei_l1o",
    ]
    assert [n for n in arms if bandit.normalised(n)] == [
        "chen_passk",
        "bagirov_zscore",
        "grpo",
        "gdpo",
    ]
