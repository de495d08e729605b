"""The pass/fail grid's section of ``docs/choosing.md`` (``advest experiment grid``), computed from
the per-run files in ``docs/results/grid/`` and nothing else.

Every comparison is paired: arm and reference ran on the same seeds and the same held-out
prompts, so the unit is the difference of unbiased pass@k (Chen et al. 2021, arXiv:2107.03374
eq. 1) on one (seed, prompt). The interval is a bootstrap that resamples seeds, then prompts
(one resample of the prompts for every seed drawn, as the prompts are shared); an arm is
"above" or "below" the reference only when the whole 95% interval is, and "no measured
difference" otherwise (the statistics: ``grid_stats``). Every sentence of the conclusion is
chosen from these verdicts: a tie is printed as a tie, and where no difference is measured the
section names what a choice rests on instead.

``advest.experiments.grid.write_page()`` rewrites ``docs/choosing.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from advest.experiments.choosing_facts import proofs
from advest.experiments.grid_stats import (
    FLAT,
    MIN_SEEDS,
    REFERENCE,
    REPS,
    compare,
    from_start,
    levels,
    paired_bootstrap,
    pass_at,
)

DESIGN_ARMS = ("grpo", "maxpo", "pkpo_sloo")
"""The design's arms; others count as planned once a run of theirs exists."""
KS = (1, 4, 8)
"""pass@k compared: pass@1, pass@K at the K = 4 that maxpo and pkpo_sloo optimise, and the
pass@8 that the page's question asks about."""
QUESTION = "**I train with verifiable 0/1 rewards and want pass@8: what do I use?**"
CEILING = 0.95
"""A reference pass@k after training at or above this leaves little room for an arm above it."""
PLANNED_SEEDS = 10


def clipped(records: list[dict[str, Any]]) -> str:
    norms = [g for r in records for g in r["grad_norm"]]
    bound = sum(g > r["max_grad_norm"] for r in records for g in r["grad_norm"])
    return f"{float(np.median(norms)):.3f}; clipped on {bound} of {len(norms)} steps"


def cell(v: Sequence[float], sign: str = "") -> str:
    return f"{v[0]:{sign}.3f} [{v[1]:{sign}.3f}, {v[2]:{sign}.3f}]"


def setup(name: str, info: dict[str, Any], runs: dict[str, Any]) -> list[str]:
    d = info["design"]
    model = f"`{d['model']}`" if d["model"] else "The embedded tiny model"
    task = f"reasoning-gym `{d['task']}` (one digit)" if d["task"] else "the embedded addition"
    adapter = f"LoRA r = {d['lora_r']}" if d["lora_r"] else "every weight"
    planned = [*DESIGN_ARMS, *(a for a in runs if a not in DESIGN_ARMS)]
    done = sum(len(s) for s in runs.values())
    per_arm = ", ".join(f"{a} {len(runs.get(a, {}))}" for a in planned)
    return [
        f"## The pass/fail grid: `{name}`",
        "",
        f"{model} ({adapter}, lr {d['lr']}) on {task}, its graded `{d['reward']}` score turned "
        "pass/fail (`--reward_threshold 1`: full credit passes). Each run: "
        f"{d['steps']} steps of {d['prompts']} prompts × G = {d['group_size']}, drawn from "
        f"{d['train_rows']} training rows (each recurs every {d['train_rows'] // d['prompts']} "
        f"steps), {d['tokens']} new tokens. Every arm and seed is evaluated on the same "
        f"{len(info['held_out'])} held-out prompts × {d['eval_samples']} samples; the starting "
        "weights are the same for every run, so their counts are measured once and shared.",
        "",
        "Advantage scale: every arm trains with AdamW (one update per step), whose step is "
        "unchanged by a constant factor on the loss (such as maxpo's N/K) but for its ε "
        "(1e-8, added to the root of the second moment), so one learning rate serves every "
        "arm; gradient clipping would break this, so it is off (the table "
        "counts the steps it bound). What is left between the arms is the direction and the "
        "relative weight of groups and steps (grpo's division by each group's spread is one), "
        "which is what the comparison measures.",
        "",
        f"Finished runs: {done} of {len(planned) * PLANNED_SEEDS} planned ({per_arm}; "
        f"{PLANNED_SEEDS} seeds per arm planned); comparisons use the seeds both arms finished. "
        f"Resume the grid (finished runs are skipped, each new one committed): "
        f"`scripts/grid.sh {name}`.",
        "",
    ]


