"""spec/maxk_weights.py's table of forms says, for each form, whether its definition needs
K <= N − 1; the proofs skip a flagged form at K = N. The flag must be exactly the definition's
own domain: a form flagged without need would go unproved at K = N, and one not flagged where
its definition is undefined would be "proved" against nothing."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest

from advest.reference import maxk
from advest.spec.maxk_weights import FORM_DEFINITIONS, MU_HI, MU_LO


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_form_is_restricted_to_k_below_n_exactly_when_its_definition_is(n: int) -> None:
    rewards = [Fraction(q * q) for q in range(n)]
    for form, (definition, needs_k_below_n) in FORM_DEFINITIONS.items():
        estimator = getattr(maxk, definition)
        estimator(rewards, n - 1)  # every definition holds below N
        try:
            estimator(rewards, n)
        except ValueError as error:
            assert needs_k_below_n, (form, str(error))
            assert "K <= N-1" in str(error)
        else:
            assert not needs_k_below_n, form


def test_a_weight_whose_denominator_binomial_is_zero_is_zero() -> None:
    """μ's weights divide by C(N − 1, K), which is 0 at K = N: the weight is 0 there (every
    position), and otherwise the exact ratio of the two binomials."""
    for weight in (MU_LO, MU_HI):
        for n in range(1, 7):
            assert [weight.exact(q, n, n) for q in range(1, n + 1)] == [Fraction(0)] * n
            for k in range(1, n):
                for q in range(1, n + 1):
                    top = q + weight.top, k + weight.k
                    want = Fraction(comb(*top) if min(top) >= 0 else 0, comb(n - 1, k))
                    assert weight.exact(q, n, k) == want
