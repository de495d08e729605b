"""``advest check`` with its search, run as a user runs it: the same command prints the same
report twice and under another interpreter's hash seed (a second machine's), the shrunk input is
in the JSON, and a planted bug that no explicit input reaches is found by the whole check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advest.oracle.reports import report
from advest.oracle.reports.cli import _episode_report

ROOT = Path(__file__).resolve().parents[3]
PLANTS = ROOT / "tests" / "core" / "oracle"


def _check(tmp: Path, name: str, seed: str, *flags: str) -> tuple[str, dict[str, object]]:
    out = tmp / f"{name}.json"
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(PLANTS)}
    cmd = [
        sys.executable,
        "-m",
        "advest.cli",
        "check",
        "search_plants:flat_mean_multiplied",
        "--convention",
        "flat",
        "--n",
        "2",
        "3",
        "--json",
        str(out),
        *flags,
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return run.stdout, json.loads(out.read_text())


def test_the_same_command_gives_the_same_report_twice_and_on_another_hash_seed(
    tmp_path: Path,
) -> None:
    first_out, first = _check(tmp_path, "a", "1")
    second_out, second = _check(tmp_path, "b", "2")
    assert first["findings"] == second["findings"]
    assert first_out.replace("b.json", "a.json") == second_out.replace("b.json", "a.json")
    found = [f for f in first["findings"] if f["searched"] and f["counterexample"]]  # type: ignore[index]
    assert any(f["prop"] == "masked rows" for f in found)
    assert "the smallest input found" in first_out and "valid = torch.tensor(" in first_out


def test_another_seed_and_more_examples_are_accepted_and_a_bad_budget_refused(
    tmp_path: Path,
) -> None:
    _, doc = _check(tmp_path, "c", "0", "--seed", "7", "--examples", "5")
    searched = [f for f in doc["findings"] if f["searched"]]  # type: ignore[index,union-attr]
    assert searched and all(f["searched"] <= 5 or f["counterexample"] for f in searched)
    cmd = [
        sys.executable,
        "-m",
        "advest.cli",
        "check",
        "search_plants:flat_mean",
        "--convention",
        "flat",
        "--examples",
        "0",
    ]
    env = {**os.environ, "PYTHONPATH": str(PLANTS)}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 2 and "--examples must be an integer >= 1" in run.stderr


@pytest.mark.parametrize(
    ("name", "family", "convention", "prop"),
    [
        ("grpo_bessel", "outcome", "plain", "finite output"),
        ("flat_mean_multiplied", "outcome", "flat", "masked rows"),
        ("token_whitened_bessel", "token", "plain", "finite output"),
        ("episode_mean_multiplied", "episode", "plain", "finite output"),
    ],
)
def test_the_whole_check_finds_each_planted_bug_only_by_searching(
    name: str, family: str, convention: str, prop: str
) -> None:
    sys.path.insert(0, str(PLANTS))
    import search_plants as plants

    fn = getattr(plants, name)
    if family == "token":
        from advest.oracle.reports.token_report import check_tokens

        findings = check_tokens(fn)
    elif family == "episode":
        findings = _episode_report(fn, None, report.DEFAULT_BUDGET)
    else:
        findings = report.check(fn, "outcome", convention=convention)  # type: ignore[arg-type]
    explicit = [f for f in findings if f.prop == prop and not f.searched]
    searched = [f for f in findings if f.prop == prop and f.searched]
    assert all(not f.verdict.startswith("no") for f in explicit)  # no explicit input reaches it
    assert searched and searched[0].verdict.startswith("no") and searched[0].counterexample
