"""``advest experiment compare --quick`` produces its outputs, well-formed (values not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.embedded import EmbeddedSpec, build

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning"
)


@pytest.mark.slow
def test_compare_quick_writes_config_metrics_summary_and_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from training.experiments.compare import main

    monkeypatch.setenv("ADVEST_HOME", str(tmp_path / "home"))
    model = build(
        EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30), verbose=False
    )
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
