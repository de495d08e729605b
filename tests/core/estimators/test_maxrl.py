"""MaxRL's claims (spec/maxrl.md), by exact enumeration on softmax bandits and exhaustively on
small binary groups: what each form is unbiased for, the trainers' form's bias, the relation to
the max@K family, and where the claims stop (continuous rewards)."""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import advest.reference.maxk as rm
import advest.reference.maxrl as ref
from advest.fast import maxrl as fst
from advest.spec import bandit

Q = Fraction
# Binary softmax bandits (π rational, r ∈ {0, 1} per action): p = Σ π_a r_a from 1/5 to 3/4.
BINARY = [
    ([Q(1, 3), Q(2, 3)], [Q(1), Q(0)]),
    ([Q(1, 5), Q(2, 5), Q(2, 5)], [Q(0), Q(1), Q(1)]),
    ([Q(1, 2), Q(1, 4), Q(1, 4)], [Q(0), Q(1), Q(0)]),
    ([Q(1, 7), Q(2, 7), Q(4, 7)], [Q(1), Q(0), Q(0)]),
]
NS = [1, 2, 3, 4, 5, 6]


def _pass_rate(pi: list[Fraction], r: list[Fraction]) -> Fraction:
    return sum((p * x for p, x in zip(pi, r, strict=True)), Q(0))


def _weighted(weights: list[Fraction], grads: list[list[Fraction]]) -> list[Fraction]:
    """Σ_k w_k·grads[k], component-wise."""
    pairs = list(zip(weights, grads, strict=True))
    return [sum((w * g[c] for w, g in pairs), Q(0)) for c in range(len(grads[0]))]


def _harmonic_gradient(pi: list[Fraction], r: list[Fraction], n: int, top: int) -> list[Fraction]:
    """N·Σ_{k=1}^{top} (1/k)·∇max@k (∇pass@k for binary r), exactly."""
    if top == 0:
        return [Q(0)] * len(pi)
    grads = [bandit.gradient(pi, r, k) for k in range(1, top + 1)]
    return _weighted([Q(n, k) for k in range(1, top + 1)], grads)


@pytest.mark.parametrize(("pi", "r"), BINARY, ids=lambda x: str([str(v) for v in x]))
@pytest.mark.parametrize("n", NS)
def test_unbiased_form_is_unbiased_for_the_harmonic_sum_of_pass_at_k_gradients(
    pi: list[Fraction], r: list[Fraction], n: int
) -> None:
    """E[Σ A_i ∇log π(a_i)] = N·Σ_{k=1}^{N} (1/k)·∇pass@k = N·(1 − (1 − p)^N)/p·∇p, with and
    without the leave-one-out baseline."""
    want = _harmonic_gradient(pi, r, n, n)
    p, grad_p = _pass_rate(pi, r), bandit.gradient(pi, r, 1)
    assert want == [n * (1 - (1 - p) ** n) / p * g for g in grad_p]
    for baseline in (True, False):
        got = bandit.expected_estimate(
            pi, r, n, lambda g, b=baseline: ref.maxrl_unbiased(g, baseline=b)
        )
        assert got == want, baseline


@pytest.mark.parametrize(("pi", "r"), BINARY, ids=lambda x: str([str(v) for v in x]))
@pytest.mark.parametrize("n", NS)
def test_p_normalised_form_drops_the_last_term_of_the_harmonic_sum(
    pi: list[Fraction], r: list[Fraction], n: int
) -> None:
    """E[ĝ] = N·[(1 − (1 − p)^N)/p − (1 − p)^{N−1}]·∇p (the issue's expression, confirmed)
    = N·(1 − (1 − p)^{N−1})/p·∇p = N·Σ_{k=1}^{N−1} (1/k)·∇pass@k: the unbiased target minus
    ∇pass@N = N(1 − p)^{N−1}·∇p, the all-fail groups' share."""
    got = bandit.expected_estimate(pi, r, n, ref.maxrl)
    p, grad_p = _pass_rate(pi, r), bandit.gradient(pi, r, 1)
    issue = [n * ((1 - (1 - p) ** n) / p - (1 - p) ** (n - 1)) * g for g in grad_p]
    assert got == issue
    assert got == [n * (1 - (1 - p) ** (n - 1)) / p * g for g in grad_p]
    assert got == _harmonic_gradient(pi, r, n, n - 1)
    bias = [a - b for a, b in zip(got, _harmonic_gradient(pi, r, n, n), strict=True)]
    assert bias == [-g for g in bandit.gradient(pi, r, n)]
    assert bias == [-n * (1 - p) ** (n - 1) * g for g in grad_p]
    assert any(b != 0 for b in bias)  # the bias is real on every bandit here (0 < p < 1)


