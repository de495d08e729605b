"""The pass/fail grid (``advest experiment grid``) and its section of ``docs/choosing.md``: the
paired bootstrap finds a planted difference and none between identical arms, the words follow
the verdicts, the page is what the per-run files render, and a rerun skips finished runs."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advest.experiments import grid, stats
from advest.experiments.grid import answer as grid_answer
from advest.experiments.grid import report as grid_report
from advest.experiments.grid import stats as grid_stats
from advest.experiments.real.report import passk_table

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing  # noqa: E402


def _arms(shift: float, seeds: int = 10, prompts: int = 64, n: int = 32) -> dict[str, Any]:
    """Planted runs: per (seed, prompt) a base pass rate; ``maxpo`` passes ``shift`` more."""
    rng = np.random.default_rng(1)
    base = rng.uniform(0.05, 0.6, size=prompts)
    runs: dict[str, Any] = {"grpo": {}, "maxpo": {}}
    for s in range(seeds):
        for arm, p in (("grpo", base), ("maxpo", np.clip(base + shift, 0, 1))):
            after = rng.binomial(n, p).tolist()
            runs[arm][s] = {"arm": arm, "seed": s, "samples": n, "after": after,
                            "before": after, "train_pass1": [0.1] * 8,
                            "grad_norm": [0.2] * 8, "max_grad_norm": 1e9}  # fmt: skip
    return runs


def test_the_unbiased_pass_at_k_is_the_one_the_real_report_uses() -> None:
    counts = [0, 1, 5, 31, 32]
    table = passk_table([counts], 32)  # [n, S, P]
    for k in (1, 4, 32):
        assert stats.pass_at(counts, 32, k) == pytest.approx(table[k - 1, 0])


@pytest.mark.parametrize(("shift", "word"), [(0.1, "above"), (-0.1, "below")])
def test_a_planted_difference_is_found(shift: float, word: str) -> None:
    found = grid_stats.compare(_arms(shift), "maxpo", 1)
    assert found["verdict"] == word
    assert found["lo"] < shift < found["hi"]


def test_identical_arms_give_no_measured_difference() -> None:
    runs = _arms(0.0)
    runs["maxpo"] = {s: {**r, "arm": "maxpo"} for s, r in runs["grpo"].items()}
    found = grid_stats.compare(runs, "maxpo", 4)
    assert found["verdict"] == "no measured difference"
    assert found["mean"] == found["lo"] == found["hi"] == 0


def test_seeds_are_resampled_not_only_prompts() -> None:
    """Seeds that disagree (+0.3 on half, −0.2 on the other half) show no difference, though
    resampling the prompts alone would call the mean of +0.05 a difference."""
    d = np.array([[0.3] * 64 if s % 2 else [-0.2] * 64 for s in range(10)])
    mean, lo, hi = stats.paired_bootstrap(d)
    assert mean == pytest.approx(0.05)
    assert stats.verdict(lo, hi) == "no measured difference"


def test_one_seed_is_not_compared() -> None:
    runs = _arms(0.3, seeds=1)
    assert grid_stats.compare(runs, "maxpo", 1)["verdict"].startswith("not compared")


def test_levelling_off_is_measured_by_an_equivalence_margin() -> None:
    rng = np.random.default_rng(2)
    steps = np.arange(40)

    def runs(slope: float, noise: float = 0.05, seeds: int = 10) -> list[dict[str, Any]]:
        return [{"train_pass1": (0.2 + slope * steps + rng.normal(0, noise, 40)).tolist()}
                for _ in range(seeds)]  # fmt: skip

    assert grid_stats.levels(runs(0.01)).startswith("still rising")
    assert grid_stats.levels(runs(0.0)).startswith("levelled off")
    # a rise measured above 0 but inside the margin (0.0004 a step: 0.004 a quarter) is flat
    assert grid_stats.levels(runs(0.0004, noise=0.005)).startswith("levelled off")
    # an interval that contains 0 but is wider than the margin is not called levelled off
    assert grid_stats.levels(runs(0.0, noise=0.5, seeds=3)).startswith("not determined")
    assert grid_stats.levels(runs(-0.01)).startswith("falling")
    assert grid_stats.levels(runs(0.01)[:1]).startswith("not judged")


def test_the_words_follow_the_verdicts_and_never_claim_a_tie() -> None:
    basis = {"maxpo": "the Coq proofs (`Unbiased.maxpo_is_unbiased`)"}
    tied = "\n".join(grid_report.conclusion({"maxpo": {1: {"verdict": "no measured difference"},
                                                       4: {"verdict": "no measured difference"}}},
                                            basis))  # fmt: skip
    assert "**pass@1**: no measured difference between `grpo` and `maxpo`." in tied
    assert "tie" not in tied
    assert "rests on the Coq proofs (`Unbiased.maxpo_is_unbiased`)" in tied
    one = {1: {"verdict": "above"}, 4: {"verdict": "no measured difference"}}
    above = "\n".join(grid_report.conclusion({"maxpo": one}, basis))
    assert "**pass@1**: `maxpo` above `grpo`." in above and "rests on" not in above


def test_the_page_shows_the_grid_as_the_files_render_it() -> None:
    data = choosing.load(ROOT / "docs" / "results")
    rows = choosing.theorems((ROOT / "docs" / "theorems.md").read_text())
    lines = grid_report.section(data["grid"], choosing.proved(rows), data["bandit"])
    page = (ROOT / "docs" / "choosing.md").read_text()
    assert "\n".join(lines) in page, "regenerate: python scripts/choosing.py --repo ."
    assert bool(data["grid"]) == ("## The pass/fail grid" in page)


def _info(runs: dict[str, Any], design_name: str = "embedded") -> dict[str, Any]:
    design = json.loads(json.dumps(grid.asdict(grid.DESIGNS[design_name])))
    return {"design": design, "held_out": ["p"] * 64, "runs": runs}


def test_the_page_s_answer_is_chosen_by_the_pass_at_8_verdict() -> None:
    above = "\n".join(grid_answer.lead({"x": _info(_arms(0.1))}, {}, None))
    assert "`maxpo` is above `grpo`: use it." in above and "pass@8, up to 10 seeds" in above
    below = "\n".join(grid_answer.lead({"x": _info(_arms(-0.1))}, {}, None))
    assert "`maxpo` below `grpo`; use `grpo`." in below
    same = _arms(0.0)
    same["maxpo"] = {s: {**r, "arm": "maxpo"} for s, r in same["grpo"].items()}
    tied = "\n".join(grid_answer.lead({"x": _info(same)}, {}, None))
    assert "no measured difference between `grpo` and `maxpo`" in tied and "tie" not in tied
    assert "rests not on this grid but on: `maxpo`: nothing measured or proved" in tied
    assert grid_answer.lead({"x": _info(_arms(0.3, seeds=1))}, {}, None) == []


def test_of_two_embedded_designs_the_longer_runs_answer() -> None:
    """Both compared: the design with more steps gives the answer (its runs had the time to
    level off), whatever the names' order."""

    def info(steps: int, shift: float) -> dict[str, Any]:
        d = _info(_arms(shift))
        d["design"] = {**d["design"], "model": None, "steps": steps}
        return d

    grid = {"a_short": info(200, 0.1), "b_long": info(1000, -0.1)}
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "`b_long`" in said and "`maxpo` below `grpo`" in said
    grid = {"a_long": info(1000, 0.1), "b_short": info(200, -0.1)}
    assert "`a_long`" in "\n".join(grid_answer.lead(grid, {}, None))


