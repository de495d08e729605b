"""The policy's forward pass without repeated work (training/logprobs.py) against the plain pass
it replaces: each prompt computed once per group and gathered into its rows' KV caches, logits
only where they predict a response token, no column past the last one read; generation from a
prompt cache computed once per group; the weights' finiteness check by min and max."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from advest.training import generation, logprobs, updates
from advest.training.data import Item
from advest.training.generation import Sampling
from advest.training.logprobs import TokenScores, forward_logprobs
from advest.training.policy import load_policy
from advest.training.prompts import encode
from tests.core.training.test_scale import LORA, _module
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, _train, model_path

__all__ = ["model_path"]

pytestmark = TRAINER_WARNINGS

ITEMS = [Item(0, "12+3=", "15"), Item(1, "40+41=", "81"), Item(2, "7+8=", "15")]
"""Prompts of two lengths: left padding inside the shared prompts."""


def _rollout(model_path: str, **over: Any) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A module and G samples of each of ``ITEMS``, rows shuffled as an update's are."""
    module = _module(model_path, group_size=4, max_new_tokens=6, **over)
    torch.manual_seed(7)
    scored = module.sample(ITEMS)
    order = torch.randperm(scored.sequences.shape[0], generator=torch.Generator().manual_seed(1))
    return module, scored.sequences[order], scored.prompt_mask[order], scored.mask[order]


