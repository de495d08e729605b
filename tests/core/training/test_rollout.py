"""The synthetic rollout (training/rollout.py) keeps the contract every ``Rollout`` field states.

Dry runs and benchmarks feed it to every estimator in place of a real step, so a field with the
wrong shape, dtype or meaning would test and time the estimators on something no run produces.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from advest.training.embedded import BOS, EOS, PAD
from advest.training.rollout import Rollout, dry_run, plan, synthetic

B, G, T, D = 3, 4, 6, 5  # all different, so that a sum over the wrong dimension changes a shape
SPECIAL_IDS = 3  # the embedded tokenizer's PAD, BOS, EOS are ids 0, 1, 2


def test_every_field_has_the_shape_and_dtype_its_declaration_states() -> None:
    r = synthetic(B, G, T, D)
    S = B * G
    expected = {
        "prompt_ids": ((B,), torch.int64),
        "token_ids": ((B, G, T), torch.int64),
        "mask": ((B, G, T), torch.bool),
        "rewards": ((B, G), torch.float32),
        "logprobs": ((B, G, T), torch.float32),
        "offsets": ((B, G, T, 2), torch.int64),
        "reward_parts": ((B, G, 1), torch.float32),
        "reward_weights": ((1,), torch.float64),
        "sequences": ((S, 1 + T), torch.int64),
        "prompt_mask": ((S, 1), torch.int64),
        "entropy": ((B, G, T), torch.float32),
        "truncated": ((B, G), torch.bool),
        "hidden": ((B, G, T, D), torch.float32),
        "sum_pi_squared": ((B, G, T), torch.float32),
    }
    for name, (shape, dtype) in expected.items():
        value = getattr(r, name)
        assert (tuple(value.shape), value.dtype) == (shape, dtype), name
    assert len(r.texts) == B and all(len(row) == G for row in r.texts)


@pytest.mark.parametrize("group_size", [2, 3, G, 7])
def test_rewards_are_zero_or_one_vary_in_every_group_and_are_the_weighted_sum_of_parts(
    group_size: int,
) -> None:
    r = synthetic(B, group_size, T)
    assert set(r.rewards.unique().tolist()) <= {0.0, 1.0}
    assert bool((r.rewards.amax(-1) > r.rewards.amin(-1)).all())  # no degenerate group
    weighted = (r.reward_parts.double() * r.reward_weights).sum(-1)  # [B, G]
    assert torch.equal(weighted.float(), r.rewards)


def test_each_token_is_one_character_of_its_text_with_one_id_per_character() -> None:
    """Offsets cut exactly one character per token, the same character always has the same id,
    and no response token is the pad, BOS or EOS id (the mask says every token is response)."""
    r = synthetic(B, G, T)
    seen: dict[str, int] = {}
    for b in range(B):
        for g in range(G):
            text = r.texts[b][g]
            assert len(text) == T
            for t in range(T):
                start, end = r.offsets[b, g, t].tolist()
                assert (start, end) == (t, t + 1)
                char, token = text[start:end], int(r.token_ids[b, g, t])
                assert seen.setdefault(char, token) == token, (char, token, seen[char])
    assert len(set(seen.values())) == len(seen)  # and distinct characters, distinct ids
    assert set(seen) <= set("0123456789+= ")  # digits and operators, as Numca reads them
    assert int(r.token_ids.min()) >= SPECIAL_IDS
    assert bool(r.mask.all()) and not bool(r.truncated.any())
    assert (PAD, BOS, EOS) == ("<pad>", "<bos>", "<eos>")  # the ids above are these three


def test_the_update_sequences_are_a_bos_prompt_then_the_response_tokens() -> None:
    r = synthetic(B, G, T)
    P = r.prompt_mask.shape[1]
    assert torch.equal(r.sequences[:, P:], r.token_ids.reshape(B * G, T))  # [S, T]
    assert bool((r.sequences[:, :P] == 1).all()) and bool((r.prompt_mask == 1).all())


def test_log_probabilities_and_sums_of_squared_probabilities_are_probabilities() -> None:
    r = synthetic(B, G, T)
    assert bool(r.logprobs.isfinite().all()) and bool((r.logprobs <= 0).all())
    assert bool((r.logprobs < 0).any())  # not a policy that is certain of every token
    # near-certain tokens and unlikely ones alike: log-probabilities spread over (-3, 0]
    assert float(r.logprobs.max()) > -0.3 and -3 <= float(r.logprobs.min()) < -2.7
    # Σ_v π(v)² of a distribution over the V = 16 ids (3 special, 13 characters) that gives the
    # sampled token p: at least p² + (1 − p)²/(V − 1) (the rest spread evenly), at most
    # p² + (1 − p)² (the rest on one id), so never below p² (what OTB's callers check) nor above 1
    p = r.logprobs.double().exp()
    low, high = p**2 + (1 - p) ** 2 / 15, p**2 + (1 - p) ** 2
    s2 = r.sum_pi_squared.double()
    assert bool((s2 >= low - 1e-6).all()) and bool((s2 <= high + 1e-6).all())
    assert float((s2 - low).max()) > 0.1 and float((high - s2).max()) > 0.1  # spread out, too
    # and the rest's share spans its whole range, down to the even spread 1/(V - 1) = 1/15
    wide = synthetic(8, 8, 16)
    q = wide.logprobs.double().exp()
    share = (wide.sum_pi_squared.double() - q**2) / (1 - q) ** 2
    share = share[q < 0.9]  # where (1 - p)^2 is large enough to read the share from float32
    assert 1 / 15 - 1e-3 < float(share.min()) < 1 / 15 + 0.02
    assert 0.98 < float(share.max()) <= 1 + 1e-6  # up to all of the rest on one id
    assert bool((r.entropy >= 0).all())


def test_the_defaults_are_the_seed_0_draw_with_8_hidden_dimensions() -> None:
    """Dry runs and the benchmark rely on one reproducible draw: same seed, same rollout."""
    default, explicit = synthetic(B, G, T), synthetic(B, G, T, D=8, seed=0)
    other = synthetic(B, G, T, seed=1)
    for field in dataclasses.fields(Rollout):
        a, b = getattr(default, field.name), getattr(explicit, field.name)
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, field.name
    assert not torch.equal(default.logprobs, other.logprobs)


def test_lengths_count_each_rollouts_response_tokens() -> None:
    r = synthetic(B, G, T)
    r.mask = torch.arange(T).expand(B, G, T) < torch.arange(B * G).reshape(B, G, 1) % (T + 1)
    assert torch.equal(r.lengths, torch.arange(B * G).reshape(B, G) % (T + 1))


@pytest.mark.parametrize("group_size", [2, 5])
def test_a_dry_run_calls_the_estimator_once_on_the_runs_prompts_and_group_size(
    group_size: int,
) -> None:
    calls: list[torch.Size] = []
    estimator = plan("grpo")

    class Spy:
        def advantages(self, rollout: Rollout) -> torch.Tensor:
            calls.append(rollout.rewards.shape)
            return estimator.advantages(rollout)

    dry_run(Spy(), 3, group_size)  # type: ignore[arg-type]  (a duck-typed plan)
    assert calls == [torch.Size([3, group_size])]
