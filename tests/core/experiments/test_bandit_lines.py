"""The README's bandit bullets (``scripts/bandit_lines.py``) are read from
``docs/results/bandit*.json``, and their words follow the numbers: a moved ratio or slope moves
the word (the README as a whole is checked against ``choosing.render`` in test_choosing.py)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import bandit_lines  # noqa: E402
import choosing  # noqa: E402


@pytest.mark.parametrize(
    ("slope", "word"),
    [
        ((-0.55, 0.03), "falls"),
        ((-0.09, 0.014), "levels off"),
        ((-0.3, 0.05), "between"),
        ((-0.41, 0.01), "between"),
        ((-0.2, 0.03), "between"),
    ],
)
def test_slope_words_follow_the_stated_rule(slope: tuple[float, float], word: str) -> None:
    assert bandit_lines.slope_word(slope) == word


@pytest.mark.parametrize(
    ("ratio", "word"),
    [
        ((0.85, 0.01), "below 1"),
        ((1.11, 0.01), "above 1"),
        ((0.98, 0.02), "within 2 se of 1"),
        ((9.05, 4.61), "within 2 se of 1"),
    ],
)
def test_ratio_words_follow_the_stated_rule(ratio: tuple[float, float], word: str) -> None:
    assert bandit_lines.ratio_word(ratio) == word


def test_every_number_comes_from_the_results_file() -> None:
    data = choosing.load(ROOT / "docs" / "results")
    bandit = data["bandit"]
    text = "\n".join(bandit_lines.block(bandit, data["bandit_format"]))
    for name, d in bandit["estimators"].items():
        assert f"`{name}` {bandit_lines.pm(d['slope_tail'], 3)}" in text
    for x, r in zip(
        bandit["variance"]["actions"]["values"],
        bandit["variance"]["actions"]["ratio_to_ei"]["maxpo"],
        strict=True,
    ):
        assert f"{bandit_lines.pm(r)} (A = {x})" in text


def test_a_moved_ratio_moves_its_number_and_its_word() -> None:
    bandit = choosing.load(ROOT / "docs" / "results")["bandit"]
    before = bandit_lines.ratio_bullet(bandit, "maxpo")
    moved = copy.deepcopy(bandit)
    ks = moved["variance"]["k"]
    ks["ratio_to_ei"]["maxpo"][1] = [1.5, 0.01]  # K = 2: below 1 in the run, now above
    after = bandit_lines.ratio_bullet(moved, "maxpo")
    assert "1.50 ± 0.01 (K = 2)" in after and "1.50 ± 0.01 (K = 2)" not in before
    assert "above 1 at K = 1, 2, 7" in after


def test_without_the_files_the_block_says_so() -> None:
    lines = bandit_lines.block(None, None)
    assert lines[0] == bandit_lines.BEGIN and lines[-1] == bandit_lines.END
    assert "no results file" in lines[1]
