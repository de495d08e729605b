"""Scale settings on a tiny model, on CPU: bf16 weights, precision combinations, gradient
checkpointing, LoRA (adapter-free reference, lr = 0, resume, export), both generation engines,
and the strategies refused before loading (FSDP without a GPU, DeepSpeed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from advest.training import generation, losses, scale
from advest.training.config import ConfigError, RLConfig
from advest.training.data import Item
from advest.training.module import RLModule
from advest.training.policy import forward_logprobs, load_policy, rollout_forward
from advest.training.prompts import encode
from advest.training.sampling import response_mask
from tests.core.training.test_training import (
    ROOT,
    TRAINER_WARNINGS,
    _cfg,
    _initial,
    _max_diff,
    _params,
    _train,
    model_path,
)

__all__ = ["model_path"]  # the module-scoped fixture, shared with test_training

pytestmark = TRAINER_WARNINGS

LORA: dict[str, Any] = {"lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.1}


def _module(model_path: str, **over: Any) -> RLModule:
    L.seed_everything(0, verbose=False)
    return RLModule(_cfg(model_path, Path("unused"), **over), model_path)


def _items(n: int) -> list[Item]:
    return [Item(i, f"{i + 10}+{2 * i + 3}=", str(3 * i + 13)) for i in range(n)]


class Snapshot(L.Callback):
    """The whole policy (base and adapters) at the start and the end of fit."""

    def on_train_start(self, trainer: L.Trainer, module: Any) -> None:
        self.start = {k: v.detach().clone() for k, v in module.policy.state_dict().items()}

    def on_train_end(self, trainer: L.Trainer, module: Any) -> None:
        self.end = {k: v.detach().clone() for k, v in module.policy.state_dict().items()}
        ids = torch.tensor([[1, 4, 5, 13, 6, 14, 7]])
        self.logits = module.policy(input_ids=ids).logits.detach().clone()


# ----------------------------------------------------------------------------- precision
def test_bf16_weights_train_a_few_steps_with_float32_log_probs(
    model_path: str, tmp_path: Path
) -> None:
    module = _module(model_path, dtype="bfloat16")
    assert module.policy.dtype == torch.bfloat16
    scored = module.sample(_items(1))
    seqs, pm, mask = scored.sequences, scored.prompt_mask, scored.mask
    logp = forward_logprobs(module.policy, seqs, pm, mask, module.cfg.temperature).logp
    assert logp.dtype == torch.float32  # log_softmax in float32 from bf16 logits
    after = _train(_cfg(model_path, tmp_path, dtype="bfloat16", steps=2, kl_coef=0.1), "bf16")
    assert all(v.dtype == torch.bfloat16 for v in after.values())
    assert all(bool(torch.isfinite(v.float()).all()) for v in after.values())
    initial = {k: v.bfloat16() for k, v in _initial(model_path).items()}
    assert _max_diff(after, initial) > 0


@pytest.mark.parametrize(
    ("dtype", "trainer", "message"),
    [
        ("float32", {"precision": "16-mixed"}, "clip the scaled gradients"),
        ("float32", {"precision": "bf16-true"}, "casts the weights after loading"),
        ("float32", {"precision": "64-true"}, "casts the weights after loading"),
        ("bfloat16", {"precision": "bf16-mixed"}, "keeps float32 master weights"),
        ("bfloat16", {"precision": "16-true"}, "contradicts --dtype bfloat16"),
        ("float16", {"precision": "bf16-mixed"}, "keeps float32 master weights"),
        ("float32", {"strategy": "fsdp", "accelerator": "cpu"}, "needs a GPU"),
        ("float32", {"strategy": "deepspeed_stage_2"}, "DeepSpeed is not supported"),
    ],
)
def test_combinations_that_cannot_work_are_refused_before_loading(
    tmp_path: Path, no_model_loading: None, dtype: str, trainer: dict[str, Any], message: str
) -> None:
    from advest.training.train import train

    with pytest.raises(ConfigError, match=message):
        train(RLConfig(out=str(tmp_path), dtype=dtype), trainer)  # type: ignore[arg-type]


# The combinations the README documents (written here, not read from scale.PRECISIONS, so a
# change to either side fails); "32" is Lightning's alias of "32-true".
DOCUMENTED = {
    "float32": {"32-true", "32", "bf16-mixed"},
    "bfloat16": {"32-true", "32", "bf16-true"},
    "float16": {"32-true", "32", "16-true"},
}
LIGHTNING_PRECISIONS = [
    "64-true",
    "32-true",
    "32",
    "16-mixed",
    "bf16-mixed",
    "16-true",
    "bf16-true",
]


@pytest.mark.parametrize("dtype", sorted(DOCUMENTED))
@pytest.mark.parametrize("precision", LIGHTNING_PRECISIONS)
def test_exactly_the_documented_combinations_are_accepted(dtype: str, precision: str) -> None:
    cfg = RLConfig(dtype=dtype)  # type: ignore[arg-type]
    if precision in DOCUMENTED[dtype] and dtype == "float16" and not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="--dtype float16 needs a GPU"):
            scale.check_trainer(cfg, {"precision": precision})
    elif precision in DOCUMENTED[dtype]:
        assert scale.check_trainer(cfg, {"precision": precision}) is None
    else:
        with pytest.raises(ConfigError, match=f"--trainer.precision {precision} with --dtype"):
            scale.check_trainer(cfg, {"precision": precision})


# ----------------------------------------------------------------------------- memory
@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(
    model_path: str, lora: bool
) -> None:
    extra = LORA | {"lora_dropout": 0.0} if lora else {}
    plain = _module(model_path, **extra)
    checkpointed = _module(model_path, gradient_checkpointing=True, **extra)
    assert checkpointed.policy.is_gradient_checkpointing
    torch.manual_seed(3)
    scored = plain.sample([Item(0, "12+3=", "15"), Item(1, "40+41=", "81")])
    seqs, pm, mask = scored.sequences, scored.prompt_mask, scored.mask
    adv = torch.randn(mask.shape, generator=torch.Generator().manual_seed(0))
    results = []
    for module in (plain, checkpointed):
        module.policy.train()
        # both plain passes: checkpointing turns the prompt-once pass off (test_logprobs.py)
        args = (module.policy, seqs, pm, mask, module.cfg.temperature)
        with torch.no_grad():
            old = forward_logprobs(*args, share_prompts=False).logp
        logp = forward_logprobs(*args, share_prompts=False).logp
        loss = losses.policy_loss(
            logp, old - 0.05, adv, mask, clip_low=0.2, clip_high=0.2,
            aggregation="token-mean", norm=losses.Normaliser.of(mask, mask.shape[1]),
        ).loss  # fmt: skip
        loss.backward()
        grads = {n: p.grad.clone() for n, p in module.policy.named_parameters() if p.requires_grad}
        results.append((loss.detach(), grads))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert float(loss_a.abs()) > 0 and grads_a.keys() == grads_b.keys()
    assert torch.equal(loss_a, loss_b)
    assert any(float(g.abs().max()) > 0 for g in grads_a.values())
    for name in grads_a:  # recomputation replays the same kernels: bit-identical on CPU
        assert torch.equal(grads_a[name], grads_b[name]), name


# ----------------------------------------------------------------------------- LoRA
def test_lora_reference_is_the_adapter_free_base_and_starts_at_kl_0_ratio_1(
    model_path: str,
) -> None:
    module = _module(model_path, kl_coef=0.1, **LORA)
    assert isinstance(module.ref, scale.AdapterFree)  # no second copy of the weights
    trained = {n for n, p in module.policy.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    torch.manual_seed(0)
    items = _items(3)
    scored = module.sample(items)
    seqs, pm = scored.sequences, scored.prompt_mask
    rollout = module.forward(items, scored)
    assert rollout.ref_logprobs is not None
    mask = rollout.mask.reshape(seqs.shape[0], -1)
    old = rollout.logprobs.reshape(mask.shape)
    assert torch.equal(rollout.ref_logprobs.reshape(mask.shape), old)  # KL = 0: B starts at 0
    module.policy.train()  # dropout on the adapters' input is on: still zero contribution
    new = forward_logprobs(module.policy, seqs, pm, mask, module.cfg.temperature).logp
    # ratio = 1, to rounding: the rollout's pass (eval) computed each prompt once, the pass
    # with dropout on runs every row's prompt (training/logprobs.py, can_share)
    ratio = torch.exp(new - old)[mask]
    torch.testing.assert_close(ratio, torch.ones_like(ratio), rtol=0, atol=1e-5)
    again = forward_logprobs(module.policy, seqs, pm, mask, module.cfg.temperature).logp
    assert torch.equal(again, new)  # another dropout draw: nothing moves while B = 0
    # once the adapters move, the reference stays the base model loaded from the folder
    with torch.no_grad():
        for n, p in module.policy.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)
    base, _ = load_policy(model_path)
    with torch.no_grad():
        ref = forward_logprobs(module.ref, seqs, pm, mask, module.cfg.temperature).logp
        plain = forward_logprobs(base, seqs, pm, mask, module.cfg.temperature).logp
        moved = forward_logprobs(module.policy, seqs, pm, mask, module.cfg.temperature).logp
    assert torch.allclose(ref, plain, atol=1e-6)
    assert float((moved - ref)[mask].abs().max()) > 1e-3


def test_generation_on_merged_adapters_computes_the_adapted_policy_and_restores_the_base(
    model_path: str,
) -> None:
    """Generation merges the adapters into the base weights (one matmul per projection, for
    speed); the merged model gives the adapted model's logits, and afterwards every base weight
    is bit-identical to before (an unmerge alone leaves a rounding error: the run would drift
    from a resumed one)."""
    from peft.tuners.lora import LoraLayer

    module = _module(model_path, **LORA)
    policy = module.policy.eval()
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "lora_B" in n:  # B starts at 0: move it so the adapters change the output
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([[1, 4, 5, 13, 6, 14, 7]])
    before = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    adapted = policy(input_ids=ids).logits.detach()
    base, _ = load_policy(model_path)
    assert float((adapted - base(input_ids=ids).logits).abs().max()) > 1e-2
    layers = [m for m in policy.modules() if isinstance(m, LoraLayer)]
    with torch.no_grad(), scale.merged_adapters(module, policy):
        assert layers and all(m.merged for m in layers)
        merged = policy(input_ids=ids).logits
    torch.testing.assert_close(merged, adapted, rtol=0, atol=1e-5)
    assert not any(m.merged for m in layers)
    after = policy.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(v, after[k]) for k, v in before.items())


class ZeroLearningRate(L.Callback):
    """lr = 0 for the optimiser and its schedule, set after the run is built: the settings refuse
    --lr 0 (it trains nothing), so this is the only way to run one."""

    def on_train_start(self, trainer: L.Trainer, module: Any) -> None:
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"] = 0.0
        for config in trainer.lr_scheduler_configs:
            config.scheduler.base_lrs = [0.0] * len(config.scheduler.base_lrs)  # type: ignore[attr-defined]


@pytest.mark.parametrize("zero_lr", [True, False])
def test_lora_with_lr_0_leaves_every_parameter_bit_identical(
    model_path: str, tmp_path: Path, zero_lr: bool
) -> None:
    """lr = 1e-2 untouched is the control: the same run with a learning rate moves the adapters."""
    from advest.training.train import train

    snap = Snapshot()
    cfg = _cfg(model_path, tmp_path, lr=1e-2, steps=2, kl_coef=0.1, **LORA)
    callbacks: list[L.Callback] = [snap, *([ZeroLearningRate()] if zero_lr else [])]
    folder = train(cfg, {"enable_progress_bar": False}, name=f"zero{zero_lr}", evaluate=False,
                   callbacks=callbacks)  # fmt: skip
    moved = _max_diff({f"policy.{k}": v for k, v in snap.start.items()},
                      {f"policy.{k}": v for k, v in snap.end.items()})  # fmt: skip
    assert (moved == 0.0) == zero_lr
    saved = _params(folder)
    assert saved and all("lora_" in k for k in saved)  # only the adapters are checkpointed
    base = {k: v for k, v in snap.end.items() if "lora_" not in k}
    assert base and all(torch.equal(v, snap.start[k]) for k, v in base.items())


class Interrupt(L.Callback):
    """Stops the run with an error after ``at`` rollout steps (after their checkpoint)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer: L.Trainer, module: Any, *args: Any) -> None:
        if module.rollout_step == self.at:
            raise RuntimeError("interrupted")