def _binary_groups(n: int) -> list[list[Fraction]]:
    return [[Q(x) for x in bits] for bits in product((0, 1), repeat=n)]


@pytest.mark.parametrize("n", range(2, 9))
def test_maxrl_is_the_sum_of_canonical_max_at_k_estimators_on_binary_groups(n: int) -> None:
    """Pointwise, every {0,1}^N: maxrl = Σ_{k=1}^{N−1} canonical(r, k); maxrl_unbiased adds
    tang_passk (the K = N term); maxrl_unbiased without baseline = Σ_{k=1}^{N} (N/k)·
    pkpo_sloo_minus_one(r, k). canonical is unbiased for (N/k)·∇max@k, tang_passk and
    pkpo_sloo_minus_one for ∇max@k (tests/core/experiments/test_bandit.py): the expectations above
    follow."""
    for r in _binary_groups(n):
        canonical_sum = [
            sum(col, Q(0)) for col in zip(*(rm.canonical(r, k) for k in range(1, n)), strict=True)
        ]
        assert ref.maxrl(r) == canonical_sum, r
        tang = rm.tang_passk(r)
        assert ref.maxrl_unbiased(r) == [a + b for a, b in zip(canonical_sum, tang, strict=True)]
        loo = [rm.pkpo_sloo_minus_one(r, k) for k in range(1, n + 1)]
        raw = [sum((Q(n, k) * loo[k - 1][i] for k in range(1, n + 1)), Q(0)) for i in range(n)]
        assert ref.maxrl_unbiased(r, baseline=False) == raw, r


def test_the_forms_differ_only_where_the_spec_says() -> None:
    """unbiased − p-normalised = 1 on a group's one success, 0 elsewhere; without baseline the
    difference is 1 wherever some reward is positive."""
    for n in range(1, 8):
        for r in _binary_groups(n):
            a, u, raw = ref.maxrl(r), ref.maxrl_unbiased(r), ref.maxrl_unbiased(r, baseline=False)
            lone = [int(x > 0 and sum(r) == x) for x in r]
            assert [y - x for x, y in zip(a, u, strict=True)] == lone
            assert [y - x for x, y in zip(a, raw, strict=True)] == [int(sum(r) > 0)] * n


# --- continuous rewards: the claims stop -------------------------------------------------------

CONTINUOUS = ([Q(1, 3), Q(1, 3), Q(1, 3)], [Q(0), Q(1, 2), Q(1)])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_claims_do_not_extend_to_three_reward_levels(n: int) -> None:
    """r ∈ {0, 1/2, 1}: neither form's expectation is N·Σ (1/k)·∇max@k (over its range of k),
    nor a multiple of it, and the pointwise max@K identity fails; the max@K sum itself (Σ
    canonical + tang_passk) stays unbiased for N·Σ_{k=1}^{N} (1/k)·∇max@k, for any rewards."""
    pi, r = CONTINUOUS
    for fn, top in ((ref.maxrl_unbiased, n), (ref.maxrl, n - 1)):
        got = bandit.expected_estimate(pi, r, n, fn)
        want = _harmonic_gradient(pi, r, n, top)
        assert got[0] * want[1] != got[1] * want[0], fn.__name__  # not parallel: not c·want

    def maxk_sum(g: list[Fraction]) -> list[Fraction]:
        terms = [rm.canonical(g, k) for k in range(1, len(g))] + [rm.tang_passk(g)]
        return [sum(col, Q(0)) for col in zip(*terms, strict=True)]

    assert bandit.expected_estimate(pi, r, n, maxk_sum) == _harmonic_gradient(pi, r, n, n)
    assert ref.maxrl([Q(0), Q(1, 2), Q(1)]) != maxk_sum([Q(0), Q(1, 2), Q(1)])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_scaled_pass_fail_reward_targets_pass_at_k_of_the_positive_outcome(n: int) -> None:
    """r ∈ {0, c}: both forms are scale invariant, so they target Σ (1/k)·∇pass@k of r > 0,
    which is Σ (1/k)·∇max@k / c: the claims hold for two reward levels when one of them is 0."""
    pi, r = BINARY[1]
    scaled = [Q(5, 2) * x for x in r]
    for fn, top in ((ref.maxrl_unbiased, n), (ref.maxrl, n - 1)):
        assert bandit.expected_estimate(pi, scaled, n, fn) == _harmonic_gradient(pi, r, n, top)


