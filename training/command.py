"""``advest train``: the command line of a training run (``train.train``).

Configuration is parsed by jsonargparse (the engine of Lightning's CLI): every ``RLConfig`` field
is a flag (``--estimator maxpo``), ``--config run.yaml`` reads a YAML file, later flags override
it, and Lightning's ``Trainer`` arguments sit under ``--trainer.*`` (``--trainer.strategy ddp
--trainer.devices 2``); ``--print_config`` prints the resolved YAML.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from .config import ConfigError, RLConfig
from .train import TRAINER_DEFAULTS, train

REFUSED_TRAINER_FLAGS = {
    "gradient_clip_val": "--max_grad_norm (clipping runs inside each optimiser step)",
    "gradient_clip_algorithm": "--max_grad_norm (always clips the total gradient norm)",
    "accumulate_grad_batches": "--micro_batches (exact accumulation inside a mini-batch)",
    "max_epochs": "--steps (one epoch is the whole run)",
    "min_epochs": "--steps (one epoch is the whole run)",
    "max_steps": "--steps (rollout steps)",
    "min_steps": "--steps (rollout steps)",
    "limit_train_batches": "--steps (rollout steps)",
    "fast_dev_run": "--steps 1 --no_eval",
    "overfit_batches": "--data with the few prompts to overfit",
    "limit_val_batches": "--eval_prompts (there is no validation loop)",
    "limit_test_batches": "advest eval (there is no test loop)",
    "limit_predict_batches": "advest eval (there is no predict loop)",
    "val_check_interval": "--eval_prompts (held-out pass@k before and after)",
    "check_val_every_n_epoch": "--eval_prompts (held-out pass@k before and after)",
    "num_sanity_val_steps": "nothing (there is no validation loop)",
    "reload_dataloaders_every_n_epochs": "nothing (one epoch; prompts follow the rollout step)",
    "enable_checkpointing": "--checkpoint_every",
    "default_root_dir": "--out and --name",
    "callbacks": "the Python API: advest.training.train.train(..., callbacks=[...])",
    "logger": "nothing (CSV, and TensorBoard when installed, are always written)",
    "use_distributed_sampler": "nothing (each rank draws its own prompts)",
    "barebones": "nothing (the metrics log is what the plots are made of)",
    "inference_mode": "nothing (there is no validation loop)",
    "enable_autolog_hparams": "nothing (config.json holds every setting)",
    "model_registry": "nothing (the run folder holds the checkpoint)",
}
"""Trainer arguments that cannot work with this trainer (manual optimisation; one epoch whose
batches are rollout steps; no validation loop), with the advest setting to use instead. They are
accepted by the parser (on the command line or in a YAML file) only to be refused by name."""


def parser() -> Any:
    import argparse

    from jsonargparse import ActionConfigFile  # type: ignore[attr-defined]

    from advest.parsing import add_settings, new_parser, switch

    p = new_parser(
        "advest train",
        "RL post-training with any registered advantage estimator (Lightning).",
        usage="advest train [-h] [--config FILE] [--SETTING VALUE ...] [--trainer.FLAG VALUE ...]",
    )
    p.add_argument("--config", action=ActionConfigFile, help="YAML file of settings")
    add_settings(p, RLConfig)
    p.add_argument("--name", type=str | None, default=None, help="run folder name under --out")
    switch(p, "resume", False, "continue --name from its checkpoints/last.ckpt")
    switch(p, "eval", True, "held-out pass@k before and after training")
    p.add_class_arguments(
        L.Trainer,
        "trainer",
        skip=set(REFUSED_TRAINER_FLAGS) | {"callbacks", "logger"},
        fail_untyped=False,
    )
    p.set_defaults({f"trainer.{k}": v for k, v in TRAINER_DEFAULTS.items()})
    for flag in REFUSED_TRAINER_FLAGS:  # parsed (any value) so that they can be refused by name
        p.add_argument(f"--trainer.{flag}", type=Any, default=None, help=argparse.SUPPRESS)
    return p


def trainer_arguments(ns: Any, defaults: Any) -> dict[str, Any]:
    """The ``--trainer.*`` settings that differ from Lightning's defaults (plus advest's own
    defaults). Raises ``ConfigError`` naming a refused flag and what to use instead."""
    given = vars(ns.trainer)
    for flag, instead in REFUSED_TRAINER_FLAGS.items():
        if given.get(flag) is not None:
            raise ConfigError(
                f"--trainer.{flag} cannot work with advest's trainer (manual optimisation, one "
                f"epoch of rollout steps); use {instead}"
            )
    return {
        k: v
        for k, v in given.items()
        if k not in REFUSED_TRAINER_FLAGS and (v != defaults.get(k) or k in TRAINER_DEFAULTS)
    }


def main(argv: Sequence[str]) -> int:
    from advest.parsing import fail, gather_lists, settings

    from .module import RunStopped

    p = parser()
    ns = p.parse_args(gather_lists(list(argv)))
    lightning_defaults = p.get_defaults().trainer
    if ns.resume and ns.name:  # flags not given again keep the run's own values
        from .resume import check_name, defaults

        try:
            check_name(ns.name)
            p.set_defaults(defaults(Path(ns.out) / ns.name))
        except ConfigError as error:
            return fail("advest train", str(error))
        ns = p.parse_args(gather_lists(list(argv)))
    try:
        trainer_args = trainer_arguments(ns, lightning_defaults)
        cfg = settings(RLConfig, ns)
        train(cfg, trainer_args, name=ns.name, resume=ns.resume, evaluate=ns.eval)
    except ConfigError as error:
        return fail("advest train", str(error))
    except RunStopped as error:  # the run found it cannot go on: no traceback, exit code 1
        print(f"advest train: stopped: {error}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:  # outside the fit (loading, evaluation); inside, Lightning's
        print("advest train: interrupted", file=sys.stderr, flush=True)
        return 130
    return 0
