"""The run folder: what ``--name`` may be, when a folder may be started or continued, and what a
``--resume`` may change. Everything here reads files and raises ``ConfigError`` before anything
is written, so a refused command leaves the folder as it was.

A resumed run continues to the ``--steps`` it is given: more steps than its checkpoint holds
extends it (a finished run included), the same or fewer is refused. Settings not given again
are the run's own (``config.json``); of those given again, only ``RESUMABLE`` may differ.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .config import ConfigError, RLConfig

RESUMABLE = ("steps", "eval_every", "checkpoint_every", "lr", "reward_workers")
"""Settings a resumed run may change. Each is applied from the resumed step on: more steps
extend the run; the cadences say when to evaluate and checkpoint; the learning rate replaces
the checkpoint's (its warm-up factor kept); reward worker processes change speed, not
rewards (a default that depends on the machine's cores must not block a resume elsewhere)."""

NOT_COMPARED = ("out",)
"""Where the run folder is looked for, not a setting of the run (the folder may have moved)."""

LEFTOVERS = ("checkpoints/.last.ckpt.tmp", ".model.tmp", ".model.old", ".config.json.tmp")
"""Temporary paths a killed run may leave in its folder; removed when the run continues."""


def check_name(name: str | None) -> None:
    """``--name`` is one plain folder name under ``--out``: a path could leave ``--out`` and
    overwrite a user's files."""
    if name is None:
        return
    bad = (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or os.sep in name
        or Path(name).is_absolute()
        or "\0" in name
    )
    if bad:
        raise ConfigError(
            f"--name {name!r} must be a plain folder name (no '/', no '..', not absolute); "
            "the run folder is --out/--name"
        )


def check_fresh(folder: Path) -> None:
    """A new run starts in an absent or empty folder: a folder with files is an earlier run
    (or a user's), which a new run would overwrite."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--name: {folder} is a file, not a run folder; pick another --name")
    if folder.is_dir() and any(folder.iterdir()):
        what = "a run" if (folder / "config.json").is_file() else "files"
        raise ConfigError(
            f"--name: {folder} already holds {what}; continue that run with --resume (and more "
            "--steps to extend it), or pick another --name"
        )


def saved_settings(folder: Path) -> dict[str, Any] | None:
    """The ``config.json`` of a run folder (None when there is none)."""
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        saved: dict[str, Any] = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"--resume: {path} is not JSON ({error})") from None
    return saved


@dataclass(frozen=True)
class Resume:
    """Where a resumed run starts: the checkpoint's rollout step and epoch, and the settings
    that change (name → (run's value, new value))."""

    step: int
    epoch: int
    changes: dict[str, tuple[Any, Any]]


def resume_point(cfg: RLConfig, folder: Path) -> Resume:
    """Check that ``folder`` can be continued with ``cfg``; raises ``ConfigError`` saying why
    not (no checkpoint, a complete run, a setting that may not change)."""
    import torch

    ckpt = folder / "checkpoints" / "last.ckpt"
    if not ckpt.is_file():
        raise ConfigError(f"--resume: no checkpoint at {ckpt}")
    try:  # mmap: only the few entries read here leave the disk, whatever the model's size
        state = torch.load(ckpt, map_location="cpu", mmap=True, weights_only=False)
        step, epoch = int(state["advest"]["rollout_step"]), int(state.get("epoch", 0))
    except Exception as error:  # a file that is not one of our checkpoints
        raise ConfigError(
            f"--resume: {ckpt} cannot be read ({type(error).__name__}: {error})"
        ) from None
    if cfg.steps <= step:
        raise ConfigError(
            f"--resume: the run in {folder} is complete at step {step} (--steps {cfg.steps}); "
            f"to extend it pass --steps M > {step} --resume"
        )
    saved = (saved_settings(folder) or {}).get("rl", {})
    now = json.loads(json.dumps(asdict(cfg)))  # as config.json holds it (lists, not tuples)
    changes = {
        k: (saved[k], now[k])
        for k in now
        if k in saved and k not in NOT_COMPARED and saved[k] != now[k]
    }
    refused = [k for k in changes if k not in RESUMABLE]
    if refused:
        said = "; ".join(
            f"--{k} {changes[k][1]!r} (the run has {changes[k][0]!r})" for k in refused
        )
        raise ConfigError(
            f"--resume: {said}: a resumed run keeps its settings except "
            f"{', '.join('--' + k for k in RESUMABLE)}; start a new run (another --name) to "
            "change the others"
        )
    return Resume(step, epoch, changes)


def defaults(folder: Path) -> dict[str, Any]:
    """A resumed run's own settings, as command-line defaults: flags not given again keep the
    run's values (``rl`` settings and ``trainer.*``)."""
    saved = saved_settings(folder) or {}
    names = {f.name for f in fields(RLConfig)} - set(NOT_COMPARED)
    out = {k: v for k, v in saved.get("rl", {}).items() if k in names}
    out.update({f"trainer.{k}": v for k, v in saved.get("trainer", {}).items()})
    return out


def remove_leftovers(folder: Path) -> None:
    import shutil

    for name in LEFTOVERS:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


def write_config(folder: Path, record: dict[str, Any], resumed: Resume | None) -> None:
    """``config.json``, written to a temporary file and renamed. A resume appends what it
    changed, and from which step, to the run's ``resumed`` list."""
    history = list((saved_settings(folder) or {}).get("resumed", [])) if resumed else []
    if resumed is not None:
        changed = {k: {"was": a, "now": b} for k, (a, b) in resumed.changes.items()}
        history.append({"at_step": resumed.step, "changed": changed})
    tmp = folder / ".config.json.tmp"
    tmp.write_text(json.dumps({**record, "resumed": history}, indent=1))
    os.replace(tmp, folder / "config.json")
