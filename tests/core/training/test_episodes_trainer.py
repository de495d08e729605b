"""Multi-turn episodes in the trainer (``--turns``; training/episodes.py): a failing answer gets
the task's feedback and another turn; the response the trainer holds is the turns with the
feedback between them, read by the policy but never trained; the episode's reward is its last
turn's; the episode estimators read the turns, the others the reward; held-out pass@k after the
first turn and after the last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from advest.fast import calling
from advest.training.config import RLConfig, scorer
from advest.training.episodes import feedback_text, sample_episodes
from advest.training.generation import Sampling, generate
from advest.training.policy import forward_logprobs
from advest.training.prompts import encode
from advest.training.rollout import synthetic
from advest.training.task import problem
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, model_path  # noqa: F401

pytestmark = TRAINER_WARNINGS


def _episodes(model_path: str, seed: int = 0, step_reward: float = 0.0):  # type: ignore[no-untyped-def]  # noqa: F811
    model = AutoModelForCausalLM.from_pretrained(model_path)
    tok = AutoTokenizer.from_pretrained(model_path)
    problems = [problem(0, 10**9 + i) for i in range(6)]
    ids, attn = encode(tok, [p.prompt for p in problems], chat_template=False, system_prompt=None)
    sc = scorer(RLConfig(reward="exact"))
    torch.manual_seed(seed)
    try:
        scored = sample_episodes(
            model, tok, ids, attn, [p.answer for p in problems], Sampling(4, 4, 1.0, 1.0), sc,
            turns=3, feedback=[feedback_text(p.prompt, True) for p in problems], engine=generate,
            step_reward=step_reward,
        )  # fmt: skip
    finally:
        sc.close()
    return model, tok, problems, scored


def test_an_episode_holds_its_turns_and_the_feedback_between_them(model_path: str) -> None:  # noqa: F811
    _, tok, problems, s = _episodes(model_path)
    P = s.prompt_mask.shape[1]
    assert s.attend is not None and s.turn_ids is not None and s.turn_rewards is not None
    assert bool((s.mask <= s.attend).all())  # every trained token is read
    feedback = s.attend & ~s.mask
    assert bool((s.turn_ids[feedback] == -1).all()) and bool((s.turn_ids[~s.attend] == -1).all())
    assert bool((s.turn_ids[s.mask] >= 0).all())
    turns = s.turn_ids.amax(-1) + 1  # [S]
    for row in range(s.sequences.shape[0]):
        b = row // 4
        said = tok(problems[b].prompt, add_special_tokens=False)["input_ids"]
        gaps = s.sequences[row, P:][feedback[row]].tolist()
        assert gaps == said * (int(turns[row]) - 1), row  # the feedback, once per further turn
        # the reward sits on the last turn and is what the last turn's text scores
        last = int(turns[row]) - 1
        tr = s.turn_rewards.view(-1, 3)[row]
        assert float(tr[last]) == float(s.rewards.view(-1)[row])
        assert float(tr.sum()) == float(tr[last])
    assert int(turns.max()) > 1  # some episode took a further turn
    # a further turn only after a failing one; a passing first turn ends the episode
    assert s.first_rewards is not None
    first_passed = s.first_rewards.view(-1) >= 1
    assert bool((turns[first_passed] == 1).all()) and not bool(first_passed[turns > 1].any())


def test_a_step_reward_lands_on_every_turn_but_the_last(model_path: str) -> None:  # noqa: F811
    """With --step_reward, the same episodes (same seed) gain it on each earlier turn, and the
    reward the other estimators see is the sum of the turns'."""
    _, _, _, plain = _episodes(model_path)
    _, _, _, stepped = _episodes(model_path, step_reward=-0.25)
    assert plain.turn_rewards is not None and stepped.turn_rewards is not None
    assert plain.turn_ids is not None
    turns = (plain.turn_ids.amax(-1) + 1).view(plain.rewards.shape)  # [B, G]
    torch.testing.assert_close(stepped.rewards, plain.rewards - 0.25 * (turns - 1).float())
    torch.testing.assert_close(stepped.turn_rewards.sum(-1), stepped.rewards)
    assert bool((stepped.turn_rewards[..., 0][turns > 1] <= 0).all())


def test_the_policy_reads_the_feedback_as_if_it_were_the_prompt(model_path: str) -> None:  # noqa: F811
    """The log-probs of a further turn, taken over the whole episode (the feedback attended,
    not trained), equal those of the same tokens after the episode so far given as a prompt."""
    model, _, _, s = _episodes(model_path)
    P = s.prompt_mask.shape[1]
    assert s.attend is not None and s.turn_ids is not None
    logp = forward_logprobs(model, s.sequences, s.prompt_mask, s.mask, 1.0, attend=s.attend).logp
    row = int((s.turn_ids.amax(-1) >= 1).nonzero()[0])
    second = (s.turn_ids[row] == 1).nonzero().flatten()
    start = int(second[0])
    context = s.sequences[row, : P + start][torch.cat([s.prompt_mask[row].bool(),
                                                       s.attend[row, :start]])]  # fmt: skip
    tail = s.sequences[row, P + start : P + int(second[-1]) + 1]
    direct = forward_logprobs(
        model, torch.cat([context, tail])[None], torch.ones(1, len(context), dtype=torch.long),
        torch.ones(1, len(tail), dtype=torch.bool), 1.0,
    ).logp  # fmt: skip
    torch.testing.assert_close(logp[row, second], direct[0], rtol=1e-5, atol=1e-5)


def test_one_turn_gives_the_episode_estimators_their_single_turn_twin() -> None:
    rollout = synthetic(3, 4, T=5)
    for name, twin in (("turn_rloo", "rloo"), ("turn_index_mean", "dr_grpo")):
        got = calling.plan(name).advantages(rollout)
        torch.testing.assert_close(got, calling.plan(twin).advantages(rollout))


@pytest.mark.parametrize("estimator", ["turn_rloo", "rloo"])
def test_advest_train_runs_episodes_and_measures_both_turns(
    model_path: str,  # noqa: F811
    tmp_path: Path,
    estimator: str,
) -> None:
    from advest.training.train import train

    cfg = _cfg(model_path, tmp_path, turns=2, estimator=estimator, reward="exact",
               eval_prompts=4, eval_samples=4)  # fmt: skip
    folder = train(cfg, {"enable_progress_bar": False}, name=estimator)
    curves = json.loads((folder / "passk.json").read_text())
    assert {"before", "before, 2 turns", "after", "after, 2 turns"} <= set(curves)
    for label in ("before", "after"):  # a second turn can only add passes
        two = curves[f"{label}, 2 turns"]
        assert all(two[k] >= curves[label][k] - 1e-12 for k in curves[label])


def test_turns_must_be_positive(tmp_path: Path) -> None:
    from advest.training.config import ConfigError, validate

    with pytest.raises(ConfigError, match="--turns"):
        validate(RLConfig(turns=0, out=str(tmp_path)))
