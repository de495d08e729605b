"""Numca: numbers in the responses as milestones for the state value, batched.

Notation: ``texts: list[list[str]]`` (``[B][G]``, decoded responses), ``offsets: [B, G, T, 2]``
(int64 character span [start, end) of each token in its text), ``mask: [B, G, T]`` (valid
response tokens), ``rewards: [B, G]`` (returns). Output ``[B, G, T]``: R_i − V̂_{i,t} at valid
tokens, 0 at padding. Definitions: spec/numca.md.

Only the regex pass is Python: one ``finditer`` per string, interning values to integer ids
(each distinct matched text is canonicalised once). Everything after it is tensor work with no
loop over tokens or spans: value presence per group by ``torch.unique`` and segment sums, the
char → token map by one ``searchsorted`` over all rollouts' token starts, and the
piecewise-constant baseline by a scatter-amax of "span becomes available at token t" events
followed by a ``cummax`` over tokens.
"""

from __future__ import annotations

import re
from fractions import Fraction

import torch
from torch import Tensor

from advest.spec.numca_grammar import NUMBER, canonical
from advest.spec.tolerances import pair

from ._checks import bool_mask, check_rewards
from .group import rloo
from .registry import defined_in, register

_SPACE = re.compile(r"\s")


def _check(texts: object, offsets: Tensor, mask: Tensor, rewards: Tensor) -> Tensor:
    """Validate types, shapes and devices, and that no group is empty; return the mask as bool."""
    check_rewards(rewards)
    B, G = rewards.shape
    if G < 2:
        raise ValueError(f"numca needs groups of G >= 2 samples (no other rollouts); got G={G}")
    if not isinstance(texts, list) or len(texts) != B:
        raise ValueError(f"texts must be a list of B = {B} lists of G = {G} strings")
    for b, row in enumerate(texts):
        if not isinstance(row, list) or len(row) != G or not all(isinstance(s, str) for s in row):
            raise ValueError(f"texts[{b}] (group {b}) must be a list of G = {G} strings")
    if (
        not isinstance(offsets, Tensor)
        or offsets.is_floating_point()
        or offsets.dtype == torch.bool
    ):
        raise TypeError("offsets must be an integer tensor of shape [B, G, T, 2]")
    if offsets.dim() != 4 or offsets.shape[:2] != rewards.shape or offsets.shape[3] != 2:
        raise ValueError(
            f"offsets must have shape [B, G, T, 2] with [B, G] = {tuple(rewards.shape)}; "
            f"got {tuple(offsets.shape)}"
        )
    if not isinstance(mask, Tensor) or mask.shape != offsets.shape[:3]:
        raise ValueError(f"mask must have shape [B, G, T] = {tuple(offsets.shape[:3])}")
    for name, t in (("offsets", offsets), ("mask", mask)):
        if t.device != rewards.device:
            raise ValueError(f"{name} is on {t.device} but rewards is on {rewards.device}")
    mask = bool_mask(mask)
    empty = ~mask.flatten(1).any(dim=1)
    if bool(empty.any()):
        raise ValueError(f"mask leaves group {int(empty.nonzero()[0])} without valid tokens")
    return mask


def _check_spans(
    starts: Tensor, ends: Tensor, live: Tensor, lengths: Tensor, order: Tensor
) -> None:
    """Valid tokens' spans lie in their text and are non-decreasing (all ``[B, G, T]``, compacted
    so that valid tokens come first; ``lengths: [B, G]``)."""
    prev_s = torch.nn.functional.pad(starts[..., :-1], (1, 0))
    prev_e = torch.nn.functional.pad(ends[..., :-1], (1, 0))
    ok = (starts >= 0) & (starts <= ends) & (ends <= lengths[..., None])
    ok &= (starts >= prev_s) & (ends >= prev_e)
    bad = live & ~ok
    if bool(bad.any()):
        b, g, k = bad.nonzero()[0].tolist()
        t = int(order[b, g, k])
        span = [int(starts[b, g, k]), int(ends[b, g, k])]
        raise ValueError(
            f"offsets of group {b}, sample {g}, token {t}: {span} is out of range of the text "
            f"(length {int(lengths[b, g])}) or not non-decreasing along the valid tokens"
        )


def _extract(texts: list[str]) -> tuple[list[int], list[int], list[int]]:
    """One regex pass per string: per span (in order) its rollout, interned value id, and the
    position of the whitespace ending its word (−1: the word never ends)."""
    ids: dict[Fraction, int] = {}
    seen: dict[str, int] = {}  # matched text -> value id (−1: discarded); the text fixes the value
    rollout, value, space = [], [], []
    for r, text in enumerate(texts):
        for m in NUMBER.finditer(text):
            key = m.group()
            if key not in seen:
                v = canonical(m)
                seen[key] = -1 if v is None else ids.setdefault(v, len(ids))
            if seen[key] < 0:
                continue
            ws = _SPACE.search(text, m.end())
            rollout.append(r)
            value.append(seen[key])
            space.append(ws.start() if ws else -1)
    return rollout, value, space


