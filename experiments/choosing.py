"""Generate the docs page "Choosing an estimator" (``docs/choosing.md``) and the README's
real-model block from the results files in ``docs/results/`` (``choosing_data``), the Coq
theorems page (``docs/theorems.md``) and the peer-conventions table (``docs/integrations.md``).
Every number on the page is read from those files; ``tests/core/experiments/test_choosing.py`` fails
when the page or the README block differs from what this module renders.

``python -m advest.experiments.choosing [--real DIR] [--values DIR] [--bandit DIR]
[--oracle DIR]`` gathers the given result folders into ``docs/results/`` and rewrites the page
and the README block; with no flags it only re-renders from the files already there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from advest.experiments import grid_report
from advest.experiments.choosing_data import compared, shared
from advest.experiments.choosing_facts import (
    ESTIMATORS,
    READS_MORE,
    peers,
    proofs,
    theorems,
    unproved,
)
from advest.experiments.tables import mse_rows

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BEGIN, END = "<!-- choosing:real:begin -->", "<!-- choosing:real:end -->"


def load(results: Path = RESULTS) -> dict[str, Any]:
    """Every results file: ``real``, ``values``, ``bandit``, ``oracle`` (absent: None), ``grid``."""

    paths = {name: results / f"{name}.json" for name in ("real", "values", "bandit", "oracle")}
    found = {k: json.loads(p.read_text()) if p.is_file() else None for k, p in paths.items()}
    return {**found, "grid": grid_report.load(results / "grid")}


cell = grid_report.cell  # "mean [lo, hi]"


def status(real: dict[str, Any]) -> str:
    done, planned = real["finished_runs"], real["planned_runs"]
    counts = {e["seeds"] for t in real["summary"].values() for e in t.values()}
    caveat = "" if len(counts) < 2 else ("; each seed draws its own held-out prompts, so the "
        "table shows each arm on its own seeds, and the best arm, the rankings and the "
        f"separations compare every arm on the seeds all have ({shared(real)})")  # fmt: skip
    if done >= planned:
        return f"complete: all {planned} runs finished{caveat}"
    return (f"**partial**: {done} of the {planned} planned runs had finished when this was "
            "generated (the runs go seed by seed; an arm's seed count is in its row)"
            f"{caveat}")  # fmt: skip


def real_setup(real: dict[str, Any]) -> str:
    s = real["settings"]
    tasks = ", ".join(f"`{t}` {json.dumps(o)}" for t, o in real["tasks"].items())
    arms = {a for t in real["summary"].values() for a in t}
    k8 = "(G = 16 for the K = 8 arms) " if any(a.endswith("_k8") for a in arms) else ""
    return (
        f"SmolLM2-135M-Instruct (GGUF, LoRA r = {s['lora_r']}), reasoning-gym {tasks}; "
        f"{s['steps']} rollout steps of {s['prompts_per_step']} prompts × G = {s['group_size']} "
        f"{k8}× {s['max_new_tokens']} new tokens, lr {s['lr']:g}; "
        f"held-out pass@k from {s['eval_prompts']} unseen prompts × {s['eval_samples']} samples "
        "(the unbiased estimator), mean over seeds, 95% bootstrap intervals over prompts. "
        f"Status: {status(real)}."
    )


def real_table(real: dict[str, Any], ks: tuple[int, ...] = (1, 8, 64)) -> str:
    head = "| task | arm | seeds | " + " | ".join(f"pass@{k} before | pass@{k} after" for k in ks)
    lines = [head + " | s / step |", "|---" * (4 + 2 * len(ks)) + "|"]
    for task, arms in real["summary"].items():
        for arm, e in arms.items():
            cells = [f"{cell(e['before'][k - 1])} | {cell(e['after'][k - 1])}" for k in ks]
            lines.append(
                f"| {task} | {arm} | {e['seeds']} | " + " | ".join(cells)
                + f" | {e['seconds_per_step']:.1f} |"
            )  # fmt: skip
    return "\n".join(lines) + "\n"


def overlap(a: list[float], b: list[float]) -> bool:
    return a[1] <= b[2] and b[1] <= a[2]


def by_pass(arms: dict[str, Any], k: int) -> list[str]:
    """Arm names by mean pass@k after training, best first."""
    return sorted(arms, key=lambda a: -float(arms[a]["after"][k - 1][0]))


def ranking_lines(real: dict[str, Any]) -> list[str]:
    """Per task: the arms by pass@1 and by pass@64 after training, and the pairs whose order
    flips between the two with intervals that do not overlap at either k."""
    out = []
    for task, arms in compared(real).items():
        n = min(e["samples"] for e in arms.values())
        ks = [k for k in (1, 64) if k <= n]
        orders = {k: by_pass(arms, k) for k in ks}
        for k in ks:
            out.append(f"* `{task}`, pass@{k} after, best first: " + " > ".join(orders[k]))
        if len(ks) < 2:
            continue
        flips = [
            f"{a} / {b}"
            for a in arms
            for b in arms
            if a < b
            and not overlap(arms[a]["after"][0], arms[b]["after"][0])
            and not overlap(arms[a]["after"][63], arms[b]["after"][63])
            and (arms[a]["after"][0][0] > arms[b]["after"][0][0])
            != (arms[a]["after"][63][0] > arms[b]["after"][63][0])
        ]
        out.append(
            f"* `{task}`: pairs that pass@1 and pass@64 rank in opposite orders, with separated "
            "intervals at both: " + (", ".join(flips) if flips else "none")
        )
    return out


def separation_lines(real: dict[str, Any], ref: str = "grpo") -> list[str]:
    """Per task and k ∈ {1, 8, 64}: the arms whose 95% interval after training lies above
    ``ref``'s, below it, or overlaps it (not separated)."""
    out = []
    for task, arms in compared(real).items():
        if ref not in arms:
            continue
        for k in (1, 8, 64):
            r = arms[ref]["after"][k - 1]
            groups: dict[str, list[str]] = {"above": [], "below": [], "not separated": []}
            for arm, e in arms.items():
                if arm == ref:
                    continue
                v = e["after"][k - 1]
                key = "above" if v[1] > r[2] else "below" if v[2] < r[1] else "not separated"
                groups[key].append(arm)
            said = "; ".join(f"{g}: {', '.join(a) or '—'}" for g, a in groups.items())
            out.append(f"* `{task}`, pass@{k} after, against `{ref}`: {said}")
    return out


