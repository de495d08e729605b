"""advest inside SkyRL, run for real: SkyRL needs Python ≥ 3.12 (``skyrl`` 0.3.0 declares 3.11
but does not import there), so its tests (tests/skyrl/check_skyrl.py) run in a second
environment, ``.nox/skyrl`` (or the interpreter in ``$ADVEST_SKYRL_PYTHON``), which ``nox -s skyrl``
builds before it runs this file (``tests/venvs.py``)."""

from __future__ import annotations

from tests.venvs import SKYRL


def test_skyrl_checks_pass_in_the_skyrl_environment() -> None:
    run = SKYRL.pytest(["tests/skyrl/check_skyrl.py"], timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]


def test_skyrls_rows_of_trainers_data_are_what_its_code_gives_now() -> None:
    """docs/results/skyrl_rows.json (read by docs/peer_verdicts.md's generator in verl's
    environment) is computed here, from SkyRL 0.4.0's own compute_advantages_and_returns;
    recomputing it must give the committed file."""
    args = ["-W", "ignore", "scripts/peer_rows.py", "--skyrl", "--check"]
    run = SKYRL.run(args, timeout=600)
    assert run.returncode == 0, "rerun: .nox/skyrl/bin/python scripts/peer_rows.py --skyrl"
