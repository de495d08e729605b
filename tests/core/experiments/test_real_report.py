"""The real-model experiment's report (``experiments/real/report.py``): pass@k with
intervals over prompts, the level-off step, and the files it writes. The runs themselves train
the real model (``advest experiment real``); here the per-prompt counts are given."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from advest.experiments.real.report import (
    bootstrap_all,
    level_off,
    on_common_seeds,
    summarise_results,
    write,
)


def test_the_bootstrap_interval_is_of_the_mean_over_prompts() -> None:
    (point, *_), (lo, *_), (hi, *_) = bootstrap_all([[8, 0, 8, 0]], samples=8)
    assert point == 0.5 and lo < 0.5 < hi and lo >= 0 and hi <= 1
    same = bootstrap_all([[4, 4, 4, 4]], samples=8)
    assert [float(x[0]) for x in same] == [0.5, 0.5, 0.5]  # no spread, no width


def test_pass_at_k_is_the_unbiased_estimator_for_every_k() -> None:
    # one prompt, 2 of 4 samples pass: pass@1 = 1/2, pass@2 = 1 − C(2,2)/C(4,2) = 5/6, pass@3 = 1
    mean, lo, hi = bootstrap_all([[2]], samples=4)
    assert mean.tolist() == pytest.approx([0.5, 5 / 6, 1.0, 1.0])
    assert (lo == mean).all() and (hi == mean).all()  # one prompt: nothing to resample


def test_a_flat_curve_levels_off_at_its_first_window_and_a_rising_one_does_not() -> None:
    flat = [[0.5, 0.4, 0.6, 0.5, 0.5] * 4 for _ in range(3)]
    assert level_off(flat)["step"] == 5
    rising = [[t / 20 for t in range(20)] for _ in range(3)]
    got = level_off(rising)
    assert got["step"] is None and got["steps"] == 20 and len(got["means"]) == 4
    # rises for two windows, then stays: levels off at the end of the second window
    knee = [[0.1] * 5 + [0.3] * 5 + [0.5, 0.52, 0.48, 0.5, 0.5] * 2 for _ in range(3)]
    assert level_off(knee)["step"] == 15
    # the rule's threshold: window 1 is 0.4 ± 0.245 (SE); a later window 0.4 above it is within
    # 2 SE (levelled), 0.6 above it is not
    assert level_off([[0, 1, 0, 1, 0] + [0.8] * 5])["step"] == 5
    assert level_off([[0, 1, 0, 1, 0] + [1.0] * 5])["step"] is None


def test_the_report_writes_the_table_csv_and_plot_from_the_counts(tmp_path: Path) -> None:
    record = {"samples": 8, "group_size": 8, "seconds_per_step": 2.0, "train_pass1": [0.1] * 10}
    results = {
        "chain_sum": {
            "grpo": [{**record, "seed": s, "before": [1, 0, 2, 0], "after": [3, 0, 2, 1]}
                     for s in range(2)],
            "maxpo": [{**record, "seed": 0, "before": [1, 0, 2, 0], "after": [2, 2, 2, 2]}],
        }
    }  # fmt: skip
    (tmp_path / "metrics.json").write_text(json.dumps(results))
    summary = write(tmp_path)
    # grpo after: pass@1 = (3 + 0 + 2 + 1) / 32
    assert summary["chain_sum"]["grpo"]["after"][0][0] == pytest.approx(6 / 32)
    assert summary["chain_sum"]["maxpo"]["seeds"] == 1
    table = (tmp_path / "summary.md").read_text()
    assert "| chain_sum | grpo | 2 | 0.094 [" in table and "| 0.188 [" in table
    rows = list(csv.DictReader((tmp_path / "passk.csv").read_text().splitlines()))
    assert len(rows) == 2 * 2 * 8  # arms × (before, after) × k = 1..8
    assert (tmp_path / "passk.png").stat().st_size > 0


def test_parts_run_side_by_side_merge_into_one_experiment(tmp_path: Path) -> None:
    from advest.experiments.real.report import merge

    rec = {"samples": 8, "group_size": 8, "seconds_per_step": 1.0, "train_pass1": [0.5] * 5}
    for seed in (1, 0):
        part = tmp_path / f"part{seed}"
        part.mkdir()
        runs = {"chain_sum": {"grpo": [{**rec, "seed": seed, "before": [1], "after": [seed]}]}}
        (part / "metrics.json").write_text(json.dumps(runs))
        config = {"tasks": {"chain_sum": {}}, "arms": {"grpo": {}}, "seeds": 1, "first_seed": seed}
        (part / "config.json").write_text(json.dumps(config))
    (tmp_path / "failed").mkdir()  # a part that wrote nothing is left out
    merge(tmp_path / "all", [tmp_path / "part1", tmp_path / "part0", tmp_path / "failed"])
    merged = json.loads((tmp_path / "all" / "metrics.json").read_text())
    assert [r["after"] for r in merged["chain_sum"]["grpo"]] == [[0], [1]]  # seeds in order
    assert json.loads((tmp_path / "all" / "config.json").read_text())["seeds"] == 2


def test_a_rerun_reuses_finished_runs_restarts_unfinished_ones_and_refuses_other_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``advest experiment real`` resumes by run folder; the trainer is replaced by one that
    writes what a finished run leaves (the real trainer is tested in test_real_model.py)."""
    from dataclasses import asdict, replace
    from types import SimpleNamespace

    from advest.experiments import real
    from advest.training import train as train_module

    calls: list[str] = []

    def fake_train(cfg: object, opts: object, *, name: str, before: object) -> Path:
        folder = Path(cfg.out) / name  # type: ignore[attr-defined]
        assert not folder.exists() or not any(folder.iterdir())  # a fresh folder, as train wants
        folder.mkdir(parents=True, exist_ok=True)
        calls.append(name)
        (folder / "config.json").write_text(json.dumps({"rl": asdict(cfg)}))  # type: ignore[call-overload]
        (folder / "passk_counts.json").write_text(
            json.dumps({"samples": 8, "before": [1], "after": [2]})
        )
        (folder / "metrics.csv").write_text("step,pass@1,time/generate\n1,0.5,2.0\n")
        return folder

    monkeypatch.setattr(train_module, "train", fake_train)
    args = SimpleNamespace(model="m", steps=2, prompts=4, tokens=8, lr=1e-4, eval_prompts=1,
                           samples=8, out_path=tmp_path)  # fmt: skip
    base = real.base_config(args)
    rec = real.run("chain_sum", "grpo", 0, base, None)
    assert rec["after"] == [2] and rec["train_pass1"] == [0.5] and rec["seconds_per_step"] == 2.0
    real.run("chain_sum", "grpo", 0, base, None)
    assert calls == ["chain_sum-grpo-seed0"]  # the second call reused the finished run
    partial = tmp_path / "runs" / "chain_sum-maxpo-seed0"
    partial.mkdir(parents=True)
    (partial / "config.json").write_text("{}")  # killed before it finished
    real.run("chain_sum", "maxpo", 0, base, None)
    assert calls[-1] == "chain_sum-maxpo-seed0"
    with pytest.raises(SystemExit, match="other settings"):
        real.run("chain_sum", "grpo", 0, replace(base, lr=2e-4), None)


