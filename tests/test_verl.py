"""advest inside verl 0.9.1, run for real: verl pins its own transformers, so its tests
(tests/verl/check_verl.py) run in a second environment, ``.venv-verl`` (or the interpreter in
``$ADVEST_VERL_PYTHON``), which the README's test command builds. A missing environment fails
this test with the command that builds it; nothing is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKS = [
    "tests/verl/check_verl.py",
    "tests/verl/check_processes.py",
    "tests/verl/check_main_ppo.py",
]
BUILD = (
    "python -m venv .venv-verl && .venv-verl/bin/pip install torch==2.13.0 && "
    '.venv-verl/bin/pip install -e ".[verl]"'
)


def test_verl_checks_pass_in_the_verl_environment() -> None:
    python = Path(os.environ.get("ADVEST_VERL_PYTHON", ROOT / ".venv-verl" / "bin" / "python"))
    assert python.exists(), f"no verl environment at {python}; build it with: {BUILD}"
    # verl warns on import (ray's deprecated state API, optional engines): not advest's warnings
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:warnings", *CHECKS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
    print(run.stdout[-300:], file=sys.stderr)
