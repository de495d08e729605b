"""The slow tier of tests/core/training/test_training.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from advest.fast import registry
from tests.core.training.test_training import (
    DDP_SCRIPT,
    ROOT,
    TRAINER_WARNINGS,
    _cfg,
    _cli,
    _initial,
    _max_diff,
    _metrics,
    _params,
    _run_args,
    _train,
    model_path,  # noqa: F401  (the fixture)
)

pytestmark = TRAINER_WARNINGS


def test_a_run_killed_mid_way_resumes_to_the_same_parameters(
    model_path: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    straight = _cli(_run_args(model_path, tmp_path, "straight"))
    out, _ = straight.communicate(timeout=600)
    assert straight.returncode == 0, out
    killed = _cli(_run_args(model_path, tmp_path, "killed"))
    ckpt = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    deadline = time.time() + 300
    while time.time() < deadline and killed.poll() is None:
        if ckpt.exists() and torch.load(ckpt, weights_only=False)["advest"]["rollout_step"] >= 8:
            break
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    done_at_kill = torch.load(ckpt, weights_only=False)["advest"]["rollout_step"]
    assert 0 < done_at_kill < 24 and done_at_kill % 4 == 0, "the kill did not land mid-run"
    resumed = _cli([*_run_args(model_path, tmp_path, "killed"), "--resume"])
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    assert _max_diff(_params(tmp_path / "killed"), _params(tmp_path / "straight")) == 0.0
    # the resumed run's metrics file is the uninterrupted run's, row for row (timings aside)
    killed_rows, straight_rows = _metrics(tmp_path / "killed"), _metrics(tmp_path / "straight")
    assert [r["rollout_step"] for r in killed_rows] == [f"{s}.0" for s in range(1, 25)]
    assert killed_rows == straight_rows
    assert "will be deleted" not in out  # no false warning from Lightning's CSV logger


def test_ddp_on_two_cpu_processes_keeps_parameters_identical(
    model_path: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = tmp_path / "ddp_run.py"
    script.write_text(DDP_SCRIPT)
    # the held-out pass count reads the first reward; one that passes about half the samples
    # makes the counts depend on which rank sampled which prompt with which seed
    (tmp_path / "parity.py").write_text("def odd(c, a):\n    return float(len(c) % 2)\n")
    proc = subprocess.run(
        [sys.executable, str(script), model_path, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": f"{ROOT}:{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert (
        _max_diff(
            {f"policy.{k}": v for k, v in rank0.items()},
            {f"policy.{k}": v for k, v in rank1.items()},
        )
        == 0.0
    )
    assert _max_diff({f"policy.{k}": v for k, v in rank0.items()}, _initial(model_path)) > 0
    # the held-out evaluation ran on both ranks, each on its share, and rank 0 gathered it:
    # rank r sampled items[r::2] (rank 1's one prompt padded to two) with seed 1234 + r
    from advest.training import scoring
    from advest.training.evaluate import embedded_held_out, pass_counts
    from advest.training.policy import load_policy

    counts = json.loads((tmp_path / "ddp" / "passk_counts.json").read_text())
    assert len(counts["before"]) == len(counts["after"]) == 3
    items = embedded_held_out(3, 0)
    model, tok = load_policy(model_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    scorer = scoring.Scorer(["parity:odd", "digits"], workers=0)
    kw = {"samples": 3, "max_new_tokens": 4, "scorer": scorer}
    share0 = pass_counts(model, tok, [items[0], items[2]], seed=1234, **kw)
    share1 = pass_counts(model, tok, [items[1], items[1]], seed=1235, **kw)[:1]
    assert counts["before"] == [share0[0], share1[0], share0[1]]
    assert 0 < sum(counts["before"]) < 9  # neither all passing nor all failing


def test_a_local_checkpoint_trains_on_a_jsonl_with_math_rewards(
    model_path: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    data = tmp_path / "math.jsonl"
    data.write_text(
        "\n".join(json.dumps({"prompt": f"{i}+{i}=", "answer": str(2 * i)}) for i in range(10))
    )
    proc = _cli([
        "--model", model_path, "--data", str(data), "--reward", "math", "--steps", "2",
        "--estimator", "rloo",
        "--prompts_per_step", "2", "--group_size", "4", "--max_new_tokens", "4",
        "--out", str(tmp_path), "--name", "math", "--trainer.enable_progress_bar", "false",
    ])  # fmt: skip
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert (tmp_path / "math" / "metrics.csv").exists()
    assert (tmp_path / "math" / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_estimator_trains_through_the_same_path(
    name: str,
    model_path: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """No per-estimator code in the trainer: each registered name, selected by name only, runs a
    rollout step end to end (inputs built from the rollout, output brought to tokens, update)."""
    k = 2 if registry.entry(name).needs_k else 1
    binary = {"reward": "exact"} if name == "chen_passk" else {}  # pass@k needs 0/1 rewards
    cfg = _cfg(model_path, tmp_path, estimator=name, k=k, steps=1, ppo_epochs=1, **binary)
    after = _train(cfg, name)
    assert all(torch.isfinite(v).all() for v in after.values())
