"""verl's own ``main_ppo`` entry point, started on CPU with ``advest_maxpo``: Hydra reads the
documented overrides, the driver and the ``TaskRunner`` Ray actor import advest through the
``verl.plugins`` entry point, transferqueue (verl's default data path) starts, and the run goes
as far as verl's own GPU requirement, where it stops with verl's resource error. A real GRPO vs
MaxPO run on a GPU is ``scripts/verl_main_ppo.sh``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def overrides(model: str, data: Path, estimator: str, k: int, gpus: int, device: str) -> list[str]:
    """The command line of one small main_ppo run (also used by scripts/verl_main_ppo.sh's
    settings): GRPO-style groups of 4 samples, advest's K as ``+algorithm.advest_k``."""
    return [
        f"algorithm.adv_estimator={estimator}",
        f"+algorithm.advest_k={k}",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'val.parquet'}",
        "data.train_batch_size=4",
        "data.max_prompt_length=16",
        "data.max_response_length=8",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        f"trainer.n_gpus_per_node={gpus}",
        "trainer.nnodes=1",
        "trainer.logger=[console]",
        f"trainer.device={device}",
        # transferqueue's default 8 storage actors each hold a CPU: on a 2-core machine Ray
        # would wait for them forever
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]


def _data(folder: Path) -> Path:
    import pandas as pd

    rows = [
        {
            "data_source": "advest_sum",
            "prompt": [{"role": "user", "content": f"{i}+{i}="}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"index": i},
        }
        for i in range(8)
    ]
    for split in ("train", "val"):
        pd.DataFrame(rows).to_parquet(folder / f"{split}.parquet")
    return folder


@pytest.fixture(scope="module")
def model() -> str:
    from advest.training.embedded import build

    return str(build(verbose=False))


def _main_ppo(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ADVEST_VERL_VERBOSE": "1", "RAY_DEDUP_LOGS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_main_ppo_with_advest_maxpo_starts_on_cpu_up_to_verls_gpu_requirement(
    model: str, tmp_path: Path
) -> None:
    run = _main_ppo(overrides(model, _data(tmp_path), "advest_maxpo", 2, 1, "cpu"), tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode != 0  # no GPU: verl refuses, after everything advest takes part in
    assert "Total available GPUs 0 is less than total desired GPUs 1" in log, log[-3000:]
    # the plugin ran in the TaskRunner actor, a fresh interpreter that never imports advest
    import re

    runner = set(re.findall(r"TaskRunnerV1 pid=(\d+)", log))
    registered = set(re.findall(r"advest: \d+ estimators registered in verl \(pid (\d+)\)", log))
    assert len(runner) == 1 and runner <= registered, (runner, registered)
    assert len(registered) >= 2  # the driver too
    assert "'adv_estimator': 'advest_maxpo'" in log and "'advest_k': 2" in log
    assert "could not register" not in log and "Unknown advantage estimator" not in log


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # K = G = 4 is outside maxpo's 1 ≤ K ≤ G−1
        (
            ("+algorithm.advest_k=2", "+algorithm.advest_k=4"),
            "algorithm.adv_estimator=advest_maxpo (actor_rollout_ref.rollout.n=4, "
            "algorithm.advest_k=4): uid 0 (verl batch rows 0, 1, 2, 3) has 4 samples: maxpo "
            "at K = 4 needs groups of at least 5 samples",
        ),
        (
            ("+algorithm.advest_k=2", "+algorithm.advest_kk=2"),
            "algorithm.advest_kk is not an advest setting; advest reads advest_k",
        ),
        (
            ("algorithm.adv_estimator=advest_maxpo", "algorithm.adv_estimator=advest_maxp"),
            "algorithm.adv_estimator=advest_maxp: advest has no estimator 'maxp'",
        ),
        (
            ("+algorithm.advest_k=2", "+algorithm.advest_shaping=gr4"),
            "algorithm.advest_shaping: unknown shaping 'gr4'; valid: efficiency, gr3, "
            "length_penalty, overlong",
        ),
    ],
    ids=["k-outside-range", "typo-in-key", "unknown-name", "unknown-shaping"],
)
def test_main_ppo_refuses_advest_settings_when_the_config_is_read(
    model: str, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    """The settings are checked by verl's own ``validate_config`` on the driver, before Ray,
    the workers or the model start: verl alone would fail only at the first training step."""
    args = overrides(model, _data(tmp_path), "advest_maxpo", 2, 1, "cpu")
    old, new = change
    run = _main_ppo([new if a == old else a for a in args], tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode != 0
    assert message in log, log[-3000:]
    assert "TaskRunner" not in log and "Total available GPUs" not in log, log[-3000:]


def test_the_gpu_comparison_script_writes_its_data_and_reward_and_names_both_arms(
    model: str, tmp_path: Path
) -> None:
    """``scripts/verl_main_ppo.py --dry_run`` (the GPU run itself needs a GPU and vLLM)."""
    import importlib.util

    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "verl_main_ppo.py"), "--model", model,
         "--out", str(tmp_path), "--size", "16", "--dry_run"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert any("adv_estimator=grpo" in x for x in lines)
    assert any("adv_estimator=advest_maxpo" in x and "+algorithm.advest_k=4" in x for x in lines)
    import pandas as pd

    train = pd.read_parquet(tmp_path / "train.parquet")
    assert len(train) == 16 and set(pd.read_parquet(tmp_path / "val.parquet").index) == set(
        range(128)
    )
    spec = importlib.util.spec_from_file_location("reward", tmp_path / "reward.py")
    assert spec is not None and spec.loader is not None
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    assert reward.compute_score("s", "so the sum is 12", "12") == 1.0
    assert reward.compute_score("s", "12 or maybe 13", "12") == 0.0
    assert reward.compute_score("s", "no number", "12") == 0.0
