"""Designs of one ``series`` (declared in ``docs/results/designs/``): one set of settings, seeds
and data run for several step counts, shown on the page as ONE design evaluated at several step
counts (how far the shorter and the longer runs share their steps is measured from the
per-step training pass rates in the files, not asserted); or a SWEEP, one design run at several
learning rates, whose declared family spans its members (Holm over every rate's comparisons
together: ``across``)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

Member = tuple[str, dict[str, Any], Any]
"""(design name, its record with ``design`` and ``declaration``, its runs by arm and seed)."""


def series_of(found: list[Member]) -> dict[str, list[Member]]:
    """series → its designs, fewest steps first; a design without a declared series is a
    series of its own. ``found`` in the page's order (``report.designs``)."""
    out: dict[str, list[Member]] = {}
    for name, info, runs in found:
        key = (info.get("declaration") or {}).get("series", name)
        out.setdefault(key, []).append((name, info, runs))
    return {k: sorted(v, key=lambda m: (m[1]["design"]["steps"], m[1]["design"]["lr"]))
            for k, v in out.items()}  # fmt: skip


def is_sweep(members: list[Member]) -> bool:
    """Whether the series is a sweep over learning rates, as ``across`` found it from the
    declarations (the one rule: the page's sections and its answer both read it here)."""
    return any("holm_with" in (m[1].get("declaration") or {}) for m in members)


def across(grid: dict[str, Any], declared: dict[str, dict[str, Any]]) -> None:
    """Give each sweep member's declaration its other declared members' runs (``holm_with``;
    none yet: empty): its declared family is every member's comparisons together, so
    ``report.found_of`` corrects them as one (one design's alone would be corrected over too
    few). A sweep: declarations of one ``series`` at several learning rates."""
    by: dict[str, list[str]] = {}
    for name, d in declared.items():
        if "series" in d:
            by.setdefault(d["series"], []).append(name)
    for members in by.values():
        if len({declared[n]["learning_rate"] for n in members}) < 2:
            continue
        for name in (n for n in members if n in grid):
            others = {n: grid[n]["runs"] if n in grid else {} for n in members if n != name}
            grid[name]["declaration"] = {**declared[name], "holm_with": others}


def shared(short: Member, long: Member) -> str:
    """How the shorter design's runs agree with the longer one's (same arm and seed) over the
    shorter's steps: identical per-step training pass rates, or the steps where they part."""
    parted, same, drift = [], 0, 0.0
    for arm, by_seed in short[2].items():
        for seed, r in by_seed.items():
            other = long[2].get(arm, {}).get(seed)
            if other is None:
                continue
            a, b = r["train_pass1"], other["train_pass1"][: len(r["train_pass1"])]
            g, h = r.get("grad_norm", [0.0])[0], other.get("grad_norm", [0.0])[0]
            drift = max(drift, abs(g - h) / max(abs(g), abs(h), 1e-30))
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)
            if first is None:
                same += 1
            else:
                parted.append(first + 1)
    pair = f"`{short[0]}` and `{long[0]}`"
    if not parted:
        return (
            f"{pair}: identical over the first {short[1]['design']['steps']} steps in all "
            f"{same} common runs"
        )
    return (
        f"{pair}: {same} of {same + len(parted)} common runs identical over the first "
        f"{short[1]['design']['steps']} steps; the others part at step {min(parted)} to "
        f"{max(parted)} (their first steps' gradient norms differ by at most {drift:.1e} "
        "relative: float noise, which then changes the samples drawn)"
    )


def agreement(members: list[Member]) -> str:
    """One sentence: each shorter design against the next longer one."""
    return "; ".join(shared(a, b) for a, b in pairwise(members)) + "."
