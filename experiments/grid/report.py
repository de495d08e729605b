"""The pass/fail grid's section of ``docs/choosing.md`` (``advest experiment grid``), computed from
the per-run files in ``docs/results/grid/`` and nothing else.

Every comparison is paired: arm and reference ran on the same seeds and the same held-out
prompts, so the unit is the difference of unbiased pass@k (Chen et al. 2021, arXiv:2107.03374
eq. 1) on one (seed, prompt). The interval is a bootstrap that resamples seeds, then prompts
(one resample of the prompts for every seed drawn, as the prompts are shared); an arm is
"above" or "below" the reference only when Holm's correction over the design's declared family
of comparisons (``designs``: every compared arm at every k) rejects no difference, and "no
measured difference" otherwise (the statistics: ``stats``); no equivalence margin is
declared for these comparisons, so none is called a tie. Every sentence of the conclusion is
chosen from these corrected verdicts, and where no difference is measured the section names
what a choice rests on instead. Designs of one ``series`` (one set of runs at several step
counts) are shown as one design.

``scripts/choosing.py --repo .`` writes this section into ``docs/choosing.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..stats import ALPHA, NO_DIFFERENCE, REPS, cell, paired_bootstrap, pass_at
from . import designs as declared
from . import series as grid_series
from .designs import DESIGN_ARMS
from .stats import FLAT, REFERENCE, compare, corrected, from_start, levels

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


def _task(d: dict[str, Any]) -> str:
    if not d["task"]:
        return "the embedded addition"
    opts = dict(d["options"])
    lo, hi = opts.get("min_digits"), opts.get("max_digits")
    digits = f"{lo} digit{'s' if lo != 1 else ''}" if lo == hi else f"{lo} to {hi} digits"
    return f"reasoning-gym `{d['task']}` ({digits} a term)"


def _k_of(runs: dict[str, Any], info: dict[str, Any]) -> str:
    """K and G as the runs used them: each pass@K arm's K, and G (K = 8 arms use G = 16)."""
    d, arms = info["design"], [r for by in runs.values() for r in list(by.values())[:1]]
    ks = sorted({f"K = {r['settings']['arm']['k']}" for r in arms
                 if "k" in r.get("settings", {}).get("arm", {})})  # fmt: skip
    gs = sorted({r.get("settings", {}).get("arm", {}).get("group_size", d["group_size"])
                 for r in arms} or {d["group_size"]})  # fmt: skip
    pk = f"{' and '.join(ks)} for the pass@K arms" if ks else "no pass@K arm has run yet"
    return f"{pk}, G = {' or '.join(str(g) for g in gs)}"


def setup(name: str, info: dict[str, Any], runs: dict[str, Any]) -> list[str]:
    d = info["design"]
    model = f"`{d['model']}`" if d["model"] else "The embedded tiny model"
    adapter = f"LoRA r = {d['lora_r']}" if d["lora_r"] else "every weight"
    planned, seeds = declared.planned(info.get("declaration")) or (
        [*DESIGN_ARMS, *(a for a in runs if a not in DESIGN_ARMS)],
        PLANNED_SEEDS,
    )
    done = sum(len(s) for s in runs.values())
    per_arm = ", ".join(f"{a} {len(runs.get(a, {}))}" for a in planned)
    return [
        f"{model} ({adapter}) on {_task(d)}, its graded `{d['reward']}` score turned "
        "pass/fail (`--reward_threshold 1`: full credit passes). Settings: "
        f"{_k_of(runs, info)}; learning rate {d['lr']} for every arm, not tuned for any arm. "
        f"Each run: {d['steps']} steps of {d['prompts']} prompts × G samples, drawn from "
        f"{d['train_rows']} training rows (each recurs every {d['train_rows'] // d['prompts']} "
        f"steps), {d['tokens']} new tokens. Every arm and seed is evaluated on the same "
        f"{len(info['held_out'])} held-out prompts × {d['eval_samples']} samples; the starting "
        "weights are the same for every run, so their counts are measured once and shared.",
        "",
        "Advantage scale: every arm trains with AdamW (one update per step), whose step is "
        "unchanged by a constant factor on the loss (such as maxpo's N/K) but for its ε "
        "(1e-8, added to the root of the second moment), so one learning rate can serve every "
        "arm; that is an argument from scale, not a tuned rate: no rate was tuned for any arm. "
        "Gradient clipping would break the invariance, so it is off (the table "
        "counts the steps it bound). What is left between the arms is the direction and the "
        "relative weight of groups and steps (grpo's division by each group's spread is one), "
        "which is what the comparison measures.",
        "",
        f"Finished runs: {done} of {len(planned) * seeds} planned ({per_arm}; "
        f"{seeds} seeds per arm planned); comparisons use the seeds both arms finished. "
        f"{_where(name, info, runs)}",
        "",
    ]


