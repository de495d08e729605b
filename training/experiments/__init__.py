"""``advest experiment NAME``: experiments that reproduce the seed papers' claims. Each writes
``config.json``, ``metrics.json``, PNG plots and ``summary.md`` under ``runs/<name>/<time>/``
(``--out`` to change) and has a ``--quick`` smoke mode."""

from __future__ import annotations

import importlib

EXPERIMENTS = {"compare": "training.experiments.compare", "values": "training.experiments.values"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXPERIMENTS:
        print(f"usage: advest experiment {{{','.join(sorted(EXPERIMENTS))}}} [--quick] [...]")
        return 2
    code: int = importlib.import_module(EXPERIMENTS[argv[0]]).main(argv[1:])
    return code