def test_a_finished_design_answers_before_a_longer_one_with_a_few_seeds() -> None:
    """A new, longer design with 3 seeds does not take the answer from a finished one."""

    def info(steps: int, shift: float, seeds: int) -> dict[str, Any]:
        runs = _arms(shift, seeds=seeds)
        runs["pkpo_sloo"] = {s: {**r, "arm": "pkpo_sloo"} for s, r in runs["maxpo"].items()}
        d = _info(runs)
        d["design"] = {**d["design"], "model": None, "steps": steps}
        return d

    grid = {"long": info(3000, 0.0, 3), "short": info(1000, 0.1, 10)}
    assert grid_answer.finished(grid["short"]["runs"])
    assert not grid_answer.finished(grid["long"]["runs"])
    said = "\n".join(grid_answer.lead(grid, {}, None))
    assert "grid `short`" in said and "are above `grpo`" in said
    grid["long"] = info(3000, 0.0, 10)
    assert "grid `long`" in "\n".join(grid_answer.lead(grid, {}, None))


def _started_at(runs: dict[str, Any], rate: float) -> dict[str, Any]:
    """``runs`` with the shared starting weights' counts drawn at pass rate ``rate``."""
    before = np.random.default_rng(3).binomial(32, rate, size=64).tolist()
    return {a: {s: {**r, "before": before} for s, r in by.items()} for a, by in runs.items()}