def level_lines(real: dict[str, Any]) -> list[str]:
    out = []
    for task, arms in real["summary"].items():
        for arm, e in arms.items():
            lv = e["level_off"]
            seq = ", ".join(f"{m:.2f}" for m in lv["means"])
            if len(lv["means"]) < 2:
                when = f"{lv['steps']} steps: too few windows to tell"
            elif lv["step"] is not None:
                when = f"levels off at step {lv['step']}"
            else:
                when = f"still rising at step {lv['steps']}"
            out.append(f"* `{task}` {arm}: {seq} → {when}")
    return out


def values_table(values: dict[str, Any]) -> str:
    s, st = values["settings"], values["states"]
    lines = [
        f"{s['model']} on `{s['data']}` {json.dumps(s['data_options'])}: {s['problems']} held-out "
        f"problems × G = {s['group']} rollouts, {st['states']} states (prefixes of its own "
        f"rollouts), V_MC from {s['mc']} continuations each (mean binomial SE "
        f"{st['mean_binomial_se']:.3f}); Hista block w = {s['hista_w']}. Spread of "
        f"(V_MC − group mean): {st['reference_spread_v_mc_minus_group_mean']:.3f}.",
        "",
        *mse_rows("baseline", st["estimators"]),
    ]
    lines += ["", f"KAE against the current group mean (fixed policy, {s['iterations']} iterations"
              " of history), MSE against the prompt's V_MC:", "",
              "| samples per prompt | group mean | KAE history |", "|---|---|---|"]  # fmt: skip
    for n, v in values["kae"].items():
        kae = "n/a" if v["kae_history_mse"] is None else f"{v['kae_history_mse']:.4f}"
        lines.append(f"| {n} | {v['group_mean_mse']:.4f} | {kae} |")
    return "\n".join(lines) + "\n"


