"""The policy as the trainer, evaluation and the experiments load and read it: tokenizer and
model from a local folder (the one place a model is loaded), and the log-probs of responses under
a model. No Lightning here: evaluation and the experiments import this, not the training loop.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def load_tokenizer(path: str) -> Any:
    """The tokenizer of a local folder, left-padding, with a pad token: its own, else its unknown
    token, else EOS (safe: attention masks come from prompt lengths, never from pad ids)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        unk = tokenizer.unk_token
        tokenizer.pad_token = unk if unk is not None and unk != tokenizer.eos_token else None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(path: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """Model (weights in ``dtype``) and tokenizer from a local folder (never the hub): the one
    place a model is loaded, so that precision, adapters or checkpointing are decided here."""
    from transformers import AutoModelForCausalLM

    from .hf import quiet_transformers

    tokenizer = load_tokenizer(path)
    with quiet_transformers():  # no "Loading weights" bar
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    return model, tokenizer


def positions(attention_mask: Tensor) -> Tensor:
    """Position ids that skip left padding, as ``generate`` uses them."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def forward_logprobs(
    model: Any,
    sequences: Tensor,
    prompt_mask: Tensor,
    mask: Tensor,
    temperature: float,
    *,
    hidden: bool = False,
    attend: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """``sequences [S, P + T]``, ``prompt_mask [S, P]`` (as ``generate`` saw it), response
    ``mask [S, T]`` → log-probs ``[S, T]`` of the response tokens at ``temperature``, the logits
    ``[S, T, V]`` they come from, and (on request) last-layer hidden states ``[S, T, D]``; the
    state at position P−1+t is the one that emitted token t."""
    P = prompt_mask.shape[1]
    # the response tokens the policy reads: ``attend`` where the environment answered between
    # turns (those tokens are read, never trained), else the loss mask itself
    seen = mask if attend is None else attend
    attn = torch.cat([prompt_mask.bool(), seen.bool()], -1).long()
    out = model(
        input_ids=sequences,
        attention_mask=attn,
        position_ids=positions(attn),
        output_hidden_states=hidden,
        use_cache=False,
    )
    logits = out.logits[:, P - 1 : -1].float() / temperature
    targets = sequences[:, P:]
    logp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    states = out.hidden_states[-1][:, P - 1 : -1] if hidden else None
    return logp, logits, states


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
    """``forward_logprobs`` in ``chunks`` pieces (the update's micro-batch count), keeping
    per-token entropy instead of the logits: the rollout's ``[S, T, V]`` float32 logits never
    exist at once (S = 512, T = 512, V = 151,936 would be 159 GB). Returns ``[S, T]``
    log-probs, ``[S, T]`` entropy, ``[S, T, D]`` hidden states (or None) and, on request,
    ``[S, T]`` Σ_v π(v)² at the sampling temperature (the optimal token baseline's input)."""
    from .metrics import entropy

    logps, ents, states, squares = [], [], [], []
    for rows in torch.arange(sequences.shape[0], device=sequences.device).chunk(chunks):
        seen = None if attend is None else attend[rows]
        logp, logits, state = forward_logprobs(
            model,
            sequences[rows],
            prompt_mask[rows],
            mask[rows],
            temperature,
            hidden=hidden,
            attend=seen,
        )
        logps.append(logp)
        ents.append(entropy(logits))
        if sum_pi_squared:
            squares.append(torch.softmax(logits, -1).square().sum(-1))
        if state is not None:
            states.append(state)
    return (
        torch.cat(logps),
        torch.cat(ents),
        torch.cat(states) if states else None,
        torch.cat(squares) if squares else None,
    )
