"""The embedded default policy: a tiny Llama built from a config, a character tokenizer built with
``tokenizers``, a short supervised warm-start on the addition task, saved with
``save_pretrained`` so that the trainer loads it with the same ``from_pretrained(path)`` code as a
real checkpoint. Nothing is downloaded.

The folder is built once per (spec, seed) and reused: ``~/.cache/advest/embedded-<hash>`` unless
``ADVEST_HOME`` says otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .task import ALPHABET, problem

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
CONTEXT = 64
"""The embedded model's context in tokens (prompt and completion), checked before it is built."""


@dataclass(frozen=True)
class EmbeddedSpec:
    """What the embedded default is made of; its hash names the cache folder."""

    hidden_size: int = 96
    layers: int = 3
    heads: int = 4
    digits: int = 2
    warm_start_steps: int = 1000
    """Supervised steps: enough to be partly competent, so RL has signal to amplify."""
    warm_start_batch: int = 64
    warm_start_lr: float = 3e-3
    seed: int = 0


def home() -> Path:
    return Path(os.environ.get("ADVEST_HOME", Path.home() / ".cache" / "advest"))


def build_tokenizer() -> object:
    """A character-level ``PreTrainedTokenizerFast``: one token per character of the task."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([PAD, BOS, EOS, *ALPHABET])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, padding_side="left"
    )


def build_model(spec: EmbeddedSpec, vocab_size: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=2 * spec.hidden_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=CONTEXT,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(spec.seed)
    return LlamaForCausalLM(config)


def _sft_batch(tokenizer: object, spec: EmbeddedSpec, step: int) -> dict[str, torch.Tensor]:
    """Prompt + answer + eos, loss on the answer and eos only; problems drawn from the training
    index range of a seed (``-1 - seed``) that RL never uses."""
    problems = [
        problem(-1 - spec.seed, step * spec.warm_start_batch + i, spec.digits)
        for i in range(spec.warm_start_batch)
    ]
    texts = [BOS + p.prompt + p.answer + EOS for p in problems]
    enc = tokenizer(texts, return_tensors="pt", padding=True)  # type: ignore[operator]
    labels = enc["input_ids"].clone()
    for i, p in enumerate(problems):
        n_answer = len(p.answer) + 1
        labels[i, : labels.shape[1] - n_answer] = -100
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "labels": labels,
    }


def warm_start(model: torch.nn.Module, tokenizer: object, spec: EmbeddedSpec) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr, weight_decay=0.0)
    model.train()
    for step in range(spec.warm_start_steps):
        loss = model(**_sft_batch(tokenizer, spec, step)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def build(spec: EmbeddedSpec | None = None, *, verbose: bool = True) -> Path:
    """The folder of the embedded default (built on first use; atomic, so a killed build leaves
    no half-written folder)."""
    spec = spec or EmbeddedSpec()
    key = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    path = home() / f"embedded-{key}"
    if (path / "config.json").exists():
        return path
    start = time.perf_counter()
    if verbose:
        print(f"building the embedded default model in {path} ...", flush=True)
    tokenizer = build_tokenizer()
    model = build_model(spec, len(tokenizer))  # type: ignore[arg-type]
    warm_start(model, tokenizer, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".building-"))
    from .hf import quiet_transformers

    with quiet_transformers():  # no "Writing model shards" bar
        model.save_pretrained(tmp)  # type: ignore[operator]
        tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
    (tmp / "advest_embedded.json").write_text(json.dumps(asdict(spec), indent=1))
    try:
        tmp.rename(path)
    except OSError:  # another process won the race; its folder is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print(f"built in {time.perf_counter() - start:.1f} s", flush=True)
    return path
