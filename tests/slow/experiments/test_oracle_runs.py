"""The slow tier of tests/core/experiments/test_oracle_runs.py: its tests that take tens of seconds
each (the core session stays within its few minutes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing_data  # noqa: E402
import oracle_runs  # noqa: E402


def test_a_real_check_is_condensed_into_the_page_s_verdicts(tmp_path: Path) -> None:
    subprocess.run(oracle_runs.command("chen_passk", tmp_path), check=True, timeout=300)
    choosing_data.oracle(tmp_path, tmp_path)
    got = json.loads((tmp_path / "oracle.json").read_text())["chen_passk"]
    assert got["centred"] == "yes"
    # std-normalised: right direction, a scale that changes with the bandit, so not unbiased
    assert got["unbiased"].startswith("no for max@4 (K=4)")
    assert got["shift invariant"].startswith("not checked")
