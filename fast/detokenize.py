"""Build Numca's ``texts`` and ``offsets`` from sampled token ids and a tokenizer.

Method: **incremental decoding with cumulative decoded lengths**. Token k's piece is what
decoding a short window of ids ending at k adds to decoding the same window without k:

    piece_k = D(ids[lo : k+1])[len(D(ids[lo : k])):],   lo = max(0, k − window)

where D strips trailing U+FFFD (the replacement character an incomplete UTF-8 sequence decodes to),
except at the last token. So a character split over several byte-level tokens is assigned to the
token holding its last byte (spec/numca.md, step 3), and the tokens before it get an empty span at
the current position. Decoding with context (not each token alone) keeps the leading space of
SentencePiece pieces ("▁12" decodes to "12" alone but to " 12" after other tokens). The text is the
concatenation of the pieces, so the offsets are exact for the returned text by construction; for
prefix-stable decoders (byte-level BPE, SentencePiece) it equals ``tokenizer.decode(ids)``. Cost:
two decodes of at most window + 1 ids per token.

Why not ``return_offsets_mapping``: fast tokenizers give offsets when *encoding* a text, i.e. for
the token sequence the tokenizer would produce from it. Sampled ids need not be that canonical
tokenization, so re-encoding can change the token count and misalign the offsets with the mask
and log-probs; special tokens also get (0, 0), which is not a position in the response.

The tokenizer is anything with ``decode(ids: list[int]) -> str``: a ``transformers`` tokenizer
(mind its ``clean_up_tokenization_spaces`` and ``skip_special_tokens`` defaults) or a
``tokenizers.Tokenizer``. Nothing is imported from either library.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

__all__ = ["Decoder", "decode_with_offsets", "texts_and_offsets"]

_REPLACEMENT = "\ufffd"


class Decoder(Protocol):
    """Anything that turns token ids into text."""

    def decode(self, ids: list[int], /) -> str: ...


def decode_with_offsets(
    ids: Sequence[int], tokenizer: Decoder, *, window: int = 8
) -> tuple[str, list[tuple[int, int]]]:
    """The text of one response and each token's character span [start, end) in it."""
    if window < 4:
        raise ValueError(f"window must be >= 4 (a UTF-8 character has up to 4 bytes); got {window}")
    ids = [int(x) for x in ids]
    text, offsets = "", []
    for k in range(len(ids)):
        lo = max(0, k - window)
        last = k == len(ids) - 1
        before = tokenizer.decode(ids[lo:k]).rstrip(_REPLACEMENT) if k > lo else ""
        now = tokenizer.decode(ids[lo : k + 1])
        if not last:
            now = now.rstrip(_REPLACEMENT)
        # A decoder that rewrites earlier text (not prefix-stable) loses the rewritten part.
        common = len(before) if now.startswith(before) else _common_prefix(before, now)
        piece = now[common:]
        offsets.append((len(text), len(text) + len(piece)))
        text += piece
    return text, offsets


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def texts_and_offsets(
    token_ids: Tensor, mask: Tensor, tokenizer: Decoder, *, window: int = 8
) -> tuple[list[list[str]], Tensor]:
    """``texts [B][G]`` and ``offsets [B, G, T, 2]`` (int64, on token_ids' device) for
    ``fast.numca.numca``. Only valid tokens (``mask: [B, G, T]``) are decoded, in order; padding
    positions get the empty span at the end of the text."""
    if token_ids.dim() != 3 or mask.shape != token_ids.shape:
        raise ValueError(
            f"token_ids and mask must both have shape [B, G, T]; got {tuple(token_ids.shape)} "
            f"and {tuple(mask.shape)}"
        )
    B, G, T = token_ids.shape
    valid = (mask != 0).cpu()
    ids = token_ids.cpu()
    offsets = torch.zeros(B, G, T, 2, dtype=torch.int64)
    texts: list[list[str]] = []
    for b in range(B):
        row = []
        for g in range(G):
            positions = valid[b, g].nonzero().flatten()
            text, spans = decode_with_offsets(
                ids[b, g, positions].tolist(), tokenizer, window=window
            )
            offsets[b, g] = len(text)
            if spans:
                offsets[b, g, positions] = torch.tensor(spans, dtype=torch.int64)
            row.append(text)
        texts.append(row)
    return texts, offsets.to(token_ids.device)
