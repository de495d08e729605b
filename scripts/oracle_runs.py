"""Run the oracle (``advest check``) on every estimator of the page "Choosing an estimator" that
reads rewards alone, each in its own child process, writing ``DEST/ARM.json`` for
``python scripts/choosing.py --repo . --oracle DEST``.

What to run is derived, not listed: the arms are the page's (``choosing_facts.ESTIMATORS``, less
``READS_MORE``), each arm's estimator and K are the real-model experiment's (``real.ARMS``: K = 8
for the ``_k8`` arms), and the callable and the oracle's family come from the estimator's
registry entry (its module; ``maxk`` when it takes K, ``maxrl`` for the MaxRL family, judged
against its own objective; ``outcome`` otherwise).

``python scripts/oracle_runs.py [DEST]`` (default ``runs/oracle``): about 5 s an
estimator on one core.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from choosing_facts import ESTIMATORS, READS_MORE

from advest.experiments.real import ARMS
from advest.fast import registry
from advest.training.settings import RLConfig


def command(arm: str, dest: Path) -> list[str]:
    """The ``advest check`` command line that judges ``arm``'s estimator at the page's K."""
    settings = ARMS[arm]
    e = registry.entry(str(settings["estimator"]))
    target = f"{e.fn.__module__}:{e.name}"
    if e.family == "maxrl":
        family = ["--family", "maxrl"]
    elif e.needs_k:
        family = ["--family", "maxk", "--k", str(settings.get("k", RLConfig().k))]
    else:
        family = ["--family", "outcome"]
    return [sys.executable, "-m", "advest.cli", "check", target, *family,
            "--json", str(dest / f"{arm}.json")]  # fmt: skip


def arms() -> list[str]:
    """The page's arms the oracle can judge: those that read rewards alone."""
    return [a for a in ESTIMATORS if a not in READS_MORE]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dest = Path(args[0] if args else "runs/oracle")
    dest.mkdir(parents=True, exist_ok=True)
    failed = []
    for arm in arms():
        print(f"oracle: {arm}", flush=True)
        # exit 1 is a report with a "no" in it (a finding, not a failure); 2 and up: no report
        if subprocess.run(command(arm, dest), stdout=subprocess.DEVNULL).returncode > 1:
            failed.append(arm)
    if failed:
        print(f"oracle_runs: no report for {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"wrote {dest}/<arm>.json; now: python scripts/choosing.py --repo . --oracle {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
