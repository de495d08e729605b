"""Sample and score: the one path from prompts to scored completions, shared by training,
``advest eval`` and ``advest experiment values``, so that the sampling settings (temperature,
top_p, max_new_tokens) and the rewards mean the same in all three.

Notation: ``B`` prompts, ``G`` samples per prompt, ``S = B·G`` sequences, ``P`` the left-padded
prompt width, ``T`` the response budget (``max_new_tokens``), ``R`` reward functions.

``sample`` draws completions with a generation engine; ``verify`` scores decoded completions
with the run's ``Scorer``; ``sample_and_score`` is the two in sequence. The policy's forward
pass over the samples (log-probs, entropy, hidden states) is the trainer's business, apart from
both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from . import generation
from .generation import Engine, Sampling
from .scoring import Scorer


@dataclass
class Scored:
    """Sampled completions and their rewards."""

    sequences: Tensor  # [S, P + T] int64: prompt as given, response right-padded to T
    prompt_mask: Tensor  # [S, P] the prompt attention mask generation used
    mask: Tensor  # [S, T] bool: response tokens up to and including the first EOS
    texts: list[str]  # [S] decoded responses (special tokens skipped)
    rewards: Tensor  # [B, G] float32: the weighted sum of the reward functions
    parts: Tensor  # [B, G, R] float32: each reward function's score
    truncated: Tensor  # [S] bool: hit the budget without EOS
    generate_s: float  # seconds spent sampling
    reward_s: float  # seconds spent decoding and verifying
    # multi-turn episodes (training/episodes.py); None for one turn
    attend: Tensor | None = None  # [S, T] bool: response tokens read (the answers between turns)
    turn_ids: Tensor | None = None  # [S, T] int64: each token's turn, −1 elsewhere
    turn_rewards: Tensor | None = None  # [B, G, K] float32: each turn's reward
    first_rewards: Tensor | None = None  # [B, G] float32: the first turn's reward
    first_parts: Tensor | None = None  # [B, G, R] float32: the first turn's reward scores

    @property
    def responses(self) -> Tensor:
        """``[S, T]`` response token ids."""
        return self.sequences[:, self.prompt_mask.shape[1] :]


def passes(parts: Tensor) -> Tensor:
    """``[..., R]`` reward scores -> ``[...]`` bool: whether each sample passes, for pass@k in
    training and held out alike. The first reward (the verifier) decides, and only full credit
    (a score of at least 1) passes: partial credit (``digits``, reasoning-gym's "the answer
    occurs in the text") shapes the reward, as further rewards (format bonuses, length terms)
    do, but is not a pass."""
    passed: Tensor = parts[..., 0] >= 1
    return passed


def response_mask(responses: Tensor, eos_id: int) -> Tensor:
    """``[..., T]`` bool: response tokens up to and including the first EOS."""
    eos = responses == eos_id
    after_eos: Tensor = (eos.cumsum(-1) - eos.long()) > 0
    return ~after_eos


@torch.no_grad()
def sample(
    model: Any,
    tokenizer: Any,
    ids: Tensor,
    attention_mask: Tensor,
    sampling: Sampling,
    engine: Engine = generation.generate,
) -> tuple[Tensor, Tensor]:
    """``[S, P + T]`` token ids (every batch padded to the budget: fixed shapes) and the
    ``[S, P]`` prompt mask, from ``ids`` / ``attention_mask`` ``[B, P]`` (left-padded). Uses the
    global torch random stream: a seed fixes the samples."""
    enc = {"input_ids": ids, "attention_mask": attention_mask}
    out = engine(model, tokenizer, enc, sampling)
    width = ids.shape[1] + sampling.max_new_tokens
    out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=tokenizer.pad_token_id)
    return out, attention_mask.repeat_interleave(sampling.group_size, 0)


def verify(
    scorer: Scorer, texts: Sequence[str], answers: Sequence[str], device: Any = None
) -> tuple[Tensor, Tensor]:
    """``[B, G]`` total and ``[B, G, R]`` per-function rewards of ``S = B·G`` completions, G in a
    row per answer."""
    B, S = len(answers), len(texts)
    G = S // B
    parts = scorer(texts, [answers[i // G] for i in range(S)])
    totals = [scorer.total(p) for p in parts]
    return (
        torch.tensor(totals, dtype=torch.float32, device=device).view(B, G),
        torch.tensor(parts, dtype=torch.float32, device=device).view(B, G, len(scorer.specs)),
    )


@torch.no_grad()
def sample_and_score(
    model: Any,
    tokenizer: Any,
    ids: Tensor,
    attention_mask: Tensor,
    answers: Sequence[str],
    sampling: Sampling,
    scorer: Scorer,
    *,
    engine: Engine = generation.generate,
    prefix: Tensor | None = None,
) -> Scored:
    """G completions of each of the B prompts ``ids [B, P]`` (left-padded, on the model's
    device), decoded and scored against ``answers [B]``. ``prefix``: response tokens already at
    the end of every prompt (a state part-way through a response), scored as the start of each
    completion."""
    start = time.perf_counter()
    sequences, prompt_mask = sample(model, tokenizer, ids, attention_mask, sampling, engine)
    sampled = time.perf_counter()
    responses = sequences[:, ids.shape[1] :]
    mask = response_mask(responses, tokenizer.eos_token_id)
    head = [] if prefix is None else prefix.tolist()
    texts = [
        tokenizer.decode(head + r[m].tolist(), skip_special_tokens=True)
        for r, m in zip(responses, mask, strict=True)
    ]
    rewards, parts = verify(scorer, texts, answers, ids.device)
    truncated = ~(responses == tokenizer.eos_token_id).any(-1)
    return Scored(
        sequences,
        prompt_mask,
        mask,
        texts,
        rewards,
        parts,
        truncated,
        generate_s=sampled - start,
        reward_s=time.perf_counter() - sampled,
    )
