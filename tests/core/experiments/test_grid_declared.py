"""The grid designs' declarations and what the page does with them: every design on the page is
declared, Holm's correction over the declared family decides every verdict the answer reads
(a verdict that fails correction leaves the answer), the answer's arms are compared with each
other, a series of step counts is one design, and a replication keeps only what replicates."""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advest.experiments import stats
from advest.experiments.grid import answer as grid_answer
from advest.experiments.grid import designs, pilot
from advest.experiments.grid import report as grid_report
from advest.experiments.grid import series as grid_series
from advest.experiments.grid import stats as grid_stats
from tests.core.experiments.test_grid import _arms, _info

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing  # noqa: E402

FAMILY = ["chen_passk", "kae", "maxpo", "pkpo_sloo"]


def _declared(compared: list[str], ks: list[int], **more: Any) -> dict[str, Any]:
    return {"compared": compared, "ks": ks, "reference": "grpo", **more}


def _planted(shift: float) -> dict[str, Any]:
    """maxpo ``shift`` above grpo; chen_passk, kae and pkpo_sloo copies of grpo."""
    runs = _arms(shift)
    for arm in ("chen_passk", "kae", "pkpo_sloo"):
        runs[arm] = {s: {**r, "arm": arm} for s, r in runs["grpo"].items()}
    return runs


def test_holm_rejects_step_down_and_its_adjusted_p_values_agree() -> None:
    ps = {"a": 0.001, "b": 0.011, "c": 0.03, "d": 0.04}
    # 0.001 <= 0.05/4, 0.011 <= 0.05/3, 0.03 > 0.05/2: stop there; d (0.04 <= 0.05) is not
    # rejected either, though it would be on its own
    assert stats.holm(ps) == {"a": True, "b": True, "c": False, "d": False}
    adjusted = stats.holm_adjusted(ps)
    assert adjusted == pytest.approx({"a": 0.004, "b": 0.033, "c": 0.06, "d": 0.06})
    rng = np.random.default_rng(0)
    for _ in range(200):
        drawn = {str(i): float(p) for i, p in enumerate(rng.uniform(0, 0.1, rng.integers(1, 15)))}
        rejected, adj = stats.holm(drawn), stats.holm_adjusted(drawn)
        assert all(rejected[i] == (adj[i] <= stats.ALPHA) for i in drawn)


def test_the_bootstrap_p_value_agrees_with_the_interval() -> None:
    for shift in (0.0, 0.02, 0.05, -0.05):
        c = grid_stats.compare(_arms(shift), "maxpo", 8)
        assert (c["p"] < 0.05) == (c["verdict"] != stats.NO_DIFFERENCE)


def test_a_verdict_that_fails_correction_leaves_the_answer() -> None:
    runs = _planted(0.02)
    raw = grid_stats.compare(runs, "maxpo", 8)
    assert raw["verdict"] == "above" and raw["p"] > stats.ALPHA / 12  # fails Holm of 12
    info = {**_info(runs), "declaration": _declared(FAMILY, [1, 4, 8])}
    said = "\n".join(grid_answer.lead({"x": info}, {}, None))
    assert "`maxpo` is above" not in said
    assert "no measured difference between `grpo` and each of `chen_passk`, `kae`, `maxpo`" in said
    found = grid_report.found_of(runs, info["declaration"])
    assert found["maxpo"][8]["verdict_95"] == "above"
    assert found["maxpo"][8]["verdict"] == stats.NO_DIFFERENCE
    # the same difference declared as a family of one passes its correction and answers
    info["declaration"] = _declared(["maxpo"], [8])
    assert "`maxpo` is above `grpo`: use it" in "\n".join(grid_answer.lead({"x": info}, {}, None))


def test_the_answer_s_arms_are_compared_with_each_other() -> None:
    runs = _planted(0.2)
    runs["chen_passk"] = {s: {**r, "arm": "chen_passk"} for s, r in runs["maxpo"].items()}
    said = "\n".join(grid_answer.lead({"x": _info(runs)}, {}, None))
    assert "`chen_passk` and `maxpo` are above `grpo`: use one of them" in said
    assert "compared with each other at pass@8 (Holm over its one pair): `chen_passk` − " in said
    assert "+0.000 [+0.000, +0.000]: no measured difference" in said