def test_a_second_command_adds_its_runs_to_the_same_experiment(tmp_path: Path) -> None:
    """``advest experiment real`` run again into the same --out with other arms or seeds keeps
    the earlier results, lists the union of arms and each command's plan; other settings are
    refused."""
    from advest.experiments import real
    from advest.experiments.real.report import planned_runs

    def config(arms: list[str], seeds: int, first: int, lr: float = 1e-4) -> dict[str, object]:
        return {"tasks": {"chain_sum": {}}, "arms": {a: {} for a in arms}, "seeds": seeds,
                "first_seed": first, "base": {"lr": lr, "steps": 2}}  # fmt: skip

    assert real.earlier(tmp_path, config(["grpo", "maxpo", "ktae"], 1, 0)) == {}
    done = {"chain_sum": {"grpo": [{"seed": 0}], "maxpo": [{"seed": 0}], "ktae": []}}
    (tmp_path / "metrics.json").write_text(json.dumps(done))
    assert real.earlier(tmp_path, config(["grpo", "maxpo"], 2, 1)) == done
    union = json.loads((tmp_path / "config.json").read_text())
    assert list(union["arms"]) == ["grpo", "maxpo", "ktae"] and len(union["pieces"]) == 2
    # 3 arms × seed 0, then 2 arms × seeds 1-2: 7 runs, not 3 arms × 3 seeds
    assert len(planned_runs(union)) == 7
    with pytest.raises(SystemExit, match="other settings"):
        real.earlier(tmp_path, config(["grpo"], 1, 0, lr=2e-4))


def test_arms_are_compared_on_the_seeds_all_of_them_have() -> None:
    """An arm run with more seeds than another is cut to the shared ones for comparison: each
    seed draws its own held-out prompts, so pooling other seeds compares other prompts."""
    record = {"samples": 4, "group_size": 8, "seconds_per_step": 1.0, "train_pass1": [0.1] * 5}
    grpo = [{**record, "seed": s, "before": [0, 0], "after": [s, s]} for s in (2, 0, 1)]
    hista = [{**record, "seed": 0, "before": [0, 0], "after": [4, 0]}]
    results = {
        "chain_sum": {"grpo": grpo, "hista": hista},
        "gsm": {"grpo": [{**record, "seed": 1, "before": [0, 0], "after": [1, 1]}], "empty": []},
    }  # fmt: skip
    cut, seeds = on_common_seeds(results)
    assert seeds == {"chain_sum": [0], "gsm": [1]}
    assert [r["seed"] for r in cut["chain_sum"]["grpo"]] == [0] and cut["gsm"]["empty"] == []
    compared = summarise_results(cut)["chain_sum"]
    assert compared["grpo"]["seeds"] == 1 and compared["grpo"]["after"][0][0] == 0.0
    assert compared["hista"]["after"][0][0] == pytest.approx(0.5)
    assert summarise_results(results)["chain_sum"]["grpo"]["after"][0][0] == pytest.approx(0.25)
