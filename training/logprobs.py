"""The policy's forward pass over sampled responses: per-token log-probs (the loss's input),
entropy, and on request hidden states and Σ_v π(v)², computed without repeating work.

Notation: ``S`` sequences, each a left-padded prompt of width ``P`` followed by ``T`` response
tokens; ``V`` the vocabulary, ``D`` the hidden size; the response tokens a row *reads* are its
``attend`` mask (multi-turn episodes) or else its loss ``mask``.

Three things a plain forward pass over ``[S, P + T]`` computes and never uses are skipped:

* **the prompt, once per group.** The G samples of a prompt share it token for token, so the
  prompt's keys and values are computed once per distinct prompt and gathered into each row's
  KV cache; the responses then run against that cache. The gather is differentiable (its
  backward sums the G rows' gradients), so the log-probs and the gradient are the plain pass's
  up to float rounding. For SmolLM2 with a 46-token chat prompt, 8 samples of 24 tokens, this
  is 952 token positions through the network instead of 2,240.
* **logits off the response.** Only the positions that predict a response token go through
  the vocabulary projection (``logits_to_keep``), not the prompt's.
* **columns no row reads.** Completions are padded to the token budget; the pass stops at the
  last column any row reads (and never feeds the last read token, whose output predicts
  nothing read).

Outputs are zero where a row reads no token, whatever the batch, so a pass in chunks equals
one pass over all rows.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import torch
from torch import Tensor


class TokenScores(NamedTuple):
    """Per response token of S rows, zero where the row reads no token."""

    logp: Tensor
    """``[S, T]`` float32 log-probs of the response tokens at the temperature (with grad when
    the model has it)."""
    entropy: Tensor
    """``[S, T]`` float32 entropy of the policy at each position (nats), detached."""
    hidden: Tensor | None
    """``[S, T, D]`` last-layer hidden states (on request); the state that emitted token t."""
    sum_pi_squared: Tensor | None
    """``[S, T]`` Σ_v π(v)² at the temperature (on request), detached."""


def positions(attention_mask: Tensor) -> Tensor:
    """Position ids that skip left padding, as ``generate`` uses them."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


KEYWORDS: dict[type, tuple[str | None, str | None]] = {}
"""Per model class: the names its ``forward`` gives the KV cache and the logits-to-keep count
(they changed across transformers versions), None where it takes neither."""


def keywords(model: Any) -> tuple[str | None, str | None]:
    """``KEYWORDS`` of the transformers model inside ``model``, read once per class."""
    cls = type(inner(model))
    if cls not in KEYWORDS:
        params = inspect.signature(cls.forward).parameters
        cache = next((k for k in ("cache", "past_key_values") if k in params), None)
        keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        KEYWORDS[cls] = (cache, keep)
    return KEYWORDS[cls]


def inner(model: Any) -> Any:
    """The transformers model inside ``model``: a peft wrapper (or the adapter-free KL
    reference) calls it with the keyword arguments it is given."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def can_share(model: Any) -> bool:
    """Whether the prompt may be computed once per group: the model takes a KV cache, and in
    training no gradient checkpointing is on (it recomputes each layer in the backward pass,
    which would append to the cache a second time) and no dropout (each row draws its own
    mask; the G rows of a prompt would share one). Not under FSDP, where two forward passes of
    one wrapped layer before its backward pass have never been run."""
    base = inner(model)
    if keywords(model)[0] is None:
        return False
    if base.training and (getattr(base, "is_gradient_checkpointing", False) or drops(base)):
        return False
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        from torch.distributed.fsdp import FullyShardedDataParallel

        return not any(isinstance(m, FullyShardedDataParallel) for m in base.modules())
    return True


def drops(model: Any) -> bool:
    """Whether ``model`` has dropout that is on in training: a dropout layer (LoRA's among
    them) or attention dropout in its config."""
    config = getattr(model, "config", None)
    if float(getattr(config, "attention_dropout", 0.0) or 0.0) > 0:
        return True
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def read_width(seen: Tensor) -> int:
    """Columns up to the last response token any row reads (at least 1)."""
    columns = seen.any(0).nonzero()
    return int(columns.max()) + 1 if len(columns) else 1


def call_model(
    model: Any,
    ids: Tensor,
    attn: Tensor,
    pos: Tensor,
    *,
    keep: int,
    hidden: bool,
    cache: Any = None,
) -> Any:
    """One forward pass; the logits of the last ``keep`` positions (0: all of them)."""
    cache_kw, keep_kw = keywords(model)
    kw: dict[str, Any] = {"use_cache": cache is not None}
    if cache is not None:
        kw[str(cache_kw)] = cache
    if keep_kw is not None and keep:
        kw[keep_kw] = keep
    return model(
        input_ids=ids, attention_mask=attn, position_ids=pos, output_hidden_states=hidden, **kw
    )


def plain_logits(
    model: Any, sequences: Tensor, prompt_mask: Tensor, seen: Tensor, width: int, hidden: bool
) -> tuple[Tensor, Tensor | None]:
    """``[S, width, V]`` logits that predict response tokens 0 … width − 1 (and their hidden
    states), from one pass over every row's prompt and response."""
    P = prompt_mask.shape[1]
    attn = torch.cat([prompt_mask.bool(), seen[:, : width - 1]], -1).long()
    out = call_model(
        model, sequences[:, : P + width - 1], attn, positions(attn), keep=width, hidden=hidden
    )
    states = out.hidden_states[-1][:, -width:] if hidden else None
    return out.logits[:, -width:], states