def test_every_design_on_the_page_is_declared_and_its_declaration_printed() -> None:
    data = choosing.load(ROOT / "docs" / "results")
    assert designs.undeclared(data["grid"], data["designs"]) == []
    page = (ROOT / "docs" / "choosing.md").read_text()
    for name in data["grid"]:
        d = data["designs"][name]
        assert f"Declared ({d['declared']};" in page, name
        assert f"`docs/results/designs/{name}.toml`" in page
    assert "**exploratory** (chosen after data were seen)" in page
    claims = page.split("## State values")[0].replace("no tie is claimed", "")
    assert re.search(r"\btie", claims) is None  # no equivalence margin is declared: no tie


def test_a_declaration_without_a_field_is_refused_naming_it(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "results" / "designs" / "embedded.toml").read_text()
    (tmp_path / "embedded.toml").write_text(text.replace("correction =", "# correction ="))
    with pytest.raises(designs.DeclarationError, match=r"embedded\.toml does not state correction"):
        designs.load(tmp_path)
    (tmp_path / "embedded.toml").write_text(text)
    (tmp_path / "other.toml").write_text(text)
    with pytest.raises(designs.DeclarationError, match="declares 'embedded'; name it other"):
        designs.load(tmp_path)


def test_a_series_is_shown_as_one_design_and_its_shared_steps_are_measured() -> None:
    short, long = _planted(0.0), _planted(0.0)
    for by in long.values():
        for r in by.values():
            r["train_pass1"] = [*r["train_pass1"], 0.5, 0.5]
    a = ("a", {"design": {"steps": 8}}, short)
    b = ("b", {"design": {"steps": 10}}, long)
    assert "identical over the first 8 steps in all 50 common runs" in grid_series.shared(a, b)
    long["maxpo"][3] = {**long["maxpo"][3], "train_pass1": [0.1, 0.1, 0.9, *[0.1] * 7]}
    assert "49 of 50 common runs identical" in grid_series.shared(a, b)
    assert "part at step 3 to 3" in grid_series.shared(a, b)
    page = (ROOT / "docs" / "choosing.md").read_text()
    assert "## The pass/fail grid: `embedded`, one design at 200, 1000 and 3000 steps" in page
    assert "## The pass/fail grid: `embedded_long`" not in page


def test_the_answer_keeps_only_the_verdicts_that_replicate() -> None:
    first = {**_info(_planted(0.2)), "declaration": _declared(FAMILY, [8], replicated_by="r")}
    again = _planted(0.0)
    for arm in ("maxpo", "pkpo_sloo", "chen_passk", "kae"):
        again[arm] = {s + 100: {**r, "seed": s + 100} for s, r in again[arm].items()}
    again["grpo"] = {s + 100: {**r, "seed": s + 100} for s, r in again["grpo"].items()}
    grid = {"x": first, "r": {**_info(again), "declaration": _declared(FAMILY, [8], answers=False)}}
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "grid `x`" in said and "`maxpo` is above" not in said
    assert "not replicated (counted as no measured difference): `maxpo`" in said
    grid["r"] = {**_info(_planted(0.2)), "declaration": _declared(FAMILY, [8], answers=False)}
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "`maxpo` is above `grpo`: use it" in said and "replicated on `r`" in said


def test_no_arm_pair_is_left_out_of_the_pairwise_family() -> None:
    runs = _planted(0.2)
    for arm in ("chen_passk", "kae"):
        runs[arm] = {s: {**r, "arm": arm} for s, r in runs["maxpo"].items()}
    said = "\n".join(grid_answer.lead({"x": _info(runs)}, {}, None))
    assert "(Holm over the 3 pairs)" in said
    for a, b in itertools.combinations(["chen_passk", "kae", "maxpo"], 2):
        assert f"`{a}` − `{b}`" in said


def _pilot(before: int, after: int) -> dict[str, Any]:
    return {"samples": 16, "before": [before] * 64, "after": [after] * 64,
            "wall_seconds": 3600.0, "seconds": [40.0] * 48}  # fmt: skip


