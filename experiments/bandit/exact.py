"""The bandit's exact max@K objective and its gradient in float64 (MaxPO App. G.1), apart from
the sampling and the sweeps (``bandit.py``). ``spec.bandit`` holds the same in rationals."""

from __future__ import annotations

import torch
from torch import Tensor

F64 = torch.float64


def _sorted_cdf(pi: Tensor, r: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """order [A] (ascending rewards), gaps d_j = r_(j+1) − r_(j) [A−1], CDF F_j, j < A [A−1]."""
    order = torch.argsort(r, stable=True)
    rs = r[order]
    cdf = torch.cumsum(pi[order], dim=0)[:-1]
    return order, rs[1:] - rs[:-1], cdf


def objective(pi: Tensor, r: Tensor, k: int) -> Tensor:
    """J = r_(A) − Σ_{j<A} (r_(j+1) − r_(j)) F_j^K (MaxPO App. G.1), float64 scalar. pi, r: [A]."""
    _, gaps, cdf = _sorted_cdf(pi.to(F64), r.to(F64))
    return r.to(F64).max() - (gaps * cdf**k).sum()


def exact_gradient(logits: Tensor, r: Tensor, k: int) -> Tensor:
    """∂J/∂θ_c = −K π_c Σ_{j<A} d_j F_j^{K−1} ([rank(c) ≤ j] − F_j) (MaxPO App. G.1). [A]
    float64.

    The indicator sum is a suffix sum of w_j = d_j F_j^{K−1} over j ≥ rank(c): O(A log A).
    """
    pi = torch.softmax(logits.to(F64), dim=0)
    order, gaps, cdf = _sorted_cdf(pi, r.to(F64))
    w = gaps * cdf ** (k - 1)  # [A−1]
    suffix = torch.cat([w.flip(0).cumsum(0).flip(0), w.new_zeros(1)])  # [A]: Σ_{j ≥ position}
    grad_sorted = -k * pi[order] * (suffix - (w * cdf).sum())
    return torch.empty_like(grad_sorted).index_copy_(0, order, grad_sorted)
