"""The answer at the top of ``docs/choosing.md``: which design answers the page's question, and
the sentence it gives, chosen from Holm-corrected verdicts only (``report.found_of``: an
uncorrected 95% interval never puts an arm in the answer). The arms the answer names are
compared with each other too (Holm over their pairs), and a design declared after its data
were seen is called exploratory until its declared replication has run."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from ..stats import NO_DIFFERENCE, cell
from .designs import DESIGN_ARMS
from .designs import planned as plan
from .report import (
    PLANNED_SEEDS,
    QUESTION,
    Proved,
    at_ceiling,
    designs,
    found_of,
    ks_of,
    names,
    order,
    p_cell,
    rests_on,
    start_table,
)
from .series import is_sweep, series_of
from .stats import (
    MIN_SEEDS,
    REFERENCE,
    compare,
    corrected,
)


def lead(grid: dict[str, Any], proofs: Proved, bandit: dict[str, Any] | None) -> list[str]:
    """The page's answer, from the Holm-corrected pass@8 verdicts of one design: the real
    model's grid once every design arm has its ``PLANNED_SEEDS`` seeds, else the embedded
    model's (of its designs that have compared an arm: one where some arm ended above the
    starting weights at pass@8 before one where none did; then a finished one before an
    unfinished one; then the one with the most steps); none (the page keeps its earlier
    answer) while no design has. This rule was written after the embedded designs' data were
    seen, and the answer says that its design is exploratory where its declaration says so."""
    ready = [(not (info["design"]["model"] and finished(info["runs"])),
              not _gains(info["runs"]), not finished(info["runs"]), -info["design"]["steps"],
              name) for name, info in grid.items()
             if _compared(info["runs"]) and (finished(info["runs"]) or not info["design"]["model"])
             and (info.get("declaration") or {}).get("answers", True)]  # fmt: skip
    if not ready:
        return []
    name = min(ready)[-1]
    runs, decl = grid[name]["runs"], grid[name].get("declaration")
    k = max(ks_of(runs))  # 8 when the runs sampled that many
    every = found_of(runs, decl)
    found = {a: every[a][k] for a in sorted(every, key=order) if k in every[a]}
    if not found:  # the runs compared only arms outside the declared family
        return []
    found, replicated = _replicated(grid, name, found, k)
    said = _verdicts(found, k, proofs, bandit) + _among(runs, found, k) + replicated
    said += _real(grid, name) + _notes(grid, name, k)
    model = grid[name]["design"]["model"] or "the embedded tiny model"
    seeds, prompts = max(c["seeds"] for c in found.values()), len(grid[name]["held_out"])
    on = (f"On the paired pass/fail grid `{name}` ({model}; pass@{k}, up to {seeds} seeds × "
          f"{prompts} shared held-out prompts; verdicts Holm-corrected over the design's "
          f"declared family; see “The pass/fail grid: `{name}`”)")  # fmt: skip
    others = [
        _elsewhere(series, members, k, grid)
        for series, members in series_of(designs(grid)).items()
        if all(m[0] != name for m in members) and any(finished(m[2]) for m in members)
    ]
    also = (f" The other finished grids at pass@{k}, against `{REFERENCE}` (Holm-corrected): "
            + "; ".join(others) + ".") if others else ""  # fmt: skip
    swept = [_sweep(series, members, k) for series, members in series_of(designs(grid)).items()
             if is_sweep(members)]  # fmt: skip
    return [QUESTION, "", f"{on}, " + "; ".join(said) + "." + also + "".join(swept), ""]


def _sweep(series: str, members: list[tuple[str, dict[str, Any], Any]], k: int) -> str:
    """A learning-rate sweep's verdicts at pass@k, rate by rate (Holm over the whole sweep,
    ``series.across``), once every declared rate has its declared seeds of its declared arms;
    ``members``: the rates that have runs."""
    decl = members[0][1]["declaration"]
    arms, seeds = plan(decl) or ([*DESIGN_ARMS], PLANNED_SEEDS)  # the same for every rate
    planned = (1 + len(decl["holm_with"])) * seeds * len(arms)  # rates not run yet included
    done = sum(min(len(runs.get(a, {})), seeds) for _, _, runs in members for a in arms)
    if done < planned:
        return (f" The learning-rate sweep `{series}` has not finished ({done} of {planned} "
                "runs), so whether the ranking depends on the rate is not known yet.")  # fmt: skip
    said, words = [], set()
    for _, info, runs in sorted(members, key=lambda m: m[1]["design"]["lr"]):
        found = found_of(runs, info.get("declaration"))
        for arm in sorted(found, key=order):
            c = found[arm].get(k, {})
            words.add((arm, c.get("verdict")))
            lost = " (every arm below the starting weights)" if _moved(runs, k) == {"below"} else ""
            said.append(f"`{arm}` {c.get('verdict')} at rate {info['design']['lr']}{lost}")
    same = len(words) == len({a for a, _ in words})
    return (f" The learning-rate sweep `{series}` at pass@{k} against `{REFERENCE}` (Holm over "
            f"the sweep): {', '.join(said)}: "
            + ("the same verdict at every rate." if same else "the verdict changes with the "
               "rate."))  # fmt: skip


def _verdicts(found: dict[str, Any], k: int, proofs: Proved,
              bandit: dict[str, Any] | None) -> list[str]:  # fmt: skip
    """The answer's clauses from the corrected verdicts at pass@k."""
    by = {v: [a for a, c in found.items() if c["verdict"] == v] for v in ("above", "below")}
    same = [a for a, c in found.items() if c["verdict"] == NO_DIFFERENCE]
    said = []
    if by["above"]:
        one = len(by["above"]) == 1
        use = "it" if one else "one of them"
        said.append(f"{names(by['above'])} {'is' if one else 'are'} above `{REFERENCE}`: use {use}")
    if by["below"]:
        said.append(f"{names(by['below'])} below `{REFERENCE}`")
        if not by["above"]:
            said.append(f"use `{REFERENCE}`" + (" or an arm with no measured difference from it"
                                                 if same else ""))  # fmt: skip
    if same:
        basis = "; ".join(f"`{a}`: {rests_on(a, proofs, bandit)}" for a in same)
        said.append(f"no measured difference between `{REFERENCE}` and {_each(same)}, so a "
                    f"choice among them rests not on this grid but on: {basis}")  # fmt: skip
    waiting = [a for a in found if a not in {*by["above"], *by["below"], *same}]
    if waiting:
        said.append(f"{names(waiting)} not compared yet")
    return said


