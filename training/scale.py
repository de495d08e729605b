"""Fitting larger policies: weight dtype, gradient checkpointing, LoRA (through ``peft``) with the
adapter-free base as the KL reference, the adapter/merged export, and the distributed strategies
(FSDP set up with the decoder layer as its wrapping unit; DeepSpeed refused).

Everything here is decided from ``RLConfig`` and the Trainer arguments; the trainer calls in at
load time (``prepare``, ``reference``), when it builds the Trainer (``check_trainer``,
``strategy``), around checkpoints (``trim_checkpoint``, ``check_loaded``) and at the end
(``export``, also with each checkpoint).

Precision contract: whatever the weights' dtype, the log-probs of the ratio and of the KL are
``log_softmax`` of the logits cast to float32 (``RLModule.forward_logprobs``); only the logits
themselves carry the weights' (or autocast's) rounding.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .config import ConfigError

if TYPE_CHECKING:
    from .config import RLConfig

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

PRECISIONS: dict[str, set[str]] = {
    # float32 weights: plain, or bf16 autocast over float32 master weights
    "float32": {"32-true", "32", "bf16-mixed"},
    # low-precision weights: Lightning leaves them as loaded (32-true) or keeps them in that dtype
    "bfloat16": {"32-true", "32", "bf16-true"},
    "float16": {"32-true", "32", "16-true"},
}
"""``--trainer.precision`` values accepted with each ``--dtype`` (see ``precision_reason``)."""


def torch_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` → ``torch.bfloat16``; the names are those of ``--dtype``."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(f"--dtype {name!r}: choose one of {sorted(DTYPES)}") from None


def precision_reason(dtype: str, precision: str) -> str:
    """Why ``--trainer.precision precision`` cannot go with ``--dtype dtype``."""
    if precision == "16-mixed":
        return (
            "16-mixed scales the loss, and the trainer clips gradients by hand before the "
            "optimiser step, so it would clip the scaled gradients; use --dtype float32 with "
            "bf16-mixed, or "
            "--dtype float16 with --trainer.precision 16-true"
        )
    if precision.endswith("-mixed"):
        return (
            f"mixed precision keeps float32 master weights, but --dtype {dtype} loads them in "
            f"{dtype} already; use --dtype float32 with {precision}, or 32-true / "
            f"{ {'bfloat16': 'bf16', 'float16': '16'}[dtype] }-true with --dtype {dtype}"
        )
    if precision.endswith("-true") and precision != "32-true":
        return (
            f"{precision} casts the weights after loading, which contradicts --dtype {dtype}; "
            f"set --dtype to the weights' dtype you want and use 32-true (or the matching -true)"
        )
    return f"advest train supports {sorted(PRECISIONS[dtype])} with --dtype {dtype}"


def check_trainer(cfg: RLConfig, trainer_args: dict[str, Any]) -> None:
    """Every Trainer setting that cannot work with ``cfg``, refused before any model loads."""
    torch_dtype(cfg.dtype)
    precision = str(trainer_args.get("precision", "32-true"))
    if precision not in PRECISIONS[cfg.dtype]:
        raise ConfigError(
            f"--trainer.precision {precision} with --dtype {cfg.dtype}: "
            f"{precision_reason(cfg.dtype, precision)}"
        )
    check_devices(trainer_args)
    if cfg.dtype == "float16" and not _has_gpu(trainer_args):
        raise ConfigError(
            "--dtype float16 needs a GPU: on CPU, AdamW's eps (1e-8) and the squares of "
            "gradients below ~1e-4 round to 0 in float16, so the first optimiser step divides by "
            "zero and the weights become inf/NaN; use --dtype bfloat16 or float32 on CPU"
        )
    strategy = trainer_args.get("strategy", "auto")
    name = strategy if isinstance(strategy, str) else type(strategy).__name__.lower()
    if "deepspeed" in name:
        raise ConfigError(
            f"--trainer.strategy {name}: DeepSpeed is not supported by advest train (it has "
            "never run in this project: it needs a CUDA build and a GPU). Use --trainer.strategy "
            "fsdp on GPUs, or ddp."
        )
    if "fsdp" in name and not _has_gpu(trainer_args):
        raise ConfigError(
            f"--trainer.strategy {name} needs a GPU: Lightning's FSDP refuses the CPU "
            "accelerator. On CPU use --trainer.strategy ddp (or auto)."
        )
    if cfg.lora_r > 0 and importlib.util.find_spec("peft") is None:
        raise ConfigError(
            f"--lora_r {cfg.lora_r} needs peft: pip install 'advest[lora]' (or --lora_r 0 for "
            "full fine-tuning)"
        )


def check_devices(trainer_args: dict[str, Any]) -> None:
    """``--trainer.accelerator`` and ``--trainer.devices`` that Lightning would refuse only
    after the model has loaded."""
    accelerator = str(trainer_args.get("accelerator", "auto"))
    if accelerator in {"gpu", "cuda"} and not torch.cuda.is_available():
        raise ConfigError(
            f"--trainer.accelerator {accelerator}: no GPU is visible to torch "
            "(torch.cuda.is_available() is False); use --trainer.accelerator cpu or auto"
        )
    if accelerator == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("--trainer.accelerator mps: MPS is not available; use cpu or auto")
    devices = trainer_args.get("devices", 1)
    text = str(devices).strip()
    if text in {"0", "", "[]"} or (isinstance(devices, int) and devices < -1):
        raise ConfigError(
            f"--trainer.devices {devices!r}: give at least 1 device (a count, -1 or auto for "
            "all, or a list of indices)"
        )


def _has_gpu(trainer_args: dict[str, Any]) -> bool:
    accelerator = str(trainer_args.get("accelerator", "auto"))
    return accelerator in {"auto", "gpu", "cuda"} and torch.cuda.is_available()


# ----------------------------------------------------------------------------- the policy
def prepare(model: Any, cfg: RLConfig) -> Any:
    """The loaded policy made ready to train: gradient checkpointing, then LoRA adapters."""
    if cfg.gradient_checkpointing:
        # non-reentrant: correct with frozen base weights (LoRA) and with inputs that need no
        # grad; active only in train mode, so generation and the rollout forward pass keep
        # their speed and their KV cache
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if cfg.lora_r > 0:
        model = wrap_lora(model, cfg)
    return model


def wrap_lora(model: Any, cfg: RLConfig) -> Any:
    """``model`` with LoRA adapters on ``cfg.lora_target_modules``; only those train."""
    from peft import LoraConfig, get_peft_model

    targets: list[str] | str = list(cfg.lora_target_modules)
    if targets == ["all-linear"]:
        targets = "all-linear"
    config = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    try:
        return get_peft_model(model, config)
    except ValueError as error:  # peft names the modules it could not find
        raise ConfigError(f"--lora_target_modules {cfg.lora_target_modules}: {error}") from None


def is_lora(model: Any) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class AdapterFree:
    """The LoRA policy with its adapters switched off: the base model, used as the frozen KL
    reference with no second copy of the weights. Called like a model (no gradients flow:
    the trainer calls it under ``no_grad``)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def __call__(self, **inputs: Any) -> Any:
        with self.policy.disable_adapter():
            return self.policy(**inputs)

    def to(self, device: Any) -> AdapterFree:
        return self  # the weights are the policy's, which Lightning moves

    def get_base_model(self) -> Any:
        """The transformers model the call runs (``logprobs.inner``)."""
        return self.policy.get_base_model()


