"""Export and held-out evaluation on user data: ``<run>/model`` loads with plain transformers
and gives the trained policy; ``advest eval`` takes the run folder; ``--eval_fraction`` holds
rows out of training and evaluates them before, during and after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from advest.training import evaluate
from advest.training.config import ConfigError
from advest.training.data import PromptSource, read_rows, split
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, model_path

__all__ = ["model_path"]  # the module-scoped fixture, shared with test_training

pytestmark = TRAINER_WARNINGS

IDS = torch.tensor([[1, 4, 5, 13, 6, 14, 7]])


def _jsonl(path: Path, n: int) -> Path:
    rows = [{"prompt": f"{i + 10}+{i + 3}=", "answer": str(2 * i + 13)} for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


class Logits(L.Callback):
    """The trained policy's logits on ``IDS`` at the end of fit."""

    def on_train_end(self, trainer: L.Trainer, module: Any) -> None:
        with torch.no_grad():
            self.logits = module.policy(input_ids=IDS).logits.clone()


def test_a_full_fine_tuning_run_exports_a_transformers_folder_and_evaluates_held_out_rows(
    model_path: str, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    from advest.training.train import train

    data = _jsonl(tmp_path / "rows.jsonl", 12)
    cfg = _cfg(model_path, tmp_path, data=str(data), eval_fraction=0.25, eval_every=1,
               eval_samples=3, eval_prompts=10, steps=2, checkpoint_every=1, lr=1e-2)  # fmt: skip
    snap = Logits()
    folder = train(cfg, {"enable_progress_bar": False}, name="full", callbacks=[snap])
    model = AutoModelForCausalLM.from_pretrained(folder / "model", local_files_only=True).eval()
    with torch.no_grad():
        exported = model(input_ids=IDS).logits
    initial = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True)
    with torch.no_grad():
        assert float((initial(input_ids=IDS).logits - snap.logits).abs().max()) > 1e-4
    assert torch.equal(exported, snap.logits)
    assert (folder / "model" / "tokenizer_config.json").is_file()
    curves = json.loads((folder / "passk.json").read_text())
    assert list(curves) == ["before", "step 1", "after"]
    assert all(sorted(int(k) for k in c) == [1, 2, 3] for c in curves.values())
    for png in ("passk", "train_reward", "train_passk", "train_entropy"):
        assert (folder / f"{png}.png").stat().st_size > 0

    # advest eval on the run folder resolves <run>/model
    out = tmp_path / "eval"
    code = evaluate.main(["--model", str(folder), "--data", str(data), "--samples", "2",
                          "--max_new_tokens", "3", "--out", str(out)])  # fmt: skip
    assert code == 0
    assert list(json.loads((out / "passk.json").read_text())) == ["full"]


def test_held_out_rows_never_reach_a_training_batch(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "rows.jsonl", 20)
    rows = read_rows(data)
    train_rows, held = split(rows, 0.25, seed=3)
    assert len(held) == 5 and sorted(map(str, train_rows + held)) == sorted(map(str, rows))
    assert split(rows, 0.25, seed=3) == (train_rows, held)  # deterministic by seed
    assert split(rows, 0.25, seed=4)[1] != held
    source = PromptSource(str(data), seed=3, held_out=0.25)
    assert source.held == held
    drawn = {str(i.prompt) for s in range(20) for i in source.batch(s, 0, 1, 4)}  # 5 passes
    assert drawn == {str(r.prompt) for r in train_rows}
    assert not drawn & {str(r.prompt) for r in held}


def test_the_run_holds_out_the_same_rows_it_evaluates(model_path: str, tmp_path: Path) -> None:
    from advest.training.module import RLModule

    data = _jsonl(tmp_path / "rows.jsonl", 12)
    cfg = _cfg(model_path, tmp_path, data=str(data), eval_fraction=0.25, eval_prompts=10)
    module = RLModule(cfg, model_path)
    items = evaluate.held_out_items(cfg, module.source)
    assert [i.prompt for i in items] == [r.prompt for r in split(read_rows(data), 0.25, 0)[1]]
    assert not {i.prompt for i in items} & {r.prompt for r in module.source.rows or []}


@pytest.mark.parametrize(
    ("over", "flag"),
    [
        ({"eval_fraction": 1.0}, "--eval_fraction"),
        ({"eval_fraction": 0.01}, "--eval_fraction"),  # holds out 0 of 12 rows
        ({"eval_fraction": 0.2, "eval_data": "{data}"}, "--eval_data"),
        ({"eval_data": "{missing}"}, "--eval_data"),
        ({"eval_every": -1}, "--eval_every"),
    ],
)
def test_bad_held_out_settings_are_refused_by_name(
    model_path: str, tmp_path: Path, over: dict[str, Any], flag: str
) -> None:
    from advest.training.config import validate

    data = _jsonl(tmp_path / "rows.jsonl", 12)
    paths = {"data": str(data), "missing": str(tmp_path / "nope.jsonl")}
    over = {k: v.format(**paths) if isinstance(v, str) else v for k, v in over.items()}
    with pytest.raises(ConfigError, match=flag):
        validate(_cfg(model_path, tmp_path, data=str(data), **over))
    with pytest.raises(ConfigError, match="--eval_fraction"):
        validate(_cfg(model_path, tmp_path, eval_fraction=0.2))  # no --data to split
