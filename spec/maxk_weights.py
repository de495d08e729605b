"""The per-position weights of the O(N log N) max@K algorithm (spec/maxk.md §Algorithm).

Each weight is a ratio of binomials, a function of the 1-based sorted position q:

    w_q = C(q + top, K + k) / C(N + den_n, K + den_k)

with C(n, k) = 0 outside 0 <= k <= n. Every weight is a probability in [0, 1]. This table is the
one source for ``fast/`` (log-gamma, float64), ``reference.maxk_closed`` (exact integers) and
``proofs/`` (z3): nobody retypes the offsets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class BinomRatio:
    """C(q + top, K + k) / C(N + den_n, K + den_k) at 1-based sorted position q."""

    top: int
    k: int
    den_n: int
    den_k: int

    def exact(self, q: int, n: int, k: int) -> Fraction:
        """The weight as an exact rational; 0 where either binomial is 0 (e.g. μ at K = N)."""
        den = _comb(n + self.den_n, k + self.den_k)
        return Fraction(_comb(q + self.top, k + self.k), den) if den else Fraction(0)


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
"""C(q−1, K−1)/C(N, K): weight of r_(q) in M̂_K; also Bagirov's diagonal w_qq/C(N, K) (Eq. 9)."""
BAGIROV_ABOVE = BinomRatio(top=-2, k=-2, den_n=0, den_k=0)
"""C(q−2, K−2)/C(N, K): Bagirov's w_pq/C(N, K) for q > p (Eq. 9)."""
CHEN_FAIL_ALL = BinomRatio(top=0, k=0, den_n=0, den_k=0)
"""C(N_neg, K)/C(N, K) = 1 − R̄, evaluated at q = N_neg (Chen Eq. 14)."""
CHEN_FAIL_REST = BinomRatio(top=-1, k=-1, den_n=-1, den_k=-1)
"""C(N_neg − 1, K − 1)/C(N − 1, K − 1) at q = N_neg: an incorrect sample's extra term (Eq. 15)."""

WEIGHTS: dict[str, BinomRatio] = {
    "alpha": ALPHA,
    "beta": BETA,
    "gamma": GAMMA,
    "mu_lo": MU_LO,
    "mu_hi": MU_HI,
    "m_hat": M_HAT,
    "bagirov_above": BAGIROV_ABOVE,
    "chen_fail_all": CHEN_FAIL_ALL,
    "chen_fail_rest": CHEN_FAIL_REST,
}


def chen_raw(correct: Any, fail_all: Any, fail_rest: Any) -> Any:
    """Chen's raw pass@K advantage (Eqs. 14–15) from the two ratios above at q = N_neg:
    1 − R̄ for a correct sample, 1 − R̄ − C(N_neg−1, K−1)/C(N−1, K−1) for an incorrect one.
    ``correct`` is 1 or 0 (or a tensor of them); works for floats, tensors and z3 terms."""
    return fail_all - (1 - correct) * fail_rest


# --- linear forms -------------------------------------------------------------------------------
# Every max@K block is a linear form on the sorted rewards x:
#     out_p = own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q,
# with own, below, above each a combination Σ c(N, K)·w_q of the weights above. ``fast/`` evaluates
# them in float64 as (own − below)⊙x + cumsum((below − above)⊙x) + Σ_q above_q x_q; ``proofs/``
# evaluates the same combinations exactly and proves them equal to the subset definitions.

Coef = Callable[[int, int], Fraction]
Combo = tuple[tuple[BinomRatio, Coef], ...]
Form = tuple[Combo, Combo, Combo]  # own, below, above


def _c(value: int) -> Coef:
    return lambda n, k: Fraction(value)


def _k_over_n(n: int, k: int) -> Fraction:
    return Fraction(k, n)


def _minus_k_over_n_minus_1(n: int, k: int) -> Fraction:
    return Fraction(-k, n - 1)


def _negate(combo: Combo) -> Combo:
    return tuple((w, (lambda n, k, c=c: -c(n, k))) for w, c in combo)


def difference(a: Form, b: Form) -> Form:
    """The form a − b (coefficient lists concatenated, b's negated)."""
    own, below, above = (x + _negate(y) for x, y in zip(a, b, strict=True))
    return own, below, above


FORMS: dict[str, Form] = {
    "ei": (((ALPHA, _c(1)),), ((GAMMA, _c(-1)),), ()),  # α x − Σ_{q<p} γ x
    "b": ((), ((MU_LO, _c(1)), (GAMMA, _c(-1))), ((MU_HI, _c(1)), (BETA, _c(-1)))),  # M⁻ − C
    "delta": (((ALPHA, _c(1)),), ((MU_LO, _c(-1)),), ((BETA, _c(1)), (MU_HI, _c(-1)))),  # M⁺ − M⁻
    "m_plus": (((ALPHA, _c(1)),), (), ((BETA, _c(1)),)),  # α x + Σ_{q>p} β x
    "sloo": (  # (K/N) M⁺ − (K/(N−1)) M⁻
        ((ALPHA, _k_over_n),),
        ((MU_LO, _minus_k_over_n_minus_1),),
        ((BETA, _k_over_n), (MU_HI, _minus_k_over_n_minus_1)),
    ),
}
FORMS["ei_minus_b"] = difference(FORMS["ei"], FORMS["b"])  # maxpo = EI − b
FORMS["bagirov"] = (((M_HAT, _c(1)),), (), ((BAGIROV_ABOVE, _c(1)),))  # Bagirov Eq. 9 = (K/N) M⁺

FORM_DEFINITIONS: dict[str, tuple[str, bool]] = {
    # form: (the subset definition it computes, whether it needs K <= N−1)
    "ei": ("ei", False),
    "m_plus": ("m_plus", False),
    "b": ("l2o_baseline", True),
    "delta": ("canonical", True),
    "ei_minus_b": ("maxpo", True),
    "sloo": ("pkpo_sloo", True),
    "bagirov": ("pkpo_s", False),
}
"""Which definition each form of ``FORMS`` computes: what the z3 proof (``proofs.bounded``)
and the Coq theorems (``proofs/coq/Sorted.v``, ``Theorem <definition>_sorted``) prove."""


def form_rows(
    form: Form,
    n: int,
    k: int,
    weight: Callable[[BinomRatio], Any],
    scalar: Callable[[Fraction], Any] = lambda q: q,
) -> tuple[Any, Any, Any]:
    """(own − below, below − above, above) of ``form``, each a vector over q = 1..N, in the
    caller's number type: ``weight(ratio)`` is the vector of one table entry (float64 tensor in
    ``fast``, object array of Fractions in ``proofs``); ``scalar`` converts a coefficient."""

    def combo(c: Combo) -> Any:
        out = 0 * weight(ALPHA)
        for ratio, coef in c:
            out = out + scalar(coef(n, k)) * weight(ratio)
        return out

    own, below, above = (combo(c) for c in form)
    return own - below, below - above, above


def evaluate(diag: Any, step: Any, above: Any, x: V, cumsum: Callable[[Any], Any]) -> V:
    """The one evaluation of the linear forms, used by ``fast`` and by ``proofs``:

        out_p = (own − below)_p x_p + Σ_{q<=p} (below − above)_q x_q + Σ_q above_q x_q
              = own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q.

    x: [..., G] sorted ascending; diag, step: [S, G]; above: [G, S] -> [..., S, G].
    ``cumsum`` sums along the last axis (torch.cumsum(v, -1), numpy.cumsum(v, -1))."""
    xs: Any = x[..., None, :]  # type: ignore[index]
    out: V = diag * xs + cumsum(step * xs) + (x @ above)[..., None]
    return out
