"""Every machine-checked claim is proved over the quick CI range, deliberately false claims come
back refuted with a counterexample, and a wrong fast formula would be caught by the proofs."""

from __future__ import annotations

import pytest

from advest.proofs import bounded, symbolic, unbiased
from advest.proofs.run import jobs, summary_rows
from advest.spec import maxk_weights


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
    # off by a constant integer factor: the ratio is 2, not 1 (an integer test would pass it)
    assert not symbolic._ratio_is_one(2 * sp.binomial(n - 1, k), sp.binomial(n - 1, k))
    assert not symbolic._ratio_is_one(sp.binomial(n - 1, k), 2 * sp.binomial(n - 1, k))


def test_ci_proves_every_bounded_claim_to_n_7_or_lists_why_not() -> None:
    """The CI range of a claim stops at N = 7, or at N = 6 when CI_EXCLUDED gives the measured
    cost of its N = 7 case (which `advest prove` still runs)."""
    for claim, _, ci_max_n in bounded.CLAIMS:
        name = claim.__name__
        assert ci_max_n == (6 if name in bounded.CI_EXCLUDED else 7), name


def test_job_list_covers_n_up_to_the_requested_bound() -> None:
    labels = [label for label, _ in jobs(max_n=7, unbiased_max_n=4)]
    assert any("N=7" in label for label in labels)
    assert any("unbiased A=3 N=4" in label for label in labels)


# --- proofs that cannot be weakened silently ---------------------------------------------------

# The K domain of each bounded claim, written here independently of bounded.CLAIMS (spec/maxk.md's
# claims table): the claims that involve M⁻ need K <= N − 1, the others hold up to K = N;
# ei_is_centred is refuted from K = 2 (EI = r at K = 1 is not centred either, but trivially).
K_UP_TO_N = {
    "bagirov_eq9_equals_pkpo_s",
    "pkpo_sloo_minus_one_is_scaled_ei",
    "fast_forms_equal_definitions",
    "definitions_are_permutation_equivariant",
    "shift_rules_hold",
    "ei_is_centred",
}


@pytest.mark.parametrize("n", range(1, 9))
def test_every_claim_is_checked_at_every_k_of_its_domain(n: int) -> None:
    """A claim whose K range silently shrinks (say range(1, n − 1)) proves fewer cases."""
    for claim, ks, _ in bounded.CLAIMS:
        name = claim.__name__
        low = 2 if name == "ei_is_centred" else 1
        top = n if name in K_UP_TO_N else n - 1
        assert list(ks(n)) == list(range(low, top + 1)), name


