"""KTAE: key-token advantage estimation, literally, for one group.

Source: Sun, Yang, Jian, Du, Cui, Ren, Zhang, *KTAE: A Model-Free Algorithm to Key-Tokens Advantage
Estimation in Mathematical Reasoning*, arXiv:2505.16826; conventions pinned in spec/ktae.md. Per
token id v of the group: a presence table over correct (R > 0) and incorrect rollouts, Fisher
strength from the exact two-sided hypergeometric p-value, information gain, a signed direction,
and κ_v = top·tanh(s_v/2), added to the GRPO advantage of every valid token with id v.

The p-value is an exact rational (integer binomials, ``Fraction``); exp, log, arcsin and tanh are
the math module's float64.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from fractions import Fraction

from ._exact import Number, comb, public, to_fractions
from .group import grpo

TIE = Fraction(1, 10**7)  # relative tie tolerance (R's fisher.test convention)
K1, BM25_B, TF_EPS = 2.0, 0.5, 1e-5


def fisher_p(a: int, b: int, c: int, d: int) -> Fraction:
    """Two-sided Fisher exact p-value of the table [[a, b], [c, d]]: the total probability of the
    tables with the same margins that are no more likely than the observed one (ties within 1e-7
    relative count as equal); exactly 1 when every table is included."""
    n, r1, c1 = a + b + c + d, a + b, a + c

    def prob(k: int) -> Fraction:
        return Fraction(comb(c1, k) * comb(n - c1, r1 - k), comb(n, r1))

    support = range(max(0, r1 + c1 - n), min(r1, c1) + 1)
    observed = prob(a)
    included = [k for k in support if prob(k) <= observed * (1 + TIE)]
    if len(included) == len(support):
        return Fraction(1)
    return sum((prob(k) for k in included), Fraction(0))


def _h2(q: float) -> float:
    return -sum(x * math.log2(x) for x in (q, 1 - q) if x > 0)


def key_token_values(
    token_ids: Sequence[Sequence[int]],
    rewards: Sequence[Number],
    *,
    special_ids: Collection[int] = (),
    alpha: float = 1.0,
    beta: float = 1.0,
    top: float = 1.0,
    tf: bool = True,
) -> dict[int, float]:
    """κ_v for every id v in the group; ``token_ids[i]`` are rollout i's valid tokens."""
    r = to_fractions(rewards)
    if len(token_ids) != len(r):
        raise ValueError(f"token_ids has {len(token_ids)} rollouts but rewards has {len(r)}")
    correct = [x > 0 for x in r]
    n, n_t = len(r), sum(correct)
    n_f = n - n_t
    vocab = sorted({v for rollout in token_ids for v in rollout})
    if n_t == 0 or n_f == 0:
        return dict.fromkeys(vocab, 0.0)
    l_t = sum(len(o) for o, ok in zip(token_ids, correct, strict=True) if ok)
    l_f = sum(len(o) for o, ok in zip(token_ids, correct, strict=True) if not ok)
    kappa = {}
    for v in vocab:
        a = sum(1 for o, ok in zip(token_ids, correct, strict=True) if ok and v in o)
        b = sum(1 for o, ok in zip(token_ids, correct, strict=True) if not ok and v in o)
        c, d = n_t - a, n_f - b
        p = fisher_p(a, b, c, d)
        strength = 0.0 if p == 1 else math.exp(-2 * float(p))
        rows = [(a, b), (c, d)]
        gain = _h2(n_t / n) - sum((x + y) / n * _h2(x / (x + y)) for x, y in rows if x + y > 0)
        direction = math.asin(math.sqrt(a / n_t)) - math.asin(math.sqrt(b / n_f))
        if tf and l_t > 0 and l_f > 0:
            count_t = sum(o.count(v) for o, ok in zip(token_ids, correct, strict=True) if ok)
            count_f = sum(o.count(v) for o, ok in zip(token_ids, correct, strict=True) if not ok)
            avg = (l_t + l_f) / 2
            k_t = K1 * (1 - BM25_B + BM25_B * l_t / avg)
            k_f = K1 * (1 - BM25_B + BM25_B * l_f / avg)
            f_t, f_f = count_t / l_t, count_f / l_f
            tf_t, tf_f = f_t * (K1 + 1) / (f_t + k_t), f_f * (K1 + 1) / (f_f + k_f)
            direction += tf_t / (tf_f + TF_EPS) - tf_f / (tf_t + TF_EPS)
        s = (alpha * strength + beta * gain) * direction / (alpha + beta)
        kappa[v] = 0.0 if v in special_ids else top * math.tanh(s / 2)
    return kappa


def ktae(
    token_ids: Sequence[Sequence[int]],
    rewards: Sequence[Number],
    *,
    special_ids: Collection[int] = (),
    alpha: float = 1.0,
    beta: float = 1.0,
    top: float = 1.0,
    tf: bool = True,
) -> list[list[float]]:
    """A_{i,t} = grpo(R)_i + κ_{o_{i,t}} for every valid token (GRPO: ddof 1, ε = 1e-6)."""
    kappa = key_token_values(
        token_ids, rewards, special_ids=special_ids, alpha=alpha, beta=beta, top=top, tf=tf
    )
    base = [float(x) for x in grpo(rewards)]
    return [[g + kappa[v] for v in rollout] for g, rollout in zip(base, token_ids, strict=True)]


__all__ = public(globals())  # every public function and class above