def theory_lines(data: dict[str, Any], rows: list[tuple[str, str]], pk: list[str]) -> list[str]:
    """The evidence besides the real model for the pass@K arms ``pk``: Coq, bandit, oracle."""
    bandit, oracle = data["bandit"] or {}, data["oracle"] or {}
    lines = []
    proved = [f"`{a}`: " + ", ".join(f"`{t}`" for t in proofs(a, rows) if "unbiased" in t)
              for a in pk if any("unbiased" in t for t in proofs(a, rows))]  # fmt: skip
    if proved:
        lines.append("* Proved in Coq for every N and K: " + "; ".join(proved) + ".")
    fits = [f"`{a}` cos {bandit['estimators'][a]['cos'][0]:.4f}"
            for a in pk if a in bandit.get("estimators", {})]  # fmt: skip
    if fits:
        s = bandit["settings"]
        lines.append(
            f"* Softmax bandit (N = {s['n']}, K = {s['k']}, {s['seeds']} seeds): cosine of the "
            "mean estimate with ∇max@K " + ", ".join(fits) + "."
        )
    verdicts = [f"`{a}`: {oracle[a]['unbiased']}" for a in pk if a in oracle]
    if verdicts:
        lines.append("* Oracle (`advest check`, K = 4): " + "; ".join(verdicts) + ".")
    return lines


def recommendation(arms: dict[str, Any], best: str, tied: list[str]) -> str:
    passk = [a for a in [best, *tied] if ESTIMATORS[a].passk]
    if ESTIMATORS[best].passk:
        return f"Use `{best}`: it gave the best held-out pass@8, and it targets pass@K by design."
    if passk:
        return (
            f"The real model does not separate `{best}` (the measured best) from the pass@K "
            f"estimator{'s' if len(passk) > 1 else ''} {', '.join(f'`{a}`' for a in passk)} "
            f"on pass@8; choose `{passk[0]}` when pass@K is what you want (it is proved to "
            f"follow ∇pass@K, below), `{best}` when pass@1 matters as much."
        )
    return (
        f"On this model and budget the mean-reward `{best}` gave the best held-out pass@8, "
        "and no pass@K estimator came within its interval: the pass@K estimators' proved "
        "unbiasedness for ∇pass@K did not turn into better pass@8 here."
    )


def answer(data: dict[str, Any], rows: list[tuple[str, str]]) -> list[str]:
    """The page's first lines: 0/1 rewards and pass@8 — what to use, with the evidence."""
    real = data["real"]
    head = "**I train with verifiable 0/1 rewards and want pass@8: what do I use?**"
    if not real or not real["summary"]:
        pk = [a for a, e in ESTIMATORS.items() if e.passk and not a.endswith("_k8")]
        said = ", ".join(f"`{a}`" for a in pk)
        return [head, "", f"A pass@K estimator ({said}, with K ≤ G − 1): they target pass@K by "
                "construction; what is proved and measured of each is below. No real-model run "
                "has finished yet, so whether one beats `grpo`'s pass@8 on a real model is not "
                "measured here.", "", "The evidence:", "",
                *theory_lines(data, rows, pk)]  # fmt: skip
    task, arms = next(iter(compared(real).items()))
    best = max(arms, key=lambda a: arms[a]["after"][7][0])
    tied = [a for a in arms if a != best and overlap(arms[a]["after"][7], arms[best]["after"][7])]
    e = arms[best]
    lines = [head, "", recommendation(arms, best, tied), "", "The evidence:", ""]
    lines.append(
        f"* Real model (`{task}`, {e['seeds']} seed{'s' if e['seeds'] > 1 else ''}, "
        f"{status(real)}): best pass@8 after training `{best}` {cell(e['after'][7])} (from "
        f"{cell(e['before'][7])}); within its 95% interval: "
        + (", ".join(f"`{a}` {cell(arms[a]['after'][7])}" for a in tied) or "no other arm") + "."
    )  # fmt: skip
    return lines + theory_lines(data, rows, [a for a in arms if ESTIMATORS[a].passk])


