"""``metrics.csv``: one row per rollout step, kept across a resume.

Lightning's ``CSVLogger`` deletes an existing ``metrics.csv`` when it starts (and warns about it
whenever the run folder holds anything, which every advest run folder does). A resumed run must
instead keep the rows of the steps its checkpoint covers and append its own, so that its file
equals the uninterrupted run's, row for row. Rows that the killed run wrote after its last
checkpoint are dropped when the resumed run logs that step again.
"""

from __future__ import annotations

import csv
import os
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only


class MetricsCSV(Logger):
    """``folder/metrics.csv``; ``resume`` keeps the rows already there (see the module doc)."""

    def __init__(self, folder: Path, *, resume: bool = False) -> None:
        super().__init__()
        self.path = Path(folder) / "metrics.csv"
        self.rows: list[dict[str, Any]] = []
        self._trimmed = not resume
        if resume and self.path.exists():
            with self.path.open(newline="") as f:
                self.rows = list(csv.DictReader(f))

    @property
    def name(self) -> str:
        return "metrics"

    @property
    def version(self) -> str:
        return ""

    @property
    def root_dir(self) -> str:
        return str(self.path.parent)

    @property
    def log_dir(self) -> str:
        return str(self.path.parent)

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kw: Any) -> None:
        pass  # config.json holds every setting

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        row: dict[str, Any] = {**metrics, "step": step}
        if not self._trimmed:  # the first row after a resume: forget what it replaces
            first = float(row.get("rollout_step", float("inf")))
            self.rows = [r for r in self.rows if float(r.get("rollout_step") or 0) < first]
            self._trimmed = True
        self.rows.append(row)
        self._write()

    def _write(self) -> None:
        keys = sorted({k for r in self.rows for k in r})
        tmp = self.path.with_name(".metrics.csv.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)  # a kill mid-write leaves the previous file whole


# ----------------------------------------------------------------------------- the console
QUIET_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",  # "GPU available", the LitLogger tip, "fit stopped"
    "lightning.fabric.utilities.rank_zero",
    "lightning.pytorch.accelerators.cuda",
)
"""Lightning's info lines that tell a user nothing they can act on (its advertisement among
them); its warnings still show."""

QUIET_WARNINGS = (
    # Lightning's own pytree helper calls a torch API that torch deprecated: not the user's code
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    # a pretrained model loads in eval mode; the trainer sets the modes it needs itself
    r"Found \d+ module\(s\) in eval mode",
    # peft asks transformers with a name transformers renamed: not the user's code
    r"`is_gradient_checkpointing` is deprecated",
)
"""Warnings raised inside libraries about libraries: noise in a run's log."""


def quiet_libraries() -> None:
    """Silence ``QUIET_LOGGERS`` and ``QUIET_WARNINGS`` for this process (the trainer's one
    progress bar and advest's own lines remain)."""
    import logging
    import warnings

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)


def say(line: str) -> None:
    """A line above the run's progress bar when one is open (a plain print would land on the
    bar's own line)."""
    from tqdm import tqdm

    tqdm.write(line)
    sys.stdout.flush()


def step_bar(keys: tuple[str, ...]) -> Any:
    """The run's one progress bar: rollout steps done of ``--steps`` (a resumed run starts at
    its checkpoint's step), the step's ``keys`` (reward, pass@k), and the time left.

    A ``ProgressBar`` of its own rather than Lightning's ``TQDMProgressBar`` restyled: that one
    draws "Training: 0/?" and "Epoch 0: 0/N" (N its dataloader's length) before any hook can
    rename it, and redraws itself on close; this one opens at the first step, with its total."""
    from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar
    from tqdm import tqdm

    class StepBar(ProgressBar):
        def __init__(self) -> None:
            super().__init__()
            self.bar: Any = None
            self.enabled = True

        def disable(self) -> None:  # Lightning's call on ranks other than 0
            self.enabled = False

        def enable(self) -> None:
            self.enabled = True

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            if not self.enabled or self.bar is not None:
                return
            done = int(getattr(module, "rollout_step", 0))
            total = int(module.cfg.steps)
            self.bar = tqdm(total=total, initial=done, desc="rollout steps", dynamic_ncols=True,
                            file=sys.stdout, smoothing=0.3)  # fmt: skip

        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            if self.bar is None:
                return
            shown = trainer.progress_bar_metrics
            self.bar.set_postfix({k: f"{float(shown[k]):.3f}" for k in keys if k in shown},
                                 refresh=False)  # fmt: skip
            self.bar.update(int(getattr(module, "rollout_step", 0)) - self.bar.n)
            if self.bar.n >= self.bar.total:  # closed before the "after" evaluation's lines
                self._close()

        def on_train_end(self, trainer: Any, module: Any) -> None:  # a run stopped early
            self._close()

        def _close(self) -> None:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return StepBar()


def plot_metrics(folder: Path) -> None:
    """Per-step reward, pass@k and entropy curves from the CSV log, as ``train_*.png`` beside it
    (``passk.png`` is the held-out evaluation's)."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = folder / "metrics.csv"
    if not path.exists():
        return
    rows = list(csv.DictReader(path.open()))
    keys = [k for k in rows[0] if k.startswith("pass@")] if rows else []
    # train_*: the per-step curves, apart from the held-out passk.png (before/after)
    panels = {
        "train_reward": (["reward"], "mean reward"),
        "train_passk": (keys, "pass@k of the step's groups"),
        "train_entropy": (["entropy"], "entropy (nats per token)"),
    }
    for stem, (cols, ylabel) in panels.items():
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for col in cols:
            pts = [
                (float(r["rollout_step"]), float(r[col]))
                for r in rows
                if r.get(col) and r.get("rollout_step")
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), label=col)
        ax.set_xlabel("rollout step")
        ax.set_ylabel(ylabel)
        if cols:
            ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(folder / f"{stem}.png", dpi=110)
        plt.close(fig)
