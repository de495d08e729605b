"""KTAE: key-token advantage estimation, batched over groups, no loop over tokens or ids.

Notation: ``token_ids: [B, G, T]`` (int), ``mask: [B, G, T]`` (valid response tokens),
``rewards: [B, G]``. Output ``[B, G, T]``: grpo(R) + κ at valid tokens, 0 at padding.
Definitions: spec/ktae.md. Every distinct (group, id) pair is found with ``torch.unique`` on int64
keys; presence, counts and the Fisher/IG statistics are segment reductions and one
``[pairs, G+1]`` grid of hypergeometric log-probabilities (float64 log-factorials). No
vocabulary-sized buffers.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import torch
from torch import Tensor

from advest.spec.tolerances import pair

from ._checks import bool_mask, check_rewards
from .group import grpo
from .registry import defined_in, register

LOG_TIE = math.log1p(1e-7)  # relative tie tolerance of the two-sided Fisher test
K1, BM25_B, TF_EPS = 2.0, 0.5, 1e-5


def _check(token_ids: Tensor, mask: Tensor, rewards: Tensor) -> Tensor:
    check_rewards(rewards)
    if (
        not isinstance(token_ids, Tensor)
        or token_ids.is_floating_point()
        or token_ids.dtype == torch.bool
    ):
        raise TypeError("token_ids must be an integer tensor of shape [B, G, T]")
    if token_ids.dim() != 3 or token_ids.shape[:2] != rewards.shape:
        raise ValueError(
            f"token_ids must have shape [B, G, T] with [B, G] = {tuple(rewards.shape)}; "
            f"got {tuple(token_ids.shape)}"
        )
    if not isinstance(mask, Tensor) or mask.shape != token_ids.shape:
        raise ValueError(f"mask must have the shape of token_ids {tuple(token_ids.shape)}")
    for name, t in (("token_ids", token_ids), ("mask", mask)):
        if t.device != rewards.device:
            raise ValueError(f"{name} is on {t.device} but rewards is on {rewards.device}")
    mask = bool_mask(mask)
    if bool((mask & (token_ids < 0)).any()):
        b = int((mask & (token_ids < 0)).nonzero()[0, 0])
        raise ValueError(f"token_ids has a negative id at a valid position in group {b}")
    return mask


def _log_comb(log_fact: Tensor, n: Tensor, k: Tensor) -> Tensor:
    """log C(n, k) from a log-factorial table; −inf outside 0 <= k <= n."""
    ok = (k >= 0) & (k <= n) & (n >= 0)
    n_s, k_s = n.clamp(min=0), k.clamp(min=0)
    nk = (n_s - k_s).clamp(min=0)
    out = log_fact[n_s] - log_fact[k_s] - log_fact[nk]
    return torch.where(ok, out, -torch.inf)


def _fisher_strength(a: Tensor, b: Tensor, n_t: Tensor, n: int) -> Tensor:
    """F = exp(−2p), and 0 where p = 1 (every table included), per pair. All int64 ``[P]``."""
    log_fact = torch.lgamma(torch.arange(n + 1, dtype=torch.float64, device=a.device) + 1)
    r1, c1 = a + b, n_t
    k = torch.arange(n + 1, device=a.device)  # [n + 1]
    lo, hi = (r1 + c1 - n).clamp(min=0), torch.minimum(r1, c1)
    in_support = (k >= lo[:, None]) & (k <= hi[:, None])  # [P, n + 1]
    log_p = (
        _log_comb(log_fact, c1[:, None], k[None, :])
        + _log_comb(log_fact, (n - c1)[:, None], r1[:, None] - k[None, :])
        - _log_comb(log_fact, torch.full_like(r1, n), r1)[:, None]
    )
    log_obs = log_p.gather(1, a[:, None])
    included = in_support & (log_p <= log_obs + LOG_TIE)
    everything = (included == in_support).all(dim=1)
    p = torch.where(included, torch.exp(log_p), 0.0).sum(dim=1)
    return torch.where(everything, 0.0, torch.exp(-2 * p))


def _h2(q: Tensor) -> Tensor:
    """Binary entropy in bits, with 0·log 0 = 0."""
    nats: Tensor = torch.special.xlogy(q, q) + torch.special.xlogy(1 - q, 1 - q)
    return -nats / math.log(2)


@register(
    kind="token",
    extends="grpo",
    inputs=("token_ids", "mask", "rewards"),
    # torch.unique sorts the B·G·T keys; the Fisher grid is [pairs, G + 1] with pairs up to
    # B·G·T distinct (group, id) (a large vocabulary)
    cost="B·G·T log(B·G·T) + B·G²·T",
    tolerance=pair(
        "output", "grpo(R) + top·tanh(s/2) in float64 (lgamma Fisher tail sums): ulps of max|A|"
    ),
)
def ktae(
    token_ids: Tensor,
    mask: Tensor,
    rewards: Tensor,
    *,
    special_ids: Collection[int] = (),
    alpha: float = 1.0,
    beta: float = 1.0,
    top: float = 1.0,
    tf: bool = True,
) -> Tensor:
    """grpo(R) + κ_{token id} per valid token (κ = top·tanh(s/2)); 0 at padding. [B, G, T]."""
    valid = _check(token_ids, mask, rewards)
    B, G, T = token_ids.shape
    dev = rewards.device
    base = grpo(rewards).to(torch.float64)  # [B, G]
    out = torch.zeros(B, G, T, dtype=torch.float64, device=dev)
    bi, gi, ti = valid.nonzero(as_tuple=True)  # [N] each: valid positions
    if bi.numel() == 0:
        return out.to(rewards.dtype)
    tok = token_ids[bi, gi, ti].to(torch.int64)
    V = int(tok.max()) + 1
    correct = rewards > 0  # [B, G]
    n_t = correct.sum(dim=1)  # [B]
    two_sided = (n_t > 0) & (n_t < G)  # [B]: both sides non-empty
    pair_key = bi * V + tok  # distinct (group, id)
    pairs, pair_of_token = torch.unique(pair_key, return_inverse=True)  # [P], [N]
    pair_group = pairs // V
    # presence: distinct (rollout, id), each counted once on its side
    rollout_key = (bi * G + gi) * V + tok
    present = torch.unique(rollout_key)  # [Q]
    present_rollout = present // V
    present_pair = torch.searchsorted(pairs, (present_rollout // G) * V + present % V)
    present_correct = correct.flatten()[present_rollout]
    P = pairs.numel()
    a = torch.zeros(P, dtype=torch.int64, device=dev).index_add_(
        0, present_pair, present_correct.long()
    )
    b = torch.zeros(P, dtype=torch.int64, device=dev).index_add_(
        0, present_pair, (~present_correct).long()
    )
    n_t_pair = n_t[pair_group]
    c, d = n_t_pair - a, (G - n_t_pair) - b
    strength = _fisher_strength(a, b, n_t_pair, G)
    af, bf, cf, df = (x.to(torch.float64) for x in (a, b, c, d))
    nt_f, nf_f = n_t_pair.to(torch.float64), (G - n_t_pair).to(torch.float64)
    gain = _h2(nt_f / G)
    for x, y in ((af, bf), (cf, df)):
        row = x + y
        gain = gain - torch.where(row > 0, row / G * _h2(x / row.clamp(min=1)), 0.0)
    safe_t, safe_f = nt_f.clamp(min=1), nf_f.clamp(min=1)
    direction = torch.asin(torch.sqrt(af / safe_t)) - torch.asin(torch.sqrt(bf / safe_f))
    if tf:
        direction = direction + _tf_term(pair_of_token, correct[bi, gi], bi, P, pair_group, B)
    s = (alpha * strength + beta * gain) * direction / (alpha + beta)
    kappa = top * torch.tanh(s / 2)
    special = torch.tensor(sorted(special_ids), dtype=torch.int64, device=dev)
    kappa = torch.where(torch.isin(pairs % V, special) | ~two_sided[pair_group], 0.0, kappa)
    out[bi, gi, ti] = base[bi, gi] + kappa[pair_of_token]
    return out.to(rewards.dtype)


def _tf_term(
    pair_of_token: Tensor, token_correct: Tensor, bi: Tensor, P: int, pair_group: Tensor, B: int
) -> Tensor:
    """tf_T/(tf_F + ε) − tf_F/(tf_T + ε) per pair (BM25-style saturated frequencies); 0 where a
    side has no tokens at all."""
    ones = torch.ones_like(pair_of_token, dtype=torch.float64)
    count_t = torch.zeros(P, dtype=torch.float64, device=bi.device).index_add_(
        0, pair_of_token, ones * token_correct
    )
    count_f = torch.zeros(P, dtype=torch.float64, device=bi.device).index_add_(
        0, pair_of_token, ones * ~token_correct
    )
    len_t = torch.zeros(B, dtype=torch.float64, device=bi.device).index_add_(
        0, bi, ones * token_correct
    )
    len_f = torch.zeros(B, dtype=torch.float64, device=bi.device).index_add_(
        0, bi, ones * ~token_correct
    )
    l_t, l_f = len_t[pair_group], len_f[pair_group]
    avg = (l_t + l_f) / 2
    k_t = K1 * (1 - BM25_B + BM25_B * l_t / avg)
    k_f = K1 * (1 - BM25_B + BM25_B * l_f / avg)
    f_t, f_f = count_t / l_t.clamp(min=1), count_f / l_f.clamp(min=1)
    tf_t, tf_f = f_t * (K1 + 1) / (f_t + k_t), f_f * (K1 + 1) / (f_f + k_f)
    term = tf_t / (tf_f + TF_EPS) - tf_f / (tf_t + TF_EPS)
    return torch.where((l_t > 0) & (l_f > 0), term, 0.0)


__all__ = defined_in(__name__)  # every estimator registered above