def section(arm: str, data: dict[str, Any], texts: tuple[str, str]) -> str:
    """One estimator's entry: objective, oracle, proofs, bandit, real model, cost, peers.
    ``texts``: ``docs/theorems.md`` and ``docs/integrations.md``."""
    theorem_text, peer_text = texts
    rows = theorems(theorem_text)
    e, name = ESTIMATORS[arm], arm.removesuffix("_k8")
    oracle, bandit = (data["oracle"] or {}).get(name), (data["bandit"] or {}).get("estimators", {})
    lines = [f"### `{arm}`", "", f"* **Optimises**: {e.optimises} ({e.source})."]
    if oracle:
        lines.append("* **Oracle** (`advest check`): " + "; ".join(
            f"{p}: {v}" for p, v in oracle.items()) + ".")  # fmt: skip
    elif arm in READS_MORE:
        lines.append("* **Oracle**: not run (the oracle checks estimators of rewards alone; this "
                     "one reads tokens, hidden states or history).")  # fmt: skip
    else:
        lines.append("* **Oracle**: no verdicts in `docs/results/oracle.json` (its `advest check` "
                     "did not complete).")  # fmt: skip
    names = proofs(arm, rows)
    lines.append("* **Proved in Coq** ([theorems](theorems.md)): " + (
        ", ".join(f"`{t}`" for t in names) if names else "nothing") + ".")  # fmt: skip
    caveat = unproved(arm, theorem_text)
    if caveat:
        lines[-1] = lines[-1][:-1] + f"; the theorems page: “{caveat}”"
    if name in bandit:
        b, s = bandit[name], data["bandit"]["settings"]
        lines.append(
            f"* **Bandit** (N = {s['n']}, K = {s['k']}, {s['seeds']} seeds): cos(E ĝ, ∇J) "
            f"{b['cos'][0]:.4f} ± {b['cos'][1]:.4f}, fitted scale {b['fitted_scale'][0]:.3f}, "
            f"tail slope of the error {b['slope_tail'][0]:.2f}."
        )
    else:
        lines.append("* **Bandit**: not in the bandit run.")
    real = (data["real"] or {}).get("summary", {})
    got = [(t, a[arm]) for t, a in real.items() if arm in a]
    for task, r in got:
        lines.append(
            f"* **Real model** (`{task}`, {r['seeds']} seeds): pass@1 {cell(r['before'][0])} → "
            f"{cell(r['after'][0])}; pass@8 → {cell(r['after'][7])}; pass@64 → "
            f"{cell(r['after'][63])}."
        )
        base = real[task].get("grpo")
        ratio = f" ({r['seconds_per_step'] / base['seconds_per_step']:.2f}× grpo's)" if base else ""
        lines.append(f"* **Cost per step** (`{task}`, 2 shared CPU cores): "
                     f"{r['seconds_per_step']:.1f} s{ratio}.")  # fmt: skip
    if not got:
        lines.append("* **Real model**: no finished run yet.")
    values = (data["values"] or {}).get("states", {}).get("estimators", {})
    if name in values:
        v = values[name]
        lines.append(f"* **State values on SmolLM2's traces**: MSE vs V_MC {v['mse']:.4f} "
                     f"[{v['mse_95ci'][0]:.4f}, {v['mse_95ci'][1]:.4f}] (group mean "
                     f"{values['group_mean']['mse']:.4f}), Spearman "
                     f"{v['spearman']:.3f}.")  # fmt: skip
    found = peers(arm, peer_text)
    lines.append("* **Peer setting it reproduces** ([integrations](integrations.md)): " + (
        "; ".join(found) if found else "no row in the conversion tables") + ".")  # fmt: skip
    return "\n".join(lines) + "\n"