def _where(name: str, info: dict[str, Any], runs: dict[str, Any]) -> str:
    """The device the runs ran on, and how to resume them there (the declared command)."""
    devices = sorted({str(r.get("device", "cpu")) for by in runs.values() for r in by.values()})
    if devices in ([], ["cpu"]):
        command = (info.get("declaration") or {}).get("command", f"scripts/grid.sh {name}")
        return ("Resume the grid (finished runs are skipped, each new one committed): "
                f"`{command}`.")  # fmt: skip
    base = name.removesuffix("-gpu")
    return (f"Every run on {' and '.join(devices)} (the arms of one seed in one process on one "
            f"device); resume there with `scripts/grid_gpu.sh OUT {base}` and copy "
            f"`OUT/{base}` here.")  # fmt: skip


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


def found_of(runs: dict[str, dict[int, Any]], decl: dict[str, Any] | None
             ) -> dict[str, dict[int, Any]]:  # fmt: skip
    """arm → k → the comparison with the reference, Holm-corrected over the declared family
    (``designs.family``; without a declaration: every arm at every k the runs allow; a sweep
    member's family holds its other members' comparisons too, ``series.across``)."""
    every = {"": runs, **(decl or {}).get("holm_with", {})}  # a sweep: one family for all
    pool: dict[tuple[str, str, int], Any] = {}
    for name, r in every.items():
        if not r and decl:  # a member not run yet: its comparisons count, none rejected
            none = {"p": 1.0, "mean": 0.0, "verdict": NO_DIFFERENCE}
            pool |= {(name, *c): none for c in declared.family(decl, set(runs))}
        ks = ks_of(r) if REFERENCE in r else ()
        pairs = (declared.family(decl, set(r)) if decl else
                 [(a, k) for a in r if a != REFERENCE for k in ks])  # fmt: skip
        pool |= {(name, a, k): compare(r, a, k) for a, k in pairs if k in ks}
    out: dict[str, dict[int, Any]] = {}
    for (name, a, k), c in corrected(pool).items():
        if not name:
            out.setdefault(a, {})[k] = c
    return out


def p_cell(c: dict[str, Any]) -> str:
    """Holm's adjusted p-value; below the bootstrap's resolution it is bounded, not zero."""
    if "p_holm" not in c:
        return "–"
    return f"< {2 / REPS:.4f}" if c["p_holm"] == 0 else f"{c['p_holm']:.4f}"


def comparison_table(runs: dict[str, dict[int, Any]], decl: dict[str, Any] | None = None
                     ) -> tuple[list[str], dict[str, Any]]:  # fmt: skip
    found = found_of(runs, decl)
    ks = sorted({k for per in found.values() for k in per})
    head = " | ".join(f"pass@{k}: difference [95%] | Holm p | verdict" for k in ks)
    lines = [f"| arm − {REFERENCE} | seeds | {head} |", "|---|---|" + "---|---|---|" * len(ks)]
    for arm, per in found.items():
        cells = [
            (cell((c["mean"], c["lo"], c["hi"]), "+") if "mean" in c else "–")
            + f" | {p_cell(c)} | {c['verdict']}"
            for c in per.values()
        ]
        lines.append(f"| `{arm}` | {next(iter(per.values()))['seeds']} | {' | '.join(cells)} |")
    return [*lines, ""], found


