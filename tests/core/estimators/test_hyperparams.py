"""spec/hyperparams.py: a setting is read as the decimal it was written as, and clip ranges are
checked at their edges (both covariance implementations select tokens by these exact values)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from advest.spec.hyperparams import clip_range, decimal


@pytest.mark.parametrize(
    ("x", "want"),
    [(0.29, Fraction(29, 100)), (1e-6, Fraction(1, 10**6)), (3, Fraction(3)),
     (Fraction(1, 3), Fraction(1, 3)), (-2.5, Fraction(-5, 2))],
)  # fmt: skip
def test_a_setting_is_the_decimal_it_was_written_as(x: object, want: Fraction) -> None:
    assert decimal(x, "eps") == want


@pytest.mark.parametrize("x", [True, False, "0.2", None, [0.2]])
def test_a_setting_that_is_not_a_number_is_a_type_error_naming_it(x: object) -> None:
    with pytest.raises(TypeError, match="eps must be a number"):
        decimal(x, "eps")


@pytest.mark.parametrize("x", [math.nan, math.inf, -math.inf])
def test_a_non_finite_setting_is_a_value_error_naming_it(x: float) -> None:
    with pytest.raises(ValueError, match="eps must be finite"):
        decimal(x, "eps")


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [(0, 0, (Fraction(1), Fraction(1))),  # no clipping on either side
     (1, 1, (Fraction(0), Fraction(2))),  # PRIME's Clip-Cov runs: the ratio in [0, 2]
     (0.2, 0.28, (Fraction(4, 5), Fraction(32, 25))),
     (0.5, 3, (Fraction(1, 2), Fraction(4)))],
)  # fmt: skip
def test_the_clip_range_is_one_minus_low_to_one_plus_high_edges_included(
    low: object, high: object, want: tuple[Fraction, Fraction]
) -> None:
    assert clip_range(low, high) == want


@pytest.mark.parametrize(("low", "high"), [(-0.1, 0.2), (1.01, 0.2), (0.2, -0.01), (2, 0)])
def test_a_clip_range_outside_its_domain_is_refused(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="need 0 <= clip_low <= 1 and clip_high >= 0"):
        clip_range(low, high)
