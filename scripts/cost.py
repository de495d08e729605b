"""The repository's cost-growth page: measurements merged into ``docs/results/cost.json`` (one
section per device) and ``docs/results/cost_ranks.json``, and ``docs/cost.md`` with its plot
``docs/cost.png`` rendered from them (``advest.experiments.cost.report``, the report
``advest experiment cost`` writes under its ``--out``). A maintainers' tool: it writes into the
repository that ``--repo`` names, and nowhere else.

    python scripts/cost.py --repo .                   # measure on CPU (a few minutes), render
    python scripts/cost.py --repo . --only ktae       # re-measure one estimator, merge, render
    python scripts/cost.py --repo . --render          # re-render from the results files only
    python scripts/cost.py --repo . --collect DIR/cost.json   # merge a GPU's results, render
    python scripts/cost.py --repo . --ranks           # the collectives' cost, render

A GPU's results come from ``advest experiment cost --device cuda --out DIR`` (or
``scripts/gpu_speed.py``) on the GPU's machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from advest.experiments import cost
from advest.experiments.cost import fit, measure, ranks, report

COMMAND = "python scripts/cost.py --repo ."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        "scripts/cost.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repo", type=Path, required=True, help="the repository's root")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--scale", choices=sorted(measure.SCALES), default="full", help="the sizes")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these estimators")
    p.add_argument("--collect", type=Path, default=None, help="merge this results file")
    p.add_argument("--render", action="store_true", help="only re-render the page and plot")
    p.add_argument("--ranks", action="store_true", help="measure the collectives' cost only")
    a = p.parse_args(argv)
    results_file = a.repo / "docs" / "results" / "cost.json"
    results = cost.load(results_file)
    if a.ranks:
        found = ranks.measure()
        (a.repo / "docs" / "results" / "cost_ranks.json").write_text(
            json.dumps(found, indent=1) + "\n"
        )
    elif a.collect:
        for device, section in cost.load(a.collect)["devices"].items():
            results = cost.merge(results, device, section)
    elif not a.render:
        section = cost.run(a.device, a.scale, a.only, cost.retain())
        results = cost.merge(results, a.device, section)
    results_file.write_text(cost.dump(results))
    (a.repo / "docs" / "cost.md").write_text(page(a.repo))
    report.plot(results, a.repo / "docs" / "cost.png")
    print(f"wrote {results_file}, docs/cost.md and docs/cost.png")
    for device, section in results["devices"].items():
        for line in fit.exceeding(report.device_fits(section)):
            print(f"{device}: exceeds: {line}")
    return 0


def page(repo: Path) -> str:
    """``docs/cost.md`` as the results files in ``repo`` render it."""
    results = cost.load(repo / "docs" / "results" / "cost.json")
    found = repo / "docs" / "results" / "cost_ranks.json"
    ranked = json.loads(found.read_text()) if found.is_file() else None
    return report.page(results, ranked, COMMAND)


if __name__ == "__main__":
    sys.exit(main())
