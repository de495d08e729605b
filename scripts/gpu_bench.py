"""The scale table of issue 15: a ~0.5 B Qwen2-style policy, G = 8, 64 prompts per step, 512 new
tokens; generated tokens/s, seconds per step by phase and peak GPU memory for float32 vs bf16,
with and without gradient checkpointing, full fine-tuning vs LoRA, both generators, FSDP on one
GPU; then an FSDP LoRA run killed after 2 steps and resumed, against a straight run.

    python scripts/gpu_bench.py                  # on the GPU machine (one H100), ~20 min
    python scripts/gpu_bench.py --tiny           # the same code at toy sizes, on CPU, ~1 min
    python scripts/gpu_bench.py --rows 0,1 --steps 2

Nothing is downloaded: the model is built from a ``Qwen2Config`` (the sizes of Qwen2.5-0.5B,
vocabulary 151,936) with a word-level tokenizer built by ``tokenizers`` (the addition task's
characters, then filler tokens up to the vocabulary size), warm-started briefly on the embedded
addition task and saved with ``save_pretrained``; every row then runs ``advest train`` on it.
On a GPU each row runs in its own process, so that its peak memory is its own. The first step
of each row is a warm-up and is left out of the times.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing it

import torch  # noqa: E402

SIZES: dict[str, dict[str, Any]] = {
    # Qwen2.5-0.5B's shape: 494 M parameters with the tied 151,936 × 896 embedding
    "0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
    },
}

BF16 = {"dtype": "bfloat16", "precision": "bf16-true"}
LORA = {"lora_r": 16, "lora_alpha": 32, "lora_target_modules": ["all-linear"]}
ROWS: list[dict[str, Any]] = [
    {"dtype": "float32", "precision": "32-true"},
    {"dtype": "float32", "precision": "bf16-mixed"},
    BF16,
    {**BF16, "gradient_checkpointing": True},
    {**BF16, "generator": "continuous"},
    {**BF16, **LORA},
    {**BF16, **LORA, "gradient_checkpointing": True},
    {**BF16, "strategy": "fsdp"},
    {**BF16, **LORA, "strategy": "fsdp"},
]
"""One table row each: RLConfig fields, plus ``precision`` and ``strategy`` for the Trainer."""

PHASES = ["generate", "forward", "reward", "advantage", "update"]


def build(size: str, warm_steps: int, device: str) -> Path:
    """The bench policy's folder (built once per size)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from advest.training import embedded
    from advest.training.embedded import BOS, EOS, PAD, EmbeddedSpec
    from advest.training.task import ALPHABET

    path = embedded.home() / f"gpu-bench-{size}-{warm_steps}"
    if (path / "config.json").exists():
        return path
    shape = SIZES[size]
    words = [PAD, BOS, EOS, *ALPHABET]
    words += [f"<extra_{i}>" for i in range(shape["vocab_size"] - len(words))]
    core = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, padding_side="left"
    )
    config = Qwen2Config(
        **shape,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    torch.nn.Module.to(model, device)  # torch's typed `to`; transformers wraps its own
    print(f"built {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M parameters", flush=True)
    spec = EmbeddedSpec(warm_start_batch=64, warm_start_lr=1e-3)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
    model.train()
    for step in range(warm_steps):
        batch = {k: v.to(device) for k, v in embedded._sft_batch(tok, spec, step).items()}
        with torch.autocast(device.split(":")[0], torch.bfloat16, enabled=device != "cpu"):
            loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"warm-start: {warm_steps} steps, last loss {float(loss):.3f}", flush=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def run_row(i: int, model: str, a: argparse.Namespace) -> dict[str, Any]:
    """Train row ``i`` for ``a.steps`` steps; its mean phase times after the first step."""
    import lightning as L

    from advest.training.config import RLConfig
    from advest.training.train import train

    row = dict(ROWS[i])
    trainer: dict[str, Any] = {
        "enable_progress_bar": False,
        "precision": row.pop("precision"),
        "strategy": row.pop("strategy", "auto"),
    }
    cfg = RLConfig(
        model=model,
        steps=a.steps,
        prompts_per_step=a.prompts,
        group_size=a.group_size,
        max_new_tokens=a.new_tokens,
        micro_batches=a.micro_batches,
        ppo_epochs=1,
        kl_coef=1e-3,  # the reference forward pass is part of every row
        estimator="grpo",
        k=min(4, a.group_size),  # the logged pass@k
        reward="exact",
        eval_prompts=0,
        checkpoint_every=0,
        out=a.out,
        **row,
    )
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    L.seed_everything(0, verbose=False)
    folder = train(cfg, trainer, name=f"row{i}", evaluate=False)
    rows = list(csv.DictReader((folder / "metrics.csv").open()))[1:] or [{}]
    mean = {p: _mean(rows, f"time/{p}") for p in PHASES}
    length = _mean(rows, "response_length")
    sequences = a.prompts * a.group_size
    return {
        "row": i,
        **ROWS[i],
        **{f"{p}_s": v for p, v in mean.items()},
        "step_s": sum(mean.values()),
        "tokens_per_s": length * sequences / mean["generate"] if mean["generate"] else 0.0,
        "response_length": length,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0,
    }


def _mean(rows: list[dict[str, str]], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key)]
    return sum(values) / len(values) if values else float("nan")