def _captured_premises(monkeypatch: pytest.MonkeyPatch, n: int) -> dict[str, list[object]]:
    """Every premise list any bounded claim hands to z3 at size n (claim -> premises)."""
    seen: dict[str, list[object]] = {}
    real = bounded.z3_prove

    def spy(claim: str, *args: object, **kw: object) -> object:
        premises = args[4] if len(args) > 4 else kw.get("premises")
        if premises:
            seen[claim] = list(premises)  # type: ignore[call-overload]
        return real(claim, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(bounded, "z3_prove", spy)
    for claim, ks, _ in bounded.CLAIMS:
        for k in ks(n):
            claim(n, k)
    return seen


def test_every_premise_admits_non_constant_witnesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A premise that (by a typo) admits only constant vectors would make its claim vacuous:
    each premise must admit a non-constant vector; the sorted premise one with all values
    distinct and one with a tie, the binary premise an unsorted one."""
    import z3

    n = 4
    seen = _captured_premises(monkeypatch, n)
    assert {"fast_forms_equal_definitions", "bagirov_eq9_equals_pkpo_s"} <= set(seen)
    assert "chen_raw_is_scaled_canonical" in seen
    for claim, premises in seen.items():
        names = "x" if claim != "chen_raw_is_scaled_canonical" else "r"
        v = [z3.Real(f"{names}{i}") for i in range(n)]
        extra = (
            [[z3.Distinct(*v)], [v[0] < v[1], v[1] == v[2], v[2] < v[3]]]
            if names == "x"
            else [[z3.Or([v[i] > v[i + 1] for i in range(n - 1)]), z3.Or(v[0] != v[1])]]
        )
        for more in extra:
            solver = z3.Solver()
            solver.add(*premises, *more)  # type: ignore[arg-type]
            assert solver.check() == z3.sat, (claim, more)


def test_the_sorted_premise_is_what_the_fast_forms_proof_assumes() -> None:
    """Planting the typo (a premise that admits only constant vectors) is caught above."""
    import z3

    x = [z3.Real(f"x{i}") for i in range(3)]
    typo = [x[i] == x[i + 1] for i in range(2)]
    solver = z3.Solver()
    solver.add(*typo, z3.Distinct(*x))
    assert solver.check() == z3.unsat  # the check above would fail on this premise
    solver = z3.Solver()
    solver.add(*bounded.sorted_ascending(x), z3.Distinct(*x))
    assert solver.check() == z3.sat


def test_unknown_is_never_counted_as_proved(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny resource limit forces z3 to give up: the record says unknown, the bundled claims
    and the summary table say it failed, and `advest prove` would exit non-zero."""
    from advest.proofs import records

    forced = bounded.fast_forms_equal_definitions(4, 2)  # default limit: proved
    assert forced.status == "proved" and forced.evidence.startswith("rlimit ")
    monkeypatch.setattr(records, "RLIMIT", 1)
    record = bounded.fast_forms_equal_definitions(4, 2)
    assert record.status == "unknown" and "resource" in record.evidence
    bundled = bounded.definitions_are_permutation_equivariant(3, 2)
    assert bundled.status == "unknown"
    rows = summary_rows([record, forced])
    assert rows[0][4].startswith("FAILED")


def test_every_fast_form_is_covered_by_the_algorithm_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each form of FORMS (what fast evaluates) is in the fast-forms proof, and corrupting any
    one of them makes that proof fail: deleting a form from the proof cannot go unnoticed."""
    assert set(maxk_weights.FORM_DEFINITIONS) == set(maxk_weights.FORMS)
    record = bounded.fast_forms_equal_definitions(4, 2)
    assert record.status == "proved"
    for form in maxk_weights.FORMS:
        assert form in record.statement, form
        own, below, above = maxk_weights.FORMS[form]
        broken = (own, below, (*above, (maxk_weights.ALPHA, lambda n, k: 1)))
        monkeypatch.setattr(bounded, "FORMS", {**maxk_weights.FORMS, form: broken})
        assert bounded.fast_forms_equal_definitions(4, 2).status == "refuted", form
    monkeypatch.undo()


@pytest.mark.parametrize("n", range(1, 8))
def test_the_permutation_generators_generate_the_symmetric_group(n: int) -> None:
    import math

    generators = [tuple(g) for g in bounded.permutation_generators(n)]
    assert all(sorted(g) == list(range(n)) for g in generators)
    group = {tuple(range(n))}
    frontier = list(group)
    while frontier:
        p = frontier.pop()
        for g in generators:
            q = tuple(p[g[i]] for i in range(n))
            if q not in group:
                group.add(q)
                frontier.append(q)
    assert len(group) == math.factorial(n)


def test_dropping_a_generator_is_caught() -> None:
    """With only the n-cycle, the group has order n < n!: the check above fails for n >= 3."""
    cycle = tuple(bounded.permutation_generators(4)[1])
    group, p = {tuple(range(4))}, tuple(range(4))
    for _ in range(10):
        p = tuple(p[cycle[i]] for i in range(4))
        group.add(p)
    assert len(group) == 4 < 24


def test_no_claim_is_proved_from_zero_queries() -> None:
    """N = 1 cases are proved by a real query; a claim with no query is unknown."""
    empty = bounded._all_proved("c", "", "", 1, 1, [])
    assert empty.status == "unknown"
    for claim, ks, _ in bounded.CLAIMS:
        for k in ks(1):
            record = claim(1, k)
            assert record.status == record.expected, record
            assert record.evidence.startswith("rlimit ") or "queries" in record.evidence
            if "queries" in record.evidence:
                assert int(record.evidence.split()[0]) >= 1


def test_the_symmetry_proofs_list_and_domains_are_derived_from_the_definitions() -> None:
    """proofs.bounded_symmetry proves every per-sample definition, each where it has a value;
    that domain, computed from the definition, is the registry's K range for every registered
    estimator and excludes what cannot be computed (ei_l1o at N = 1: no other sample)."""
    from advest.fast import registry
    from advest.proofs.definitions import defined, per_sample

    names = per_sample()
    assert {"ei", "maxpo", "canonical", "pkpo_sloo", "m_plus", "m_minus"} <= set(names)
    assert "m_hat" not in names
    registered = [name for name in names if name in registry.names()]
    assert len(registered) >= 7
    for name in registered:
        entry = registry.entry(name)
        for n in range(2, 6):
            ks = [k for k in range(1, n + 1) if defined(name, n, k)]
            assert ks == list(range(1, entry.k_max(n) + 1)), (name, n, ks)
    assert not defined("ei_l1o", 1, 1) and defined("ei", 1, 1)
    assert not defined("m_minus", 3, 3) and defined("m_plus", 3, 3)
