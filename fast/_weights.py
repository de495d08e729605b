"""The max@K position weights in float64 from log-gamma ratios, cached per (N, K, device).

The offsets come from ``spec.maxk_weights`` (shared with the exact closed form and the proofs).
No binomial coefficient is ever formed: C(1024, 512) ≈ 4.5e306 would overflow a product with r.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import Tensor

from advest.spec.maxk_weights import ALPHA, BETA, GAMMA, M_HAT, MU_HI, MU_LO, BinomRatio


class Weights(NamedTuple):
    """Each ``[N]`` float64; ``mu_lo``/``mu_hi`` are zeros when K = N (M⁻ is undefined there)."""

    alpha: Tensor
    beta: Tensor
    gamma: Tensor
    mu_lo: Tensor
    mu_hi: Tensor
    m_hat: Tensor


def _log_comb(n: float, k: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _ratio(w: BinomRatio, n: int, k: int) -> Tensor:
    """w_q for q = 1..N as float64, exp(log C(q+top, K+k) − log C(N+den_n, K+den_k))."""
    den_n, den_k = n + w.den_n, k + w.den_k
    top = torch.arange(1, n + 1, dtype=torch.float64) + w.top
    kk = float(k + w.k)
    if not 0 <= den_k <= den_n or kk < 0:
        return torch.zeros(n, dtype=torch.float64)
    valid = top >= kk
    safe_top = torch.where(valid, top, torch.full_like(top, kk))
    log_num = torch.lgamma(safe_top + 1) - math.lgamma(kk + 1) - torch.lgamma(safe_top - kk + 1)
    return torch.where(valid, torch.exp(log_num - _log_comb(den_n, den_k)), 0.0)


@functools.lru_cache(maxsize=512)
def _table(n: int, k: int, device: torch.device) -> Weights:
    table = [_ratio(w, n, k) for w in (ALPHA, BETA, GAMMA, MU_LO, MU_HI, M_HAT)]
    return Weights(*(t.to(device) for t in table))


# Opaque to torch.compile: traced, the cache would be bypassed and the weights rebuilt per call.
@torch.compiler.disable  # type: ignore[untyped-decorator]
def weights(n: int, k: int, device: torch.device) -> Weights:
    """All weights for groups of N with comparator size K, on ``device`` (cached)."""
    return _table(n, k, device)
