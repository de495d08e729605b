"""The MaxPO paper's dense O(G²) forms of EI and the L2O baseline (MaxPO Thms E.1 and E.2).

A second fast implementation, kept to cross-check ``fast.maxk`` and to measure it against in
``advest bench``; not registered. Valid for K >= 2 only (at K = 1 every weight is
C(·, −1) = 0 and the forms return 0 instead of r). On the sorted rewards,
D_pℓ = max(r_(p) − r_(ℓ), 0):

    EI_sorted = D w,  w_ℓ = C(ℓ−1, K−2)/C(G−1, K−1)                                   (Thm E.1)
    c_ℓ = Σ_p D_pℓ;  M̄_pℓ = (c_ℓ − D_pℓ)/(G−1);
    W_pℓ = C(ℓ−1−[ℓ>p], K−2)/C(G−2, K−1) (ℓ ≠ p), W_pp = 0;  b_sorted[p] = Σ_ℓ W_pℓ M̄_pℓ  (Thm E.2)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import check_k, check_rewards


def _binom_ratio(top: Tensor, k: int, log_den: float) -> Tensor:
    valid = (top >= k) & (k >= 0)
    safe = torch.where(valid, top, float(max(k, 0)))
    log_num = torch.lgamma(safe + 1) - math.lgamma(max(k, 0) + 1) - torch.lgamma(safe - k + 1)
    return torch.where(valid, torch.exp(log_num - log_den), 0.0)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _sorted_gaps(rewards: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    rs, perm = torch.sort(rewards.to(torch.float64), dim=-1, stable=True)  # [B, G]
    gaps = (rs.unsqueeze(-1) - rs.unsqueeze(-2)).clamp_min(0)  # [B, G(p), G(ℓ)]
    return rs, perm, gaps


def _unsort(values: Tensor, perm: Tensor, like: Tensor) -> Tensor:
    return torch.empty_like(values).scatter_(-1, perm, values).to(like.dtype)


def ei_dense(rewards: Tensor, k: int) -> Tensor:
    """EI by Thm E.1. rewards: [B, G] -> [B, G]; 2 <= K <= G."""
    check_rewards(rewards)
    G = rewards.shape[1]
    if k == 1:
        raise ValueError(f"ei_dense needs K >= 2 (Thm E.1 returns 0 at K = 1); got K={k}, N={G}")
    check_k(k, G, "ei_dense", k_max=G)
    _, perm, gaps = _sorted_gaps(rewards)
    ell = torch.arange(1, G + 1, dtype=torch.float64, device=rewards.device)
    w = _binom_ratio(ell - 1, k - 2, _log_comb(G - 1, k - 1))  # [G]
    return _unsort(gaps @ w, perm, rewards)


def l2o_dense(rewards: Tensor, k: int) -> Tensor:
    """L2O baseline by Thm E.2. rewards: [B, G] -> [B, G]; 2 <= K <= G−1."""
    check_rewards(rewards)
    G = rewards.shape[1]
    if k == 1:
        raise ValueError(f"l2o_dense needs K >= 2; got K={k}, N={G}")
    check_k(k, G, "l2o_dense", k_max=G - 1)
    _, perm, gaps = _sorted_gaps(rewards)
    col = gaps.sum(dim=-2, keepdim=True)  # [B, 1, G]: c_ℓ
    m_bar = (col - gaps) / (G - 1)  # [B, G, G]
    idx = torch.arange(1, G + 1, dtype=torch.float64, device=rewards.device)
    p, ell = idx.unsqueeze(-1), idx.unsqueeze(-2)  # [G, 1], [1, G]
    W = _binom_ratio(ell - 1 - (ell > p).double(), k - 2, _log_comb(G - 2, k - 1))  # [G, G]
    W = W * (p != ell)
    return _unsort((W * m_bar).sum(-1), perm, rewards)
