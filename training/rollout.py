"""A rollout batch, and the plan that calls the run's estimator on it.

The trainer holds no per-estimator code: each registry entry names the rollout fields it
consumes (``fast.registry.INPUTS``). ``plan`` resolves the estimator once per run (its entry,
the base a reweighter reweights, the instance of a stateful one, the fields they read);
``Plan.advantages`` builds those fields from a ``Rollout``, calls the estimator and brings its
output to ``[B, G, T]``.

Notation: ``B`` prompts, ``G`` samples per prompt, ``T`` response tokens, ``P`` prompt width,
``R`` reward functions, ``D`` hidden size, ``S = B·G`` sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from advest.fast import registry


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
    hidden: Tensor | None = None  # [B, G, T, D], only when an estimator asks for it
    k: int = 1
    reward_parts: Tensor | None = None  # [B, G, R] float32, each reward function's score
    sequences: Tensor | None = None  # [S, P + T] int64, prompt left-padded (what the update reads)
    prompt_mask: Tensor | None = None  # [S, P] the prompt attention mask generation used
    entropy: Tensor | None = None  # [B, G, T] float32, policy entropy per position (nats)
    ref_logprobs: Tensor | None = None  # [B, G, T] float32, reference model (when KL is on)
    truncated: Tensor | None = None  # [B, G] bool, hit the token budget without EOS

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(-1)


@dataclass(frozen=True)
class Plan:
    """The run's estimator, resolved once: its registry ``entry``, the ``base`` entry a
    reweighter (an estimator that reads ``advantages``) reweights, the callable ``instance``
    (``entry.fn``, or for a stateful entry the run's own instance, which keeps its state), the
    keyword ``options`` of a stateless one, and the rollout ``fields`` the two consume."""

    entry: registry.Entry
    base: registry.Entry | None
    instance: Any
    options: dict[str, Any] = field(default_factory=dict)
    fields: frozenset[str] = frozenset()

    def needs(self, name: str) -> bool:
        """Whether the estimator (or its base) consumes the rollout field ``name``."""
        return name in self.fields

    def output(self, rollout: Rollout, base: Tensor | None = None) -> Any:
        """The estimator's own output on the rollout (``[B, G]``, ``[B, G, T]`` or an object
        with ``advantages``). A reweighter's ``base`` advantages ``[B, G]`` come from the base
        estimator unless given."""
        if self.base is not None and base is None:
            base = _value(_call(self.base, self.base.fn, rollout, {}, None))
        return _call(self.entry, self.instance, rollout, self.options, base)

    def advantages(self, rollout: Rollout) -> Tensor:
        """``[B, G, T]`` float32 advantages of the rollout, zero at padding."""
        return _to_tokens(self.output(rollout), rollout)


def plan(
    estimator: str, base_estimator: str = "grpo", options: dict[str, Any] | None = None
) -> Plan:
    """Resolve ``estimator`` (and ``base_estimator``, used when it reads ``advantages``) and
    construct a stateful one with ``options``. Raises ``KeyError`` for an unknown name and
    whatever the constructor raises for bad options."""
    options = dict(options or {})
    entry = registry.entry(estimator)
    base_entry = registry.entry(base_estimator)  # named in the settings: must exist either way
    base = base_entry if "advantages" in entry.inputs else None
    fields = frozenset(entry.inputs) | frozenset(base.inputs if base is not None else ())
    if entry.stateful:
        return Plan(entry, base, entry.fn(**options), {}, fields)
    return Plan(entry, base, entry.fn, options, fields)


def _call(
    entry: registry.Entry, fn: Any, rollout: Rollout, options: dict[str, Any], base: Tensor | None
) -> Any:
    """``fn`` (``entry``'s callable or instance) on the rollout fields the entry declares;
    ``base`` fills ``advantages`` for reweighters."""
    fields = {"lengths": rollout.lengths, "advantages": base}
    args = {i: fields[i] if i in fields else getattr(rollout, i) for i in entry.inputs}
    return fn(**args, **options)


def _value(out: Any) -> Tensor:
    """An estimator's advantages: the output itself, or its ``advantages`` (reweighters)."""
    value: Tensor = out.advantages if hasattr(out, "advantages") else out
    return value


def _to_tokens(out: Any, rollout: Rollout) -> Tensor:
    value = _value(out)
    B, G, T = rollout.mask.shape
    if value.shape == (B, G):
        value = value.unsqueeze(-1).expand(B, G, T)
    if value.shape != (B, G, T):
        raise ValueError(
            f"estimator output has shape {tuple(value.shape)}; want [B, G] or [B, G, T]"
        )
    return (value * rollout.mask).to(torch.float32)


def synthetic(B: int, G: int, T: int, D: int = 8, k: int = 1, seed: int = 0) -> Rollout:
    """A rollout with every field filled, for dry runs and benchmarks: character-level responses
    of digits and operators (so Numca finds numbers and KTAE sees a realistic vocabulary), one
    character per token, and 0/1 rewards that vary inside every group."""
    gen = torch.Generator().manual_seed(seed)
    alphabet = "0123456789+= "
    chars = torch.randint(len(alphabet), (B, G, T), generator=gen)
    texts = [["".join(alphabet[int(c)] for c in chars[b, g]) for g in range(G)] for b in range(B)]
    starts = torch.arange(T)
    rewards = (torch.arange(G).repeat(B, 1) % 2).float()
    return Rollout(
        prompt_ids=torch.arange(B),
        token_ids=chars + 3,
        mask=torch.ones(B, G, T, dtype=torch.bool),
        rewards=rewards,
        logprobs=-torch.rand(B, G, T, generator=gen) * 3,
        texts=texts,
        offsets=torch.stack([starts, starts + 1], -1).expand(B, G, T, 2).contiguous(),
        hidden=torch.randn(B, G, T, D, generator=gen),
        k=k,
        reward_parts=rewards.unsqueeze(-1),
    )


def dry_run(plan: Plan, prompts_per_step: int, group_size: int, k: int) -> None:
    """Call a plan's estimator once on a synthetic rollout of the run's shape (give it a plan of
    its own when the estimator is stateful, so that no state leaks into the run)."""
    plan.advantages(synthetic(prompts_per_step, group_size, T=4, k=k))
