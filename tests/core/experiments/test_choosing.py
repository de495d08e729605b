"""The page "Choosing an estimator" and the README's real-model block are generated from the
results files (``docs/results/*.json``), ``docs/theorems.md`` and ``docs/integrations.md`` by
``experiments/choosing.py``: they must read exactly as it renders them."""

from __future__ import annotations

import copy
from pathlib import Path

from advest.experiments import choosing

ROOT = Path(__file__).resolve().parents[3]


def test_the_page_and_the_readme_block_are_what_the_results_files_render() -> None:
    page, readme = choosing.render(ROOT)
    command = "python -m advest.experiments.choosing (see the page's end)"
    assert (ROOT / "docs" / "choosing.md").read_text() == page, f"regenerate: {command}"
    assert (ROOT / "README.md").read_text() == readme, f"regenerate: {command}"


def test_a_changed_result_changes_the_page() -> None:
    """The drift test can fail: one number in a results file moves the rendered page."""
    data = choosing.load(ROOT / "docs" / "results")
    theorem_text = (ROOT / "docs" / "theorems.md").read_text()
    peer_text = (ROOT / "docs" / "integrations.md").read_text()
    page = choosing.page(data, theorem_text, peer_text)
    moved = copy.deepcopy(data)
    if moved["real"] is not None and moved["real"]["summary"]:
        arms = next(iter(moved["real"]["summary"].values()))
        arm = next(iter(arms))
        arms[arm]["after"][7][0] += 0.01
    else:
        moved["real"] = None
        moved["bandit"] = None
    assert choosing.page(moved, theorem_text, peer_text) != page


def _real(after8: dict[str, list[float]], finished: int, planned: int) -> dict[str, object]:
    entry = {
        "seeds": 1,
        "prompts": 4,
        "samples": 64,
        "group_size": 8,
        "seconds_per_step": 1.0,
        "level_off": {"window": 5, "means": [0.1], "ses": [0.0], "step": None, "steps": 5},
    }

    def one(v: list[float]) -> dict[str, object]:
        after = [[0.5, 0.4, 0.6]] * 64
        after[7] = v
        return {**entry, "before": [[0.1, 0.0, 0.2]] * 64, "after": after}

    settings = {
        "steps": 5,
        "prompts_per_step": 4,
        "group_size": 8,
        "max_new_tokens": 24,
        "lr": 2e-4,
        "lora_r": 16,
        "eval_prompts": 4,
        "eval_samples": 64,
        "temperature": 1.0,
    }
    return {"planned_runs": planned, "finished_runs": finished, "settings": settings,
            "tasks": {"chain_sum": {}}, "summary": {"chain_sum": {a: one(v) for a, v in
                                                                    after8.items()}}}  # fmt: skip


def test_the_answer_follows_the_measured_pass_at_8() -> None:
    data = {"real": None, "values": None, "bandit": None, "oracle": None}
    apart = _real({"grpo": [0.8, 0.75, 0.85], "maxpo": [0.5, 0.45, 0.55]}, 2, 2)
    lines = "\n".join(choosing.answer({**data, "real": apart}, []))
    assert "mean-reward `grpo` gave the best held-out pass@8" in lines and "partial" not in lines
    tied = _real({"grpo": [0.8, 0.7, 0.9], "maxpo": [0.78, 0.68, 0.88]}, 2, 6)
    lines = "\n".join(choosing.answer({**data, "real": tied}, []))
    assert "does not separate `grpo`" in lines and "choose `maxpo`" in lines
    assert "**partial**: 2 of the 6 planned runs" in lines
    ahead = _real({"grpo": [0.5, 0.45, 0.55], "pkpo_sloo": [0.8, 0.75, 0.85]}, 2, 2)
    assert "Use `pkpo_sloo`" in "\n".join(choosing.answer({**data, "real": ahead}, []))


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
    assert choosing.unproved("maxpo", theorem_text) is None
    text = (ROOT / "docs" / "integrations.md").read_text()
    assert any("Passk_Training" in p for p in choosing.peers("chen_passk", text))
    assert any('scale_rewards="none"' in p for p in choosing.peers("dr_grpo", text))
    assert choosing.peers("ktae", text) == []
