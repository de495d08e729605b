"""Tolerances of ``fast/`` against the exact reference, one justified entry per (estimator, dtype).

An error bound is ``tol * scale`` with scale = max(max|r|, max|exact output|) over the batch:
the fast path subtracts the group minimum and works in float64, so its error is a few ulps of the
spread (non-normalised estimators) or of the output (z-scores, GRPO). float32/bfloat16/float16
entries are dominated by the final cast of the output.
"""

from __future__ import annotations

import torch

DEFAULT: dict[torch.dtype, float] = {
    # float64: weights from lgamma carry ~|lgamma|·ε ≈ 7e-13 relative error at G = 1024, and
    # prefix sums add ~G·ε; 1e-9 leaves three orders of margin (the fast path's contract).
    torch.float64: 1e-9,
    # float32: the output is rounded once to float32 (6e-8 relative); 1e-4 is the contract.
    torch.float32: 1e-4,
    torch.bfloat16: 1e-2,
    torch.float16: 2e-3,
}

OVERRIDES: dict[tuple[str, torch.dtype], float] = {}
"""Per-estimator exceptions; empty: every estimator meets the default."""


def tolerance(name: str, dtype: torch.dtype) -> float:
    return OVERRIDES.get((name, dtype), DEFAULT[dtype])


def output_floor(dtype: torch.dtype) -> float:
    """The smallest subnormal of ``dtype``: an exact output below it can only round to 0 or to it,
    so every bound carries it as an absolute floor."""
    info = torch.finfo(dtype)
    return float(info.smallest_normal * info.eps)