def ks_of(runs: dict[str, dict[int, Any]]) -> tuple[int, ...]:
    """The ``KS`` that the runs' samples per prompt can estimate."""
    n = min(r["samples"] for by_seed in runs.values() for r in by_seed.values())
    return tuple(k for k in KS if k <= n)


def arm_table(runs: dict[str, dict[int, Any]]) -> list[str]:
    ks = ks_of(runs)
    lines = [
        "| arm | seeds | pass@1 before | " + " | ".join(f"pass@{k} after" for k in ks)
        + " | training pass@1, last quarter − the one before | median gradient norm |",
        "|---|---|---|" + "---|" * len(ks) + "---|---|",
    ]  # fmt: skip
    for arm, by_seed in runs.items():
        recs = [by_seed[s] for s in sorted(by_seed)]
        n = recs[0]["samples"]

        def of(key: str, k: int, recs: list[dict[str, Any]] = recs, n: int = n) -> str:
            return cell(paired_bootstrap(np.array([pass_at(r[key], n, k) for r in recs])))

        after = " | ".join(of("after", k) for k in ks)
        lines.append(f"| `{arm}` | {len(recs)} | {of('before', 1)} | {after} | {levels(recs)} | "
                     f"{clipped(recs)} |")  # fmt: skip
    return [*lines, ""]


def comparison_table(runs: dict[str, dict[int, Any]]) -> tuple[list[str], dict[str, Any]]:
    ks = ks_of(runs)
    head = " | ".join(f"pass@{k}: difference [95%] | verdict" for k in ks)
    lines = [f"| arm − {REFERENCE} | seeds | {head} |", "|---|---|" + "---|---|" * len(ks)]
    found: dict[str, Any] = {}
    for arm in runs:
        if arm == REFERENCE:
            continue
        found[arm] = {k: compare(runs, arm, k) for k in ks}
        cells = [
            (cell((c["mean"], c["lo"], c["hi"]), "+") if "mean" in c else "–")
            + f" | {c['verdict']}"
            for c in found[arm].values()
        ]
        lines.append(f"| `{arm}` | {found[arm][1]['seeds']} | {' | '.join(cells)} |")
    return [*lines, ""], found


