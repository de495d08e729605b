"""Tolerances of ``fast/`` against the exact reference: one justified entry per (estimator,
dtype), declared in the estimator's registry entry (``tolerance=pair(rule, why)``); this module
defines the rule and the reasons the entries share.

An error bound is ``rel * scale + output_floor(dtype)``. The scale is never max|r|: on the
suite's large-offset inputs (1e6 + j·1e-7 in float64, 1e3 + j·2⁻¹² in float32) max|r| is 10⁶–10¹³
times the group's spread, so a bound proportional to it lets an all-zeros estimator pass, and one
that loses every digit of the spread to the offset (a missing group shift) pass as well
(``tests/core/estimators/test_tolerances.py`` plants both). The scale is one of:

* ``"group"``: per group b, max(spread_b, max_i |exact A_bi|) with spread_b = max r_b − min r_b.
  For estimators whose fast path subtracts the group's max (or min) first (exact by Sterbenz) and
  then forms linear combinations with weights that are probabilities: the rounding is a few ulps
  of G·spread; a shift added back at the end (EI at K = 1, PKPO s) is rounded once, an ulp of |A|;
  a z-score (GRPO, Chen, Bagirov) is accurate to a few ulps of |A|.
* ``"batch"``: one scale for the batch, max(spread of all B·G rewards, max |exact A|). For the
  shrinkage peers, which work in units of the batch spread m (fast.group._batch_units): every
  group's error is a few ulps of m, however small its own spread.
* ``"output"``: max |exact output| over the scope (token-level estimators: weights, advantages and
  values are compared with the estimator's own output scale; their inputs are not rewards alone).

float64 error budgets are ~G·ε ≈ 2e-13 at G = 1024 (lgamma weights: ~|lgamma|·ε ≈ 7e-13), so
``rel = 1e-9`` leaves three orders of margin; float32 outputs are computed in float64 and rounded
once (6e-8 relative), so ``rel = 1e-4`` (the issue-#2 contract) leaves three orders as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

ScaleRule = Literal["group", "batch", "output"]


@dataclass(frozen=True)
class Tolerance:
    """One entry of the table: allowed |fast − exact| = rel · scale (plus the subnormal floor)."""

    rel: float
    scale: ScaleRule
    why: str
    offset_rel: float = 0.0
    """An extra absolute allowance, offset_rel · max|r|, for the one estimator whose fast state
    cannot remove the offset (KAE's history sums); 0 everywhere else."""


SHIFTED = (
    "sorts once and subtracts the group max (exact, Sterbenz); float64 linear forms with "
    "probability weights (lgamma) err by a few ulps of G·spread"
)
SHIFT_BACK = SHIFTED + "; the shift added back at the end is rounded once, an ulp of |A|"
ZSCORE = "Δ (group-max shift) divided by ‖Δ‖/√(G−ddof) after scaling by max|Δ|: a few ulps of |A|"
CENTRED = "subtracts the group min first (exact), then the mean in float64: a few ulps of spread"
F32_WHY = "computed in float64 from the float32 input and rounded once at the end (6e-8 of |A|)"

F64, F32 = torch.float64, torch.float32


Tolerances = dict[torch.dtype, Tolerance]
"""An estimator's tolerance class: one entry per dtype, declared in its registry entry."""


def pair(rule: ScaleRule, why64: str, why32: str = F32_WHY, offset_rel: float = 0.0) -> Tolerances:
    """The float64 (rel 1e-9) and float32 (rel 1e-4) entries of one estimator, scaled by
    ``rule``, each with the reason its error stays inside."""
    return {
        F64: Tolerance(1e-9, rule, why64, offset_rel),
        F32: Tolerance(1e-4, rule, why32, offset_rel),
    }


def output_floor(dtype: torch.dtype) -> float:
    """The smallest subnormal of ``dtype``: an exact output below it can only round to 0 or to it,
    so every bound carries it as an absolute floor."""
    info = torch.finfo(dtype)
    return float(info.smallest_normal * info.eps)
