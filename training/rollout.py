"""A rollout batch: what one step produced, the source every estimator reads its inputs from.

The trainer holds no per-estimator code: each registry entry names the rollout fields it
consumes (``fast.registry.INPUTS``), and ``fast.calling.plan`` (the one calling module every
caller shares) resolves the estimator once per run; ``Plan.advantages(rollout)`` fetches those
fields from a ``Rollout``, calls the estimator and brings its output to ``[B, G, T]``.

Notation: ``B`` prompts, ``G`` samples per prompt, ``T`` response tokens, ``P`` prompt width,
``R`` reward functions, ``D`` hidden size, ``S = B·G`` sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from advest.fast.calling import Plan, plan

__all__ = ["Plan", "Rollout", "dry_run", "plan", "synthetic"]


@dataclass
class Rollout:
    """Everything one rollout step produces on one process: B prompts × G samples × T response
    tokens, their rewards and the policy's (and reference's) view of them."""

    prompt_ids: Tensor  # [B] int64
    token_ids: Tensor  # [B, G, T] int64, pad after EOS
    mask: Tensor  # [B, G, T] bool, response tokens up to and including EOS
    rewards: Tensor  # [B, G] float32, the weighted sum of reward_parts
    logprobs: Tensor  # [B, G, T] float32, rollout policy (at the sampling temperature)
    texts: list[list[str]]  # [B][G]
    offsets: Tensor  # [B, G, T, 2] int64 (empty unless an estimator reads offsets)
    reward_parts: Tensor  # [B, G, R] float32, each reward function's score
    reward_weights: Tensor  # [R] float64, each reward function's weight (--reward_weights)
    sequences: Tensor  # [S, P + T] int64, prompt left-padded (what the update reads)
    prompt_mask: Tensor  # [S, P] the prompt attention mask generation used
    entropy: Tensor  # [B, G, T] float32, policy entropy per position (nats)
    truncated: Tensor  # [B, G] bool, hit the token budget without EOS
    # Computed only when the run asks: None says "not computed", never "zero".
    hidden: Tensor | None = None  # [B, G, T, D], when an estimator reads hidden states
    ref_logprobs: Tensor | None = None  # [B, G, T] float32, reference model (when KL is on)
    sum_pi_squared: Tensor | None = None  # [B, G, T] float32 Σ_v π(v)², when an estimator reads it
    # Multi-turn episodes (--turns 2 or more): the response holds the turns and, between them,
    # the environment's answers, which the policy attends to but never wrote.
    attend: Tensor | None = None  # [B, G, T] bool: every response token the policy reads
    episode_rewards: Tensor | None = None  # [B, G, K] float: each turn's reward
    episode_turn_ids: Tensor | None = None  # [B, G, T] int64: each token's turn, −1 elsewhere

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(-1)

    @property
    def turn_rewards(self) -> Tensor:
        """``[B, G, K]``: each turn's reward (one turn: the reward)."""
        if self.episode_rewards is not None:
            return self.episode_rewards
        return self.rewards.unsqueeze(-1)

    @property
    def turn_ids(self) -> Tensor:
        """``[B, G, T]``: the turn each response token belongs to, −1 on the environment's
        tokens and padding (one turn: 0 on every response token)."""
        if self.episode_turn_ids is not None:
            return self.episode_turn_ids
        return torch.where(self.mask, 0, -1).long()


def synthetic(B: int, G: int, T: int, D: int = 8, seed: int = 0) -> Rollout:
    """A rollout with every field filled, for dry runs and benchmarks: character-level responses
    of digits and operators (so Numca finds numbers and KTAE sees a realistic vocabulary), one
    character per token, and 0/1 rewards that vary inside every group."""
    gen = torch.Generator().manual_seed(seed)
    alphabet = "0123456789+= "
    chars = torch.randint(len(alphabet), (B, G, T), generator=gen)
    logprobs = -torch.rand(B, G, T, generator=gen) * 3
    # Σ_v π(v)² of a distribution that gives the sampled token p = exp(logprob) is p² plus the
    # rest's (1 − p)² times a share between 1/(V − 1) (spread over the other V − 1 ids: 3
    # special, the alphabet's) and 1 (all on one id); the share is drawn last, after the fields
    # drawn before it was added
    p, others = logprobs.exp(), len(alphabet) + 2
    texts = [["".join(alphabet[int(c)] for c in chars[b, g]) for g in range(G)] for b in range(B)]
    starts = torch.arange(T)
    rewards = (torch.arange(G).repeat(B, 1) % 2).float()
    return Rollout(
        prompt_ids=torch.arange(B),
        token_ids=chars + 3,
        mask=torch.ones(B, G, T, dtype=torch.bool),
        rewards=rewards,
        logprobs=logprobs,
        texts=texts,
        offsets=torch.stack([starts, starts + 1], -1).expand(B, G, T, 2).contiguous(),
        reward_parts=rewards.unsqueeze(-1),
        reward_weights=torch.ones(1, dtype=torch.float64),
        sequences=torch.cat(
            [torch.ones(B * G, 1, dtype=torch.long), (chars + 3).reshape(-1, T)], 1
        ),
        prompt_mask=torch.ones(B * G, 1, dtype=torch.long),
        entropy=torch.rand(B, G, T, generator=gen),
        truncated=torch.zeros(B, G, dtype=torch.bool),
        hidden=torch.randn(B, G, T, D, generator=gen),
        sum_pi_squared=p**2
        + (1 - p) ** 2 * (1 / others + (1 - 1 / others) * torch.rand(B, G, T, generator=gen)),
    )


def dry_run(plan: Plan, prompts_per_step: int, group_size: int) -> None:
    """Call a plan's estimator once on a synthetic rollout of the run's shape (give it a plan of
    its own when the estimator is stateful, so that no state leaks into the run)."""
    plan.advantages(synthetic(prompts_per_step, group_size, T=4))
