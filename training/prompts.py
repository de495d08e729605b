"""Prompts as the model expects them: the one place a prompt becomes token ids.

A prompt is text or a list of chat messages. When the tokenizer has a chat template (and
``chat_template`` is on), the messages (a text prompt is one user message; ``system_prompt``
prepends a system message) go through ``apply_chat_template(..., add_generation_prompt=True)``,
whose template writes any BOS itself. Otherwise the text is tokenized as the tokenizer does by
default, and a BOS is prepended only when the tokenizer has one and did not add it: never two.

The attention mask of a batch is built here, from the lengths, never from token ids, so a pad
token equal to EOS cannot hide EOS tokens inside a prompt; the rollout keeps this mask and the
training forward pass uses the same one ``generate`` saw.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .data import Prompt


def messages(prompt: Prompt, system_prompt: str | None) -> list[dict[str, str]]:
    out = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if system_prompt and out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": system_prompt})
    return out


def uses_template(tokenizer: Any, chat_template: bool) -> bool:
    return bool(chat_template and getattr(tokenizer, "chat_template", None))


def token_ids(
    tokenizer: Any, prompt: Prompt, *, chat_template: bool = True, system_prompt: str | None = None
) -> list[int]:
    """The prompt's token ids, ready for generation. Raises ``ValueError`` for chat messages
    when the tokenizer has no chat template (or it is switched off)."""
    if uses_template(tokenizer, chat_template):
        ids = tokenizer.apply_chat_template(
            messages(prompt, system_prompt), add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in newer versions
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    if not isinstance(prompt, str):
        raise ValueError(
            "a prompt given as chat messages needs a tokenizer with a chat template "
            "(this one has none, or --no_chat_template is set)"
        )
    text = f"{system_prompt}\n\n{prompt}" if system_prompt else prompt
    ids = [int(i) for i in tokenizer(text)["input_ids"]]
    bos = tokenizer.bos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids = [bos, *ids]
    return ids


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """``[B, P]`` ids, left-padded with ``pad_id``, and ``[B, P]`` int64 attention mask (1 on
    the prompt tokens, whatever their ids)."""
    P = max(len(r) for r in rows)
    ids = torch.full((len(rows), P), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), P, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, P - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[b, P - len(r) :] = 1
    return ids, mask


def encode(
    tokenizer: Any,
    prompts: list[Prompt],
    *,
    chat_template: bool = True,
    system_prompt: str | None = None,
) -> tuple[Tensor, Tensor]:
    """A batch of prompts: ``[B, P]`` left-padded ids and their ``[B, P]`` attention mask."""
    rows = [
        token_ids(tokenizer, p, chat_template=chat_template, system_prompt=system_prompt)
        for p in prompts
    ]
    return left_pad(rows, tokenizer.pad_token_id)


def drop_long(rows: list[Any], tokenizer: Any, cfg: Any, model_path: str) -> list[Any]:
    """Rows of --data whose prompt is longer than ``cfg.max_prompt_tokens`` are dropped (with a
    count), so that every step's prompts fit the budget the settings were checked for; with no
    budget set, the budget is what the model's context leaves beside ``cfg.max_new_tokens``.
    Raises ``ConfigError`` when no row fits."""
    import json
    from pathlib import Path

    from .settings import ConfigError

    size = [
        len(
            token_ids(
                tokenizer,
                r.prompt,
                chat_template=cfg.chat_template,
                system_prompt=cfg.system_prompt,
            )
        )
        for r in rows
    ]
    limit = cfg.max_prompt_tokens
    if limit is None:  # what the context leaves beside the completion budget
        config = Path(model_path) / "config.json"  # read, not loaded: no weights yet
        context = (
            json.loads(config.read_text()).get("max_position_embeddings")
            if config.is_file()
            else None
        )
        limit = context - cfg.max_new_tokens if isinstance(context, int) else max(size)
    kept = [r for r, n in zip(rows, size, strict=True) if n <= limit]
    if not kept:
        raise ConfigError(
            f"--data {cfg.data}: every prompt is longer than --max_prompt_tokens {limit} "
            f"(shortest: {min(size)} tokens); raise it or shorten the prompts"
        )
    if len(kept) < len(rows):
        print(
            f"--data {cfg.data}: dropped {len(rows) - len(kept)} of {len(rows)} rows longer "
            f"than --max_prompt_tokens {limit}",
            flush=True,
        )
    return kept
