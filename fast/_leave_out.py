"""Leave-one-prompt-out sums for the shrinkage baselines (``fast.group.james_stein``): O(B) over
``[B]`` per-prompt statistics, by prefix and suffix sums, never a total minus self.
"""

from __future__ import annotations

import torch
from torch import Tensor


def exclusive_sum(values: Tensor) -> Tensor:
    """``[B]`` → ``[B]``: Σ over the other entries as prefix + suffix sums, O(B), with no total
    minus self (that cancels catastrophically when one entry dominates)."""
    zero = values.new_zeros(1)
    prefix = torch.cat([zero, values.cumsum(0)[:-1]])
    suffix = torch.cat([values.flip(0).cumsum(0).flip(0)[1:], zero])
    return prefix + suffix


def mean_of_others(values: Tensor) -> Tensor:
    """``[B]`` → ``[B]``: the mean over the other B − 1 entries."""
    return exclusive_sum(values) / (values.shape[0] - 1)


def spread_of_others(mu: Tensor, mu_bar: Tensor) -> Tensor:
    """``[B]``: Σ_{q≠p} (μ_q − μ̄_{−p})². O(B) by Σ d² − (B−1)·d̄² on d = μ − mean(μ); the few
    rows where that subtraction loses more than 3 digits (a prompt far from all the others,
    which agree: only the batch's extremes can be) are summed directly, O(B) each. The bound
    was 6 digits, which left 1e-10 relative in float64: beyond the oracle's rounding allowance
    for a prompt at 2^20 beside three near 0 (the search found it through the permutation
    property; tests/core/estimators/test_peers.py)."""
    B = mu.shape[0]
    d = mu - mu.mean()
    sq = exclusive_sum(d * d)  # sums of non-negative terms: accurate
    out = (sq - (B - 1) * mean_of_others(d) ** 2).clamp(min=0)
    redo = ((out <= 1e-3 * sq) & (sq > 0)).nonzero().flatten()
    if redo.numel():
        keep = torch.ones(redo.numel(), B, dtype=mu.dtype, device=mu.device)
        keep[torch.arange(redo.numel(), device=mu.device), redo] = 0
        direct = (keep * (mu.unsqueeze(0) - mu_bar[redo].unsqueeze(1)) ** 2).sum(dim=1)
        out = out.index_put((redo,), direct)
    return out
