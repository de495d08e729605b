"""A real verl ``main_ppo`` comparison of GRPO and advest's MaxPO (K = 4) on one GPU, with a
local model folder and reasoning-gym prompts: the same command line as the CPU start-up test
(``tests/verl/check_main_ppo.py``), scaled up. Run it in the verl environment on a machine with
a GPU and verl's rollout engine (vLLM or SGLang) installed; nothing is downloaded.

    .venv-verl/bin/python scripts/verl_main_ppo.py --model /path/to/Qwen2.5-0.5B-Instruct \\
        --out runs/verl-main-ppo [--steps 50] [--dry_run]

Each arm is one ``python -m verl.trainer.main_ppo`` process; verl writes its own console log
(``<out>/<arm>.log``), whose ``critic/score/mean`` lines are the training reward per step.
``--dry_run`` prints the two commands and writes the data without running them.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REWARD = '''
import re

def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """1 when the last number in the completion equals the gold answer (reasoning-gym's
    chain_sum answers are integers), else 0."""
    numbers = re.findall(r"-?\\d+", solution_str)
    return float(bool(numbers) and numbers[-1] == str(ground_truth).strip())
'''

ARMS = {"grpo": ["algorithm.adv_estimator=grpo"],
        "maxpo": ["algorithm.adv_estimator=advest_maxpo", "+algorithm.advest_k=4"]}  # fmt: skip


def write_data(out: Path, size: int, seed: int) -> None:
    import pandas as pd
    import reasoning_gym

    options = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}
    for split, n, s in (("train", size, seed), ("val", 128, seed + 1_000_003)):
        rows = [
            {
                "data_source": "advest_chain_sum",
                "prompt": [{"role": "user", "content": e["question"]}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(e["answer"])},
                "extra_info": {"index": i},
            }
            for i, e in enumerate(
                reasoning_gym.create_dataset("chain_sum", size=n, seed=s, **options)
            )
        ]
        pd.DataFrame(rows).to_parquet(out / f"{split}.parquet")
    (out / "reward.py").write_text(REWARD)


def command(model: str, out: Path, arm: str, steps: int) -> list[str]:
    return [
        sys.executable, "-m", "verl.trainer.main_ppo", *ARMS[arm],
        f"data.train_files={out / 'train.parquet'}", f"data.val_files={out / 'val.parquet'}",
        "data.train_batch_size=32", "data.max_prompt_length=256", "data.max_response_length=256",
        f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
        "actor_rollout_ref.actor.use_kl_loss=False", "algorithm.use_kl_in_reward=False",
        f"custom_reward_function.path={out / 'reward.py'}",
        "custom_reward_function.name=compute_score",
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.logger=[console]",
        f"trainer.total_training_steps={steps}", "trainer.test_freq=10", "trainer.save_freq=-1",
        "trainer.project_name=advest", f"trainer.experiment_name={arm}",
        f"trainer.default_local_dir={out / arm}",
    ]  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True, help="a local save_pretrained folder")
    p.add_argument("--out", default="runs/verl-main-ppo")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--size", type=int, default=2048, help="training prompts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry_run", action="store_true")
    a = p.parse_args()
    if not (Path(a.model) / "config.json").is_file():
        p.error(f"--model {a.model}: not a save_pretrained folder (no config.json)")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    write_data(out, a.size, a.seed)
    for arm in ARMS:
        cmd = command(a.model, out, arm, a.steps)
        print(" ".join(cmd), flush=True)
        if a.dry_run:
            continue
        with (out / f"{arm}.log").open("w") as log:
            env = {**os.environ, "ADVEST_VERL_VERBOSE": "1"}
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        scores = re.findall(r"critic/score/mean:([-\d.]+)", (out / f"{arm}.log").read_text())
        print(f"{arm}: exit {rc}; training reward per step: {', '.join(scores) or 'none'}")
        if rc != 0:
            return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
