"""Numca: numbers in the responses as milestones for the state value, literally, for one group.

Source: Chen et al., *Hista and Numca: Estimate State Value Effectively for LLM Reinforcement
Learning* (arXiv:2605.29782), advest's reading pinned in spec/numca.md. Numeric spans are found by
one regex pass over each decoded response and canonicalised to exact ``Fraction``s. A span of
rollout i counts for its token t once the whitespace that ends the span's word lies in a token < t;
the baseline at t is the mean return of the *other* rollouts that contain the value of the latest
such span (with support ≥ 1), or the leave-one-out mean before the first. A_{i,t} = R_i − V̂_t.

A rollout is its decoded text plus the character span [start, end) of each valid token in it.
Character c belongs to the **last** token whose span contains it (the token holding its last byte
when a multi-byte character is split); a character in no span (a gap) belongs to the first token
that starts after it, and to no token if there is none. Spans must be non-decreasing in start
and end (tokens without text get an empty span at the current position).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from advest.spec.numca_grammar import NUMBER, canonical

from ._exact import Number, public, to_fractions


def numbers(text: str) -> list[tuple[int, int, Fraction]]:
    """Every numeric span of ``text`` as (start, end, value), in order; zero denominators dropped.

    >>> [str(v) for _, _, v in numbers("x = -3 and 5-3")]
    ['-3', '5', '3']
    """
    found = []
    for m in NUMBER.finditer(text):
        value = canonical(m)
        if value is not None:
            found.append((m.start(), m.end(), value))
    return found


def char_token(offsets: Sequence[tuple[int, int]], c: int) -> int:
    """The token that character ``c`` belongs to: the last token whose span holds c, else the
    first token starting after c; ``len(offsets)`` (no token) if there is none."""
    holders = [k for k, (start, end) in enumerate(offsets) if start <= c < end]
    if holders:
        return holders[-1]
    later = [k for k, (start, _) in enumerate(offsets) if start > c]
    return later[0] if later else len(offsets)


@dataclass(frozen=True)
class Milestone:
    """One numeric span of a rollout: its value, where it ends, and the first token it counts for
    (``available`` = token of the whitespace ending its word + 1; None if its word never ends)."""

    value: Fraction
    end: int
    available: int | None


def milestones(text: str, offsets: Sequence[tuple[int, int]]) -> list[Milestone]:
    """The spans of one rollout with their availability (spec/numca.md, steps 3-4)."""
    out = []
    for _, end, value in numbers(text):
        ws = next((c for c in range(end, len(text)) if text[c].isspace()), None)
        tok = None if ws is None else char_token(offsets, ws)
        available = None if tok is None or tok >= len(offsets) else tok + 1
        out.append(Milestone(value, end, available))
    return out


def _check(
    texts: Sequence[str], offsets: Sequence[Sequence[tuple[int, int]]], r: list[Fraction]
) -> None:
    if len(texts) != len(r) or len(offsets) != len(r):
        raise ValueError(
            f"texts has {len(texts)} and offsets {len(offsets)} rollouts but rewards has {len(r)}"
        )
    if len(r) < 2:
        raise ValueError(
            f"numca needs groups of G >= 2 samples (no other rollouts); got G={len(r)}"
        )
    if all(len(o) == 0 for o in offsets):
        raise ValueError("mask leaves group 0 without valid tokens")
    for i, (text, spans) in enumerate(zip(texts, offsets, strict=True)):
        prev = (0, 0)
        for t, (start, end) in enumerate(spans):
            if not (0 <= start <= end <= len(text) and start >= prev[0] and end >= prev[1]):
                raise ValueError(
                    f"offsets of group 0, sample {i}, token {t}: [{start}, {end}) is out of range "
                    f"of the text (length {len(text)}) or not non-decreasing"
                )
            prev = (start, end)


def baselines(
    texts: Sequence[str], offsets: Sequence[Sequence[tuple[int, int]]], rewards: Sequence[Number]
) -> list[list[Fraction]]:
    """V̂_{i,t} for every valid token t of every rollout i (spec/numca.md, steps 5-6).

    ``texts[i]`` is rollout i's decoded response, ``offsets[i]`` the [start, end) character span
    of each of its valid tokens.
    """
    R = to_fractions(rewards)
    _check(texts, offsets, R)
    G = len(R)
    vals = [{v for _, _, v in numbers(text)} for text in texts]  # Vals_j: the full response
    out = []
    for i in range(G):
        loo = sum((R[j] for j in range(G) if j != i), Fraction(0)) / (G - 1)
        spans = milestones(texts[i], offsets[i])
        row = []
        for t in range(len(offsets[i])):
            v_hat = loo
            completed = [s for s in spans if s.available is not None and s.available <= t]
            for s in sorted(completed, key=lambda s: s.end):  # the latest supported one wins
                support = [j for j in range(G) if j != i and s.value in vals[j]]
                if support:
                    v_hat = sum((R[j] for j in support), Fraction(0)) / len(support)
            row.append(v_hat)
        out.append(row)
    return out


def numca(
    texts: Sequence[str], offsets: Sequence[Sequence[tuple[int, int]]], rewards: Sequence[Number]
) -> list[list[Fraction]]:
    """A_{i,t} = R_i − V̂_{i,t} for every valid token (no std normalisation). Needs G >= 2."""
    v_hat = baselines(texts, offsets, rewards)
    R = to_fractions(rewards)
    return [[R[i] - v for v in row] for i, row in enumerate(v_hat)]


def join_tokens(tokens: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """A rollout given as token strings: its text and each token's span (cumulative lengths)."""
    offsets, pos = [], 0
    for piece in tokens:
        offsets.append((pos, pos + len(piece)))
        pos += len(piece)
    return "".join(tokens), offsets


# every public function and class above, and the grammar both implementations share
__all__ = [*public(globals()), "NUMBER", "canonical"]