def table(results: list[dict[str, Any]]) -> str:
    head = "| weights | precision | ckpt | LoRA | generator | strategy | tokens/s | "
    head += " | ".join(f"{p} s" for p in PHASES) + " | step s | peak GiB |"
    lines = [head, "|" + "---|" * 14]
    for r in results:
        if "error" in r:
            lines.append(f"| row {r['row']}: {r['error']} |")
            continue
        cells = [
            r["dtype"],
            r["precision"],
            "yes" if r.get("gradient_checkpointing") else "",
            f"r={r['lora_r']}" if r.get("lora_r") else "",
            r.get("generator", "generate"),
            r.get("strategy", "auto"),
            f"{r['tokens_per_s']:.0f}",
            *(f"{r[f'{p}_s']:.3f}" for p in PHASES),
            f"{r['step_s']:.2f}",
            f"{r['peak_gib']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def environment() -> str:
    import lightning
    import transformers

    try:
        import peft

        peft_version = peft.__version__
    except ImportError:
        peft_version = "absent"
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    return (
        f"{device}; torch {torch.__version__}, transformers {transformers.__version__}, "
        f"lightning {lightning.__version__}, peft {peft_version}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="toy sizes: a smoke run on CPU")
    p.add_argument("--rows", default=None, help="comma-separated row numbers (default: all)")
    p.add_argument("--steps", type=int, default=None, help="rollout steps per row (first: warm-up)")
    p.add_argument("--out", default="runs/gpu_bench", help="run folders and results.jsonl")
    p.add_argument("--row", type=int, default=None, help=argparse.SUPPRESS)  # child process
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    big = not a.tiny
    a.prompts, a.group_size = (64, 8) if big else (2, 2)
    a.new_tokens, a.micro_batches = (512, 64) if big else (8, 2)
    a.steps = a.steps or (3 if big else 2)
    if a.row is not None:  # one row, in this process; the result goes to stdout as JSON
        print("RESULT " + json.dumps(run_row(a.row, a.model, a)), flush=True)
        return 0
    gpu = torch.cuda.is_available()
    os.environ.setdefault("ADVEST_HOME", str(Path(a.out) / "home"))
    model = str(build("0.5b" if big else "tiny", 50 if big else 5, "cuda" if gpu else "cpu"))
    rows = [int(r) for r in a.rows.split(",")] if a.rows else list(range(len(ROWS)))
    results = []
    for i in rows:
        start = time.perf_counter()
        if not gpu and ROWS[i].get("strategy") == "fsdp":
            results.append({"row": i, "error": "FSDP needs a GPU (refused before loading)"})
            continue
        if gpu:  # a fresh process per row: its own peak memory, its own process group
            cmd = [sys.executable, __file__, "--row", str(i), "--model", model, "--out", a.out]
            cmd += ["--steps", str(a.steps)] + (["--tiny"] if a.tiny else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
            result = json.loads(found[-1][7:]) if found else {"row": i, "error": tail[0]}
        else:
            result = run_row(i, model, a)
        results.append(result)
        print(f"row {i} done in {time.perf_counter() - start:.0f} s: {result}", flush=True)
        with (Path(a.out) / "results.jsonl").open("a") as f:
            f.write(json.dumps(result) + "\n")
    sequences = a.prompts * a.group_size
    print(f"\n{environment()}")
    print(f"G = {a.group_size}, {a.prompts} prompts per step ({sequences} sequences), "
          f"{a.new_tokens} new tokens, {a.micro_batches} micro-batches, KL on, "
          f"mean of steps 2..{a.steps}\n")  # fmt: skip
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
