"""The oldest TRL advest supports, run for real: ``tests/test_trl.py`` (TRL's own trainer, two
steps, the advantages that reached the loss) in a second environment, ``.venv-trl-oldest`` (or
the interpreter in ``$ADVEST_TRL_OLDEST_PYTHON``), built by the README's test command with the
``[trl-oldest]`` extra. The main environment runs the same file with the newest supported TRL,
so both ends of the ``[trl]`` range are tested. A missing environment fails with the command
that builds it; nothing is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = (
    "python -m venv .venv-trl-oldest && .venv-trl-oldest/bin/pip install torch==2.13.0 && "
    '.venv-trl-oldest/bin/pip install -e ".[trl-oldest]"'
)
OLDEST = "0.29.1"
"""The lower end of the ``[trl]`` extra's range (pyproject.toml)."""


def test_the_trl_integration_tests_pass_with_the_oldest_supported_trl() -> None:
    default = ROOT / ".venv-trl-oldest" / "bin" / "python"
    python = Path(os.environ.get("ADVEST_TRL_OLDEST_PYTHON", default))
    assert python.exists(), f"no oldest-TRL environment at {python}; build it with: {BUILD}"
    version = subprocess.run(
        [str(python), "-c", "import trl; print(trl.__version__)"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert version.stdout.strip() == OLDEST, version.stdout + version.stderr
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_trl.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
    print(run.stdout[-300:], file=sys.stderr)


def test_the_extras_name_the_range_these_tests_cover() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert f"trl>={OLDEST},<1.17" in extras["trl"]
    assert f"trl=={OLDEST}" in extras["trl-oldest"]