def _scores_and_grads(
    model: Any, args: tuple[Any, ...], share: bool
) -> tuple[TokenScores, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    scores = forward_logprobs(
        model, *args, 0.7, hidden=True, sum_pi_squared=True, share_prompts=share
    )
    mask = args[2]
    (-(scores.logp * mask).sum() / mask.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return scores, grads


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_the_prompt_once_pass_gives_the_plain_pass_outputs_and_gradients(
    model_path: str, lora: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Log-probs, entropy, hidden states, Σπ² and every gradient, at temperature 0.7, on
    shuffled rows whose prompts have left padding, LoRA dropout off (it draws per call)."""
    module, seqs, pm, mask = _rollout(model_path, **(LORA | {"lora_dropout": 0.0} if lora else {}))
    module.policy.train()
    calls: list[int] = []
    real = logprobs.shared_logits
    monkeypatch.setattr(logprobs, "shared_logits", lambda *a: calls.append(1) or real(*a))
    plain, plain_grads = _scores_and_grads(module.policy, (seqs, pm, mask), share=False)
    assert not calls
    shared, shared_grads = _scores_and_grads(module.policy, (seqs, pm, mask), share=True)
    assert calls == [1]  # the shared pass ran, and nothing was compared with itself
    for name in TokenScores._fields:
        a, b = getattr(plain, name), getattr(shared, name)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=name)
    assert plain_grads.keys() == shared_grads.keys() and plain_grads
    assert not lora or all("lora_" in n for n in plain_grads)
    assert sum(float(g.abs().max()) > 0 for g in plain_grads.values()) > len(plain_grads) / 3
    for n, g in plain_grads.items():
        torch.testing.assert_close(shared_grads[n], g, rtol=1e-4, atol=1e-6, msg=n)


def test_each_distinct_prompt_goes_through_the_network_once(
    model_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 prompts × 4 samples padded with 3 unread columns: the prompt pass has 3 rows, the
    response pass 12 rows of the read width less one (the last read token predicts nothing
    read), and logits are kept for the prompt's last position only."""
    module, seqs, pm, mask = _rollout(model_path)
    seqs = torch.cat([seqs, seqs[:, -3:]], 1)
    mask = torch.cat([mask, torch.zeros_like(mask[:, :3])], 1)
    seen: list[tuple[tuple[int, ...], int]] = []
    real = logprobs.call_model

    def spy(model: Any, ids: torch.Tensor, *a: Any, **kw: Any) -> Any:
        seen.append((tuple(ids.shape), kw["keep"]))
        return real(model, ids, *a, **kw)

    monkeypatch.setattr(logprobs, "call_model", spy)
    with torch.no_grad():
        forward_logprobs(module.policy, seqs, pm, mask, 1.0)
    width = logprobs.read_width(mask)
    assert width <= mask.shape[1] - 3
    assert seen == [((3, pm.shape[1]), 1), ((12, width - 1), 0)]


def test_columns_past_the_last_read_token_are_neither_computed_nor_filled(
    model_path: str,
) -> None:
    """Padding the batch with unread columns changes nothing; outputs are 0 where no token is
    read, so a row's values do not depend on the other rows of its batch."""
    module, seqs, pm, mask = _rollout(model_path)
    pad = torch.full((seqs.shape[0], 5), module.tokenizer.pad_token_id, dtype=seqs.dtype)
    longer = torch.cat([seqs, pad], 1), pm, torch.cat([mask, torch.zeros_like(mask[:, :5])], 1)
    with torch.no_grad():
        base = forward_logprobs(module.policy, seqs, pm, mask, 1.0)
        wide = forward_logprobs(module.policy, *longer, 1.0)
        alone = forward_logprobs(module.policy, seqs[:1], pm[:1], mask[:1], 1.0)
    assert bool((wide.logp[:, -5:] == 0).all())
    torch.testing.assert_close(wide.logp[:, :-5], base.logp)
    assert bool((base.logp[~mask] == 0).all()) and bool((base.entropy[~mask] == 0).all())
    assert bool((base.logp[mask] < 0).all())
    torch.testing.assert_close(alone.logp, base.logp[:1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("over", [{"gradient_checkpointing": True}, LORA], ids=["ckpt", "dropout"])
def test_checkpointing_or_dropout_in_training_takes_the_plain_pass(
    model_path: str, over: dict[str, Any]
) -> None:
    """Recomputing a layer would append its keys to the cache twice; dropout draws a mask per
    row, which the G rows of a shared prompt would not. Neither acts in eval mode."""
    module = _module(model_path, **over)
    module.policy.train()
    assert not logprobs.can_share(module.policy)
    module.policy.eval()
    assert logprobs.can_share(module.policy)
    plain = _module(model_path, **(LORA | {"lora_dropout": 0.0}))
    assert logprobs.can_share(plain.policy.train())


def test_generation_from_a_prompt_cache_samples_what_plain_generate_samples(
    model_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same seed, same tokens and the same row order (sample g of prompt b at row b·G + g) as
    ``generate`` repeating each prompt G times, on prompts of two lengths."""
    model, tok = load_policy(model_path)
    model.eval()
    ids, attn = encode(tok, [i.prompt for i in ITEMS], chat_template=True, system_prompt=None)
    assert len(set(attn.sum(-1).tolist())) > 1  # left padding in the batch
    s = Sampling(group_size=4, max_new_tokens=6, temperature=1.0, top_p=1.0)
    enc = {"input_ids": ids, "attention_mask": attn}
    runs = []
    for cached in (True, False):
        if not cached:
            monkeypatch.setattr(generation, "prompt_cache", lambda *a: None)
        torch.manual_seed(3)
        runs.append(generation.generate(model, tok, enc, s))
    with_cache, without = runs
    assert torch.equal(with_cache[:, : ids.shape[1]], ids.repeat_interleave(4, 0))
    assert torch.equal(with_cache, without)
    assert len({tuple(r) for r in with_cache[:, ids.shape[1] :].tolist()}) > 4  # samples vary


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1.0])
def test_the_weight_check_finds_one_non_finite_value_in_any_tensor(value: float) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
    with torch.no_grad():
        model[1].weight[2, 4] = value
    m = SimpleNamespace(policy=model, rollout_step=0, cfg=SimpleNamespace(lr=1.0, dtype="float32"))
    if value == 1.0:
        updates.check_weights(m, 0.5)  # type: ignore[arg-type]
        return
    with pytest.raises(updates.NonFiniteWeights, match="non-finite"):
        updates.check_weights(m, 0.5)  # type: ignore[arg-type]


def test_an_update_in_micro_batches_computes_each_prompt_once_per_micro_batch(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 prompts × G = 4 in 2 micro-batches: each holds 2 whole groups, whatever the shuffle,
    so the update's prompt passes have 2 rows each."""
    rows: list[int] = []
    real = logprobs.call_model

    def spy(model: Any, ids: torch.Tensor, *a: Any, **kw: Any) -> Any:
        if torch.is_grad_enabled() and kw["keep"] == 1:  # the update's prompt pass
            rows.append(ids.shape[0])
        return real(model, ids, *a, **kw)

    monkeypatch.setattr(logprobs, "call_model", spy)
    _train(_cfg(model_path, tmp_path, steps=1, ppo_epochs=1, micro_batches=2), "micro")
    assert rows == [2, 2]