def _replicated(grid: dict[str, Any], name: str, found: dict[str, Any], k: int
                ) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """Once the declared replication of ``name`` has finished, an arm keeps its above or below
    only where the replication's corrected verdict agrees; the clause says which did."""
    rep = (grid[name].get("declaration") or {}).get("replicated_by")
    if not rep or rep not in grid or not finished(grid[rep]["runs"]):
        return found, []
    again = found_of(grid[rep]["runs"], grid[rep].get("declaration"))
    kept, lost = {}, []
    for a, c in found.items():
        same = again.get(a, {}).get(k, {}).get("verdict") == c["verdict"]
        if c["verdict"] != NO_DIFFERENCE and not same:
            lost.append(a)
        kept[a] = c if same or c["verdict"] == NO_DIFFERENCE else {**c, "verdict": NO_DIFFERENCE}
    held = [a for a, c in kept.items() if c["verdict"] != NO_DIFFERENCE]
    said = [f"replicated on `{rep}`'s fresh seeds: {names(held) if held else 'none'}"
            + (f"; not replicated (counted as no measured difference): {names(lost)}"
               if lost else "")]  # fmt: skip
    return kept, said


def _among(runs: dict[str, Any], found: dict[str, Any], k: int) -> list[str]:
    """The answer's arms compared with each other at pass@k, Holm over their pairs."""
    above = sorted(a for a, c in found.items() if c["verdict"] == "above")
    if len(above) < 2:
        return []
    pairs = corrected({(a, b): compare(runs, a, k, ref=b) for a, b in combinations(above, 2)})
    words = []
    for (a, b), c in pairs.items():
        if c["verdict"] == NO_DIFFERENCE:
            words.append(f"`{a}` − `{b}` {cell((c['mean'], c['lo'], c['hi']), '+')}: no "
                         "measured difference")  # fmt: skip
        else:
            words.append(f"`{a}` {c['verdict']} `{b}` ({c['mean']:+.3f}, Holm p {p_cell(c)})")
    return [f"compared with each other at pass@{k} (Holm over {_pairs(len(pairs))}): "
            + ", ".join(words)]  # fmt: skip


def _real(grid: dict[str, Any], name: str) -> list[str]:
    """Where the answer is the embedded model's: how far the real model's grids are."""
    if grid[name]["design"]["model"]:
        return []
    pending = [n for n, info in grid.items() if info["design"]["model"]]
    if not pending:
        return []
    done = ", ".join(f"`{n}`: {sum(len(r) for r in grid[n]['runs'].values())} of "
                     f"{len(DESIGN_ARMS) * PLANNED_SEEDS} runs" for n in pending)  # fmt: skip
    return [f"the real model's grids ({done}) have not finished, so this answer is the "
            "embedded model's"]  # fmt: skip


