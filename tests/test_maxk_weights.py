"""spec/maxk_weights.py's table of forms says, for each form, whether its definition needs
K <= N − 1; the proofs skip a flagged form at K = N. The flag must be exactly the definition's
own domain: a form flagged without need would go unproved at K = N, and one not flagged where
its definition is undefined would be "proved" against nothing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from advest.reference import maxk
from advest.spec.maxk_weights import FORM_DEFINITIONS


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