def shared_logits(
    model: Any, sequences: Tensor, prompt_mask: Tensor, seen: Tensor, width: int, hidden: bool
) -> tuple[Tensor, Tensor | None]:
    """``plain_logits`` with each distinct prompt computed once: its keys and values are
    gathered into every row that has it (a differentiable gather), then the responses run
    against them. Also right when no two rows share a prompt, only not faster then."""
    from transformers import DynamicCache

    P = prompt_mask.shape[1]
    key = torch.cat([sequences[:, :P], prompt_mask.long()], 1)
    unique, rows = torch.unique(key, dim=0, return_inverse=True)
    ids, pmask = unique[:, :P], unique[:, P:]
    cache = DynamicCache()
    head = call_model(model, ids, pmask, positions(pmask), keep=1, hidden=hidden, cache=cache)
    logits = head.logits[:, -1:][rows]
    states = head.hidden_states[-1][:, -1:][rows] if hidden else None
    if width == 1:
        return logits, states
    cache.batch_select_indices(rows)
    attn = torch.cat([prompt_mask.bool(), seen[:, : width - 1]], -1).long()
    responses, pos = sequences[:, P : P + width - 1], positions(attn)[:, P:]
    tail = call_model(model, responses, attn, pos, keep=0, hidden=hidden, cache=cache)
    logits = torch.cat([logits, tail.logits], 1)
    if states is not None:
        states = torch.cat([states, tail.hidden_states[-1]], 1)
    return logits, states


def forward_logprobs(
    model: Any,
    sequences: Tensor,
    prompt_mask: Tensor,
    mask: Tensor,
    temperature: float,
    *,
    hidden: bool = False,
    attend: Tensor | None = None,
    sum_pi_squared: bool = False,
    share_prompts: bool = True,
) -> TokenScores:
    """``sequences [S, P + T]``, ``prompt_mask [S, P]`` (as ``generate`` saw it), response
    ``mask [S, T]`` → ``TokenScores`` at ``temperature`` (log-softmax in float32 whatever the
    weights' dtype). ``attend``: the response tokens read where the environment answered
    between turns (read, never trained); else the loss mask is what is read.
    ``share_prompts=False`` forces one plain pass over every row (the reference the shared
    pass is tested against)."""
    P, T = prompt_mask.shape[1], mask.shape[1]
    seen = (mask if attend is None else attend).bool()
    width = read_width(seen)
    share = share_prompts and can_share(model) and _repeats(sequences[:, :P], prompt_mask)
    pass_ = shared_logits if share else plain_logits
    logits, states = pass_(model, sequences, prompt_mask, seen, width, hidden)
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    logsm = torch.log_softmax(logits, -1)
    logp = logsm.gather(-1, sequences[:, P : P + width].unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        probs = logsm.exp()
        entropy = -(probs * logsm).sum(-1)
        squares = probs.square().sum(-1) if sum_pi_squared else None
    read = seen[:, :width]

    def full(x: Tensor) -> Tensor:  # zero where not read, then padded to the T columns
        kept = torch.where(read.reshape(read.shape + (1,) * (x.dim() - 2)), x, 0)
        return torch.nn.functional.pad(kept, (0, 0) * (x.dim() - 2) + (0, T - width))

    return TokenScores(
        full(logp),
        full(entropy),
        None if states is None else full(states),
        None if squares is None else full(squares),
    )


def _repeats(prompts: Tensor, prompt_mask: Tensor) -> bool:
    """Whether two rows have the same prompt (the shared pass then saves work)."""
    key = torch.cat([prompts, prompt_mask.long()], 1)
    return bool(torch.unique(key, dim=0).shape[0] < key.shape[0])


def rollout_forward(
    model: Any,
    sequences: Tensor,
    prompt_mask: Tensor,
    mask: Tensor,
    *,
    temperature: float,
    chunks: int,
    hidden: bool,
    sum_pi_squared: bool = False,
    attend: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """``forward_logprobs`` in ``chunks`` pieces of consecutive rows (the update's micro-batch
    count; a group's rows stay together), so that the rollout's ``[S, T, V]`` float32 logits
    never exist at once (S = 512, T = 512, V = 151,936 would be 159 GB). Returns ``[S, T]``
    log-probs, ``[S, T]`` entropy, ``[S, T, D]`` hidden states (or None) and, on request,
    ``[S, T]`` Σ_v π(v)² at the sampling temperature (the optimal token baseline's input)."""
    parts = [
        forward_logprobs(
            model,
            sequences[rows],
            prompt_mask[rows],
            mask[rows],
            temperature,
            hidden=hidden,
            attend=None if attend is None else attend[rows],
            sum_pi_squared=sum_pi_squared,
        )
        for rows in torch.arange(sequences.shape[0], device=sequences.device).chunk(chunks)
    ]
    states = [p.hidden for p in parts if p.hidden is not None]
    squares = [p.sum_pi_squared for p in parts if p.sum_pi_squared is not None]
    return (
        torch.cat([p.logp for p in parts]),
        torch.cat([p.entropy for p in parts]),
        torch.cat(states) if states else None,
        torch.cat(squares) if squares else None,
    )
