"""The policy loss (training/losses.py) on values worked out by hand.

tests/core/training/test_training.py checks that micro-batches add up to their mini-batch and that
clipping uses its two ranges; these check the values themselves: each aggregation against its
formula, the KL term's switch and size, and the inputs a run can produce at the edges (a fully
masked sequence, an all-padding micro-batch, a wild log-ratio).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, get_args

import pytest
import torch

from advest.training import losses

S, T = 3, 4  # different, so that a sum over the wrong dimension changes a shape
LOSS = torch.tensor(
    [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]], dtype=torch.float64
)
MASK = torch.tensor(
    [[True, True, False, False], [True, True, True, True], [False, False, False, False]]
)


@pytest.mark.parametrize(
    ("how", "want"),
    [
        # 6 valid tokens: (1 + 2) + (5 + 6 + 7 + 8) = 29
        ("token-mean", 29 / 6),
        ("seq-mean-token-sum", 29 / 3),
        # per sequence: 3/2, 26/4, and 0 for the fully masked one; mean over the 3 sequences
        ("seq-mean-token-mean", (1.5 + 6.5 + 0.0) / 3),
        # Dr.GRPO: a constant S·L denominator, L the response budget (here 5, not T)
        ("dr-grpo", 29 / (3 * 5)),
    ],
)
def test_each_aggregation_is_its_formula(how: losses.Aggregation, want: float) -> None:
    norm = losses.Normaliser.of(MASK, 5)
    assert (norm.tokens, norm.sequences, norm.max_tokens) == (6.0, 3.0, 5.0)
    got = losses.aggregate(LOSS, MASK, how, norm)
    assert float(got) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("how", get_args(losses.Aggregation))
def test_an_all_padding_micro_batch_adds_exactly_zero(how: losses.Aggregation) -> None:
    """A micro-batch of padding only (possible after a split) must add 0, not NaN, whatever the
    mini-batch's normaliser, including one that counts no tokens at all."""
    empty = torch.zeros(S, T, dtype=torch.bool)
    for norm in (losses.Normaliser.of(empty, T), losses.Normaliser.of(MASK, T)):
        assert float(losses.aggregate(LOSS, empty, how, norm)) == 0.0


def test_a_single_valid_token_is_its_own_token_mean() -> None:
    one = torch.zeros(S, T, dtype=torch.bool)
    one[1, 2] = True
    assert float(losses.aggregate(LOSS, one, "token-mean", losses.Normaliser.of(one, T))) == 7.0


@pytest.mark.parametrize("name", ["", "a", "dr-grpo2", "seq-mean", "token-sum", "zz"])
def test_an_unknown_aggregation_is_refused_whatever_it_sorts_next_to(name: str) -> None:
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        losses.aggregate(LOSS, MASK, name, losses.Normaliser.of(MASK, T))  # type: ignore[arg-type]


def test_the_normaliser_cannot_change_between_micro_batches() -> None:
    norm = losses.Normaliser.of(MASK, T)
    with pytest.raises(dataclasses.FrozenInstanceError):
        norm.tokens = 1.0  # type: ignore[misc]


def _inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(3)
    logp = -torch.rand(S, T, generator=gen, dtype=torch.float64)
    old = logp + 0.05 * torch.randn(S, T, generator=gen, dtype=torch.float64)
    ref = logp + 0.3 * torch.randn(S, T, generator=gen, dtype=torch.float64)
    adv = torch.randn(S, T, generator=gen, dtype=torch.float64)
    return logp, old, ref, adv


def test_the_clipping_and_aggregation_settings_are_keyword_only() -> None:
    """clip_low and clip_high are easy to swap: they can only be passed by name."""
    logp, old, _, adv = _inputs()
    norm = losses.Normaliser.of(MASK, T)
    positional: tuple[Any, ...] = (logp, old, adv, MASK, 0.2, 0.28, "token-mean", norm)
    with pytest.raises(TypeError):
        losses.policy_loss(*positional)


def test_kl_is_added_only_with_a_reference_and_a_nonzero_coefficient() -> None:
    logp, old, ref, adv = _inputs()
    kw: dict[str, Any] = {
        "clip_low": 0.2,
        "clip_high": 0.28,
        "aggregation": "token-mean",
        "norm": losses.Normaliser.of(MASK, T),
    }
    plain = losses.policy_loss(logp, old, adv, MASK, **kw)
    # by default, and with a coefficient of 0, a reference changes nothing and no KL is reported
    for extra in ({"ref_logprobs": ref}, {"ref_logprobs": ref, "kl_coef": 0.0}):
        off = losses.policy_loss(logp, old, adv, MASK, **kw, **extra)
        assert torch.equal(off.loss, plain.loss) and not bool(off.kl.any())
    k3 = losses.kl_penalty(logp, ref, "k3")
    on = losses.policy_loss(logp, old, adv, MASK, **kw, ref_logprobs=ref, kl_coef=0.1)
    assert torch.equal(on.kl, k3)
    want = plain.loss + 0.1 * (k3 * MASK).sum() / MASK.sum()
    assert float(on.loss) == pytest.approx(float(want), rel=1e-12)
    assert torch.equal(on.clipped, plain.clipped)


def test_k3_is_exact_down_to_a_log_ratio_of_minus_20_and_capped_there() -> None:
    """k3 = (1/r − 1) + log r; for a wild sample (log r < −20) the code caps log(1/r) at 20 so
    that exp() cannot overflow: the value there is k3 at log r = −20, finite."""
    log_r = torch.tensor([-19.5, -20.0, -20.5, -1000.0], dtype=torch.float64)
    got = losses.kl_penalty(log_r, torch.zeros_like(log_r), "k3")
    assert float(got[0]) == pytest.approx(math.exp(19.5) - 1 - 19.5, rel=1e-12)
    capped = math.exp(20.0) - 1 - 20.0
    assert got[1:].tolist() == pytest.approx([capped] * 3, rel=1e-12)
