"""advest inside TRL's GRPOTrainer, run for real: two training steps of a tiny local Llama on CPU,
comparing the advantages that reached TRL's loss with advest's on the rewards TRL computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig, GRPOTrainer

from advest.fast import by_group, registry, shaping
from advest.integrations.trl import AdvestGRPOConfig, AdvestGRPOTrainer
from advest.training import embedded

# TRL 1.16 reads transformers names that transformers 5 renamed (gradient -> activation
# checkpointing): TRL's warnings, not advest's.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`.*` is deprecated and will be removed in v6:FutureWarning"
)

G = 4  # completions per prompt
PROMPTS = ["1+2=", "3+4=", "5+6=", "7+8="]


def _tiny_model(folder: Path) -> Path:
    """A 1-layer Llama (hidden 32) and advest's character tokenizer, saved as a local checkpoint."""
    tokenizer: Any = embedded.build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class Recorder:
    """Mixin: keeps, per generation batch, the rows in the order the reward function saw them,
    and every batch the loss was given (TRL shuffles rows in between)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.generated: list[dict[str, torch.Tensor]] = []
        self.fed: list[dict[str, torch.Tensor]] = []
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        keys = ("prompt_ids", "completion_ids", "completion_mask")
        self.generated.append({k: out[k].clone() for k in keys})
        return out

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        keys = ("prompt_ids", "completion_ids", "advantages")
        self.fed.append({k: inputs[k].detach().clone() for k in keys})
        return super().compute_loss(model, inputs, *args, **kwargs)


class Recording(Recorder, AdvestGRPOTrainer):
    pass


class RecordingTRL(Recorder, GRPOTrainer):
    pass


def _train(
    tmp_path: Path, estimator: str | None, k: int | None, **settings: Any
) -> tuple[Recorder, list[torch.Tensor]]:
    """Two steps with advest's ``estimator`` (None: TRL's own GRPO advantage); ``settings`` go
    to the config (e.g. TRL's ``scale_rewards``)."""
    rewards_seen: list[torch.Tensor] = []

    def reward(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        # deterministic in the completion's tokens, with several levels so groups are not flat
        values = [float(sum(ids) % 5) / 4 for ids in completion_ids]
        rewards_seen.append(torch.tensor(values, dtype=torch.float32))
        return values

    advest = {} if estimator is None else {"advest_estimator": estimator, "advest_k": k}
    config, trainer_class = (
        (GRPOConfig, RecordingTRL) if estimator is None else (AdvestGRPOConfig, Recording)
    )
    args = config(
        output_dir=str(tmp_path / "out"),
        **advest,
        num_generations=G,
        per_device_train_batch_size=2 * G,  # 2 prompts per step
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,  # TRL's default (on) only slows a 1-layer model
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        seed=0,
        **settings,
    )
    trainer = trainer_class(
        model=str(_tiny_model(tmp_path / "model")),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
    )
    trainer.train()
    return trainer, rewards_seen


def _rows(batch: dict[str, torch.Tensor]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [
        (tuple(p.tolist()), tuple(c.tolist()))
        for p, c in zip(batch["prompt_ids"], batch["completion_ids"], strict=True)
    ]


@pytest.mark.parametrize(("estimator", "k"), [("maxpo", 2), ("kae", None)])
def test_trl_trains_with_advests_advantages(tmp_path: Path, estimator: str, k: int | None) -> None:
    trainer, rewards_seen = _train(tmp_path, estimator, k)
    assert trainer.state.global_step == 2
    assert len(trainer.generated) == len(rewards_seen) == len(trainer.fed) == 2
    entry = registry.entry(estimator)
    history = entry.fn() if entry.stateful else None  # kae: one instance across both steps
    prompt_ids: dict[tuple[int, ...], int] = {}
    differs_from_trl = False
    for generated, rewards, fed in zip(trainer.generated, rewards_seen, trainer.fed, strict=True):
        grouped = rewards.view(-1, G)  # [B, G]
        if history is not None:
            rows = _rows(generated)[::G]
            ids = torch.tensor([prompt_ids.setdefault(p, len(prompt_ids)) for p, _ in rows])
            expected = history(prompt_ids=ids, rewards=grouped).reshape(-1)
        else:
            expected = entry.fn(grouped, k).reshape(-1)  # [B·G] in the reward function's order
        by_row: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
        for row, value in zip(_rows(generated), expected.tolist(), strict=True):
            # identical rows have identical rewards and, estimators being equivariant, advantages
            assert by_row.setdefault(row, value) == value
        used = fed["advantages"]  # [B·G] as the loss received it, shuffled
        want = torch.tensor([by_row[row] for row in _rows(fed)], dtype=used.dtype)
        torch.testing.assert_close(used, want, rtol=0, atol=0)
        trl = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
        differs_from_trl |= not torch.allclose(expected, trl.reshape(-1), atol=1e-3)
    assert differs_from_trl, (
        "the rewards gave TRL's own advantages: the test cannot tell them apart"
    )


def test_trl_trains_with_advests_advantages_of_the_shaped_rewards(tmp_path: Path) -> None:
    """``advest_shaping``: the loss gets ``by_group`` of the rewards shaped by each completion's
    length (its completion-mask sum), exactly. rloo is not scale-invariant, so GR³ changes its
    advantages even where every completion has the same length."""
    options = {"alpha": 1.0}
    settings = {"advest_shaping": "gr3", "advest_shaping_options": options}
    trainer, rewards_seen = _train(tmp_path, "rloo", None, **settings)
    made = shaping.shaping("gr3", **options)
    differs = False
    for generated, rewards, fed in zip(trainer.generated, rewards_seen, trainer.fed, strict=True):
        lengths = generated["completion_mask"].sum(1)  # [B·G] in the reward function's order
        index = torch.arange(len(rewards)) // G
        expected = by_group("rloo", rewards, index, shaping=made, lengths=lengths)
        differs |= not torch.equal(expected, by_group("rloo", rewards, index))
        by_row: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
        for row, value in zip(_rows(generated), expected.tolist(), strict=True):
            assert by_row.setdefault(row, value) == value
        used = fed["advantages"]
        want = torch.tensor([by_row[row] for row in _rows(fed)], dtype=used.dtype)
        torch.testing.assert_close(used, want, rtol=0, atol=0)
    assert differs, "the shaping changed no advantage: the test cannot tell it was applied"


def test_trls_own_advantage_is_advests_grpo_with_eps_1e_4(tmp_path: Path) -> None:
    """TRL's formula, through TRL's own trainer: (r − mean)/(std_ddof=1 + 1e-4) per group, i.e.
    ``grpo(rewards, eps=1e-4)``; no convention option is needed to match it."""
    trainer, rewards_seen = _train(tmp_path, None, None)
    for generated, rewards, fed in zip(trainer.generated, rewards_seen, trainer.fed, strict=True):
        expected = registry.get("grpo")(rewards.view(-1, G), eps=1e-4).reshape(-1)
        by_row = dict(zip(_rows(generated), expected.tolist(), strict=True))
        want = torch.tensor([by_row[row] for row in _rows(fed)])
        # TRL divides in float32 with a float32 std; advest reduces in float64: rounding apart
        torch.testing.assert_close(fed["advantages"], want, rtol=1e-5, atol=1e-5)


def test_misconfiguration_is_refused_before_training(tmp_path: Path) -> None:
    model = str(_tiny_model(tmp_path / "model"))
    data = Dataset.from_dict({"prompt": PROMPTS})

    def build(**settings: Any) -> AdvestGRPOTrainer:
        args = AdvestGRPOConfig(
            output_dir=str(tmp_path / "out"),
            num_generations=G,
            per_device_train_batch_size=G,
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            report_to=[],
            **settings,
        )
        return AdvestGRPOTrainer(
            model=model, reward_funcs=[lambda **kw: []], args=args, train_dataset=data
        )

    with pytest.raises(ValueError, match="set advest_k"):
        build(advest_estimator="maxpo")
    with pytest.raises(ValueError, match="takes no K"):
        build(advest_estimator="rloo", advest_k=2)
    with pytest.raises(ValueError, match="token level"):
        build(advest_estimator="ktae")
    with pytest.raises(ValueError, match="needs each reward's own score"):
        build(advest_estimator="gdpo")
    with pytest.raises(ValueError, match="K=5"):
        build(advest_estimator="maxpo", advest_k=5)  # K > G
    with pytest.raises(ValueError, match=r"^advest_shaping: unknown shaping 'gr4'"):
        build(advest_estimator="grpo", advest_shaping="gr4")
    with pytest.raises(ValueError, match=r"^advest_shaping_options: shaping 'gr3' takes"):
        build(advest_estimator="grpo", advest_shaping="gr3", advest_shaping_options='{"b": 1}')


def test_evaluation_with_fewer_generations_than_k_is_refused_when_built(tmp_path: Path) -> None:
    args = AdvestGRPOConfig(
        output_dir=str(tmp_path / "out"), num_generations=G, num_generations_eval=2,
        per_device_train_batch_size=G, per_device_eval_batch_size=2, eval_strategy="steps",
        eval_steps=1, advest_estimator="maxpo", advest_k=3, use_cpu=True, bf16=False,
        activation_checkpointing=False, report_to=[],
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": PROMPTS})
    with pytest.raises(ValueError, match=r"num_generations_eval=2: .*K=3"):
        AdvestGRPOTrainer(
            model=str(_tiny_model(tmp_path / "model")), reward_funcs=[lambda **kw: [0.0] * 2],
            args=args, train_dataset=data, eval_dataset=data,
        )  # fmt: skip


def test_evaluation_leaves_the_kae_history_as_training_left_it(tmp_path: Path) -> None:
    def reward(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [float(sum(ids) % 5) / 4 for ids in completion_ids]

    args = AdvestGRPOConfig(
        output_dir=str(tmp_path / "out"), advest_estimator="kae", num_generations=G,
        num_generations_eval=G, per_device_train_batch_size=2 * G,
        per_device_eval_batch_size=2 * G, max_completion_length=4, max_steps=1, beta=0.0,
        use_cpu=True, bf16=False, activation_checkpointing=False, report_to=[],
        save_strategy="no", seed=0,
    )  # fmt: skip
    trainer = AdvestGRPOTrainer(
        model=str(_tiny_model(tmp_path / "model")), reward_funcs=[reward], args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        eval_dataset=Dataset.from_dict({"prompt": ["9+9=", "1+1="]}),
    )  # fmt: skip
    trainer.train()
    before = {k: v.clone() for k, v in trainer.advest.state.state_dict().items()
              if isinstance(v, torch.Tensor)}  # fmt: skip
    known = dict(trainer.advest_prompt_ids)
    metrics = trainer.evaluate()
    assert "eval_loss" in metrics
    after = trainer.advest.state.state_dict()
    assert before and all(torch.equal(v, after[k]) for k, v in before.items())
    assert len(trainer.advest_prompt_ids) >= len(known)  # ids may grow; the history may not


def test_trls_batch_std_is_advests_grpo_batch_std_with_eps_1e_4(tmp_path: Path) -> None:
    """TRL 1.16's ``scale_rewards="batch"`` (LitePPO's group mean, batch std), through TRL's own
    trainer: (r − group mean)/(std_ddof=1 of all the step's rewards + 1e-4), i.e.
    ``grpo_batch_std(rewards, eps=1e-4)``; it differs from the per-group ``grpo`` here."""
    trainer, rewards_seen = _train(tmp_path, None, None, scale_rewards="batch")
    differs_from_group_std = False
    for generated, rewards, fed in zip(trainer.generated, rewards_seen, trainer.fed, strict=True):
        grouped = rewards.view(-1, G)
        expected = registry.get("grpo_batch_std")(grouped, eps=1e-4).reshape(-1)
        by_row = dict(zip(_rows(generated), expected.tolist(), strict=True))
        want = torch.tensor([by_row[row] for row in _rows(fed)])
        torch.testing.assert_close(fed["advantages"], want, rtol=1e-5, atol=1e-5)
        per_group = registry.get("grpo")(grouped, eps=1e-4).reshape(-1)
        differs_from_group_std |= not torch.allclose(expected, per_group, atol=1e-3)
    assert differs_from_group_std


def test_scale_rewards_picks_the_grpo_variant_and_is_refused_where_it_has_no_meaning() -> None:
    from advest.integrations.trl import with_scale_rewards

    assert [with_scale_rewards("grpo", s) for s in ("group", "none", "batch", True, False)] == [
        "grpo", "dr_grpo", "grpo_batch_std", "grpo", "dr_grpo"
    ]  # fmt: skip
    assert with_scale_rewards("maxpo", "group") == "maxpo"  # TRL's default: nothing to honour
    with pytest.raises(
        ValueError, match="scale_rewards='none' has no meaning for advest_estimator='maxpo'"
    ):
        with_scale_rewards("maxpo", "none")
    with pytest.raises(ValueError, match="scale_rewards='z'"):
        with_scale_rewards("grpo", "z")


def test_trls_scale_rewards_none_with_advest_grpo_trains_with_dr_grpo(tmp_path: Path) -> None:
    """Through TRL's own trainer: ``scale_rewards="none"`` with ``advest_estimator="grpo"``
    reaches the loss as r − group mean, not as advest's std-scaled GRPO."""
    trainer, rewards_seen = _train(tmp_path, "grpo", None, scale_rewards="none")
    differs = False
    for generated, rewards, fed in zip(trainer.generated, rewards_seen, trainer.fed, strict=True):
        grouped = rewards.view(-1, G)
        expected = registry.get("dr_grpo")(grouped).reshape(-1)
        by_row = dict(zip(_rows(generated), expected.tolist(), strict=True))
        want = torch.tensor([by_row[row] for row in _rows(fed)])
        torch.testing.assert_close(fed["advantages"], want, rtol=1e-6, atol=1e-6)
        differs |= not torch.allclose(expected, registry.get("grpo")(grouped).reshape(-1))
    assert differs


def test_trls_normalize_then_sum_is_advests_gdpo_with_eps_1e_4(tmp_path: Path) -> None:
    """TRL's ``multi_objective_aggregation="normalize_then_sum"``, through TRL's own trainer
    with two reward functions and weights (1, 0.5): each reward z-scored in its group with
    std_ddof=1 + 1e-4, the weighted sum whitened over the batch with the same ε, i.e.
    ``gdpo(reward_parts, weights, eps=1e-4)`` (spec/gdpo.md, "Peers")."""
    seen: list[list[torch.Tensor]] = [[], []]

    def modulo(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        values = [float(sum(ids) % 5) / 4 for ids in completion_ids]
        seen[0].append(torch.tensor(values, dtype=torch.float32))
        return values

    def parity(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        values = [float(ids[0] % 2 if ids else 0) + len(set(ids)) / 8 for ids in completion_ids]
        seen[1].append(torch.tensor(values, dtype=torch.float32))
        return values

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), num_generations=G, per_device_train_batch_size=2 * G,
        max_completion_length=6, max_steps=2, learning_rate=1e-2, beta=0.0, use_cpu=True,
        bf16=False, activation_checkpointing=False, report_to=[], save_strategy="no",
        logging_steps=1, seed=0, multi_objective_aggregation="normalize_then_sum",
        reward_weights=[1.0, 0.5],
    )  # fmt: skip
    trainer = RecordingTRL(
        model=str(_tiny_model(tmp_path / "model")),
        reward_funcs=[modulo, parity],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
    )
    trainer.train()
    assert len(trainer.generated) == len(seen[0]) == len(seen[1]) == len(trainer.fed) == 2
    gdpo = registry.get("gdpo")
    for step, (generated, fed) in enumerate(zip(trainer.generated, trainer.fed, strict=True)):
        parts = torch.stack([seen[0][step], seen[1][step]], -1).view(-1, G, 2)  # [B, G, R]
        expected = gdpo(parts.double(), [1.0, 0.5], eps=1e-4).reshape(-1)
        by_row = dict(zip(_rows(generated), expected.tolist(), strict=True))
        want = torch.tensor([by_row[row] for row in _rows(fed)], dtype=torch.float32)
        # TRL reduces in float32, advest in float64: rounding apart
        torch.testing.assert_close(fed["advantages"], want, rtol=1e-5, atol=1e-5)
        summed = registry.get("grpo")((parts @ torch.tensor([1.0, 0.5])).double(), eps=1e-4)
        assert not torch.allclose(expected, summed.reshape(-1), atol=1e-3)