def _notes(grid: dict[str, Any], name: str, k: int) -> list[str]:
    """The answer's caveats: ceiling, loss against the start, exploratory design."""
    runs, decl, notes = grid[name]["runs"], grid[name].get("declaration") or {}, []
    every = found_of(runs, decl or None)
    for j in sorted({j for per in every.values() for j in per} - {k}):
        moved = {v: [a for a in every if every[a].get(j, {}).get("verdict") == v
                     and every[a].get(k, {}).get("verdict") != v]  # what pass@k does not say
                 for v in ("above", "below")}  # fmt: skip
        said = [f"{names(arms)} {v}" for v, arms in moved.items() if arms]
        if said:  # the same family's other verdicts: what the choice costs or gains there
            notes.append(f"at pass@{j}, {' and '.join(said)} `{REFERENCE}` (Holm)")
    if k in at_ceiling(runs):
        notes.append(f"`{REFERENCE}`'s pass@{k} is near its ceiling there, so no measured "
                     "difference says little")  # fmt: skip
    if _moved(runs, k) == {"below"}:  # a regime the reader must know of
        notes.append(f"every arm ended below the starting weights' held-out pass@{k} there "
                     f"(paired, the same test): the arms above `{REFERENCE}` lost less, none "
                     "gained")  # fmt: skip
    if decl.get("exploratory"):
        rep = decl.get("replicated_by")
        state = (
            (
                f"until its replication `{rep}` (declared before its runs; "
                f"{_runs(grid, rep)}) replicates it"
            )
            if rep
            else "until it is replicated"
        )
        notes.append(f"`{name}` was declared after data were seen ({decl['seen_before']}), "
                     f"so this answer is exploratory {state}")  # fmt: skip
    return notes


def _runs(grid: dict[str, Any], name: str) -> str:
    done = sum(len(r) for r in grid.get(name, {}).get("runs", {}).values())
    return runs_finished(done) if done else "not run yet"


def runs_finished(done: int) -> str:
    """A grid's progress in words: "1 run finished", "3 runs finished"."""
    return f"{done} run{'s' if done != 1 else ''} finished"


def _elsewhere(series: str, members: list[tuple[str, dict[str, Any], Any]], k: int,
               grid: dict[str, Any]) -> str:  # fmt: skip
    """One finished design's (or one series') corrected pass@k verdicts, in a clause; an
    exploratory one says which of them its finished replication kept, or that it has none."""
    parts = []
    for name, info, runs in members:
        if not _compared(runs):
            continue
        found = {a: per[k]["verdict"] for a, per in found_of(runs, info.get("declaration"))
                 .items() if k in per}  # fmt: skip
        by = {w: sorted((a for a, v in found.items() if v == w), key=order)
              for w in ("above", "below", NO_DIFFERENCE)}  # fmt: skip
        said = ", ".join(f"no measured difference for {names(arms)}" if w == NO_DIFFERENCE
                         else f"{names(arms)} {w}" for w, arms in by.items() if arms)  # fmt: skip
        lost = " (every arm below the starting weights)" if _moved(runs, k) == {"below"} else ""
        at = f"after {info['design']['steps']} steps" if len(members) > 1 else f"`{name}`"
        decl = info.get("declaration") or {}
        if decl.get("exploratory"):  # the clause must not read as confirmed
            rep = decl.get("replicated_by")
            at_k = {a: per[k] for a, per in found_of(runs, decl).items() if k in per}
            kept = _replicated(grid, name, at_k, k)[1]
            state = (kept[0] if kept else f"its replication `{rep}` has not finished"
                     if rep else "no replication declared")  # fmt: skip
            lost += f" (exploratory: declared after data were seen; {state})"
        parts.append(f"{at}: {said}{lost}")
    head = f"`{series}` (one design at {len(members)} step counts) " if len(members) > 1 else ""
    return head + ", ".join(parts) if len(members) > 1 else parts[0] if parts else f"`{series}`"


def finished(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether every arm of the design has its ``PLANNED_SEEDS`` runs."""
    return all(len(runs.get(a, {})) >= PLANNED_SEEDS for a in DESIGN_ARMS)


def _moved(runs: dict[str, dict[int, Any]], k: int) -> set[str]:
    """The verdicts of every arm's held-out pass@k against the starting weights, Holm-corrected
    as the section's table corrects them (every arm at every k)."""
    return {per[k]["verdict"] for per in start_table(runs)[1].values() if k in per}


def _gains(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether some arm's held-out pass@k (the largest k) ended above the starting weights'."""
    return "above" in _moved(runs, max(ks_of(runs)))


def _compared(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether some arm and the reference share at least ``MIN_SEEDS`` seeds."""
    ref = set(runs.get(REFERENCE, {}))
    return any(len(ref & set(r)) >= MIN_SEEDS for a, r in runs.items() if a != REFERENCE)


def _each(arms: list[str]) -> str:
    return names(arms) if len(arms) == 1 else f"each of {names(arms)}"


def _pairs(n: int) -> str:
    return "its one pair" if n == 1 else f"the {n} pairs"