def test_a_lora_run_resumes_bit_identically(model_path: str, tmp_path: Path) -> None:
    cfg = _cfg(model_path, tmp_path, steps=4, checkpoint_every=2, kl_coef=0.1, **LORA)
    straight = _train(cfg, "straight")
    with pytest.raises(RuntimeError, match="interrupted"):
        _train(cfg, "cut", callbacks=[Interrupt(2)])
    assert torch.load(tmp_path / "cut/checkpoints/last.ckpt")["advest"]["rollout_step"] == 2
    resumed = _train(cfg, "cut", resume=True)
    assert straight.keys() == resumed.keys() and all("lora_" in k for k in straight)
    assert _max_diff(straight, resumed) == 0.0


@pytest.mark.parametrize("lora_r", [0, 2])
def test_resuming_a_lora_checkpoint_with_other_lora_settings_is_refused(
    model_path: str, tmp_path: Path, lora_r: int
) -> None:
    _train(_cfg(model_path, tmp_path, steps=1, **LORA), "run")
    # refused from config.json before anything loads (the checkpoint check is the fallback)
    with pytest.raises(ConfigError, match=r"--lora_r \d+ \(the run has 4\)"):
        _train(_cfg(model_path, tmp_path, steps=2, lora_r=lora_r), "run", resume=True)


