"""Fail fast: every setting, the model folder and the whole data file are checked before any
model loads, and each message names the flag (or the file and line) and says what to change.

The model folder here holds a real config and tokenizer but weights that are not a model: a
check that ran after loading would fail with a loading error instead of the message asserted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from advest.training.config import ConfigError, RLConfig
from advest.training.data import DataError, read_rows
from advest.training.embedded import EmbeddedSpec, build
from advest.training.train import train

TINY = EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=0)


@pytest.fixture(scope="module")
def unloadable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A save_pretrained folder whose weights file is garbage: loading it would fail."""
    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("ADVEST_HOME")
    os.environ["ADVEST_HOME"] = str(home)
    try:
        real = build(TINY, verbose=False)
    finally:
        os.environ.pop("ADVEST_HOME") if old is None else os.environ.update(ADVEST_HOME=old)
    folder = tmp_path_factory.mktemp("model")
    for f in real.iterdir():
        shutil.copy(f, folder / f.name)
    (folder / "model.safetensors").write_bytes(b"not a model")
    return folder


def _cfg(model: Path, tmp: Path, **over: Any) -> RLConfig:
    base: dict[str, Any] = {"model": str(model), "out": str(tmp), "steps": 1, "group_size": 4}
    return RLConfig(**{**base, **over})


def test_a_model_folder_without_a_tokenizer_is_refused(unloadable: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(unloadable / name, folder / name)
    with pytest.raises(ConfigError, match="no tokenizer"):
        train(_cfg(folder, tmp_path))
    with pytest.raises(ConfigError, match="no such folder"):
        train(_cfg(tmp_path / "missing", tmp_path))


def _data(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_bytes(body)
    return path


GOOD = b'{"prompt": "1+1=", "answer": "2"}\n'


def test_several_bad_lines_are_reported_together(tmp_path: Path) -> None:
    path = _data(tmp_path, GOOD + b"x\n" + GOOD + b"y\n")
    with pytest.raises(DataError, match=r"line 2: not JSON .*; line 4: not JSON"):
        read_rows(path)


def test_message_and_text_prompts_are_both_read(tmp_path: Path) -> None:
    chat = {"prompt": [{"role": "user", "content": "2+2?"}], "answer": 4}
    rows = read_rows(_data(tmp_path, GOOD + json.dumps(chat).encode()))
    assert rows[0].prompt == "1+1=" and rows[1].answer == "4"
    assert rows[1].prompt == ({"role": "user", "content": "2+2?"},)


def test_prompt_and_completion_budgets_must_fit_the_context(
    unloadable: Path, tmp_path: Path
) -> None:
    path = _data(tmp_path, GOOD)
    with pytest.raises(ConfigError, match="lower --max_prompt_tokens"):
        train(_cfg(unloadable, tmp_path, data=str(path), max_prompt_tokens=61, max_new_tokens=4))


def test_chat_messages_need_a_chat_template(unloadable: Path, tmp_path: Path) -> None:
    chat = {"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4"}
    path = _data(tmp_path, json.dumps(chat).encode())
    with pytest.raises(ConfigError, match="has no chat template"):
        train(_cfg(unloadable, tmp_path, data=str(path)))
