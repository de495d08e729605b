"""`advest experiment compare|values --quick` write well-formed outputs (values not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advest.training.embedded import EmbeddedSpec, build

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny embedded-style model, built once for this module in its own cache folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADVEST_HOME", str(tmp_path_factory.mktemp("home")))
        return build(
            EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30), verbose=False
        )


def test_compare_quick_writes_config_metrics_summary_and_plot(tmp_path: Path, model: Path) -> None:
    from advest.experiments.compare import main

    out = tmp_path / "cmp"
    assert main(["--quick", "--model", str(model), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {"grpo", "maxpo"}
    for runs in metrics.values():
        (run,) = runs
        assert sorted(int(k) for k in run["passk_after"]) == [1, 2, 3, 4]
        assert all(0 <= v <= 1 for v in run["passk_after"].values())
    assert json.loads((out / "config.json").read_text())["seeds"] == 1
    assert "| maxpo |" in (out / "summary.md").read_text()
    assert (out / "passk.png").stat().st_size > 0


def test_values_quick_writes_config_metrics_summary_and_plot(tmp_path: Path, model: Path) -> None:
    from advest.cli import experiment as main

    out = tmp_path / "values"
    assert main(["values", "--quick", "--model", str(model), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    states = metrics["states"]
    assert {"group_mean", "loo_mean", "numca"} <= set(states["estimators"])
    for scores in states["estimators"].values():
        assert scores["mse"] >= 0 and len(scores["mse_95ci"]) == 2
    assert all(0 <= r["v_mc"] <= 1 for r in states["rows"])
    kae = metrics["kae"]
    assert set(kae["by_n"]) == {"n=1", "n=2", "n=4"} and len(kae["drift"]) == 2
    assert {r["iteration"] for r in kae["rows"]} == {0, 1} and kae["policy"]["lora_r"] == 16
    for n in kae["by_n"].values():  # h = 1 has a history at the second iteration
        assert n["kae_h1"]["rows"] == 4 and len(n["kae_h1"]["difference"]["ci"]) == 2
    assert "| loo_mean |" in (out / "summary.md").read_text()
    assert (out / "collapse.png").stat().st_size > 0


def test_values_takes_a_reasoning_gym_task_and_its_held_out_prompts(
    tmp_path: Path, model: Path
) -> None:
    from advest.cli import experiment as main

    out = tmp_path / "values"
    task = ["--data", "reasoning_gym:chain_sum", "--reward", "reasoning_gym"]
    argv = ["values", "--quick", "--model", str(model), "--out", str(out), *task]
    assert main([*argv, "--reward_workers", "0"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["data"] == "reasoning_gym:chain_sum"
    assert json.loads((out / "metrics.json").read_text())["states"]["rows"]


def test_values_resumes_the_finished_problems_and_refuses_other_settings(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from advest.cli import experiment as main

    out = tmp_path / "values"
    argv = ["values", "--quick", "--model", str(model), "--out", str(out)]
    assert main(argv) == 0
    first = json.loads((out / "metrics.json").read_text())["states"]["rows"]
    lines = (out / "states.jsonl").read_text().splitlines()
    assert [json.loads(x)["index"] for x in lines] == [0, 1, 2, 3]
    (out / "states.jsonl").write_text("\n".join(lines[:2]) + "\n")  # stopped after two problems
    capsys.readouterr()
    assert main(argv) == 0
    assert "states (2 problems done before): 1/2" in capsys.readouterr().out  # the last two ran
    assert json.loads((out / "metrics.json").read_text())["states"]["rows"] == first
    assert main([*argv, "--hista_w", "2"]) == 2
    assert "--hista_w: 1 → 2" in capsys.readouterr().err
