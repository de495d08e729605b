"""The README's Quick start has exactly two commands, and .ci/run runs the second verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[3]


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
    # then the main environment, in which nox's main sessions run (venv_backend="none"), and
    # nox with no arguments: every session (tests/core/meta/test_tiers.py), the gates in `lint`
    assert 'pip install -e ".[test,docs,trl]"' in pip
    assert pip.endswith(" && nox")


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test = _quick_start()
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines
    # ... inside a virtual environment it creates and activates first, as users do
    before = ci_lines[: ci_lines.index(test)]
    assert "python3 -m venv .venv" in before and "source .venv/bin/activate" in before
    assert before.index("python3 -m venv .venv") < before.index("source .venv/bin/activate")


def test_the_readme_names_the_core_loop_and_each_session() -> None:
    """The loop to run while working, and each session's place in the test command."""
    import noxfile

    readme = (ROOT / "README.md").read_text()
    contributing = (ROOT / "docs" / "contributing.md").read_text()
    assert "nox -s core" in readme and "nox -s core" in contributing
    for session in ("lint", "core", *noxfile.TIERS):
        assert f"`{session}`" in readme, session