COMMAND = (
    "python -m advest.experiments.choosing --real runs/real/cpu "
    "--values runs/values/smollm2 --bandit runs/bandit/full --oracle runs/oracle"
)


def page(data: dict[str, Any], theorem_text: str, peer_text: str) -> str:
    rows = theorems(theorem_text)
    grid = data.get("grid") or {}
    lead = grid_report.lead(grid, rows, data["bandit"]) or answer(data, rows)
    out = ["# Choosing an estimator", "", *lead, ""]
    out += ["<!-- generated by advest.experiments.choosing from docs/results/*.json, "
            "docs/theorems.md and docs/integrations.md: do not edit -->", ""]  # fmt: skip
    out += grid_report.section(grid, rows, data["bandit"])
    real = data["real"]
    if real:
        out += ["## The real model", "", real_setup(real), "", real_table(real)]
        out += [
            *separation_lines(real),
            *ranking_lines(real),
            "",
            "Training pass@1 (the mean reward of each step's own "
            f"samples, mean over seeds, per {WINDOW_TEXT}):",
            "",
            *level_lines(real),
            "",
        ]
    if data["values"]:
        out += ["## State values on the real model's traces", "", values_table(data["values"])]
    arms = list(ESTIMATORS)
    out += ["## Each estimator", ""] + [section(a, data, (theorem_text, peer_text)) for a in arms]
    out += ["## Regenerate", "", "```bash", COMMAND, "```", ""]
    return "\n".join(out)


WINDOW_TEXT = "5-step window; a window levels off when no later one exceeds it by 2 SE"


def readme_block(data: dict[str, Any]) -> str:
    """The README's measured block: the real-model table, rankings, plot and values table."""
    out = [BEGIN, ""]
    if data["real"]:
        real = data["real"]
        out += [real_setup(real), "", real_table(real), *separation_lines(real),
                *ranking_lines(real), "",
                "![held-out pass@k after training](docs/real_passk.png)", "",
                f"Training pass@1 ({WINDOW_TEXT}):", "", *level_lines(real), ""]  # fmt: skip
    if data["values"]:
        out += ["Value estimation on SmolLM2's own traces (`advest experiment values`):", "",
                values_table(data["values"])]  # fmt: skip
    if not data["real"] and not data["values"]:
        out += ["No run of `advest experiment real` or `values` had finished when this block was "
                "generated.", ""]  # fmt: skip
    out += [f"Regenerate this block and `docs/choosing.md`: `{COMMAND}`.", "", END]
    return "\n".join(out)


def render(root: Path = ROOT) -> tuple[str, str]:
    """(docs/choosing.md, README.md) as they should read from the results files."""
    data = load(root / "docs" / "results")
    theorem_text = (root / "docs" / "theorems.md").read_text()
    peer_text = (root / "docs" / "integrations.md").read_text()
    readme = (root / "README.md").read_text()
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    return page(data, theorem_text, peer_text), readme[:start] + readme_block(data) + readme[end:]


def main(argv: list[str] | None = None) -> int:
    from advest.experiments import choosing_data

    p = argparse.ArgumentParser("python -m advest.experiments.choosing", description=__doc__)
    for key in ("real", "values", "bandit", "oracle"):
        p.add_argument(f"--{key}", type=Path, default=None, help=f"the {key} results folder")
    a = p.parse_args(argv)
    sources = {k: getattr(a, k) for k in ("real", "values", "bandit", "oracle")}
    choosing_data.collect(sources, RESULTS)
    doc, readme = render()
    (ROOT / "docs" / "choosing.md").write_text(doc)
    (ROOT / "README.md").write_text(readme)
    print(f"wrote {ROOT / 'docs' / 'choosing.md'} and the README block")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
