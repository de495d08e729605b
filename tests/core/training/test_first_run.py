"""A user's first run, as a user starts it (``advest train`` in a fresh folder): its log holds
advest's lines and one progress bar, nothing else; the held-out evaluation is sized to the model
and the run, and reports its own progress."""

from __future__ import annotations

import re
from typing import Any

import pytest

from advest.training import heldout
from advest.training.config import sized
from advest.training.settings import RLConfig

ADVEST_LINE = re.compile(
    r"held-out evaluation: \d+ prompts? × \d+ samples, before and after \(.*\)"
    r"|held-out (before|after): +(pass@\d+=[0-9.]+ *)+( \(estimator \w+\))?"
    r"|note: \d+% of the completions at rollout step \d+ hit --max_new_tokens .*"
)
"""The lines advest itself prints in a default run."""

BAR = re.compile(r"rollout steps: +\d+%\|.*\| \d+/\d+ \[.*\]")
"""A frame of the run's one bar (tqdm writes frames separated by carriage returns)."""


def real(**kw: Any) -> RLConfig:
    return RLConfig(model="some/checkpoint", **kw)


@pytest.mark.parametrize(
    ("cfg", "want"),
    [
        (RLConfig(), (128, 16)),  # the embedded model: seconds
        # issue 35's one-step run: 2 prompts × 4 samples train → 1 prompt × 4 samples held out
        (real(steps=1, prompts_per_step=2, group_size=4), (1, 4)),
        (real(steps=10, prompts_per_step=4, group_size=8), (20, 8)),  # 320 drawn → 160 held
        (real(steps=1000, prompts_per_step=8, group_size=32), (128, 16)),  # capped
        (real(steps=1, eval_prompts=7), (7, 8)),  # a given value is kept
        (real(steps=10, eval_samples=2), (128, 2)),
        (real(steps=1, prompts_per_step=2, group_size=4, eval_prompts=0), (0, 4)),
    ],
)
def test_the_evaluation_is_sized_to_the_model_and_the_run(
    cfg: RLConfig, want: tuple[int, int]
) -> None:
    out = sized(cfg)
    assert (out.eval_prompts, out.eval_samples) == want
    if cfg.model is not None and cfg.eval_prompts is None:  # at most half of what trains
        drawn = cfg.steps * cfg.prompts_per_step * cfg.group_size
        assert out.eval_prompts * out.eval_samples <= max(drawn // 2, out.eval_samples)


def test_the_evaluation_reports_its_progress_and_time_left(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    now = iter([100.0, 130.0, 131.0, 160.0, 0.0, 999.0])  # start; 4 prompts; 5; 8; (silent)
    monkeypatch.setattr(heldout.time, "monotonic", lambda: next(now))
    clock = heldout.Clock("before", speaks=True)
    clock(4, 16)  # 30 s for 4 prompts: a line, 90 s left
    clock(5, 16)  # 1 s after the last line: quiet
    clock(8, 16)  # 60 s for 8: a line, 60 s left
    silent = heldout.Clock("after", speaks=False)  # another rank: never speaks
    silent(1, 2)
    assert capsys.readouterr().out.splitlines() == [
        "held-out before: 4/16 prompts sampled, 30 s so far, about 1 min 30 s left",
        "held-out before: 8/16 prompts sampled, 1 min 0 s so far, about 1 min 0 s left",
    ]


def test_pass_counts_reports_each_chunk_of_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from advest.training import evaluate

    calls: list[int] = []  # prompts per call of the sampler

    def sample(model: Any, tok: Any, ids: torch.Tensor, *a: Any, **k: Any) -> Any:
        calls.append(int(ids.shape[0]))
        return type("Scored", (), {"parts": torch.ones(int(ids.shape[0]), 4)})()

    # the sampler and the tokenizer stand in: this checks the chunking and the reports only
    monkeypatch.setattr(evaluate, "sample_and_score", sample)
    monkeypatch.setattr(evaluate, "encode", lambda t, p, **k: (torch.zeros(len(p), 1),) * 2)
    monkeypatch.setattr(evaluate, "passes", lambda parts: parts)
    seen: list[tuple[int, int]] = []
    items = [evaluate.Item(i, "p", "a") for i in range(20)]
    got = evaluate.pass_counts(
        torch.nn.Linear(1, 1), None, items, samples=64, max_new_tokens=1,
        scorer=None,  # type: ignore[arg-type]
        progress=lambda d, t: seen.append((d, t)),
    )  # fmt: skip
    assert got == [4] * 20
    assert calls == [8, 8, 4]  # 512 completions a chunk at 64 samples: 8 prompts
    assert seen == [(8, 20), (16, 20), (20, 20)]