def test_each_arm_is_compared_with_the_starting_weights() -> None:
    lost = _started_at(_arms(0.1), 0.9)  # every trained run passes less often than the start
    table, found = grid_report.start_table(lost)
    assert {found[a][8]["verdict"] for a in found} == {"below"}
    assert table[4].startswith("| `grpo` | ") and table[4].endswith("(below) |")
    assert "(training lowered held-out pass@8 for every arm" in grid_report.start_line(found)[0]
    said = "\n".join(grid_answer.lead({"x": _info(lost)}, {}, None))
    assert "every arm ended below the starting weights' held-out pass@8" in said
    gained = _started_at(_arms(0.1), 0.0)
    found = grid_report.start_table(gained)[1]
    assert grid_report.start_line(found) == ["* **Against the starting weights**, pass@8: "
                                             "above: `grpo` and `maxpo`."]  # fmt: skip
    assert "starting weights" not in "\n".join(grid_answer.lead({"x": _info(gained)}, {}, None))
    same = grid_report.start_table(_arms(0.1))[1]  # before = after: no change at all
    assert same["grpo"][8].items() >= {"mean": 0.0, "lo": 0.0, "hi": 0.0, "p": 1.0,
                                       "verdict": "no measured difference"}.items()  # fmt: skip


def test_a_design_where_training_beat_the_start_answers_before_one_where_it_did_not() -> None:
    """Where every arm ended below the starting weights, not training beat each estimator:
    a shorter design in which some arm rose above the start gives the answer."""

    def info(steps: int, start: float) -> dict[str, Any]:
        runs = _arms(0.1)
        runs["pkpo_sloo"] = {s: {**r, "arm": "pkpo_sloo"} for s, r in runs["maxpo"].items()}
        d = _info(_started_at(runs, start))
        d["design"] = {**d["design"], "model": None, "steps": steps}
        return d

    grid = {"lost": info(3000, 0.9), "gained": info(1000, 0.0)}
    assert "grid `gained`" in "\n".join(grid_answer.lead(grid, {}, None))
    said = "\n".join(grid_answer.lead(grid, {}, None))
    # the other finished design is given in a clause, with its loss against the start
    assert "The other finished grids at pass@8, against `grpo` (Holm-corrected): `lost`: " in said
    assert "`lost`: `maxpo` and `pkpo_sloo` above (every arm below the starting weights)." in said
    grid["gained"] = info(1000, 0.9)  # both lost: the longer runs answer again
    assert "grid `lost`" in "\n".join(grid_answer.lead(grid, {}, None))


