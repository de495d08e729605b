"""``advest experiment turns`` (experiments/turns.py): its README block is its summary table
rendered from docs/results/turns.json (a test fails when they drift), and its numbers are what the
per-prompt counts say: the paired differences and their intervals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from advest.experiments import turns

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing  # noqa: E402


def _doc(first: list[list[int]], second: list[list[int]]) -> dict[str, object]:
    """Two seeds, both arms alike: ``first``/``second`` per seed, the counts after each turn."""
    runs = {
        arm: {
            str(seed): {
                "before": [0] * len(first[seed]),
                "before, 2 turns": [0] * len(first[seed]),
                "after": first[seed],
                "after, 2 turns": second[seed],
            }
            for seed in range(2)
        }
        for arm in turns.ARMS
    }
    return {"settings": turns.SETTINGS, "n": 4, "runs": runs}


def test_the_second_turns_gain_is_the_paired_difference_of_the_counts() -> None:
    doc = _doc(first=[[0, 2, 4], [1, 1, 4]], second=[[2, 2, 4], [3, 1, 4]])
    s = turns.summary(doc)
    for arm in turns.ARMS:
        gain = s["arms"][arm]["second turn adds"]
        want = np.mean([[2 / 4, 0, 0], [2 / 4, 0, 0]])
        assert abs(gain[0] - want) < 1e-12 and gain[1] <= gain[0] <= gain[2]
    equal = s["turn-level minus episode-level (both turns)"]
    assert equal == (0.0, 0.0, 0.0)  # the arms' counts are equal: nothing between them
    block = turns.render(doc)
    assert "| `turn_rloo` | 0.500 | 0.667 | +0.167 [" in block


def test_the_readme_block_is_rendered_from_the_results_file() -> None:
    readme = (ROOT / "README.md").read_text()
    begin, end = choosing.TURNS
    block = readme.split(begin, 1)[1].split(end, 1)[0]
    results = ROOT / "docs" / "results" / "turns.json"
    if not results.exists():  # the block says so until the experiment has run
        assert "not yet run" in block
        return
    doc = json.loads(results.read_text())
    assert block == f"\n{turns.render(doc)}\n"
    assert all(len(doc["runs"][arm]) >= 2 for arm in turns.ARMS)