def start_table(runs: dict[str, dict[int, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Each arm against the starting weights: held-out pass@k after training minus before,
    Holm-corrected over this table's comparisons (every arm at every k)."""
    ks = ks_of(runs)
    lines = [
        "Each arm against the starting weights (held-out pass@k after training minus before, "
        "the same test, Holm over this table's comparisons):",
        "",
        "| arm | " + " | ".join(f"pass@{k}: after − before [95%]" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]
    flat = corrected({(arm, k): from_start([by[s] for s in sorted(by)], k)
                      for arm, by in runs.items() for k in ks})  # fmt: skip
    found: dict[str, Any] = {}
    for (arm, k), c in flat.items():
        found.setdefault(arm, {})[k] = c
    for arm, per in found.items():
        cells = [f"{cell((c['mean'], c['lo'], c['hi']), '+')} ({c['verdict']})" if "mean" in c
                 else c["verdict"] for c in per.values()]  # fmt: skip
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
    """One sentence per k, chosen by the corrected verdicts; then what each arm without a
    measured difference rests on."""
    lines = []
    ks = sorted({k for per_k in found.values() for k in per_k})
    for k in ks:
        by = {v: [a for a in found if found[a].get(k, {}).get("verdict") == v]
              for v in ("above", "below", NO_DIFFERENCE)}  # fmt: skip
        said = []
        if by["above"]:
            said.append(f"{names(by['above'])} above `{REFERENCE}`")
        if by["below"]:
            said.append(f"{names(by['below'])} below `{REFERENCE}`")
        if by[NO_DIFFERENCE]:
            arms = by[NO_DIFFERENCE]
            each = names(arms) if len(arms) == 1 else f"each of {names(arms)}"
            said.append(f"no measured difference between `{REFERENCE}` and {each}")
        judged = {a for arms in by.values() for a in arms}
        rest = [a for a in found if a not in judged and k in found[a]]
        if rest:
            said.append(f"{names(rest)} not compared yet")
        lines.append(f"* **pass@{k}**: " + "; ".join(said) + ".")
    for arm in found:
        verdicts = {c["verdict"] for c in found[arm].values()}
        if verdicts == {NO_DIFFERENCE}:
            lines.append(f"* **`{arm}`**: this grid measured no difference from `{REFERENCE}`, "
                         f"so choosing it rests on {basis[arm]}, not on this grid.")  # fmt: skip
        elif not verdicts & {"above", "below"}:
            lines.append(f"* **`{arm}`**: no difference from `{REFERENCE}` measured yet at any "
                         f"k, so choosing it rests on {basis[arm]}, not on this grid.")  # fmt: skip
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
            f"{CEILING}, an arm can hardly be measured above it there, so no measured "
            f"difference at {'that k' if len(high) == 1 else 'those k'} says little."]  # fmt: skip


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
    "prompt, resampling seeds and then prompts. Test: the two-sided bootstrap p-value of a "
    "difference of 0 (twice the smaller share of resampled means on either side of 0), "
    "Holm-corrected over the design's declared family (family-wise error rate {alpha}); an arm "
    "is above (below) `grpo` when Holm rejects and its mean is above (below) 0; otherwise "
    "there is no measured difference (no equivalence margin is declared, so no tie is "
    "claimed). Training "
    "pass@1 has levelled off when the mean over the last quarter of the steps minus the quarter "
    "before it (every step and seed) has an interval, over seeds, inside ±{flat} (an "
    "equivalence test whose margin was chosen after data of `embedded_3000` were seen: "
    "exploratory); otherwise it is still rising (interval above 0), falling (below 0) or "
    "not determined (the interval is too wide to tell). "
    "Step times are kept in the files, not compared here: the machine was shared."
)


Proved = dict[str, list[str]]
"""Arm → the Coq theorems that concern it (the page's maintainers' tool reads them from
``docs/theorems.md``; none: an empty dict)."""


def rests_on(arm: str, proofs: Proved, bandit: dict[str, Any] | None) -> str:
    """What a choice of ``arm`` rests on where the grid measured nothing, each named."""
    proved = proofs.get(arm, [])
    parts = [f"the Coq proofs ({', '.join(f'`{p}`' for p in proved)})"] if proved else []
    if bandit and arm in bandit.get("estimators", {}):
        parts.append("the bandit (`docs/results/bandit.json`)")
    return " and ".join(parts) if parts else "nothing measured or proved on this page"


def one(name: str, info: dict[str, Any], runs: dict[str, Any], proofs: Proved,
        bandit: dict[str, Any] | None) -> list[str]:  # fmt: skip
    """One design's (or one step count's) tables and sentences."""
    if REFERENCE not in runs:
        return [f"No `{REFERENCE}` run has finished yet: nothing is compared.", ""]
    table, found = comparison_table(runs, info.get("declaration"))
    basis = {a: rests_on(a, proofs, bandit) for a in found}
    start, moved = start_table(runs)
    out = arm_table(runs) + start + table + conclusion(found, basis)[:-1]
    out += start_line(moved) + ceiling_line(runs) + level_line(runs)
    return out + declared.secondary(runs, info.get("declaration"))


def section(grid: dict[str, Any], proofs: Proved, bandit: dict[str, Any] | None) -> list[str]:
    """The page's lines for every design in ``grid`` (``load``), the designs of one series
    (one set of runs at several step counts) under one heading; none when there is none."""
    out: list[str] = []
    for series, members in grid_series.series_of(designs(grid)).items():
        if len(members) == 1:
            name, info, runs = members[0]
            out += [f"## The pass/fail grid: `{name}`", ""]
            out += _declaration(info) + setup(name, info, runs) + one(name, info, runs, proofs,
                                                                       bandit)  # fmt: skip
        else:
            sweep = grid_series.is_sweep(members)
            out += _head(series, members, sweep)
            for name, info, runs in members:
                d = info["design"]
                at = f"at learning rate {d['lr']}" if sweep else f"after {d['steps']} steps"
                out += [f"### `{series}` {at} (`{name}`)", ""]
                out += _declaration(info) + setup(name, info, runs)
                out += one(name, info, runs, proofs, bandit)
        out += [METHOD.format(reps=REPS, flat=FLAT, alpha=ALPHA), ""]
    return out


def _head(series: str, members: list[Any], sweep: bool) -> list[str]:
    """A series' heading and what makes its designs one: a sweep over learning rates, or one
    set of runs at several step counts."""
    who = names([m[0] for m in members])
    if sweep:
        rates = names_plain([m[1]["design"]["lr"] for m in members])
        return [f"## The learning-rate sweep: `{series}`, one design at rates {rates}", "",
                f"{who} are one design at {len(members)} learning rates: the same settings, "
                "seeds and data but the rate. Their declared family is every rate's "
                "comparisons together, so each rate's verdicts below are Holm-corrected "
                "over all of them.", ""]  # fmt: skip
    steps = names_plain([m[1]["design"]["steps"] for m in members])
    return [f"## The pass/fail grid: `{series}`, one design at {steps} steps", "",
            f"{who} are one design: the same seeds, data and settings but the number of "
            "steps, i.e. one set of runs evaluated at several step counts, not separate "
            "designs that agree. Per-step training pass rates, same arm and seed: "
            f"{grid_series.agreement(members)}", ""]  # fmt: skip


def _declaration(info: dict[str, Any]) -> list[str]:
    decl = info.get("declaration")
    return declared.block(decl) if decl else ["Not declared: no `docs/results/designs/` file.",
                                              ""]  # fmt: skip


def names_plain(items: Sequence[object]) -> str:
    said = [str(i) for i in items]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def designs(grid: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, record, runs with the reference arm first) per design, real models first."""
    found = sorted(grid.items(), key=lambda kv: (not kv[1]["design"]["model"], kv[0]))
    return [(n, i, {a: i["runs"][a] for a in sorted(i["runs"], key=order)}) for n, i in found]


def order(arm: str) -> tuple[int, str]:
    return (0 if arm == REFERENCE else 1, arm)
