"""The report of a measured mutation run (``scripts/mutation_campaign.py``): per package, the
score over the drawn mutants that have a result, with Wilson's 95% interval and the kills by
timeout apart, against the equivalent survivors argued in ``tests/mutation_survivors.md``.

    python scripts/mutation_campaign.py report            # or: python scripts/mutation_report.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation  # the sibling script: the survivors file

RESULTS = Path(__file__).resolve().parent / "mutation_results"
# tests about the repository's survivors file and committed results, not about the code: a
# mutant of a line the file names would "fail" them, so they are left out of mutant runs
REPOSITORY_CHECKS = (
    "tests/core/oracle/test_mutation.py::test_every_surviving_mutant_of_the_measured_run_is_argued_in_the_survivors_file",
    "tests/core/oracle/test_mutation.py::test_each_equivalent_survivor_names_a_line_its_module_still_has",
)


def results(folder: Path = RESULTS) -> dict[str, dict[str, object]]:
    """The latest result per mutant key (a rerun appends; the last line wins)."""
    path = folder / "results.jsonl"
    latest: dict[str, dict[str, object]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                latest[row["key"]] = row
    return latest


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval for k successes in n trials (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return max(0.0, centre - half), min(1.0, centre + half)


def report(folder: Path) -> int:
    """Per package: the score over the planned mutants with a result, its Wilson interval, the
    timeouts apart, the seconds per mutant; then every survivor not argued equivalent."""
    plan: list[dict[str, object]] = json.loads((folder / "plan.json").read_text())
    done = results(folder)
    equivalent = mutation.equivalent_keys()
    failed = False
    columns = "population | run / drawn | killed (by timeout) | equivalent | score | 95% interval"
    print(f"| package | {columns} | s/mutant |\n|---|---|---|---|---|---|---|---|")
    open_survivors: list[str] = []
    for p in plan:
        mutants: list[dict[str, object]] = p["mutants"]  # type: ignore[assignment]
        # a result counts for the source it ran on: a module changed since has none yet
        rows = [r for m in mutants if (r := done.get(str(m["key"]))) and r["sha"] == m["sha"]]
        rows = [r for r in rows if r.get("first_failure") not in REPOSITORY_CHECKS]  # no kill
        rows = [r for r in rows if r["outcome"] != "error"]
        outcomes = [str(r["outcome"]) for r in rows]
        killed = outcomes.count("killed") + outcomes.count("timeout")
        survived = [str(r["key"]) for r in rows if r["outcome"] == "survived"]
        eq = [k for k in survived if k in equivalent]
        open_survivors += [k for k in survived if k not in equivalent]
        n = len(rows) - len(eq)
        low, high = wilson(killed, n)
        seconds = sum(float(str(r["seconds"])) for r in rows) / max(len(rows), 1)
        partial = "" if len(rows) == len(mutants) else " (partial)"
        print(
            f"| {p['package']} | {p['population']} | {len(rows)} / {len(mutants)}{partial} | "
            f"{killed} ({outcomes.count('timeout')}) | {len(eq)} | {killed}/{n} = "
            f"{killed / max(n, 1):.1%} | [{low:.1%}, {high:.1%}] | {seconds:.1f} |"
        )
        failed |= n > 0 and killed / n < 0.95
    # the cost of a mutant, all in: its own run plus its share of the checks of the unmutated copy
    every = [r for r in done.values() if "seconds" in r and r.get("outcome") != "error"]
    runs = sum(1 for r in every if not r.get("baseline"))
    total = sum(float(str(r["seconds"])) for r in every)
    print(f"\n{runs} mutant runs in {total:.0f} s of test runs, checks of the unmutated copy "
          f"included: {total / max(runs, 1):.1f} s per mutant")  # fmt: skip
    # of the planned mutants (an earlier draw's keys may linger in the results file)
    planned = {str(m["key"]) for p in plan for m in p["mutants"]}  # type: ignore[attr-defined]
    errors = [k for k, r in done.items() if r.get("outcome") == "error" and k in planned]
    print(f"harness errors of planned mutants (left out of the score): {len(errors)}")
    for key in errors:
        print(f"  ERROR `{key}`")
    print(f"open survivors: {len(open_survivors)}")
    for key in open_survivors:
        print(f"  SURVIVOR `{key}`")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(report(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