def reference(cfg: RLConfig, policy: Any, load: Callable[[], Any]) -> Any:
    """The KL reference: the adapter-free base under LoRA, else a frozen copy from ``load()``."""
    if is_lora(policy):
        return AdapterFree(policy)
    return load().requires_grad_(False).eval()


def trainable(model: Any) -> list[torch.nn.Parameter]:
    """The parameters the optimiser updates (all of them, or the LoRA adapters)."""
    return [p for p in model.parameters() if p.requires_grad]


# ----------------------------------------------------------------------------- checkpoints
def trim_checkpoint(module: Any, checkpoint: dict[str, Any]) -> None:
    """Under LoRA, keep only the adapter weights in the checkpoint (the base is the ``--model``
    folder, unchanged)."""
    if not is_lora(module.policy):
        return
    keep = {f"policy.{n}" for n, p in module.policy.named_parameters() if p.requires_grad}
    checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}


def check_loaded(module: Any, checkpoint: dict[str, Any]) -> None:
    """Refuse a checkpoint whose weights do not fit this run (LoRA ↔ full fine-tuning, another
    rank or other target modules), with the settings to change rather than a size mismatch."""
    if is_lora(module.policy):
        module.strict_loading = False  # the frozen base is not in the checkpoint, by design
        want = {
            f"policy.{n}": p.shape for n, p in module.policy.named_parameters() if p.requires_grad
        }
    else:
        want = {k: v.shape for k, v in module.state_dict().items()}
    have = {k: v.shape for k, v in checkpoint["state_dict"].items()}
    if have != want:
        odd = sorted(k for k in have.keys() & want.keys() if have[k] != want[k])[:1]
        raise ConfigError(
            f"--resume: the checkpoint's {len(have)} weight tensors do not fit this run's "
            f"{len(want)} (missing e.g. {sorted(want.keys() - have.keys())[:1]}, unexpected "
            f"{sorted(have.keys() - want.keys())[:1]}, other shape {odd}); resume with the "
            "settings the run started with (--lora_r, --lora_target_modules)"
        )