def start_table(runs: dict[str, dict[int, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Each arm against the starting weights: held-out pass@k after training minus before."""
    ks = ks_of(runs)
    lines = [
        "Each arm against the starting weights (held-out pass@k after training minus before, "
        "the same test):",
        "",
        "| arm | " + " | ".join(f"pass@{k}: after − before [95%]" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]
    found: dict[str, Any] = {}
    for arm, by_seed in runs.items():
        found[arm] = {k: from_start([by_seed[s] for s in sorted(by_seed)], k) for k in ks}
        cells = [f"{cell((c['mean'], c['lo'], c['hi']), '+')} ({c['verdict']})" if "mean" in c
                 else c["verdict"] for c in found[arm].values()]  # fmt: skip
        lines.append(f"| `{arm}` | " + " | ".join(cells) + " |")
    return [*lines, ""], found


def start_line(found: dict[str, Any]) -> list[str]:
    """At the question's k: which arms ended above, below or level with the starting weights."""
    k = max(KS)
    by = {v: [a for a in found if found[a].get(k, {}).get("verdict") == v]
          for v in ("below", "above", "no measured difference")}  # fmt: skip
    said = "; ".join(f"{v}: {names(arms)}" for v, arms in by.items() if arms)
    if not said:
        return []
    every = len(by["below"]) == len(found)
    tail = (f" (training lowered held-out pass@{k} for every arm; an arm above "
            f"`{REFERENCE}` lost less)" if every else "")  # fmt: skip
    return [f"* **Against the starting weights**, pass@{k}: {said}{tail}."]


def names(arms: list[str]) -> str:
    marked = [f"`{a}`" for a in arms]
    return marked[0] if len(marked) == 1 else ", ".join(marked[:-1]) + " and " + marked[-1]


def conclusion(found: dict[str, Any], basis: dict[str, str]) -> list[str]:
    """One sentence per k, chosen by the verdicts; then what each undecided arm rests on."""
    lines = []
    ks = sorted({k for per_k in found.values() for k in per_k})
    for k in ks:
        by = {v: [a for a in found if found[a][k]["verdict"] == v]
              for v in ("above", "below", "no measured difference")}  # fmt: skip
        said = []
        if by["above"]:
            said.append(f"{names(by['above'])} above `{REFERENCE}`")
        if by["below"]:
            said.append(f"{names(by['below'])} below `{REFERENCE}`")
        if by["no measured difference"]:
            said.append(f"{names([REFERENCE, *by['no measured difference']])} tie "
                        "(no measured difference)")  # fmt: skip
        judged = {a for arms in by.values() for a in arms}
        rest = [a for a in found if a not in judged]
        if rest:
            said.append(f"{names(rest)} not compared yet")
        lines.append(f"* **pass@{k}**: " + "; ".join(said) + ".")
    for arm in found:
        verdicts = {c["verdict"] for c in found[arm].values()}
        if verdicts == {"no measured difference"}:
            lines.append(f"* **`{arm}`**: this grid measured no difference from `{REFERENCE}`, "
                         f"so choosing it rests on {basis[arm]}, not on this grid.")  # fmt: skip
        elif not verdicts & {"above", "below"}:
            lines.append(f"* **`{arm}`**: not yet compared with `{REFERENCE}` at every k, so "
                         f"choosing it rests on {basis[arm]}, not on this grid.")  # fmt: skip
    return [*lines, ""]


def at_ceiling(runs: dict[str, dict[int, Any]]) -> dict[int, float]:
    """k → the reference's mean pass@k after training, for the k where it is at least
    ``CEILING`` (there an arm can hardly be measured above it)."""
    recs = list(runs.get(REFERENCE, {}).values())
    means = {k: float(np.mean([pass_at(r["after"], r["samples"], k) for r in recs]))
             for k in ks_of(runs)} if recs else {}  # fmt: skip
    return {k: m for k, m in means.items() if m >= CEILING}


def ceiling_line(runs: dict[str, dict[int, Any]]) -> list[str]:
    high = at_ceiling(runs)
    if not high:
        return []
    said = ", ".join(f"pass@{k} {m:.3f}" for k, m in high.items())
    return [f"* **Ceiling**: `{REFERENCE}`'s held-out {said} after training: at or above "
            f"{CEILING}, an arm can hardly be measured above it there, so a tie at "
            f"{'that k' if len(high) == 1 else 'those k'} says little."]  # fmt: skip


def level_line(runs: dict[str, dict[int, Any]]) -> list[str]:
    """Which arms' training pass@1 has levelled off at the end (``levels``), in one sentence."""
    words = {a: levels([r[s] for s in sorted(r)]).split(" (")[0] for a, r in runs.items()}
    groups = {w: [a for a in runs if words[a] == w] for w in dict.fromkeys(words.values())}
    said = "; ".join(f"{w}: {names(arms)}" for w, arms in groups.items())
    rising = groups.get("still rising")
    tail = (f" ({names(rising)} would need longer runs: the comparison is of runs cut short)"
            if rising else "")  # fmt: skip
    return [f"* **Training pass@1**: {said}{tail}.", ""]


METHOD = (
    "Intervals: 95% percentile intervals of a paired bootstrap ({reps} resamples) of the mean "
    "difference in unbiased pass@k between an arm and `grpo` on the same seed and held-out "
    "prompt, resampling seeds and then prompts. Test: an arm is above (below) `grpo` when the "
    "whole interval is above (below) 0; otherwise there is no measured difference. Training "
    "pass@1 has levelled off when the mean over the last quarter of the steps minus the quarter "
    "before it (every step and seed) has an interval, over seeds, inside ±{flat} (an "
    "equivalence test); otherwise it is still rising (interval above 0), falling (below 0) or "
    "not determined (the interval is too wide to tell). "
    "Step times are kept in the files, not compared here: the machine was shared."
)


def rests_on(arm: str, rows: list[tuple[str, str]], bandit: dict[str, Any] | None) -> str:
    """What a choice of ``arm`` rests on where the grid measured nothing, each named."""
    proved = proofs(arm, rows) if rows else []
    parts = [f"the Coq proofs ({', '.join(f'`{p}`' for p in proved)})"] if proved else []
    if bandit and arm in bandit.get("estimators", {}):
        parts.append("the bandit (`docs/results/bandit.json`)")
    return " and ".join(parts) if parts else "nothing measured or proved on this page"


def section(
    grid: dict[str, Any], rows: list[tuple[str, str]], bandit: dict[str, Any] | None
) -> list[str]:
    """The page's lines for every design in ``grid`` (``load``); none when there is none."""
    out: list[str] = []
    for name, info, runs in designs(grid):
        out += setup(name, info, runs)
        if REFERENCE not in runs:
            out += [f"No `{REFERENCE}` run has finished yet: nothing is compared.", ""]
            continue
        table, found = comparison_table(runs)
        basis = {a: rests_on(a, rows, bandit) for a in found}
        start, moved = start_table(runs)
        out += arm_table(runs) + start + table + conclusion(found, basis)[:-1]
        out += start_line(moved) + ceiling_line(runs)
        out += level_line(runs)
        out += [METHOD.format(reps=REPS, flat=FLAT), ""]
    return out


def lead(
    grid: dict[str, Any], rows: list[tuple[str, str]], bandit: dict[str, Any] | None
) -> list[str]:
    """The page's answer, chosen from the grid's pass@8 verdicts: from the real model's grid
    once it has compared an arm on at least ``MIN_SEEDS`` seeds, else the embedded model's (of
    its designs that have: one where some arm ended above the starting weights at pass@8
    before one where none did, as there not training beat every estimator; then a finished one
    before an unfinished one, so that a few seeds of a new design do not override a whole
    grid; then the one with the most steps: the longest runs); none (the page keeps its
    earlier answer) while no design has."""
    ready = [(not info["design"]["model"], not _gains(info["runs"]), not finished(info["runs"]),
              -info["design"]["steps"], name)
             for name, info in grid.items() if _compared(info["runs"])]  # fmt: skip
    if not ready:
        return []
    name = min(ready)[-1]
    runs = grid[name]["runs"]
    k = max(ks_of(runs))  # 8 when the runs sampled that many
    found = {a: compare(runs, a, k) for a in sorted(runs, key=_order) if a != REFERENCE}
    by = {v: [a for a, c in found.items() if c["verdict"] == v] for v in ("above", "below")}
    tied = [a for a, c in found.items() if c["verdict"] == "no measured difference"]
    model = grid[name]["design"]["model"] or "the embedded tiny model"
    seeds, prompts = max(c["seeds"] for c in found.values()), len(grid[name]["held_out"])
    on = (f"On the paired pass/fail grid `{name}` ({model}; pass@{k}, up to {seeds} seeds × "
          f"{prompts} shared held-out prompts; see “The pass/fail grid: `{name}`”)")  # fmt: skip
    said = []
    if by["above"]:
        one = len(by["above"]) == 1
        use = "it" if one else "one of them (they are not compared with each other)"
        said.append(f"{names(by['above'])} {'is' if one else 'are'} above `{REFERENCE}`: use {use}")
    if by["below"]:
        said.append(f"{names(by['below'])} below `{REFERENCE}`")
        if not by["above"]:
            said.append(f"use `{REFERENCE}`" + (" or an arm that ties with it" if tied else ""))
    if tied:
        basis = "; ".join(f"`{a}`: {rests_on(a, rows, bandit)}" for a in tied)
        said.append(f"{names([REFERENCE, *tied])} tie (no measured difference), so a choice "
                    f"among them rests not on this grid but on: {basis}")  # fmt: skip
    waiting = [a for a in found if a not in {*by["above"], *by["below"], *tied}]
    if waiting:
        said.append(f"{names(waiting)} not compared yet")
    pending = [n for n, info in grid.items() if info["design"]["model"] and n != name]
    if pending and not grid[name]["design"]["model"]:
        runs_done = sum(len(r) for n in pending for r in grid[n]["runs"].values())
        said[-1] += (f". The real model's grid ({names(pending)}: {runs_done} runs finished) "
                     "has not yet compared an arm on two seeds, so this answer is the embedded "
                     "model's")  # fmt: skip
    if k in at_ceiling(runs):
        said[-1] += (f". `{REFERENCE}`'s pass@{k} is near its ceiling there, so a tie says "
                     "little")  # fmt: skip
    if _moved(runs, k) == {"below"}:  # a regime the reader must know of
        said[-1] += (f". Every arm ended below the starting weights' held-out pass@{k} there "
                     "(paired, the same test): the arms above "
                     f"`{REFERENCE}` lost less, none gained")  # fmt: skip
    others = [_elsewhere(n, grid[n]["runs"], k) for *_, n in sorted(ready)
              if n != name and finished(grid[n]["runs"])]  # fmt: skip
    also = (f" The other finished grids at pass@{k}, against `{REFERENCE}`: " + "; ".join(others)
            + ".") if others else ""  # fmt: skip
    return [QUESTION, "", f"{on}, " + "; ".join(said) + "." + also, ""]


def _elsewhere(name: str, runs: dict[str, dict[int, Any]], k: int) -> str:
    """One finished design's pass@k verdicts against the reference, in a clause."""
    found = {a: compare(runs, a, k)["verdict"] for a in sorted(runs, key=_order) if a != REFERENCE}
    words = {"above": "above", "below": "below", "no measured difference": "tie"}
    by = {w: [a for a, v in found.items() if v == key] for key, w in words.items()}
    said = ", ".join(f"{names(arms)} {w}{'s' if w == 'tie' and len(arms) == 1 else ''}"
                     for w, arms in by.items() if arms)  # fmt: skip
    lost = " (every arm below the starting weights)" if _moved(runs, k) == {"below"} else ""
    return f"`{name}`: {said}{lost}"


def designs(grid: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, record, runs with the reference arm first) per design, real models first."""
    found = sorted(grid.items(), key=lambda kv: (not kv[1]["design"]["model"], kv[0]))
    return [(n, i, {a: i["runs"][a] for a in sorted(i["runs"], key=_order)}) for n, i in found]


def finished(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether every arm of the design has its ``PLANNED_SEEDS`` runs."""
    return all(len(runs.get(a, {})) >= PLANNED_SEEDS for a in DESIGN_ARMS)


def _moved(runs: dict[str, dict[int, Any]], k: int) -> set[str]:
    """The verdicts of every arm's held-out pass@k against the starting weights."""
    return {from_start([r[s] for s in sorted(r)], k)["verdict"] for r in runs.values()}


def _gains(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether some arm's held-out pass@k (the largest k) ended above the starting weights'."""
    return "above" in _moved(runs, max(ks_of(runs)))


def _compared(runs: dict[str, dict[int, Any]]) -> bool:
    """Whether some arm and the reference share at least ``MIN_SEEDS`` seeds."""
    ref = set(runs.get(REFERENCE, {}))
    return any(len(ref & set(r)) >= MIN_SEEDS for a, r in runs.items() if a != REFERENCE)


def _order(arm: str) -> tuple[int, str]:
    return (0 if arm == REFERENCE else 1, arm)