# --- fast against the exact claims, and the conventions ----------------------------------------


def test_fast_forms_on_every_binary_group_match_the_reference_to_a_few_ulps() -> None:
    for n in range(1, 9):
        groups = _binary_groups(n)
        rewards = torch.tensor([[float(x) for x in g] for g in groups], dtype=torch.float64)
        for fast_fn, ref_fn in (
            (fst.maxrl, ref.maxrl),
            (fst.maxrl_unbiased, ref.maxrl_unbiased),
        ):
            got = fast_fn(rewards).flatten().tolist()
            want = [float(x) for g in groups for x in ref_fn(g)]
            assert got == pytest.approx(want, rel=1e-15, abs=0)  # a few ulps; zeros exact


def test_degenerate_groups_give_exact_zeros_and_a_singleton_follows_the_formula() -> None:
    flat = torch.tensor([[0.0, 0.0, 0.0], [0.3, 0.3, 0.3], [1e30, 1e30, 1e30]])
    for fn in (fst.maxrl, fst.maxrl_unbiased):
        assert fn(flat).tolist() == [[0.0] * 3] * 3
    one = torch.tensor([[0.0], [0.25]])
    assert fst.maxrl(one).tolist() == [[0.0], [0.0]]
    assert fst.maxrl_unbiased(one).tolist() == [[0.0], [1.0]]  # N·r/S with N = 1
    assert ref.maxrl_unbiased([Q(1, 4)]) == [Q(1)]
    with pytest.raises(TypeError, match="baseline True or False"):
        fst.maxrl_unbiased(one, baseline=1)  # type: ignore[arg-type]


# --- SkyRL's convention ---------------------------------------------------------------------------

_HOSTILE = [0.0, 1.0, 0.5, 3.7, 1e-300, 1e6, 1e6 + 1e-3, 1e6 + 2e-3, 1e30]


@settings(deadline=None, max_examples=200)
@given(
    st.integers(1, 16).flatmap(
        lambda g: st.lists(
            st.lists(
                st.one_of(st.sampled_from(_HOSTILE), st.floats(0, 1e6, allow_subnormal=False)),
                min_size=g,
                max_size=g,
            ),
            min_size=1,
            max_size=4,
        )
    )
)
def test_skyrl_convention_fast_matches_the_exact_reference(groups: list[list[float]]) -> None:
    """(r − r̄)/(r̄ + 1e-6), and r for a group of one: fast (float64) against the exact
    reference, each group within 1e-12 of its own largest |A| (an all-zero output fails)."""
    got = fst.maxrl(torch.tensor(groups, dtype=torch.float64), convention="skyrl-0.4.0")
    for g, row in zip(groups, got.tolist(), strict=True):
        want = ref.maxrl(g, convention="skyrl-0.4.0")
        scale = max(abs(float(a)) for a in want)
        for a, b in zip(row, want, strict=True):
            assert abs(Q(a) - b) <= Q(1e-12) * Q(scale), (g, row, [float(x) for x in want])


def test_skyrl_convention_differs_from_advests_by_its_eps_and_its_singletons() -> None:
    r = [Q(0), Q(1), Q(1), Q(0)]
    eps = Q(1e-6)
    assert ref.maxrl(r, convention="skyrl-0.4.0") == [(x - Q(1, 2)) / (Q(1, 2) + eps) for x in r]
    assert ref.maxrl(r) == [Q(-1), Q(1), Q(1), Q(-1)]
    assert ref.maxrl([Q(3)], convention="skyrl-0.4.0") == [Q(3)] and ref.maxrl([Q(3)]) == [Q(0)]
    for fn in (ref.maxrl, fst.maxrl):
        with pytest.raises(ValueError, match="maxrl needs convention in"):
            fn(torch.tensor([[1.0, 0.0]]) if fn is fst.maxrl else [1, 0], convention="trl")  # type: ignore[arg-type]
