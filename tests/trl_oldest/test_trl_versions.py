"""The oldest TRL advest supports, run for real: ``tests/core/training/test_trl.py`` (TRL's own
trainer, two steps, the advantages that reached the loss) in a second environment,
``.nox/trl_oldest`` (or the interpreter in ``$ADVEST_TRL_OLDEST_PYTHON``), which ``nox -s
trl_oldest`` builds with the ``[trl-oldest]`` extra before it runs this file. The main environment
runs the same file with the newest supported TRL, so both ends of the ``[trl]`` range are tested. A
missing environment fails with the command that builds it; nothing is skipped."""

from __future__ import annotations

from pathlib import Path

from tests.venvs import TRL_OLDEST

ROOT = Path(__file__).resolve().parents[2]
OLDEST = "0.29.1"
"""The lower end of the ``[trl]`` extra's range (pyproject.toml)."""


def test_the_trl_integration_tests_pass_with_the_oldest_supported_trl() -> None:
    version = TRL_OLDEST.run(["-c", "import trl; print(trl.__version__)"], timeout=300)
    assert version.stdout.strip() == OLDEST, version.stdout + version.stderr
    run = TRL_OLDEST.pytest(["tests/core/training/test_trl.py"], timeout=1200, quiet_warnings=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]


def test_the_extras_name_the_range_these_tests_cover() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert f"trl>={OLDEST},<1.17" in extras["trl"]
    assert f"trl=={OLDEST}" in extras["trl-oldest"]