def _milestone_values(
    span_r: Tensor, span_v: Tensor, shifted: Tensor, G: int
) -> tuple[Tensor, Tensor]:
    """Per span: V' = mean shifted return of the *other* rollouts whose text holds its value, and
    whether that support is non-empty. ``span_r, span_v: [S]``; ``shifted: [B·G]``."""
    V = int(span_v.max()) + 1
    present = torch.unique(span_r * V + span_v)  # distinct (rollout, value): the sets Vals_j
    p_rollout, p_value = present // V, present % V
    group_key = (p_rollout // G) * V + p_value
    pairs, pair_of_present = torch.unique(group_key, return_inverse=True)  # distinct (group, value)
    count = torch.zeros(pairs.numel(), dtype=torch.int64, device=span_r.device)
    count.index_add_(0, pair_of_present, torch.ones_like(pair_of_present))
    total = torch.zeros(pairs.numel(), dtype=torch.float64, device=span_r.device)
    total.index_add_(0, pair_of_present, shifted[p_rollout])
    pair = torch.searchsorted(pairs, (span_r // G) * V + span_v)
    support = count[pair] - 1  # the span's own rollout always holds its value
    others = total[pair] - shifted[span_r]
    return others / support.clamp(min=1), support >= 1


def _available(span_r: Tensor, space: Tensor, starts: Tensor, ends: Tensor, width: int) -> Tensor:
    """Per span, the first token it counts for: token of its terminating whitespace + 1 (T + 1
    where its word never ends). ``starts, ends: [R, T]`` compacted spans, padding starts =
    ``width − 1``."""
    R, T = starts.shape
    keys = (torch.arange(R, device=starts.device)[:, None] * width + starts).flatten()
    query = span_r * width + space.clamp(min=0)
    k = torch.searchsorted(keys, query, right=True) - 1 - span_r * T  # last start <= c, or −1
    held = (k >= 0) & (ends.flatten()[(span_r * T + k).clamp(min=0)] > space)
    tok = torch.where(held, k, k + 1)  # a character in no span: the next token that starts
    return torch.where(space < 0, T + 1, tok + 1)  # > n_valid: never (the caller drops these)


@register(
    kind="token",
    extends="rloo",
    inputs=("texts", "offsets", "mask", "rewards"),
    # the regex pass reads every character; spans and token starts are sorted (unique, argsort)
    cost="B·G·T log(B·G·T)",
    tolerance=pair("output", "leave-one-out means of rewards in float64: ulps of max|A|"),
)
def numca(texts: list[list[str]], offsets: Tensor, mask: Tensor, rewards: Tensor) -> Tensor:
    """R_i − V̂_{i,t} per valid token: V̂ is the mean return of the other rollouts holding the
    value of the latest completed numeric span, or the LOO mean before one; 0 at padding.

    texts: ``[B][G]``; offsets: [B, G, T, 2]; mask: [B, G, T]; rewards: [B, G] -> [B, G, T].
    """
    valid = _check(texts, offsets, mask, rewards)
    B, G, T = valid.shape
    R, dev = B * G, rewards.device
    flat_texts = [s for row in texts for s in row]
    lengths = torch.tensor([len(s) for s in flat_texts], device=dev).reshape(B, G)
    # Valid tokens first, in their order: "tokens < t" means earlier valid tokens.
    order = torch.argsort((~valid).to(torch.int8), dim=-1, stable=True)  # [B, G, T]
    n_valid = valid.sum(dim=-1)  # [B, G]
    live = torch.arange(T, device=dev) < n_valid[..., None]  # [B, G, T], compacted validity
    starts = offsets[..., 0].to(torch.int64).gather(-1, order)
    ends = offsets[..., 1].to(torch.int64).gather(-1, order)
    _check_spans(starts, ends, live, lengths, order)
    loo = rloo(rewards).to(torch.float64).reshape(R, 1).expand(R, T)  # A before any milestone
    shifted = rewards.to(torch.float64)
    shifted = (shifted - shifted.amin(dim=1, keepdim=True)).flatten()  # exact 0 on flat groups
    compact = loo.clone()
    span_r_l, span_v_l, space_l = _extract(flat_texts)
    if span_r_l:
        span_r = torch.tensor(span_r_l, device=dev)
        span_v, space = torch.tensor(span_v_l, device=dev), torch.tensor(space_l, device=dev)
        v_prime, supported = _milestone_values(span_r, span_v, shifted, G)
        width = int(lengths.max()) + 2  # a padding start (width − 1) lies beyond every character
        starts_r = torch.where(live, starts, width - 1).reshape(R, T)
        avail = _available(span_r, space, starts_r, ends.reshape(R, T), width)
        use = supported & (avail < n_valid.flatten()[span_r])  # becomes available at a real token
        latest = torch.full((R * T,), -1, dtype=torch.int64, device=dev)
        spans = torch.arange(span_r.numel(), device=dev)  # global order = (rollout, end) order
        latest.scatter_reduce_(0, (span_r * T + avail)[use], spans[use], reduce="amax")
        latest = latest.reshape(R, T).cummax(dim=1).values  # latest available milestone so far
        milestone = shifted[:, None] - v_prime[latest.clamp(min=0)]
        compact = torch.where(latest >= 0, milestone, loo)
    compact = torch.where(live.reshape(R, T), compact, 0.0).reshape(B, G, T)
    out = torch.zeros_like(compact).scatter_(-1, order, compact)
    return out.to(rewards.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
