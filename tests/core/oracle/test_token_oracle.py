"""The token oracle (oracle/token_*.py): every verdict checked both ways, a correct token-level
estimator passing and a planted buggy one failing, including the token-level bug classes that
trainers shipped: verl 7278 (REINFORCE++ reset its return at observation tokens), SkyRL 1492
(step advantages broadcast to the wrong positions), token- versus sequence-level aggregation
(SkyRL 1296, TRL 6439/6380, verl 5366/5417) and a baseline reading its own rollout's later
tokens. Each planted estimator is a few lines here; the verdicts are computed, never stored."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from advest.fast.group import dr_grpo, rloo
from advest.fast.ktae import ktae
from advest.oracle.conventions.harness import Guard
from advest.oracle.conventions.tokens import Declared, TokenEstimator, VerlTokens
from advest.oracle.properties import token_checks as find
from advest.oracle.properties import token_padding as pad
from advest.oracle.reports.token_report import check_tokens

F64 = torch.float64


def declared(fn: Any) -> TokenEstimator:
    return Declared(fn, Guard(), {})


# --- correct token-level estimators -------------------------------------------------------------


def rloo_tokens(rewards: Tensor, mask: Tensor) -> Tensor:
    """RLOO's advantage at every valid token: [B, G, T]."""
    return rloo(rewards)[..., None] * mask


def dr_grpo_tokens(rewards: Tensor, mask: Tensor) -> Tensor:
    """r − the group's mean over sequences, at every valid token: unbiased for (G − 1)·∇J."""
    return dr_grpo(rewards)[..., None] * mask


def previous_token_baseline(rewards: Tensor, mask: Tensor, token_ids: Tensor) -> Tensor:
    """R_i − (mean of the others' R) · [y_{i,t−1} = 0]: the baseline reads the prefix only."""
    loo = (rewards - rloo(rewards))[..., None]  # [B, G, 1]: the others' mean
    before = torch.nn.functional.pad(token_ids[..., :-1], (1, 0), value=1) == 0
    return (rewards[..., None] - loo * before) * mask


def reinforce_returns(token_level_rewards: Tensor, response_mask: Tensor, config: Any) -> tuple:  # type: ignore[type-arg]
    """verl's REINFORCE++ returns (γ = 1) without the whitening: observation tokens (mask 0)
    carry the running return through, as verl 0.9.1 does since #7278."""
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    for t in reversed(range(token_level_rewards.shape[1])):
        new = token_level_rewards[:, t] + config.gamma * running
        returns[:, t] = new * response_mask[:, t]
        running = new * response_mask[:, t] + running * (1 - response_mask[:, t])
    return returns, returns


# --- planted bugs -------------------------------------------------------------------------------


def reinforce_returns_reset(
    token_level_rewards: Tensor, response_mask: Tensor, config: Any
) -> tuple:  # type: ignore[type-arg]
    """verl 7278, planted: the running return is reset at observation tokens, so the action
    tokens before an observation span get 0 instead of the return."""
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    for t in reversed(range(token_level_rewards.shape[1])):
        running = (token_level_rewards[:, t] + config.gamma * running) * response_mask[:, t]
        returns[:, t] = running
    return returns, returns


def first_columns(rewards: Tensor, mask: Tensor) -> Tensor:
    """SkyRL 1492, planted: each response's advantage written to its first L columns (L its
    valid-token count) instead of to the positions its mask marks."""
    L = mask.sum(-1, keepdim=True)  # [B, G, 1]
    return rloo(rewards)[..., None] * (torch.arange(mask.shape[-1]) < L)


def token_mean_baseline(rewards: Tensor, mask: Tensor) -> Tensor:
    """Token- vs sequence-level aggregation, planted: the group's mean over its tokens
    (Σ_j L_j R_j / Σ_j L_j) as the baseline, so a response weighs by its length."""
    L = mask.sum(-1).to(rewards.dtype)  # [B, G]
    base = (L * rewards).sum(-1, keepdim=True) / L.sum(-1, keepdim=True)
    return (rewards - base)[..., None] * mask


def per_length(rewards: Tensor, mask: Tensor) -> Tensor:
    """Sequence-mean-token-mean folded into the advantage, planted: (r − mean) / L_i."""
    L = mask.sum(-1, keepdim=True).to(rewards.dtype)
    return dr_grpo(rewards)[..., None] / L * mask


def next_token_baseline(rewards: Tensor, mask: Tensor, token_ids: Tensor) -> Tensor:
    """A baseline reading a later token of its own rollout, planted: the others' mean times
    [y_{i,t+1} = 0]."""
    loo = (rewards - rloo(rewards))[..., None]
    after = torch.nn.functional.pad(token_ids[..., 1:], (0, 1), value=1) == 0
    after = after & torch.nn.functional.pad(mask[..., 1:], (0, 1), value=False)
    return (rewards[..., None] - loo * after) * mask


