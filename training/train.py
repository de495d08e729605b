"""One RL run (``train``): validate → load → held-out pass@k before → Lightning fit → pass@k
after, plots and a summary in the run folder. Its command line, ``advest train``, is
``training/command.py``."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L

from .config import ConfigError, RLConfig, eval_sizes, sized, validate
from .resume import (
    Resume,
    check_fresh,
    check_name,
    remove_leftovers,
    resume_point,
    write_config,
)

TRAINER_DEFAULTS: dict[str, Any] = {
    "accelerator": "auto",
    "devices": 1,
    "strategy": "auto",
    "precision": "32-true",
    "log_every_n_steps": 1,
    "enable_model_summary": False,
    "deterministic": False,
}


class Checkpointer(L.Callback):
    """``last.ckpt`` every N rollout steps and at the end, written to a temporary file and
    renamed, so a kill mid-write leaves the previous checkpoint intact; each mid-run checkpoint
    also exports the policy to ``<run>/model`` (the final export is ``train``'s, after the
    held-out evaluation)."""

    def __init__(self, folder: Path, every: int, lora_export: str = "merged") -> None:
        self.folder, self.every, self.lora_export = folder, every, lora_export

    def save(self, trainer: L.Trainer, export: bool = False) -> Path:
        from . import scale

        target = self.folder / "last.ckpt"
        tmp = self.folder / ".last.ckpt.tmp"
        try:
            trainer.save_checkpoint(tmp, weights_only=False)  # collective under DDP; rank 0 writes
        except BaseException:  # Ctrl-C or a full disk mid-write: no half checkpoint left behind
            tmp.unlink(missing_ok=True)
            raise
        if trainer.is_global_zero:
            os.replace(tmp, target)
            if export:
                scale.export(trainer.lightning_module, self.folder.parent, self.lora_export,
                             final=False)  # fmt: skip
        trainer.strategy.barrier()
        return target

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        step = int(getattr(module, "rollout_step", 0))
        if self.every and step % self.every == 0:
            self.save(trainer, export=True)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.save(trainer)

    def on_exception(
        self, trainer: L.Trainer, module: L.LightningModule, error: BaseException
    ) -> None:
        if isinstance(error, KeyboardInterrupt) and trainer.is_global_zero:
            print(
                f"advest train: interrupted; {kept(self.folder)} Continue with --resume.",
                file=sys.stderr,
                flush=True,
            )


def loggers(folder: Path, resume: bool = False) -> list[Any]:
    """CSV always (plots and experiments read it; kept across a resume); TensorBoard too when it
    is installed."""
    import importlib.util

    from .logs import MetricsCSV

    out: list[Any] = [MetricsCSV(folder, resume=resume)]
    if importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX"):
        out.append(L.pytorch.loggers.TensorBoardLogger(str(folder), name="tb", version=""))
    return out


def run_folder(cfg: RLConfig, name: str | None) -> Path:
    return Path(cfg.out) / (name or time.strftime("%Y%m%d-%H%M%S"))


def is_rank_zero() -> bool:
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def _checkpointer(folder: Path, cfg: RLConfig) -> Checkpointer:
    (folder / "checkpoints").mkdir(exist_ok=True)
    return Checkpointer(folder / "checkpoints", cfg.checkpoint_every, cfg.lora_export)


def train(
    cfg: RLConfig,
    trainer_args: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    resume: bool = False,
    evaluate: bool = True,
    callbacks: Sequence[L.Callback] = (),
    before: list[int] | None = None,
) -> Path:
    """Run one RL job; returns its folder. Raises ``ConfigError`` before loading anything when
    the settings cannot work. ``before``: the held-out counts of the starting weights under the
    same settings and seed, measured by an earlier run (an experiment's other arms), so the
    "before" evaluation is not repeated; the evaluation is seeded, so it would give the same."""
    from . import models, scale
    from .evaluate import held_out_items
    from .heldout import HeldOut
    from .logs import quiet_libraries, step_bar
    from .module import RLModule

    quiet_libraries()
    given, cfg = cfg, sized(cfg)  # the held-out size, where left out, fits the model and run
    folder, point = _check_start(cfg, trainer_args, name, resume)
    ckpt = folder / "checkpoints" / "last.ckpt"
    model_path = models.folder(cfg.model)  # a GGUF file becomes a plain folder, once
    L.seed_everything(cfg.seed, verbose=False)
    module = RLModule(cfg, model_path)
    _record(folder, cfg, trainer_args, model_path, point)
    items = held_out_items(cfg, module.source)
    do_eval = evaluate and bool(items) and not resume
    if do_eval and before is not None and len(before) != len(items):
        raise ConfigError(f"before: {len(before)} counts for {len(items)} held-out prompts")
    curves: dict[str, dict[int, float]] = {}
    counts: dict[str, list[int]] = {}  # per-prompt passes, for intervals over prompts
    if do_eval and is_rank_zero() and None in (given.eval_prompts, given.eval_samples):
        print(_sized_line(cfg, len(items)), flush=True)
    if do_eval:  # every rank takes part (FSDP gathers shards to generate)
        callbacks = [*callbacks, HeldOut(items, cfg, curves, counts, before)]
    checkpointer = _checkpointer(folder, cfg)
    if (trainer_args or {}).get("enable_progress_bar", True):
        callbacks = [*callbacks, step_bar(module.shown)]
    trainer = L.Trainer(
        **scale.strategy({**TRAINER_DEFAULTS, **(trainer_args or {})}, module.policy),
        # one epoch is the whole run; a finished run's checkpoint is at the end of its epoch,
        # so extending it is one more epoch, which ends when the --steps left are done
        max_epochs=1 if point is None else point.epoch + 1,
        default_root_dir=str(folder),
        logger=loggers(folder, resume),
        callbacks=[checkpointer, *callbacks],
        enable_checkpointing=False,
        use_distributed_sampler=False,
        num_sanity_val_steps=0,
    )
    try:
        _fit(trainer, module, ckpt if resume else None, checkpointer)
        if trainer.is_global_zero:
            _finish(module, folder, cfg, curves if do_eval else None, counts)
    finally:
        module.scorer.close()  # the reward workers end with the run, however it ends
    return folder


def _sized_line(cfg: RLConfig, prompts: int) -> str:
    """What ``config.sized`` chose, said once at the start of a run that left it out."""
    samples = eval_sizes(cfg)[1]
    why = (
        "the embedded model's default"
        if cfg.model is None
        else ("sized to this run: at most half as many completions as training draws")
    )
    return (f"held-out evaluation: {prompts} prompt{'s' * (prompts != 1)} × {samples} samples, "
            f"before and after ({why}; --eval_prompts and --eval_samples choose)")  # fmt: skip


def _check_start(
    cfg: RLConfig, trainer_args: dict[str, Any] | None, name: str | None, resume: bool
) -> tuple[Path, Resume | None]:
    """Every check that needs no model; the run's folder and, with ``resume``, where it stops."""
    from . import scale

    validate(cfg)
    scale.check_trainer(cfg, {**TRAINER_DEFAULTS, **(trainer_args or {})})
    check_name(name)
    folder = run_folder(cfg, name)
    if resume and name is None:
        raise ConfigError("--resume needs --name: the run folder under --out to continue")
    point = resume_point(cfg, folder) if resume else None
    if point is None and is_rank_zero():  # DDP's other ranks start after rank 0 made the folder
        check_fresh(folder)
    return folder, point


def _record(
    folder: Path,
    cfg: RLConfig,
    trainer_args: dict[str, Any] | None,
    model_path: str,
    point: Resume | None,
) -> None:
    """The run folder and its config.json (rank 0), saying what a resume changed."""
    folder.mkdir(parents=True, exist_ok=True)
    if not is_rank_zero():
        return
    remove_leftovers(folder)  # a killed run's temporary files
    record = {"rl": asdict(cfg), "trainer": trainer_args or {}, "model_path": model_path}
    write_config(folder, record, point)
    if point is not None:
        for key, (was, now) in point.changes.items():
            print(f"resume: --{key} {was} -> {now} from step {point.step}", flush=True)
        print(f"resume: step {point.step} of {cfg.steps}", flush=True)


def _finish(
    module: Any,
    folder: Path,
    cfg: RLConfig,
    curves: dict[str, dict[int, float]] | None,
    counts: dict[str, list[int]],
) -> None:
    """After the fit, on rank 0: the held-out curves (``curves`` None: no evaluation), the
    metrics plot, and the exported model (last: merging LoRA changes the policy)."""
    from . import logs, scale
    from .evaluate import write

    if curves is not None:
        write(curves, folder, "passk")
        (folder / "passk_counts.json").write_text(
            json.dumps({"samples": eval_sizes(cfg)[1], **counts})
        )
    logs.plot_metrics(folder)
    scale.export(module, folder, cfg.lora_export)


def _fit(trainer: L.Trainer, module: Any, ckpt: Path | None, checkpointer: Checkpointer) -> None:
    from .module import NonFiniteLoss, RunStopped

    try:
        trainer.fit(module, ckpt_path=None if ckpt is None else str(ckpt))
    except NonFiniteLoss as error:
        checkpointer.save(trainer)  # the skipped steps left the weights as they were
        raise NonFiniteLoss(f"{error} {kept(checkpointer.folder)}") from None
    except RunStopped as error:  # NaN weights: the last checkpoint is the last good one
        raise type(error)(f"{error} {kept(checkpointer.folder)}") from None


def kept(folder: Path) -> str:
    """What a stopped run leaves to resume from."""
    ckpt = folder / "last.ckpt"
    if not ckpt.is_file():
        return "No checkpoint was written before it (see --checkpoint_every)."
    import torch

    step = torch.load(ckpt, map_location="cpu", mmap=True, weights_only=False)["advest"]
    return f"The last good checkpoint, {ckpt}, holds rollout step {step['rollout_step']}."


_MOVED = ("parser", "main", "trainer_arguments", "REFUSED_TRAINER_FLAGS")
"""The command line's names, in ``training/command.py`` since 0.3.0."""


def __getattr__(name: str) -> Any:
    """The command line's old names here, with a DeprecationWarning, until 0.4.0 removes them."""
    if name not in _MOVED:
        raise AttributeError(f"module 'advest.training.train' has no attribute {name!r}")
    import warnings

    from . import command  # the deprecated names only: command imports this module

    warnings.warn(
        f"advest.training.train.{name} is deprecated and is removed in 0.4.0: it is "
        f"advest.training.command.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(command, name)
