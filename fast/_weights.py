"""The max@K position weights in float64 from log-gamma ratios, cached per (N, K, device).

The offsets come from ``spec.maxk_weights`` (shared with the exact closed form and the proofs).
No binomial coefficient is ever formed: C(1024, 512) ≈ 4.5e306 would overflow a product with r.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from torch import Tensor

from advest.spec.maxk_weights import (
    ALPHA,
    BAGIROV_ABOVE,
    BETA,
    GAMMA,
    M_HAT,
    MU_HI,
    MU_LO,
    BinomRatio,
)


class Weights(NamedTuple):
    """Each ``[N]`` float64; ``mu_lo``/``mu_hi`` are zeros when K = N (M⁻ is undefined there)."""

    alpha: Tensor
    beta: Tensor
    gamma: Tensor
    mu_lo: Tensor
    mu_hi: Tensor
    m_hat: Tensor
    bagirov_above: Tensor


_TABLE = (ALPHA, BETA, GAMMA, MU_LO, MU_HI, M_HAT, BAGIROV_ABOVE)
WEIGHT_NAMES: dict[BinomRatio, str] = dict(zip(_TABLE, Weights._fields, strict=True))


def _log_comb(n: Tensor, k: Tensor) -> Tensor:
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)


def _ratio(w: BinomRatio, n: int, k: int) -> Tensor:
    """w_q for q = 1..N as float64."""
    return ratio_at(w, torch.arange(1, n + 1, dtype=torch.float64), n, k)


def ratio_at(w: BinomRatio, q: Tensor, n: int, k: int) -> Tensor:
    """w at the float64 positions (or counts) ``q``, any shape, as
    exp(log C(q+top, K+k) − log C(N+den_n, K+den_k)); 0 where either binomial is 0."""
    den_n, den_k = n + w.den_n, k + w.den_k
    top = q + w.top
    kk = float(k + w.k)
    if not 0 <= den_k <= den_n or kk < 0:
        return torch.zeros_like(q)
    valid = top >= kk
    safe_top = torch.where(valid, top, torch.full_like(top, kk))
    log_num = _log_comb(safe_top, torch.full_like(safe_top, kk))
    # the same torch.lgamma for numerator and denominator: equal binomials give exactly 1
    den = torch.tensor([float(den_n), float(den_k)], dtype=torch.float64)
    log_den = _log_comb(den[0], den[1])
    return torch.where(valid, torch.exp(log_num - log_den.to(q.dtype)), 0.0)


@functools.lru_cache(maxsize=512)
def _table(n: int, k: int, device: torch.device) -> Weights:
    table = [_ratio(w, n, k) for w in _TABLE]
    return Weights(*(t.to(device) for t in table))


# Opaque to torch.compile: traced, the cache would be bypassed and the weights rebuilt per call.
@torch.compiler.disable  # type: ignore[untyped-decorator]
def weights(n: int, k: int, device: torch.device) -> Weights:
    """All weights for groups of N with comparator size K, on ``device`` (cached)."""
    return _table(n, k, device)