@pytest.mark.parametrize("how", ["merged", "adapter"])
def test_the_lora_export_loads_and_gives_the_trained_policy(
    model_path: str, tmp_path: Path, how: str
) -> None:
    from transformers import AutoModelForCausalLM

    from advest.training.train import train

    snap = Snapshot()
    cfg = _cfg(model_path, tmp_path, steps=2, lr=1e-2, lora_export=how, **LORA)
    folder = train(cfg, {"enable_progress_bar": False}, name=how, evaluate=False,
                   callbacks=[snap])  # fmt: skip
    out = folder / "model"
    if how == "merged":  # plain transformers, no peft, no adapter keys
        model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
        assert not any("lora" in k for k in model.state_dict())
    else:
        from peft import PeftModel

        assert (out / "adapter_config.json").is_file()
        base = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True)
        model = PeftModel.from_pretrained(base, out, local_files_only=True)
    model.eval()
    ids = torch.tensor([[1, 4, 5, 13, 6, 14, 7]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    base_logits = load_policy(model_path)[0](input_ids=ids).logits.detach()
    assert float((snap.logits - base_logits).abs().max()) > 1e-4  # training changed it
    assert torch.allclose(logits, snap.logits, atol=1e-5)


# ----------------------------------------------------------------------------- generation
@pytest.mark.parametrize("engine", sorted(generation.ENGINES))
def test_each_generator_gives_valid_completions_masks_and_log_probs(
    model_path: str, engine: str
) -> None:
    module = _module(model_path, generator=engine, max_new_tokens=6)
    tok, G = module.tokenizer, module.cfg.group_size
    items = _items(2)
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        scored = module.sample(items)
        runs.append((scored.sequences, scored.prompt_mask))
    (seqs, pm), (again, _) = runs
    P = pm.shape[1]
    assert torch.equal(seqs, again)  # the seed fixes the samples
    assert seqs.shape == (len(items) * G, P + 6)
    ids, attn = encode(tok, [i.prompt for i in items], chat_template=True, system_prompt=None)
    assert torch.equal(seqs[:, :P], ids.repeat_interleave(G, 0))
    assert torch.equal(pm, attn.repeat_interleave(G, 0))
    resp = seqs[:, P:]
    mask = response_mask(resp, tok.eos_token_id)
    assert bool((resp < len(tok)).all())
    assert torch.equal(resp[~mask], torch.full_like(resp[~mask], tok.pad_token_id))
    assert bool((mask[:, 1:] <= mask[:, :-1]).all())  # a prefix of each row
    ends = mask.sum(-1) - 1  # the last response token: EOS, unless the budget ran out
    hit = (resp == tok.eos_token_id).any(-1)
    assert bool((resp[hit, ends[hit]] == tok.eos_token_id).all())
    assert bool(mask[~hit].all())
    logp = module.forward(items, scored).logprobs.reshape(mask.shape)
    # each row alone, unpadded, through a plain forward pass: same log-probs at the response
    for row, m, lp, a in zip(seqs, mask, logp, attn.repeat_interleave(G, 0),
                             strict=True):  # fmt: skip
        prompt = row[:P][a.bool()]
        response = row[P:][m]
        ids = torch.cat([prompt, response]).unsqueeze(0)
        with torch.no_grad():
            logits = module.policy(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        want = torch.log_softmax(logits, -1).gather(-1, response.unsqueeze(-1)).squeeze(-1)
        assert torch.allclose(lp[m], want, atol=1e-5)
        assert bool((lp[~m] <= 0).all()) and bool(torch.isfinite(lp).all())


def test_the_continuous_generator_trains_through_the_same_path(
    model_path: str, tmp_path: Path
) -> None:
    after = _train(_cfg(model_path, tmp_path, generator="continuous", steps=1), "continuous")
    assert _max_diff(after, _initial(model_path)) > 0


# ----------------------------------------------------------------------------- strategies
def test_fsdp_wraps_the_decoder_layers_of_plain_and_lora_policies(model_path: str) -> None:
    """The set-up only: an FSDP run needs a GPU, which this suite does not have."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    for module in (_module(model_path), _module(model_path, **LORA)):
        assert scale.decoder_layers(module.policy) == {LlamaDecoderLayer}
        args = scale.strategy({"strategy": "fsdp", "devices": 1}, module.policy)
        assert type(args["strategy"]).__name__ == "FSDPStrategy"
        assert scale.strategy({"strategy": "ddp"}, module.policy) == {"strategy": "ddp"}


def test_the_rollout_forward_in_micro_batches_equals_one_pass(model_path: str) -> None:
    """Chunking keeps the [S, T, V] logits from existing at once and changes nothing else."""
    module = _module(model_path, micro_batches=4)
    torch.manual_seed(5)
    scored = module.sample([Item(0, "12+3=", "15"), Item(1, "40+41=", "81")])
    seqs, pm, mask = scored.sequences, scored.prompt_mask, scored.mask
    logp, ent, hidden, _ = rollout_forward(
        module.policy, seqs, pm, mask, temperature=module.cfg.temperature, chunks=4, hidden=True
    )
    with torch.no_grad():
        whole = forward_logprobs(module.policy, seqs, pm, mask, module.cfg.temperature, hidden=True)
    assert hidden is not None and whole.hidden is not None
    assert torch.allclose(logp, whole.logp, atol=1e-6)
    assert torch.allclose(ent, whole.entropy, atol=1e-6)
    assert torch.allclose(hidden, whole.hidden, atol=1e-6)


def test_the_gpu_bench_script_runs_at_toy_size_on_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/gpu_bench.py is the command for the GPU machine; this keeps it from rotting."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "scripts" / "gpu_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--tiny", "--rows", "5,7", "--steps", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if "| r=16 |" in line]
    assert all(float(cell) >= 0 for cell in row.split("|")[7:-1])
    assert "FSDP needs a GPU" in out
