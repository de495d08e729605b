"""The policy as the trainer, evaluation and the experiments load and read it: tokenizer and
model from a local folder (the one place a model is loaded), and the log-probs of responses under
a model (``logprobs.py``, re-exported here). No Lightning here: evaluation and the experiments
import this, not the training loop.
"""

from __future__ import annotations

from typing import Any

import torch

from .logprobs import TokenScores, forward_logprobs, positions, rollout_forward

__all__ = [
    "TokenScores",
    "forward_logprobs",
    "load_policy",
    "load_tokenizer",
    "positions",
    "rollout_forward",
]


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