def raw_reward(rewards: Tensor, mask: Tensor) -> Tensor:
    """No baseline at all: A = R at every token."""
    return rewards[..., None] * mask


def first_rollout_baseline(rewards: Tensor, mask: Tensor) -> Tensor:
    """r − the reward of rollout 0: depends on the rollouts' order."""
    return (rewards - rewards[:, :1])[..., None] * mask


def offset_sum(rewards: Tensor, mask: Tensor) -> Tensor:
    """r − mean computed on r + 1e7 in the input dtype: float32's ulp at 1e7 is 1."""
    x = rewards + 1e7
    return (x - x.mean(-1, keepdim=True))[..., None] * mask


def batch_scaled(rewards: Tensor, mask: Tensor) -> Tensor:
    """r − mean divided by the batch's reward spread: a group of padding moves the others."""
    return (dr_grpo(rewards) / (rewards.std() + 1))[..., None] * mask


def squared(rewards: Tensor, mask: Tensor) -> Tensor:
    """(r − mean)·|r − mean|: degree 2 in the rewards."""
    d = dr_grpo(rewards)
    return (d * d.abs())[..., None] * mask


def padded_length_norm(rewards: Tensor, mask: Tensor) -> Tensor:
    """Token- vs sequence-level aggregation folded into the advantage, planted: RLOO · L_i / T,
    T the padded width of the batch (a loss normalised by the longest row, not the response)."""
    L = mask.sum(-1, keepdim=True).to(rewards.dtype)
    return rloo(rewards)[..., None] * L / mask.shape[-1] * mask


def reads_padding(rewards: Tensor, mask: Tensor, logprobs: Tensor) -> Tensor:
    """A baseline from the mean log-probability over every column, padding included."""
    return (rloo(rewards)[..., None] - logprobs.mean(-1, keepdim=True)) * mask


def in_place(rewards: Tensor, mask: Tensor) -> Tensor:
    """Centres the caller's rewards in place."""
    rewards -= rewards.mean(-1, keepdim=True)
    return rewards[..., None] * mask


# --- the verdicts, both ways --------------------------------------------------------------------


@pytest.mark.parametrize("G", [2, 3])
def test_unbiasedness_finds_c_for_a_causal_baseline_and_flags_later_tokens_and_token_means(
    G: int,
) -> None:
    assert find.unbiasedness(declared(rloo_tokens), G, F64).verdict == f"yes, E[ĝ] = {G}·∇J"
    assert find.unbiasedness(declared(dr_grpo_tokens), G, F64).verdict == f"yes, E[ĝ] = {G - 1}·∇J"
    assert find.unbiasedness(declared(previous_token_baseline), G, F64).verdict.startswith("yes")
    for planted in (next_token_baseline, token_mean_baseline, per_length):
        assert find.unbiasedness(declared(planted), G, F64).verdict == "no", planted.__name__


def test_reads_own_tokens_names_the_later_positions_a_baseline_reads() -> None:
    assert find.reads_own_tokens(declared(previous_token_baseline), 3, F64).verdict == "prefix only"
    later = find.reads_own_tokens(declared(next_token_baseline), 3, F64)
    assert later.verdict == "later tokens"
    assert {(0, 1), (1, 2)} <= set(later.data["pairs"])  # (t, u): A_t moved with tokens from u on
    # the token-mean baseline reads its own length: the EOS that ends the response
    assert find.reads_own_tokens(declared(token_mean_baseline), 3, F64).verdict == "later tokens"
    own = find.reads_own_tokens(declared(ktae), 3, F64)  # κ of the token's own id
    assert any(t == u for t, u in own.data["pairs"])


def test_identity_checks_pass_rloo_and_fail_each_planted_break() -> None:
    fields = find.probe_fields(3, F64)
    good = declared(rloo_tokens)
    assert find.centred(good, fields, F64).verdict == "yes"
    assert find.centred(declared(token_mean_baseline), fields, F64).verdict == "no"
    shift, scale = find.shift_scale(good, fields, F64)
    assert shift.verdict == "yes" and scale.verdict.startswith("yes")
    assert find.shift_scale(declared(raw_reward), fields, F64)[0].verdict == "no"
    assert find.shift_scale(declared(squared), fields, F64)[1].verdict == "no"
    assert find.shift_scale(declared(zscore_tokens), fields, F64)[1].verdict == "invariant"
    assert find.permutation(good, fields, F64).verdict == "yes"
    assert find.permutation(declared(first_rollout_baseline), fields, F64).verdict == "no"
    for dtype in (torch.float32, torch.bfloat16):
        assert find.accuracy(good, fields, dtype).verdict == "yes"
        assert find.accuracy(declared(offset_sum), fields, dtype).verdict == "no"


