"""Run every proof: Coq general-N theorems, z3 bounded claims for N <= max_n, sympy identities,
exact unbiasedness."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from . import bounded, coq_check, symbolic, unbiased
from .records import Record

Job = tuple[str, Callable[[], Record]]


def jobs(max_n: int = 7, unbiased_max_n: int = 4, max_a: int = 3, ci: bool = False) -> list[Job]:
    """Every claim with its parameters, cheapest first within each group; with ``ci``, only the
    cases within each claim's CI range (``bounded.CLAIMS``)."""
    out: list[Job] = [(c.__name__, c) for c in symbolic.CLAIMS]
    for n in range(1, max_n + 1):
        for claim, ks, ci_max_n in bounded.CLAIMS:
            if ci and n > ci_max_n:
                continue
            out += [(f"{claim.__name__} N={n} K={k}", partial(claim, n, k)) for k in ks(n)]
    for name, a, n, k in unbiased.claims(unbiased_max_n, max_a):
        label = f"{name} unbiased A={a} N={n} K={k}"
        out.append((label, partial(unbiased.unbiased, name, a, n, k)))
    return out


def run(
    max_n: int = 7,
    unbiased_max_n: int = 4,
    progress: bool = True,
    budget_s: float | None = None,
    with_coq: bool = True,
    ci: bool = False,
) -> list[Record]:
    """All records; with ``budget_s``, stops starting new claims once the budget is spent.

    The Coq theorems (general N) come first: one ``coqc`` run checks them all."""
    todo = jobs(max_n, unbiased_max_n, ci=ci)
    if progress and with_coq:
        print("checking the Coq proofs (coqc) ...", file=sys.stderr)
    records: list[Record] = list(coq_check.check_shipped()) if with_coq else []
    start = time.perf_counter()
    for i, (label, job) in enumerate(todo, 1):
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
        if progress:
            bar = "#" * (30 * i // len(todo))
            print(f"\r[{bar:<30}] {i}/{len(todo)} {label:<60.60}", end="", file=sys.stderr)
        records.append(job())
    if progress:
        print(file=sys.stderr)
    return records


def summary_rows(records: list[Record]) -> list[tuple[str, str, str, str, str, str]]:
    """One row per claim: claim, spec section, method, parameter range, status, seconds."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.claim, _method(r)), []).append(r)
    rows = []
    for (claim, _), recs in groups.items():
        ok = all(r.status == r.expected for r in recs)
        failed = [r for r in recs if r.status != r.expected]
        status: str
        if ok:
            status = recs[0].expected
        elif all(r.missing for r in failed):  # the prover is absent: say which, not "unknown"
            status = f"NOT RUN: {failed[0].missing.split(':')[0]} (see below)"
        else:
            status = "FAILED: " + ", ".join(f"{r.parameters}: {r.status}" for r in failed)
        rows.append(
            (
                claim,
                recs[0].spec,
                _method(recs[0]),
                _range(recs),
                status,
                f"{sum(r.seconds for r in recs):.1f}",
            )
        )
    return rows


def _method(record: Record) -> str:
    return record.method.split(" (")[0]


def _range(recs: list[Record]) -> str:
    if all(r.parameters.get("N") == "all" for r in recs):
        return "all N, K"
    keys = [k for k in ("A", "N", "K") if all(isinstance(r.parameters.get(k), int) for r in recs)]
    if not keys:
        return "symbolic N, K"
    return (
        ", ".join(
            f"{k} {min(r.parameters[k] for r in recs)}..{max(r.parameters[k] for r in recs)}"
            for k in keys
        )
        + f" ({len(recs)} cases)"
    )


def print_table(records: list[Record]) -> None:
    rows = [("claim", "spec", "method", "range", "status", "s"), *summary_rows(records)]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for j, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if j == 0:
            print("  ".join("-" * w for w in widths))
    for why in missing(records):
        print(f"NOT RUN: {why}")


def missing(records: list[Record]) -> list[str]:
    """Each distinct reason a prover could not run (with how to install it), in order."""
    return list(dict.fromkeys(r.missing for r in records if r.missing))


def write_json(records: list[Record], path: Path) -> None:
    path.write_text(json.dumps([r.as_json() for r in records], indent=1))
