"""``advest experiment NAME``: reproducible toy experiments; each writes config, metrics, plots.

Experiments: ``bandit`` (the MaxPO softmax bandit, MaxPO paper §5.1 / App. G.1), ``compare`` (the
embedded task trained with several estimators), ``values`` (an SVEB-style value-estimation
benchmark), ``real`` (SmolLM2-135M-Instruct on reasoning-gym tasks), ``grid`` (the paired
pass/fail design of the choosing page, resumable across sessions), ``turns`` (two-turn
episodes: a turn-level against an episode-level estimator). Each writes
``config.json``, ``metrics.json``, PNG plots and ``summary.md`` under
``runs/<name>/<time>/`` (``--out`` to change) and has a ``--quick`` smoke mode.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

EXPERIMENTS = {
    "bandit": "advest.experiments.bandit",
    "compare": "advest.experiments.compare",
    "values": "advest.experiments.values",
    "real": "advest.experiments.real",
    "grid": "advest.experiments.grid",
    "turns": "advest.experiments.turns",
}


def main(argv: Sequence[str]) -> int:
    """Dispatch ``advest experiment NAME [flags]`` to ``NAME``'s own ``main(flags)``."""
    argv = list(argv)
    usage = (
        f"usage: advest experiment {{{','.join(EXPERIMENTS)}}} [flags] "
        "(see: advest experiment NAME -h)"
    )
    if argv and argv[0] in ("-h", "--help"):
        print(usage)
        return 0
    if not argv or argv[0] not in EXPERIMENTS:
        got = f"unknown experiment {argv[0]!r}; " if argv else "no experiment named; "
        print(f"{usage}\n{got}valid: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    import importlib

    module = importlib.import_module(EXPERIMENTS[argv[0]])
    code: int = module.main(argv[1:])
    return code
