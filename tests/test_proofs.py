"""Every machine-checked claim is proved over the quick CI range, deliberately false claims come
back refuted with a counterexample, and a wrong fast formula would be caught by the proofs."""

from __future__ import annotations

import pytest

from advest.proofs import bounded, symbolic, unbiased
from advest.proofs.run import jobs, run, summary_rows
from advest.spec import maxk_weights

CI_MAX_N = 6  # z3 range in CI; `advest prove` goes to N = 7 (see the issue note for timings)


def test_every_claim_has_its_expected_status_over_the_ci_range() -> None:
    records = run(max_n=CI_MAX_N, unbiased_max_n=4, progress=False)
    wrong = [(r.claim, r.parameters, r.status) for r in records if r.status != r.expected]
    assert not wrong
    assert sum(r.status == "proved" for r in records) > 200
    rows = summary_rows(records)
    assert all(row[1].startswith("maxk.md") for row in rows)  # each claim names its spec section


@pytest.mark.parametrize("n", [3, 4])
def test_false_claim_ei_is_centred_is_refuted_with_a_real_counterexample(n: int) -> None:
    record = bounded.ei_is_centred(n, 2)
    assert record.status == "refuted" and record.counterexample
    values = {name: float(eval(v)) for name, v in record.counterexample.items()}  # z3 rationals
    import advest.reference.maxk as reference_maxk

    r = [values.get(f"r{i}", 0.0) for i in range(n)]
    assert sum(reference_maxk.ei(r, 2)) != 0  # the counterexample really breaks the claim


def test_ei_l1o_bias_is_exhibited_exactly_as_in_the_notes() -> None:
    """At the notes' first bandit (π = (1/2, 1/3, 1/6), r = (1, −1/2, 2), N = 4, K = 2) the bias
    polynomial evaluates to (11/108, −25/162, 17/324), listed here in reward order."""
    import sympy as sp

    record = unbiased.unbiased("ei_l1o", 3, 4, 2)
    assert record.status == "refuted"
    diff, pi, r = unbiased.bias("ei_l1o", 3, 4, 2)
    # actions sorted by reward: (a2, a1, a3)
    point = {pi[0]: sp.Rational(1, 3), pi[1]: sp.Rational(1, 2)}
    point |= {r[0]: sp.Rational(-1, 2), r[1]: 1, r[2]: 2}
    assert [d.subs(point) for d in diff] == [
        sp.Rational(-25, 162),
        sp.Rational(11, 108),
        sp.Rational(17, 324),
    ]


def test_a_wrong_fast_weight_is_refuted_by_the_algorithm_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proof evaluates the same FORMS that fast uses: corrupting one makes it fail."""
    wrong = dict(maxk_weights.FORMS)
    own, below, above = wrong["ei"]
    wrong["ei"] = (own, ((maxk_weights.ALPHA, below[0][1]),), above)  # α in place of γ
    monkeypatch.setattr(bounded, "FORMS", wrong)
    record = bounded.fast_forms_equal_definitions(4, 2)
    assert record.status == "refuted" and record.counterexample


def test_symbolic_identities_are_proved_and_a_false_one_is_not() -> None:
    assert all(claim().status == "proved" for claim in symbolic.CLAIMS)
    import sympy as sp

    n, k = symbolic.N, symbolic.K
    assert not symbolic._ratio_is_one(k * sp.binomial(n - 1, k), n * sp.binomial(n - 2, k - 1))


def test_job_list_covers_n_up_to_the_requested_bound() -> None:
    labels = [label for label, _ in jobs(max_n=7, unbiased_max_n=4)]
    assert any("N=7" in label for label in labels)
    assert any("unbiased A=3 N=4" in label for label in labels)
