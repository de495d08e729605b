"""The per-position weights of the O(N log N) max@K algorithm (spec/maxk.md §Algorithm).

Each weight is a ratio of binomials, a function of the 1-based sorted position q:

    w_q = C(q + top, K + k) / C(N + den_n, K + den_k)

with C(n, k) = 0 outside 0 <= k <= n. Every weight is a probability in [0, 1]. This table is the
one source for ``fast/`` (log-gamma, float64), ``reference.maxk_closed`` (exact integers) and
``proofs/`` (z3): nobody retypes the offsets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class BinomRatio:
    """C(q + top, K + k) / C(N + den_n, K + den_k) at 1-based sorted position q."""

    top: int
    k: int
    den_n: int
    den_k: int

    def exact(self, q: int, n: int, k: int) -> Fraction:
        """The weight as an exact rational; 0 where the numerator's binomial is 0."""
        return Fraction(_comb(q + self.top, k + self.k), _comb(n + self.den_n, k + self.den_k))


def _comb(n: int, k: int) -> int:
    return math.comb(n, k) if 0 <= k <= n else 0


ALPHA = BinomRatio(top=-1, k=-1, den_n=-1, den_k=-1)
"""α_q = C(q−1, K−1)/C(N−1, K−1): the target at q is the max of its K-group."""
BETA = BinomRatio(top=-2, k=-2, den_n=-1, den_k=-1)
"""β_q = C(q−2, K−2)/C(N−1, K−1): the comparator max sits at q, above the target."""
GAMMA = BinomRatio(top=-1, k=-2, den_n=-1, den_k=-1)
"""γ_q = C(q−1, K−2)/C(N−1, K−1): the comparator max sits at q, below the target."""
MU_LO = BinomRatio(top=-1, k=-1, den_n=-1, den_k=0)
"""μlo_q = C(q−1, K−1)/C(N−1, K): leave-one-out K-max at q, below the removed sample."""
MU_HI = BinomRatio(top=-2, k=-1, den_n=-1, den_k=0)
"""μhi_q = C(q−2, K−1)/C(N−1, K): leave-one-out K-max at q, above the removed sample."""
M_HAT = BinomRatio(top=-1, k=-1, den_n=0, den_k=0)
"""C(q−1, K−1)/C(N, K): weight of r_(q) in M̂_K."""

WEIGHTS: dict[str, BinomRatio] = {
    "alpha": ALPHA,
    "beta": BETA,
    "gamma": GAMMA,
    "mu_lo": MU_LO,
    "mu_hi": MU_HI,
    "m_hat": M_HAT,
}
