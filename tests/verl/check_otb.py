"""Run inside the verl 0.9.1 environment (tests/verl/test_verl.py): advest's
``optimal_token_baseline`` against verl's own ``optimal_token_baseline`` and
``tir_optimal_token_baseline`` on the same inputs, through verl's ``compute_advantage``
(spec/otb.md, Agreement with verl)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.core_algos import compute_optimal_token_baseline_advantage
from verl.trainer.ppo.ray_trainer import compute_advantage

from advest.fast.otb import optimal_token_baseline
from advest.integrations import verl as integration

Batch = tuple[DataProto, dict[str, torch.Tensor], np.ndarray]


def _otb_batch(B: int, G: int, T: int, seed: int, *, empty: bool = False) -> Batch:
    """A verl batch of B prompts × G responses in shuffled order (prefix masks, the outcome
    reward at the last valid token), with real softmax log-probs and Σπ² over a vocabulary of 6
    (some positions nearly deterministic); and advest's [B, G(, T)] view of the same data."""
    gen = torch.Generator().manual_seed(seed)
    S = B * G
    rewards = torch.randint(0, 5, (B, G), generator=gen).float() / 4 + 0.25 * (seed % 3)
    lengths = torch.randint(1, T + 1, (B, G), generator=gen)
    lengths[0, 0] = T  # group 0 has a unique longest response: the zero tail is exercised
    lengths[0, 1:] = lengths[0, 1:].clamp(max=T - 2)
    if empty:
        lengths[1, 0] = 0  # a response with no tokens
    mask = torch.arange(T) < lengths[..., None]  # [B, G, T]
    scale = torch.where(torch.rand(B, G, T, 1, generator=gen) < 0.2, 30.0, 2.0)
    logits = torch.randn(B, G, T, 6, generator=gen) * scale
    pi = torch.softmax(logits.double(), -1)
    token = torch.multinomial(pi.reshape(-1, 6), 1, generator=gen).reshape(B, G, T)
    logprobs = pi.gather(-1, token[..., None]).squeeze(-1).log().float()  # [B, G, T]
    sum_pi_squared = (pi**2).sum(-1).float()  # [B, G, T]
    ours = {
        "rewards": rewards,
        "mask": mask,
        "logprobs": logprobs,
        "sum_pi_squared": sum_pi_squared,
    }
    perm = torch.randperm(S, generator=gen)
    flat = {k: v.reshape(S, *v.shape[2:])[perm] for k, v in ours.items()}
    tlr = torch.zeros(S, T)
    rows = torch.arange(S)[flat["mask"].any(-1)]
    last = flat["mask"].sum(-1)[rows] - 1
    tlr[rows, last] = flat["rewards"][rows]
    uids = np.array([f"prompt-{int(p) // G}" for p in perm], dtype=object)
    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": tlr,
            "response_mask": flat["mask"].long(),
            "old_log_probs": flat["logprobs"],
            "sum_pi_squared": flat["sum_pi_squared"],
        },
        non_tensors={"uid": uids},
    )
    return data, ours, perm.numpy()


@pytest.mark.parametrize(
    ("B", "G", "T", "empty"), [(4, 4, 7, False), (3, 8, 12, True), (2, 2, 5, False)]
)
@pytest.mark.parametrize("name", ["optimal_token_baseline", "tir_optimal_token_baseline"])
def test_optimal_token_baseline_matches_verls(
    B: int, G: int, T: int, empty: bool, name: str
) -> None:
    """float32 inputs as verl's batch holds them; verl computes in float32, advest in float64:
    the two agree to float32 rounding of the rewards' size."""
    data, ours, perm = _otb_batch(B, G, T, seed=B * G + T, empty=empty)
    theirs = compute_advantage(data, name, config=AlgoConfig()).batch["advantages"]  # [S, T]
    mine = optimal_token_baseline(**ours).reshape(B * G, T)[perm]  # [S, T], verl's row order
    diff = float((theirs - mine).abs().max())
    size = float(ours["rewards"].abs().max())
    print(f"{name} vs advest (B={B}, G={G}, T={T}): max |Δ| = {diff:.3g}, max |R| = {size:.3g}")
    assert diff <= 4 * T * torch.finfo(torch.float32).eps * max(size, 1.0)
    assert float(mine.abs().max()) > 0  # the comparison saw advantages, not zeros


def test_verls_function_called_directly_takes_the_same_options() -> None:
    """handle_zero_tail=False and another ε, which compute_advantage never passes."""
    B, G, T = 3, 5, 6
    data, ours, perm = _otb_batch(B, G, T, seed=11)
    batch = data.batch
    for tail, eps in ((False, 1e-8), (True, 1e-3), (False, 0.5)):
        theirs, _ = compute_optimal_token_baseline_advantage(
            batch["token_level_rewards"],
            batch["response_mask"],
            data.non_tensor_batch["uid"],
            batch["old_log_probs"],
            batch["sum_pi_squared"],
            handle_zero_tail=tail,
            epsilon=eps,
        )
        mine = optimal_token_baseline(**ours, eps=eps, zero_tail=tail).reshape(B * G, T)[perm]
        assert float((theirs - mine).abs().max()) <= 4 * T * 1.2e-7 * 2


def test_optimal_token_baseline_is_not_registered_and_says_why() -> None:
    """compute_advantage hands old_log_probs and sum_pi_squared only to the estimators named
    optimal_token_baseline and tir_optimal_token_baseline (verl's own)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    skipped = integration.register(k=2)
    assert "optimal_token_baseline" in skipped
    assert "advest_optimal_token_baseline" not in ADV_ESTIMATOR_REGISTRY