def test_the_pilot_s_rule_starts_the_grid_only_off_the_ceiling_and_rising() -> None:
    rising = pilot.summary(_pilot(1, 4))  # pass@8 0.5 -> 0.9615...: at the ceiling
    assert rising["after pass@8"] > pilot.CEILING
    assert pilot.rule(rising)[0] is False
    ok, why = pilot.rule(pilot.summary(_pilot(0, 1)))  # 0 -> 0.5
    assert ok and why == "pass@8 0.000 -> 0.500: rises and stays below 0.9"
    assert pilot.rule(pilot.summary(_pilot(1, 0)))[0] is False  # falls
    assert pilot.summary(_pilot(0, 1))["wall minutes"] == 60.0


def test_runs_of_arms_outside_the_declared_family_give_no_answer() -> None:
    info = {**_info(_arms(0.2)), "declaration": _declared(["pkpo_sloo"], [8])}
    assert grid_answer.lead({"x": info}, {}, None) == []


def test_a_same_as_declaration_is_the_other_s_and_must_have_run_its_settings(
    tmp_path: Path,
) -> None:
    text = (ROOT / "docs" / "results" / "designs" / "smollm2_products12.toml").read_text()
    (tmp_path / "smollm2_products12.toml").write_text(text)
    copy = 'name = "c"\nsame_as = "smollm2_products12"\nkind = "k"\ndeclared = "d"\n'
    (tmp_path / "c.toml").write_text(copy)
    found = designs.load(tmp_path)
    assert found["c"]["compared"] == found["smollm2_products12"]["compared"] == FAMILY[2:]
    assert found["c"]["kind"] == "k" and found["c"]["name"] == "c"
    head = designs.block(found["c"])[0]
    assert "`smollm2_products12`'s declaration, made before its runs" in head
    info = {"design": {"steps": 48}, "train": ["a"], "held_out": ["b"], "runs": {}}
    designs.same_settings({"smollm2_products12": info, "c": dict(info)}, found)
    other = {**info, "held_out": ["z"]}
    with pytest.raises(designs.DeclarationError, match="c: declared same_as 'smollm2_products12'"):
        designs.same_settings({"smollm2_products12": info, "c": other}, found)
    (tmp_path / "c.toml").write_text(copy.replace('"smollm2_products12"', '"elsewhere"'))
    with pytest.raises(designs.DeclarationError, match=r"c\.toml: same_as names no declaration"):
        designs.load(tmp_path)


def _spread() -> dict[str, Any]:
    """grpo passes 35% of samples on half the prompts and 65% on the others, maxpo 45% on
    each: maxpo is below at pass@1 (-0.05) and above at pass@8 (+0.008, p < 0.001)."""
    rng = np.random.default_rng(0)
    runs: dict[str, Any] = {"grpo": {}, "maxpo": {}}
    for s in range(10):
        for arm, p in (("grpo", np.tile([0.35, 0.65], 128)), ("maxpo", np.full(256, 0.45))):
            after = rng.binomial(32, p).tolist()
            runs[arm][s] = {"arm": arm, "seed": s, "samples": 32, "after": after,
                            "before": after, "train_pass1": [0.1] * 8,
                            "grad_norm": [0.2] * 8, "max_grad_norm": 1e9}  # fmt: skip
    runs["pkpo_sloo"] = {s: {**r, "arm": "pkpo_sloo"} for s, r in runs["grpo"].items()}
    return runs  # pkpo_sloo: a design arm outside this family, there for the grid to finish


