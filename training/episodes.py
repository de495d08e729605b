"""Multi-turn episodes (``--turns N``): the policy answers, the environment answers a wrong
answer with feedback, and the policy tries again, up to N turns (spec/episode.md).

One episode per sample: turn 1 is the usual G completions of each prompt; an episode whose
answer fails gets the task's feedback and a further turn, sampled from everything so far (its
prompt, its earlier turns and the feedback), until it passes or has taken N turns. The response
the trainer holds is the turns with the feedback between them: the policy reads the feedback
(``attend``) but never wrote it (``mask`` leaves it out of the loss; ``turn_ids`` is −1 there).
The episode's reward is its last turn's, on that turn (``turn_rewards``); ``rewards`` holds it
too, for the estimators that see one reward per sample.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .generation import Engine, Sampling
from .sampling import Scored, passes, response_mask, sample, sample_and_score, verify
from .scoring import Scorer

RETRY = "\nThat is not correct. Try again.\n"
"""The feedback a wrong answer gets where the task has no feedback of its own."""


def feedback_text(prompt: object, embedded: bool) -> str:
    """What the environment says after a wrong answer: the embedded task's tokenizer knows only
    its digits and operators, so it asks the problem again (a retry with the history in view);
    any other task says it is not correct."""
    return prompt if embedded and isinstance(prompt, str) else RETRY


@torch.no_grad()
def sample_episodes(
    model: Any,
    tokenizer: Any,
    ids: Tensor,
    attention_mask: Tensor,
    answers: Sequence[str],
    sampling: Sampling,
    scorer: Scorer,
    *,
    turns: int,
    feedback: Sequence[str],
    engine: Engine,
    step_reward: float = 0.0,
) -> Scored:
    """G episodes of each of the B prompts ``ids [B, P]`` (left-padded), of at most ``turns``
    turns; ``feedback [B]``: the environment's answer to a wrong turn, per prompt;
    ``step_reward``: the reward of every turn but the last (e.g. a cost for each retry)."""
    start = time.perf_counter()
    first = sample_and_score(
        model, tokenizer, ids, attention_mask, answers, sampling, scorer, engine=engine
    )
    B, G = first.rewards.shape
    S, P = B * G, ids.shape[1]
    pad = tokenizer.pad_token_id
    prompts = [row[m.bool()].tolist() for row, m in zip(first.sequences[:, :P], first.prompt_mask,
                                                          strict=True)]  # fmt: skip
    tokens = [r[m].tolist() for r, m in zip(first.responses, first.mask, strict=True)]
    turn = [[0] * len(t) for t in tokens]  # each token's turn; −1: the environment's
    parts, texts, truncated = first.parts.view(S, -1).clone(), list(first.texts), first.truncated
    totals = first.rewards.reshape(S).clone()  # each episode's reward: its last turn's
    last = torch.zeros(S, dtype=torch.long)  # each episode's last turn
    one = dataclasses.replace(sampling, group_size=1)
    said = [tokenizer(feedback[s // G], add_special_tokens=False)["input_ids"] for s in range(S)]
    for k in range(1, turns):
        going = [s for s in range(S) if not bool(passes(parts[s]))]
        if not going:
            break
        contexts = [prompts[s] + tokens[s] + said[s] for s in going]
        width = max(map(len, contexts))
        ctx = torch.full((len(going), width), pad, dtype=torch.long)
        att = torch.zeros(len(going), width, dtype=torch.long)
        for row, c in enumerate(contexts):
            ctx[row, width - len(c) :], att[row, width - len(c) :] = torch.tensor(c), 1
        out, _ = sample(model, tokenizer, ctx.to(ids.device), att.to(ids.device), one, engine)
        new = out[:, width:].cpu()
        valid = response_mask(new, tokenizer.eos_token_id)
        for row, s in enumerate(going):
            wrote = new[row][valid[row]].tolist()
            tokens[s] += said[s] + wrote
            turn[s] += [-1] * len(said[s]) + [k] * len(wrote)
            texts[s] = tokenizer.decode(wrote, skip_special_tokens=True)
            truncated[s] = not bool((new[row] == tokenizer.eos_token_id).any())
            last[s] = k
        asked = [answers[s // G] for s in going]
        scored_totals, scored_parts = verify(scorer, [texts[s] for s in going], asked, parts.device)
        parts[going] = scored_parts.view(len(going), -1)
        totals[going] = scored_totals.view(-1)
    done = _assemble(first, tokens, turn, parts, totals, texts, truncated, last, turns, pad, start)
    return _with_steps(done, last, step_reward) if step_reward else done


def _with_steps(scored: Scored, last: Tensor, step_reward: float) -> Scored:
    """Each turn before an episode's last earns ``step_reward``; the episode's reward (what the
    estimators that see one reward per sample get) is the sum of its turns' rewards."""
    assert scored.turn_rewards is not None
    B, G, K = scored.turn_rewards.shape
    device = scored.turn_rewards.device
    earlier = torch.arange(K, device=device) < last.to(device).view(B, G, 1)  # [B, G, K]
    turn_rewards = scored.turn_rewards + step_reward * earlier.to(scored.turn_rewards)
    return dataclasses.replace(
        scored, turn_rewards=turn_rewards, rewards=turn_rewards.sum(-1).to(scored.rewards)
    )


def _assemble(first: Scored, tokens: list[list[int]], turn: list[list[int]], parts: Tensor,
              totals: Tensor, texts: list[str], truncated: Tensor, last: Tensor, turns: int,
              pad: int, start: float) -> Scored:  # fmt: skip
    """The episodes as fixed-width rows: ``[S, P + W]`` sequences (the prompt as sampled, then
    the response right-padded to W, the longest episode or the first turn's budget), the loss
    mask (the policy's tokens: turn id ≥ 0), the tokens read, turn ids and per-turn rewards."""
    B, G = first.rewards.shape
    S, P = B * G, first.prompt_mask.shape[1]
    W = max(map(len, tokens))
    W = max(W, first.mask.shape[1])
    sequences = torch.full((S, P + W), pad, dtype=torch.long)
    sequences[:, :P] = first.sequences[:, :P].cpu()
    attend = torch.zeros(S, W, dtype=torch.bool)
    turn_ids = torch.full((S, W), -1, dtype=torch.long)
    for s in range(S):
        n = len(tokens[s])
        sequences[s, P : P + n] = torch.tensor(tokens[s], dtype=torch.long)
        attend[s, :n] = True
        turn_ids[s, :n] = torch.tensor(turn[s], dtype=torch.long)
    mask = turn_ids >= 0  # the policy wrote it
    totals = totals.float().cpu()
    turn_rewards = torch.zeros(S, turns, dtype=torch.float32)
    turn_rewards[torch.arange(S), last] = totals  # the episode's reward, on its last turn
    device = first.sequences.device
    return Scored(
        sequences.to(device),
        first.prompt_mask,
        mask.to(device),
        texts,
        totals.view(B, G).to(device),
        parts.view(B, G, -1),
        truncated,
        generate_s=time.perf_counter() - start - first.reward_s,
        reward_s=first.reward_s,
        attend=attend.to(device),
        turn_ids=turn_ids.to(device),
        turn_rewards=turn_rewards.view(B, G, turns).to(device),
        first_rewards=first.rewards,
        first_parts=first.parts,
    )
