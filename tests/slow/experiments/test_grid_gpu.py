"""``scripts/grid_gpu.sh`` (the pass/fail grid on one GPU) runs end to end on the CPU with the
embedded model: the same script and code path, tiny sizes (slow tier: a fresh interpreter per
seed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from advest.training.embedded import EmbeddedSpec, build
from tests.core.training.test_training import TRAINER_WARNINGS

ROOT = Path(__file__).resolve().parents[3]


def test_the_gpu_script_runs_every_arm_and_seed_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVEST_HOME", str(tmp_path / "home"))
    model = build(EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30),
                  verbose=False)  # fmt: skip
    out = tmp_path / "out"
    flags = ["--model", str(model), "--steps", "2", "--eval_prompts", "4", "--eval_samples", "4"]
    env = {**os.environ, "SEEDS": "2", "JOBS": "2", "CUDA_VISIBLE_DEVICES": ""}
    script = ["bash", str(ROOT / "scripts" / "grid_gpu.sh"), str(out), "embedded", *flags]
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 process(es) failed" in done.stdout
    before = json.loads((out / "embedded" / "before.json").read_text())["counts"]
    for arm in ("grpo", "maxpo", "pkpo_sloo"):
        for seed in (0, 1):
            record = json.loads((out / "embedded" / arm / f"seed{seed}.json").read_text())
            assert record["before"] == before and len(record["after"]) == 4
            assert record["device"] == "cpu"


@TRAINER_WARNINGS
def test_the_smollm2_design_runs_chen_passk_on_the_real_model_pass_fail(tmp_path: Path) -> None:
    """The real GGUF on the grid's reasoning-gym task, its graded score turned pass/fail, with
    the binary-only chen_passk beside grpo (one step, 2 held-out prompts × 2 samples)."""
    from advest.experiments import grid

    flags = ["--design", "smollm2", "--arms", "grpo", "chen_passk", "--seeds", "1",
             "--steps", "1", "--eval_prompts", "2", "--eval_samples", "2",
             "--results", str(tmp_path / "res"), "--runs", str(tmp_path / "runs")]  # fmt: skip
    assert grid.main(flags) == 0
    for arm in ("grpo", "chen_passk"):
        record = json.loads((tmp_path / "res" / "smollm2" / arm / "seed0.json").read_text())
        assert len(record["after"]) == 2 and all(0 <= c <= 2 for c in record["after"])
        (rate,) = record["train_pass1"]
        assert rate * 32 == round(rate * 32)  # a pass rate of 4 prompts × G = 8 samples
