"""Rollout generation engines behind one signature, chosen by ``--generator``.

Notation: ``B`` prompts, ``G`` samples per prompt, ``P`` the left-padded prompt width, ``T`` the
response budget (``max_new_tokens``).

An engine takes the policy, the tokenizer, the left-padded prompt batch (``input_ids`` and
``attention_mask``, ``[B, P]``) and the sampling settings, and returns ``[B·G, P + t]`` token ids
(``t ≤ T``): row ``b·G + g`` is sample ``g`` of prompt ``b``, its first ``P`` columns the prompt
exactly as given, then the sampled tokens, ending at the first EOS, right-padded with the pad
id. It uses the global torch random stream (the trainer seeds it per step), so a seed fixes the
samples. Log-probs are not an engine's business: the trainer recomputes them in one forward
pass of the policy (float32 ``log_softmax``), so every engine is scored the same way.

Engines: ``generate`` (``model.generate``, the default) and ``continuous`` (transformers'
continuous batching with a paged KV cache, ``model.generate_batch``). Another engine (vLLM,
SGLang) plugs in by adding a function with this signature to ``ENGINES``; it must sync the
policy's current weights before sampling, since the trainer updates them in place every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .logprobs import call_model, keywords, positions


@dataclass(frozen=True)
class Sampling:
    group_size: int
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0


Engine = Callable[[Any, Any, dict[str, Tensor], Sampling], Tensor]


@torch.no_grad()
def generate(model: Any, tokenizer: Any, enc: dict[str, Tensor], s: Sampling) -> Tensor:
    """``model.generate``: one padded batch of ``B·G`` rows decoded in lock-step, from a KV cache
    of each prompt computed once (``prompt_cache``) where the model takes one."""
    ids, mask = enc["input_ids"], enc["attention_mask"]
    cache = prompt_cache(model, ids, mask, s.group_size)
    kw: dict[str, Any] = {"num_return_sequences": s.group_size}
    if cache is not None:  # the rows come expanded, each with its prompt's cached state
        ids, mask = ids.repeat_interleave(s.group_size, 0), mask.repeat_interleave(s.group_size, 0)
        kw = {str(keywords(model)[0]): cache}
    out: Tensor = model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=0,
        max_new_tokens=s.max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **kw,
    )
    return out


def prompt_cache(model: Any, ids: Tensor, mask: Tensor, group: int) -> Any:
    """The KV cache of the B prompts ``ids [B, P]`` but their last token, each computed once and
    repeated for its ``group`` samples, or None where it saves nothing (G = 1, one-token
    prompts) or the model takes no cache. ``generate`` with ``num_return_sequences`` repeats
    each prompt G times before its first forward pass and so computes it G times: for
    SmolLM2's 46-token chat prompts, 8 samples of 24 tokens, that first pass was 3.9 of 9 CPU
    seconds of generation. ``generate`` runs the last token itself (it needs its logits)."""
    from transformers import DynamicCache

    if group < 2 or ids.shape[1] < 2 or keywords(model)[0] is None:
        return None
    cache = DynamicCache()
    head, head_mask = ids[:, :-1], mask[:, :-1]
    call_model(model, head, head_mask, positions(head_mask), keep=1, hidden=False, cache=cache)
    cache.batch_repeat_interleave(group)
    return cache


PAGE_SIZE = 16
"""Tokens per KV-cache page of the continuous engine (short rollouts waste little of a page)."""


@torch.no_grad()
def continuous(model: Any, tokenizer: Any, enc: dict[str, Tensor], s: Sampling) -> Tensor:
    """transformers' continuous batching (``generate_batch``): unpadded requests, a paged KV
    cache, finished rows replaced by waiting ones. The cache is sized for the whole rollout
    (``B·G`` requests of at most ``P + T`` tokens), not from free memory, so that generation
    does not reserve memory the update then lacks."""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    B, P = ids.shape
    G = s.group_size
    prompts = [row[m].tolist() for row, m in zip(ids, mask, strict=True)]
    pages = math.ceil((P + s.max_new_tokens) / PAGE_SIZE)
    config = GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=True,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=0,
        max_new_tokens=s.max_new_tokens,
        num_return_sequences=G,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    cache = ContinuousBatchingConfig(
        page_size=PAGE_SIZE,
        num_blocks=B * G * pages + 1,
        max_batch_tokens=max(256, B * P),
        # the engine samples on its own thread with its own generator: seed it from the
        # trainer's seeded stream so that a step's seed fixes its samples
        seed=int(torch.randint(2**31 - 1, ())),
        use_cuda_graph=False,
    )
    results = model.generate_batch(
        prompts, generation_config=config, continuous_batching_config=cache, warmup=False
    )
    rows = list(results.values())  # per prompt, in order: its G samples (children, then parent)
    failed = [r.request_id for r in rows if r.error is not None]
    if len(rows) != B * G or failed:
        raise RuntimeError(
            f"continuous batching returned {len(rows)} of {B * G} samples (failed: {failed})"
        )
    T = max(len(r.generated_tokens) for r in rows)
    out = torch.full((B * G, P + T), tokenizer.pad_token_id, dtype=ids.dtype)
    for i, r in enumerate(rows):
        if r.prompt_ids != prompts[i // G]:
            raise RuntimeError(f"continuous batching returned sample {i} for another prompt")
        out[i, :P] = ids[i // G]
        out[i, P : P + len(r.generated_tokens)] = torch.tensor(r.generated_tokens)
    return out.to(ids.device)


ENGINES: dict[str, Engine] = {"generate": generate, "continuous": continuous}


def get(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown generator {name!r}; valid names: {sorted(ENGINES)}") from None
