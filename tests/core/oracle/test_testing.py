"""advest.testing as a user meets it: ``assert_estimator``, the pytest11 fixture in a fresh venv
with the wheel installed, the versioned ``--json`` report and ``advest check --compare``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from advest.cli import main
from advest.oracle import OracleError, check
from advest.oracle.reports import schema
from advest.testing import EstimatorMismatch, assert_estimator

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "user_project"))
import estimators  # noqa: E402  (the user's project, not a package of ours)

EXPECT = {"centred": "yes", "couples groups": "no", "finite output": "yes"}


def _grpo_bessel(rewards: torch.Tensor) -> torch.Tensor:
    """The user's grpo as first written: a Bessel std with no case for a group of one."""
    mean = rewards.mean(-1, keepdim=True)
    return (rewards - mean) / (rewards.std(-1, keepdim=True) + 1e-6)


def test_the_search_finds_the_users_nan_for_a_group_of_one_with_its_input() -> None:
    """Bessel's std of one sample is NaN, which no explicit input holds (they start at N = 2);
    the search finds it and names the input; the user's fixed grpo passes."""
    with pytest.raises(EstimatorMismatch) as caught:
        assert_estimator(_grpo_bessel, expect=EXPECT, ns=[2])
    message = str(caught.value)
    assert "finite output [float32]: expected 'yes', measured 'no: non-finite output'" in message
    assert "rewards = torch.tensor([0.0], dtype=torch.float32).reshape(1, 1)" in message
    assert_estimator(estimators.grpo, expect=EXPECT, ns=[2])


def test_a_correct_estimator_passes_and_a_broken_one_fails_naming_each_verdict() -> None:
    # the explicit inputs (N = 2): the user's grpo holds there
    assert_estimator(estimators.grpo, expect=EXPECT, ns=[2], budget=None)
    with pytest.raises(EstimatorMismatch) as caught:
        assert_estimator(estimators.broken_grpo, expect=EXPECT, ns=[2], budget=None)
    message = str(caught.value)
    assert "centred [float32, N=2]: expected 'yes', measured 'no'" in message
    assert "couples groups" in message
    assert "finite output" not in message


def test_an_expected_property_the_oracle_never_checks_is_a_failure() -> None:
    with pytest.raises(EstimatorMismatch, match="centered: expected 'yes', not checked"):
        assert_estimator(estimators.grpo, expect={"centered": "yes"}, ns=[2])


def _report(tmp_path: Path, name: str, target: str) -> Path:
    out = tmp_path / name
    assert main(["check", target, "--n", "2", "--json", str(out)]) in (0, 1)
    return out


def test_a_file_that_is_not_a_report_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"findings": []}')
    with pytest.raises(OracleError, match=r"bad\.json: not an advest check report"):
        schema.load(bad)
    bad.write_text(json.dumps({"schema": "advest-check", "version": 99, "findings": []}))
    with pytest.raises(OracleError, match="schema version 99"):
        schema.load(bad)


def test_the_unversioned_list_of_older_releases_still_compares() -> None:
    findings = check(estimators.grpo, "outcome", ns=[2], float64=False)
    old = {
        "schema": "advest-check",
        "version": 0,
        "findings": schema.document(findings)["findings"],
    }
    assert schema.compare(old, schema.document(findings)) == []
    assert torch.__version__  # the shared env's torch, as the user's venv sees it


def _see_outer_packages(venv: Path) -> None:
    """Let ``venv`` import this interpreter's installed packages (torch, pytest), after its own.

    ``--system-site-packages`` would expose the *base* interpreter's site-packages, which is not
    this one's when the tests themselves run in a virtual environment (torch was not
    found). A ``.pth`` line naming each of this interpreter's package folders works for both: a
    plain path line is appended to ``sys.path`` without running the ``.pth`` files inside it, so
    this checkout's editable install of advest stays invisible and the wheel is what imports."""
    inner = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = dict.fromkeys(sysconfig.get_path(key) for key in ("purelib", "platlib"))
    Path(inner, "outer-packages.pth").write_text("".join(f"{path}\n" for path in outer))


def installed_wheel(tmp_path: Path) -> str:
    """The wheel, built from a copy of this checkout (``tmp_path/source``: setuptools writes
    build/ and *.egg-info/ beside the sources, removed again after the build) into
    ``tmp_path/dist``, installed into a fresh venv (``tmp_path/venv``) that sees this
    interpreter's packages but not this checkout; returns the venv's python."""
    dist, venv, source = tmp_path / "dist", tmp_path / "venv", tmp_path / "source"
    skip = shutil.ignore_patterns(".git", "build", "runs", ".venv*", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip_wheel, "-w", str(dist), str(source)], check=True, capture_output=True)
    shutil.rmtree(source / "build", ignore_errors=True)
    for info in source.glob("*.egg-info"):
        shutil.rmtree(info)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _see_outer_packages(venv)
    (wheel,) = dist.glob("advest-*.whl")
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "--no-deps", "--ignore-installed", str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    return python
