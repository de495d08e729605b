"""The README's Quick start has exactly two commands, and .ci/run runs the second verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_has_an_install_and_run_command_and_a_test_command() -> None:
    run, test = _quick_start()
    assert run.startswith("pip install torch==2.13.0 && ") and run.endswith("advest train")
    # the test command installs Coq + MathComp first (Debian packages): the general-N proofs
    apt, pip = test.split(" && pip install torch==2.13.0 && ", 1)
    assert apt.startswith("apt-get update && apt-get install -y ") and "coq" in apt
    assert pip.endswith("pytest")
    for gate in ("ruff check .", "ruff format --check .", "mypy", "pytest"):
        assert gate in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test = _quick_start()
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines


def test_the_readme_test_command_builds_every_second_environment_the_tests_use() -> None:
    """A test that runs in a second environment fails, naming ``Venv.build``, when it is
    missing: the README's test command must build each one exactly so."""
    from tests.venvs import SKYRL, TRL_OLDEST, VERL

    readme = (ROOT / "README.md").read_text()
    for venv in (VERL, TRL_OLDEST, SKYRL):
        assert venv.build in readme, venv.build