def zscore_tokens(rewards: Tensor, mask: Tensor) -> Tensor:
    """(r − mean)/std with no ε (0 for a constant group): scale invariant, exactly."""
    std = rewards.std(-1, keepdim=True)
    return (dr_grpo(rewards) / torch.where(std > 0, std, 1.0))[..., None] * mask


def test_skyrl_1492_wrong_positions_fail_left_padding_holes_and_zero_padding() -> None:
    good = {f.prop: f.verdict for f in pad.layouts(declared(rloo_tokens), 3, F64)}
    bad = {f.prop: f.verdict for f in pad.layouts(declared(first_columns), 3, F64)}
    assert set(good.values()) == {"yes"}
    assert bad["left padding"] == bad["holes in the mask"] == "no: valid tokens moved"
    assert bad["0 at padding"].startswith("no") and bad["extra right padding"] == "yes"


def test_verl_7278_reset_at_observation_tokens_fails_holes_in_the_mask() -> None:
    good = {f.prop: f.verdict for f in pad.layouts(VerlTokens(reinforce_returns, Guard()), 2, F64)}
    bad = {
        f.prop: f.verdict for f in pad.layouts(VerlTokens(reinforce_returns_reset, Guard()), 2, F64)
    }
    assert good["holes in the mask"] == "yes"
    assert bad["holes in the mask"] == "no: valid tokens moved"
    assert bad["left padding"] == "yes"  # contiguous responses: the reset never fires


def test_degenerate_groups_and_padding_rows_both_ways() -> None:
    assert pad.all_equal(declared(rloo_tokens), 3, F64).verdict == "yes: A = 0"
    assert pad.all_equal(declared(raw_reward), 3, F64).verdict.startswith("no")
    good = {f.prop: f.verdict for f in pad.padding_rows(declared(rloo_tokens), 3, F64)}
    assert good == {"empty response": "yes: A = 0 on its row", "all-padding group": "yes"}
    empty, _ = pad.padding_rows(declared(per_length), 3, F64)
    assert empty.verdict == "no: non-finite output"  # 0 / 0 on the empty row
    _, group = pad.padding_rows(declared(batch_scaled), 3, F64)
    assert group.verdict == "no: other groups moved"


def test_extends_holds_for_ktae_over_grpo_and_fails_for_another_claim() -> None:
    assert find.extends(declared(ktae), "grpo", 3, torch.float32).verdict == "yes: equals grpo"
    assert find.extends(declared(ktae), "rloo", 3, torch.float32).verdict.startswith("no")


def test_the_whole_report_couples_and_marks_copies() -> None:
    rows = {(f.prop, f.n): f.verdict for f in check_tokens(rloo_tokens, extends="rloo")}
    assert rows[("couples groups", None)] == "no" and rows[("modifies its inputs", None)] == "no"
    assert rows[("unbiased", 3)] == "yes, E[ĝ] = 3·∇J" and rows[("extends rloo", 2)].startswith(
        "yes"
    )


def test_advest_check_family_token_reports_a_later_token_baseline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command, end to end (its child process included), on a planted estimator."""
    import argparse
    from pathlib import Path

    from advest.oracle.reports.cli import add_arguments, command

    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    target = "tests.core.oracle.test_token_oracle:next_token_baseline"
    assert command(parser.parse_args([target, "--family", "token", "--extends", "rloo"])) == 0
    out = capsys.readouterr().out
    assert "| reads its own tokens | later tokens (N = 3) |" in out
    assert "| unbiased | no (N = 2, 3) |" in out


def test_extra_padding_and_padding_values_fail_for_estimators_that_read_the_padded_width() -> None:
    width = {f.prop: f.verdict for f in pad.layouts(declared(padded_length_norm), 2, F64)}
    assert width["extra right padding"] == "no: valid tokens moved"
    values = {f.prop: f.verdict for f in pad.layouts(declared(reads_padding), 2, F64)}
    assert values["padding values ignored"] == "no: valid tokens moved"
    assert values["extra right padding"] == "no: valid tokens moved"


def test_coupled_groups_and_input_changes_are_reported() -> None:
    from advest.oracle.reports.token_report import coupling

    assert coupling(declared(batch_scaled)).verdict == "yes: judged one group per batch"
    assert coupling(declared(rloo_tokens)).verdict == "no"
    rows = {(f.prop, f.n): f.verdict for f in check_tokens(in_place)}
    assert rows[("modifies its inputs", None)] == "yes: every check ran on copies"
