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

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
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
