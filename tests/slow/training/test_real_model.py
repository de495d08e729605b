"""The slow tier of tests/core/training/test_real_model.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from advest.training import models
from tests.core.training.test_real_model import NAME, _cfg, folder, home  # noqa: F401  (fixtures)
from tests.core.training.test_training import TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS


def test_the_short_name_is_the_installed_gguf_file_and_becomes_a_plain_folder(
    folder: str,  # noqa: F811
) -> None:
    path = models.shipped_path(NAME)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50e6
    config = json.loads((Path(folder) / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (Path(folder) / "model.safetensors").is_file()
    assert (Path(folder) / "chat_template.jinja").is_file()  # the GGUF's template came along


def test_rollout_logprobs_equal_a_forward_pass_of_transformers_own_gguf_load(
    folder: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first step's rollout log-probs (advest's cached plain folder, its sampling and its
    forward pass) equal a fresh forward pass of the model as transformers loads the GGUF file
    itself: the conversion changes no weight, and the rollout's masks are the ones generation
    saw."""
    from transformers import AutoModelForCausalLM

    from advest.training.module import RLModule
    from advest.training.policy import forward_logprobs

    monkeypatch.chdir(tmp_path)
    cfg = _cfg(NAME, tmp_path, ppo_epochs=2)  # two updates: the rollout has its own pass
    module = RLModule(cfg, folder)
    assert not module.one_pass
    items = module.source.batch(0, 0, 1, cfg.prompts_per_step)
    torch.manual_seed(0)
    scored = module.sample(items)
    rollout = module.forward(items, scored)
    gguf = models.shipped_path(NAME)
    fresh = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        logp = forward_logprobs(
            fresh, scored.sequences, scored.prompt_mask, scored.mask, cfg.temperature
        ).logp
    mask = scored.mask
    B, G, T = rollout.logprobs.shape
    got = rollout.logprobs.reshape(B * G, T)
    assert mask.any()
    torch.testing.assert_close(got[mask], logp[mask], rtol=0, atol=1e-4)
    module.scorer.close()


@pytest.mark.parametrize("lora_r", [8, 0], ids=["lora", "full"])
def test_one_step_on_a_reasoning_gym_task_exports_a_folder_that_loads_and_generates(
    folder: str,  # noqa: F811
    home: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lora_r: int,
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from advest.training.train import train

    monkeypatch.setenv("ADVEST_HOME", str(home))  # the cached conversion, not a second one
    monkeypatch.chdir(tmp_path)
    # an untrained 135M model rarely solves a problem in 6 tokens: a second, dense reward (the
    # completion's length in characters) gives the group a spread, so the step has a gradient
    (tmp_path / "shape.py").write_text("def chars(c, a):\n    return len(c) / 10\n")
    cfg = _cfg(NAME, tmp_path, lora_r=lora_r, reward=["reasoning_gym", "shape:chars"])
    run = train(cfg, {"enable_progress_bar": False}, name="run", evaluate=False)
    export = run / "model"
    config = json.loads((export / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model = AutoModelForCausalLM.from_pretrained(str(export), local_files_only=True)
    tok = AutoTokenizer.from_pretrained(str(export), local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    changed = [
        n
        for (n, p), q in zip(model.named_parameters(), base.parameters(), strict=True)
        if not torch.equal(p, q)
    ]
    assert changed, "one optimiser step at lr 1e-5 changed no weight"
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True,
        return_tensors="pt", return_dict=True,
    )  # fmt: skip
    out = model.generate(**ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > ids["input_ids"].shape[1]
    rows = (run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 2  # header and the one step
