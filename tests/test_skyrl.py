"""advest inside SkyRL, run for real: SkyRL needs Python ≥ 3.12 (``skyrl`` 0.3.0 declares 3.11
but does not import there), so its tests (tests/skyrl/check_skyrl.py) run in a second
environment, ``.venv-skyrl`` (or the interpreter in ``$ADVEST_SKYRL_PYTHON``), which the
README's test command builds (``tests/venvs.py``)."""

from __future__ import annotations

from tests.venvs import SKYRL


def test_skyrl_checks_pass_in_the_skyrl_environment() -> None:
    run = SKYRL.pytest(["tests/skyrl/check_skyrl.py"], timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
