"""Small but realistic local chat checkpoints, built inside the tests (nothing is downloaded).

Each is a ``save_pretrained`` folder with a byte-level BPE tokenizer trained with ``tokenizers``
on text generated here, a chat template, and a randomly initialised model:

* ``qwen2``: Qwen2 architecture, ChatML template (``<|im_start|>`` … ``<|im_end|>``), a pad token
  of its own (``<|endoftext|>``), no BOS: as Qwen2 ships.
* ``llama``: Llama architecture, no pad token (the trainer falls back to EOS), a tokenizer that
  adds ``<s>`` by itself and a template that writes ``{{ bos_token }}`` and closes every message
  with EOS ``</s>``: EOS tokens inside every prompt, the case where pad = EOS used to shift the
  log-probs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

import torch

Kind = Literal["qwen2", "llama"]

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LLAMA = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}</s>"
    "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
)


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    """Generated training text for the tokenizer: chat words, sums and their answers."""
    rng = random.Random(seed)
    words = [
        "system",
        "user",
        "assistant",
        "what",
        "is",
        "the",
        "sum",
        "of",
        "and",
        "please",
        "answer",
        "with",
        "a",
        "number",
        "only",
    ]
    lines = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        lines.append(f"{' '.join(rng.choices(words, k=5))} {a}+{b}={a + b} The answer is {a + b}.")
    return lines


def build_tokenizer(kind: Kind) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] if kind == "qwen2" else ["<s>", "</s>"]
    )
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus(), trainer=trainer)
    if kind == "qwen2":
        return PreTrainedTokenizerFast(
            tokenizer_object=core,
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            chat_template=CHATML,
        )
    bos = core.token_to_id("<s>")
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", chat_template=LLAMA
    )


def build(kind: Kind, folder: Path, seed: int = 0) -> Path:
    """Write the checkpoint to ``folder`` (model and tokenizer, ``save_pretrained``)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer(kind)
    sizes = {
        "vocab_size": len(tok),  # type: ignore[arg-type]
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "eos_token_id": tok.eos_token_id,  # type: ignore[attr-defined]
        "pad_token_id": tok.pad_token_id,  # type: ignore[attr-defined]
        "bos_token_id": tok.bos_token_id,  # type: ignore[attr-defined]
        "tie_word_embeddings": True,
    }
    torch.manual_seed(seed)
    if kind == "qwen2":
        model: torch.nn.Module = Qwen2ForCausalLM(Qwen2Config(**sizes))
    else:
        model = LlamaForCausalLM(LlamaConfig(**sizes))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)  # type: ignore[operator]
    tok.save_pretrained(folder)  # type: ignore[attr-defined]
    return folder
