"""The slow tier of tests/core/training/test_chat.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat_models import build
from tests.core.training.test_chat import SYSTEM
from tests.core.training.test_training import TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS


def test_a_chat_model_trains_on_message_prompts_with_the_math_reward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import csv
    import json

    from advest.training.config import RLConfig
    from advest.training.train import train

    model = build("qwen2", tmp_path / "qwen2")
    data = tmp_path / "chat.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": f"what is {a}+{b}?"}], "answer": str(a + b)}
        for a, b in [(2, 3), (10, 7), (41, 1), (5, 5)]
    ]
    rows.append({"prompt": "the sum of " * 80, "answer": "0"})  # longer than the limit: dropped
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = RLConfig(
        model=str(model),
        data=str(data),
        reward="math",
        estimator="rloo",
        system_prompt=SYSTEM,
        steps=2,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=6,
        max_prompt_tokens=64,
        mask_truncated=True,
        eval_prompts=0,
        checkpoint_every=0,
        out=str(tmp_path),
    )
    folder = train(cfg, {"enable_progress_bar": False}, name="chat", evaluate=False)
    assert "dropped 1 of 5 rows longer than --max_prompt_tokens 64" in capsys.readouterr().out
    with (folder / "metrics.csv").open() as f:
        logged = list(csv.DictReader(f))
    assert len(logged) == 2
    assert all(0.0 <= float(r["truncated"]) <= 1.0 for r in logged)
