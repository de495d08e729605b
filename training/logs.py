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
