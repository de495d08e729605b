"""The slow tier of tests/core/oracle/test_testing.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from advest.cli import main
from advest.oracle.reports import schema
from tests.core.oracle.test_testing import ROOT, _report, installed_wheel


def test_a_fresh_project_with_the_wheel_runs_the_fixture_and_fails_the_broken_estimator(
    tmp_path: Path,
) -> None:
    """The wheel, built from this checkout, installed into a new venv that sees the running
    interpreter's packages (torch), virtual environment or not, but not this repository; pytest
    run in a copy of tests/user_project."""
    venv, project = tmp_path / "venv", tmp_path / "project"
    python = installed_wheel(tmp_path)
    shutil.copytree(ROOT / "tests" / "user_project", project)
    # a user's shell: no PYTHONPATH pointing into this checkout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::UserWarning"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 3 passed" in run.stdout, run.stdout
    assert "broken_grpo (family outcome, K=2) differs from the expected verdicts" in run.stdout
    where = [python, "-c", "import advest.testing; print(advest.testing.__file__)"]
    installed = subprocess.run(where, cwd=project, capture_output=True, text=True, env=env)
    assert installed.stdout.startswith(str(venv)), installed.stdout  # the wheel, not this checkout


def test_compare_names_every_changed_verdict_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _report(tmp_path, "old.json", "estimators:grpo")
    new = _report(tmp_path, "new.json", "estimators:broken_grpo")
    doc = json.loads(old.read_text())
    assert (doc["schema"], doc["version"], doc["target"]) == ("advest-check", 1, "estimators:grpo")
    capsys.readouterr()
    assert main(["check", "--compare", str(old), str(old)]) == 0
    assert "0 verdict(s) changed" in capsys.readouterr().out
    assert main(["check", "--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "- centred [float32, N=2]: 'yes" in out and "-> 'no" in out
    changed = schema.compare(schema.load(old), schema.load(new))
    assert len(out.splitlines()) == 1 + len(changed)
