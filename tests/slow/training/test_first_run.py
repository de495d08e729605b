"""The slow tier of tests/core/training/test_first_run.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.core.training.test_first_run import ADVEST_LINE, BAR


def test_a_default_run_prints_advest_lines_and_one_bar(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "120"}
    got = subprocess.run(
        [sys.executable, "-m", "advest.cli", "train", "--steps", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]
    log = got.stdout + got.stderr
    frames = [f.strip() for line in log.splitlines() for f in line.split("\r") if f.strip()]
    strangers = [f for f in frames if not (ADVEST_LINE.fullmatch(f) or BAR.fullmatch(f))]
    assert not strangers, "lines that are neither advest's nor its bar:\n" + "\n".join(strangers)
    assert any(BAR.fullmatch(f) and " 2/2 " in f for f in frames), log  # the bar reached the end
    for said in ("held-out evaluation: 128 prompts × 16 samples", "held-out before:",
                 "held-out after:"):  # fmt: skip
        assert sum(f.startswith(said) for f in frames) == 1, (said, log)
    assert not re.search(r"Training:|Epoch \d|0/\?", log), log  # Lightning's own bars
