"""``scripts/gpu_speed.py`` (one GPU's speed table) runs end to end on the CPU: its ``--dry_run``
takes the same code path at tiny sizes with a tiny embedded model, and writes every part's JSON
(slow tier: a fresh interpreter, a model build and two short training runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from advest.fast import registry

ROOT = Path(__file__).resolve().parents[3]


def test_the_gpu_speed_script_dry_runs_every_part_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "ADVEST_HOME": str(tmp_path / "home")}
    script = [
        sys.executable,
        str(ROOT / "scripts" / "gpu_speed.py"),
        "--dry_run",
        "--out",
        str(out),
    ]
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] and summary["environment"]["device"] == "cpu"
    assert all("error" not in summary[part] for part in ("bench", "cost", "train")), summary
    sequence = {e.name for e in registry.entries() if e.kind == "sequence"}
    (general,) = [
        by_kind["general"] for by_kind in json.loads((out / "bench.json").read_text()).values()
    ]
    assert sequence <= set(general)
    cost = json.loads((out / "cost.json").read_text())
    assert set(cost["devices"]["cpu"]["estimators"]) == set(registry.names())
    assert cost["devices"]["cpu"]["environment"]["scale"] == "tiny"
    train = json.loads((out / "train.json").read_text())
    assert [r["generator"] for r in train["rows"]] == ["generate", "continuous"]
    assert all(r["generated_tokens_per_s"] > 0 and r["timed_steps"] >= 1 for r in train["rows"])