def test_the_answer_names_its_family_s_other_verdicts_and_marks_exploratory_designs() -> None:
    real = {**_info(_spread()), "declaration": _declared(["maxpo"], [1, 8])}
    real["design"] = {**real["design"], "model": "m"}
    said = "\n".join(grid_answer.lead({"x": real}, {}, None))
    assert "`maxpo` is above `grpo`: use it; at pass@1, `maxpo` below `grpo` (Holm)" in said
    same = {**real, "runs": _planted(0.2), "declaration": _declared(FAMILY, [1, 8])}
    assert "at pass@1" not in "\n".join(grid_answer.lead({"x": same}, {}, None))  # as at pass@8
    declared = _declared(FAMILY, [8], exploratory=True, replicated_by="r")
    guess = {**_info(_planted(0.2)), "declaration": declared}
    said = "\n".join(grid_answer.lead({"x": real, "e": guess}, {}, None))
    assert "grid `x`" in said
    assert ("`e`: `maxpo` above, no measured difference for `chen_passk`, `kae` and `pkpo_sloo` "
            "(exploratory: declared after data were seen; its replication `r` has not "
            "finished)") in said  # fmt: skip
    again = {s + 100: {**r, "seed": s + 100} for s, r in _planted(0.0)["grpo"].items()}
    rep = _info({a: {s: {**r, "arm": a} for s, r in again.items()} for a in ["grpo", *FAMILY]})
    grid = {"x": real, "e": guess, "r": {**rep, "declaration": _declared(FAMILY, [8])}}
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert ("(exploratory: declared after data were seen; replicated on `r`'s fresh seeds: none; "
            "not replicated (counted as no measured difference): `maxpo`)") in said  # fmt: skip


def test_a_sweep_is_one_family_and_the_answer_says_whether_its_verdict_changes() -> None:
    real = {**_info(_planted(0.0)), "declaration": _declared(FAMILY, [8])}
    real["design"] = {**real["design"], "model": "m"}
    grid: dict[str, Any] = {"x": real}
    for lr, shift in ((1e-4, 0.015), (3e-4, 0.0), (1e-3, 0.0)):
        info = _info(_arms(shift, seeds=5))  # 0.015 at 5 seeds: p 0.024, above on its own
        info["design"] = {**info["design"], "lr": lr}
        decl = _declared(["maxpo"], [8], series="s", seeds="200-204", answers=False,
                         learning_rate=lr)  # fmt: skip
        grid[f"s{lr}"] = {**info, "declaration": decl}
    declared = {n: i["declaration"] for n, i in grid.items() if n != "x"}
    alone = grid_report.found_of(grid["s0.0001"]["runs"], grid["s0.0001"]["declaration"])
    assert alone["maxpo"][8]["verdict"] == "above"
    first = {"x": real, "s0.0001": grid["s0.0001"]}
    grid_series.across(first, declared)  # the other rates not run yet
    alone = grid_report.found_of(grid["s0.0001"]["runs"], grid["s0.0001"]["declaration"])
    assert alone["maxpo"][8]["verdict"] == stats.NO_DIFFERENCE  # still one family of 3
    said = "\n".join(grid_answer.lead(first, {}, None))
    assert "The learning-rate sweep `s` has not finished (10 of 30 runs)" in said
    grid_series.across(grid, declared)  # the three rates' comparisons: one family of 3
    swept = grid_report.found_of(grid["s0.0001"]["runs"], grid["s0.0001"]["declaration"])
    assert swept["maxpo"][8]["verdict"] == stats.NO_DIFFERENCE
    assert swept["maxpo"][8]["verdict_95"] == "above"
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert ("The learning-rate sweep `s` at pass@8 against `grpo` (Holm over the sweep): `maxpo` "
            "no measured difference at rate 0.0001") in said  # fmt: skip
    assert "the same verdict at every rate." in said
    grid["s0.0003"]["runs"] = _arms(0.05, seeds=5)
    grid_series.across(grid, declared)
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "`maxpo` above at rate 0.0003" in said and "the verdict changes with the rate." in said
    del grid["s0.001"]["runs"]["maxpo"][4]
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "The learning-rate sweep `s` has not finished (29 of 30 runs)" in said


def test_a_declared_secondary_family_is_compared_and_corrected_on_its_own() -> None:
    decl = {"secondary": "maxpo minus grpo", "secondary_pairs": [["maxpo", "grpo"]],
            "secondary_k": 8}  # fmt: skip
    said = "\n".join(designs.secondary(_arms(0.1), decl))
    assert "at pass@8, `maxpo` − `grpo` +0.07" in said and "): above." in said
    assert "): no measured difference." in "\n".join(designs.secondary(_planted(0.0), decl))
    assert designs.secondary(_arms(0.1), {"secondary_pairs": [["kae", "grpo"]]}) == []
    assert designs.secondary(_arms(0.1), None) == []
