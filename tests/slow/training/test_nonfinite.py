"""The slow tier of tests/core/training/test_nonfinite.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from tests.core.training.test_resume import (
    _args,
    model,  # noqa: F401  (the fixture)
)
from tests.core.training.test_training import ROOT, TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS


def test_ctrl_c_stops_the_run_in_words_keeping_its_last_checkpoint(
    model: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    args = [*_args(model, tmp_path), "--steps", "400", "--name", "int", "--reward_workers", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "advest.cli", "train", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONWARNINGS": "ignore", **__import__("os").environ},
        # a terminal's Ctrl-C: the run starts with SIGINT's default action even when this test
        # runs in a background job, which ignores SIGINT and passes that on to its children
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    ckpt = tmp_path / "int" / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "advest train: interrupted; The last good checkpoint" in err, err
    assert "Traceback" not in err
    assert torch.load(ckpt, weights_only=False)["advest"]["rollout_step"] >= 2
    assert not list((tmp_path / "int").rglob(".*tmp"))
