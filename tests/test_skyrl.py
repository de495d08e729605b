"""advest inside SkyRL, run for real: SkyRL needs Python ≥ 3.12 (``skyrl`` 0.3.0 declares 3.11
but does not import there), so its tests (tests/skyrl/check_skyrl.py) run in a second
environment, ``.venv-skyrl`` (or the interpreter in ``$ADVEST_SKYRL_PYTHON``), which the
README's test command builds. A missing environment fails this test with the command that
builds it; nothing is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = (
    "PYENV_VERSION=3.12.1 python -m venv .venv-skyrl && .venv-skyrl/bin/pip install "
    'torch==2.13.0 && .venv-skyrl/bin/pip install -e ".[skyrl]"'
)


def test_skyrl_checks_pass_in_the_skyrl_environment() -> None:
    python = Path(os.environ.get("ADVEST_SKYRL_PYTHON", ROOT / ".venv-skyrl" / "bin" / "python"))
    assert python.exists(), f"no SkyRL environment at {python}; build it with: {BUILD}"
    # SkyRL and Ray warn on import (deprecations in their own dependencies): not advest's
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:warnings", "tests/skyrl/check_skyrl.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
    print(run.stdout[-300:], file=sys.stderr)