def test_a_reference_near_its_ceiling_is_said_to_leave_no_room() -> None:
    def runs(count: int) -> dict[str, Any]:
        return {"grpo": {0: {"after": [count] * 8, "samples": 32}}}

    assert grid_report.at_ceiling(runs(31)) == pytest.approx({1: 31 / 32, 4: 1.0, 8: 1.0})
    assert "pass@1 0.969, pass@4 1.000" in grid_report.ceiling_line(runs(31))[0]
    assert set(grid_report.at_ceiling(runs(16))) == {8}  # 1 − C(16, k)/C(32, k): 0.949 at k = 4
    assert grid_report.ceiling_line(runs(1)) == []


def test_a_changed_count_changes_the_grid_section() -> None:
    runs = _arms(0.0, seeds=3, prompts=8)
    info = {"design": {**json.loads(json.dumps(grid.asdict(grid.DESIGNS["embedded"])))},
            "held_out": ["p"] * 8, "runs": runs}  # fmt: skip
    moved = copy.deepcopy(info)
    moved["runs"]["maxpo"][0]["after"][0] += 1
    assert grid_report.section({"x": info}, {}, None) != grid_report.section({"x": moved}, {}, None)


def test_a_grid_s_progress_is_counted_in_words() -> None:
    assert [grid_answer.runs_finished(n) for n in (1, 3)] == ["1 run finished", "3 runs finished"]


def test_a_run_written_but_not_committed_is_found_when_the_grid_starts_again(
    tmp_path: Path,
) -> None:
    """A grid stopped between writing a run's file and committing it skips that run when it
    starts again (it is finished): scripts/grid.py commits such files first."""
    import importlib.util
    import subprocess

    spec = importlib.util.spec_from_file_location("grid_script", ROOT / "scripts" / "grid.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    runs = tmp_path / "docs" / "results" / "grid" / "d" / "grpo"
    runs.mkdir(parents=True)
    (runs / "seed0.json").write_text("{}")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "seed 0"], check=True)
    assert script.uncommitted(tmp_path) == []
    (runs / "seed1.json").write_text("{}")
    (tmp_path / "elsewhere.json").write_text("{}")  # not a run: left alone
    assert script.uncommitted(tmp_path) == [runs / "seed1.json"]


pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning",
    "ignore::UserWarning",
    "ignore::FutureWarning",
    "ignore::lightning.fabric.utilities.warnings.PossibleUserWarning",
)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from advest.training.embedded import EmbeddedSpec, build

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADVEST_HOME", str(tmp_path_factory.mktemp("home")))
        spec = EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30)
        return str(build(spec, verbose=False))


def test_the_grid_writes_one_file_per_run_and_a_rerun_skips_them(
    model_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def flags(steps: int) -> list[str]:
        return ["--design", "embedded", "--model", model_path, "--arms", "grpo", "maxpo",
                "--seeds", "2", "--steps", str(steps), "--eval_prompts", "4",
                "--eval_samples", "4", "--results", str(tmp_path / "res"),
                "--runs", str(tmp_path / "runs")]  # fmt: skip

    assert grid.main(flags(2)) == 0
    folder = tmp_path / "res" / "embedded"
    design = json.loads((folder / "design.json").read_text())
    assert len(design["held_out"]) == 4 and not set(design["held_out"]) & set(design["train"])
    records = {(a, s): json.loads((folder / a / f"seed{s}.json").read_text())
               for a in ("grpo", "maxpo") for s in (0, 1)}  # fmt: skip
    for r in records.values():
        assert len(r["after"]) == 4 and r["samples"] == 4 and len(r["train_pass1"]) == 2
        assert r["before"] == records["grpo", 0]["before"]  # measured once, shared
        assert max(r["grad_norm"]) < r["max_grad_norm"]  # clipping never bound
    assert grid.main(flags(2)) == 0
    assert "4 of 4 runs finished earlier; 0 to run" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="holds another design"):
        grid.main(flags(3))
