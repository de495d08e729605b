"""``advest prove``: its parser and its run, which ``advest.cli`` dispatches to."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from advest.parsing import Parser, new_parser, switch


def prove_parser() -> Parser:
    p = new_parser("advest prove", "Run the machine-checked proofs and print the claims.")
    p.add_argument("--max_n", type=int, default=7, help="largest N for the z3 proofs")
    p.add_argument(
        "--unbiased_max_n", type=int, default=4, help="largest N for the bandit identities"
    )
    p.add_argument("--json", type=str | None, default=None, help="write every record to this file")
    switch(p, "progress", True, "show a progress bar")
    switch(p, "ci", False, "only CI's range (each claim's largest N in proofs.bounded.CLAIMS)")
    return p


def run_prove(ns: Any) -> int:
    try:
        from .run import missing, print_table, run, write_json
    except ModuleNotFoundError as error:  # z3 comes with the test extra, not the core install
        if error.name != "z3":
            raise
        print(
            "advest prove: the z3 prover is not installed. Install it with: pip install "
            "z3-solver (or pip install 'advest[test]')",
            file=sys.stderr,
        )
        return 2
    records = run(ns.max_n, ns.unbiased_max_n, progress=ns.progress, ci=ns.ci)
    print_table(records)
    if ns.json:
        write_json(records, Path(ns.json))
        print(f"wrote {len(records)} records to {ns.json}")
    failed = [r for r in records if r.status != r.expected]
    print(f"{len(records) - len(failed)} of {len(records)} claims as expected")
    for why in missing(records):  # one line where a script looks for errors, too
        print(f"advest prove: {why}", file=sys.stderr)
    return 1 if failed else 0