# ----------------------------------------------------------------------------- export
def export(module: Any, folder: Path, how: str, *, final: bool = True) -> Path:
    """The policy and its tokenizer as ``folder/model`` (``save_pretrained``), for full
    fine-tuning and LoRA alike: a plain ``transformers`` folder, or under LoRA the ``peft``
    adapter (``how="adapter"``) or the merged model (``how="merged"``). Merging is done in
    place, so before the end (``final=False``: with each checkpoint) a LoRA run writes its
    adapter whatever ``how`` says. Written beside and renamed, so a kill mid-write leaves the
    previous export whole."""
    import shutil

    out, tmp, old = folder / "model", folder / ".model.tmp", folder / ".model.old"
    shutil.rmtree(tmp, ignore_errors=True)
    policy = module.policy
    if is_lora(policy) and how == "merged" and final:
        policy = policy.merge_and_unload()
    from .hf import quiet_transformers

    try:
        with quiet_transformers():  # no "Writing model shards" bar
            policy.save_pretrained(tmp)
            module.tokenizer.save_pretrained(tmp)
    except BaseException:  # Ctrl-C or a full disk mid-write: no half export left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # no stale adapter_config.json may survive beside merged weights: swap whole folders
    shutil.rmtree(old, ignore_errors=True)
    if not out.exists():
        tmp.rename(out)
    elif _exchange(tmp, out):  # one atomic step: model/ is the old export, then the new one
        shutil.rmtree(tmp, ignore_errors=True)
    else:  # no atomic exchange on this system: model/ is missing between the two renames
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system has no such call."""
    import ctypes
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    done = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
    return bool(done)


# ----------------------------------------------------------------------------- strategies
def decoder_layers(model: Any) -> set[type[torch.nn.Module]]:
    """The classes of ``model``'s repeated blocks (its ``_no_split_modules``, e.g.
    ``Qwen2DecoderLayer``): FSDP's wrapping unit."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    base = model.get_base_model() if is_lora(model) else model
    names |= set(getattr(base, "_no_split_modules", None) or [])
    return {type(m) for m in model.modules() if type(m).__name__ in names}


def strategy(trainer_args: dict[str, Any], policy: Any) -> dict[str, Any]:
    """``trainer_args`` with ``strategy: fsdp`` made concrete: full sharding, the policy's
    decoder layers as the wrapping unit, original parameters kept (LoRA mixes frozen and
    trained weights in one layer) and full state dicts (``last.ckpt`` stays one file).

    Not run in this project's CI (Lightning refuses FSDP without a GPU); ``check_trainer``
    refuses it on CPU before this is reached."""
    if trainer_args.get("strategy") != "fsdp":
        return trainer_args
    from lightning.pytorch.strategies import FSDPStrategy

    layers = decoder_layers(policy)
    if not layers:
        raise ConfigError(
            "--trainer.strategy fsdp: the policy declares no decoder layer class "
            "(_no_split_modules), so there is no wrapping unit"
        )
    fsdp = FSDPStrategy(
        auto_wrap_policy=layers,
        sharding_strategy="FULL_SHARD",
        state_dict_type="full",
        use_orig_params=True,
    )
    return {**trainer_args, "strategy": fsdp}


@contextmanager
def merged_adapters(module: Any, model: Any) -> Iterator[None]:
    """Under LoRA, generation runs on ``W + s·BA`` merged into each adapted projection: one
    matmul per projection and token instead of three (on 2 CPU cores, SmolLM2's LoRA rollout
    generated at 0.78× the speed of full fine-tuning's before this). Afterwards the base
    weights are put back bit for bit, not by subtracting ``s·BA`` again: that round trip moves
    them by a rounding error each step, and a resumed run, whose base weights come from the
    ``--model`` folder, would part from the uninterrupted one. Generation is under ``eval()``,
    where LoRA dropout is off, so the merged model computes what the adapted one does. Not
    under FSDP, whose gathered parameters are views of its shards."""
    from lightning.pytorch.strategies import FSDPStrategy

    trainer = getattr(module, "_trainer", None)
    sharded = trainer is not None and isinstance(trainer.strategy, FSDPStrategy)
    if not is_lora(model) or sharded:
        yield
        return
    from peft.tuners.lora import LoraLayer

    layers: list[Any] = [m for m in model.modules() if isinstance(m, LoraLayer) and not m.merged]
    saved = []
    with torch.no_grad():
        for layer in layers:
            base = layer.get_base_layer()
            kept = [(t, t.detach().clone()) for t in (base.weight, base.bias) if t is not None]
            saved.append(kept)
            layer.merge()
    try:
        yield
    finally:
        with torch.no_grad():
            for layer, kept in zip(layers, saved, strict=True):
                layer.unmerge()
                for tensor, copy in kept:
                    tensor.copy_(copy)


@contextmanager
def full_parameters(module: Any) -> Iterator[None]:
    """Generation outside the FSDP root's ``forward`` needs every shard gathered; elsewhere a
    no-op."""
    from lightning.pytorch.strategies import FSDPStrategy

    trainer = getattr(module, "_trainer", None)
    if trainer is None or not isinstance(trainer.strategy, FSDPStrategy):
        yield
        return
    from torch.distributed.fsdp import FullyShardedDataParallel

    root = trainer.strategy.model
    assert root is not None  # set up by the time a training step generates
    with FullyShardedDataParallel.summon_full_params(root, writeback=False, recurse=True):
        yield
