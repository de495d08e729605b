"""The page "Choosing an estimator" and the README's real-model block are generated from the
results files (``docs/results/*.json``), ``docs/theorems.md`` and ``docs/integrations.md`` by
``scripts/choosing.py``: they must read exactly as it renders them."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from advest.experiments.grid import report as grid_report

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing  # noqa: E402


def test_without_a_grid_the_answer_rests_on_the_proofs_and_says_so() -> None:
    data = choosing.load(ROOT / "docs" / "results")
    rows = choosing.theorems((ROOT / "docs" / "theorems.md").read_text())
    lines = "\n".join(choosing.answer({**data, "grid": {}}, rows))
    assert "No paired grid has compared one with `grpo` yet" in lines
    assert "`maxpo`" in lines and "Unbiased.maxpo_is_unbiased" in lines


def test_each_estimator_s_entry_gives_its_paired_grid_difference() -> None:
    grid = choosing.load(ROOT / "docs" / "results")["grid"]
    [line] = [x for x in choosing.grid_lines("maxpo", grid) if "`embedded`" in x]
    info = grid["embedded"]
    c = grid_report.found_of(info["runs"], info["declaration"])["maxpo"][8]
    said = f"pass@8 {c['mean']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}] ({c['verdict']}, Holm)"
    assert said in line
    assert "the reference arm" in choosing.grid_lines("grpo", grid)[0]
    assert choosing.grid_lines("numca", grid) == ["* **Pass/fail grid**: not in a grid."]


def test_proofs_and_peer_settings_are_read_from_the_docs() -> None:
    rows = choosing.theorems((ROOT / "docs" / "theorems.md").read_text())
    assert "Unbiased.maxpo_is_unbiased" in choosing.proofs("maxpo", rows)
    sloo = choosing.proofs("pkpo_sloo", rows)
    assert "Unbiased.pkpo_sloo_is_unbiased" in sloo
    assert not any("minus_one" in t for t in sloo)
    assert "Unbiased.grpo_is_biased" in choosing.proofs("grpo", rows)
    assert choosing.proofs("numca", rows) == []
    theorem_text = (ROOT / "docs" / "theorems.md").read_text()
    hista = choosing.unproved("hista", theorem_text) or ""
    assert "Hista" in hista and "not proved" in hista
    kae = choosing.unproved("kae", theorem_text) or ""
    # each estimator's entry quotes its own caveat, not the other's from the same paragraph
    assert "normalize" in kae and "Hista" not in kae and "KAE" not in hista
    assert choosing.unproved("maxpo", theorem_text) is None
    text = (ROOT / "docs" / "integrations.md").read_text()
    assert any("Passk_Training" in p for p in choosing.peers("chen_passk", text))
    assert any('scale_rewards="none"' in p for p in choosing.peers("dr_grpo", text))
    assert choosing.peers("ktae", text) == []


def test_kae_s_entry_counts_the_paired_verdicts_of_the_moving_policy_table() -> None:
    """The entry says in how many rows KAE's history is lower, higher or not measurably
    different; a row whose interval is moved below 0 moves a count."""
    data = choosing.load(ROOT / "docs" / "results")
    kae = data["values"]["kae"]
    texts = ((ROOT / "docs" / "theorems.md").read_text(), "")
    rows = [e["difference"] for per in kae["by_n"].values() for e in per.values()]
    higher = sum(d["ci"][0] > 0 for d in rows)
    entry = choosing.section("kae", data, texts)
    assert f"higher in {higher}," in entry and f"over {len(rows)} (n, h) rows" in entry
    moved = copy.deepcopy(data)
    first = next(iter(next(iter(moved["values"]["kae"]["by_n"].values())).values()))
    first["difference"]["ci"] = [-0.2, -0.1]
    assert "lower in 1," in choosing.section("kae", moved, texts)
    assert "Values on a policy" not in choosing.section("grpo", data, texts)
