"""Generate the docs page "Choosing an estimator" (``docs/choosing.md``) and the README's
measured blocks (the page's answer and tables, the bandit bullets, the two-turn table) from the
results files in ``docs/results/`` (``choosing_data``), the Coq theorems page
(``docs/theorems.md``) and the peer-conventions table (``docs/integrations.md``). Every number
on the page is read from those files; ``tests/core/experiments/test_choosing.py`` fails when the
page or a README block differs from what this module renders. A maintainers' tool: it writes
into the repository that ``--repo`` names, and nowhere else.

``python scripts/choosing.py --repo . [--values DIR] [--bandit DIR] [--bandit_format DIR]
[--oracle DIR]`` gathers the given result folders into ``docs/results/`` and rewrites the page
and the README's blocks; with no folder given it only re-renders from the files already there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import bandit_lines
import filter_groups_compare
from choosing_facts import ESTIMATORS, READS_MORE, peers, proofs, theorems, unproved

from advest.experiments import turns
from advest.experiments.grid import answer as grid_answer
from advest.experiments.grid import designs
from advest.experiments.grid import report as grid_report
from advest.experiments.grid import series as grid_series
from advest.experiments.grid import stats as grid_stats
from advest.experiments.real import ARMS
from advest.experiments.stats import cell
from advest.experiments.values import kae as values_kae
from advest.experiments.values import paired as values_paired
from advest.experiments.values.paired import mse_rows

SOURCES = ("values", "bandit", "bandit_format", "oracle")
"""The results files besides the grids' (``docs/results/grid/``), each gathered from a folder."""
BEGIN, END = "<!-- choosing:begin -->", "<!-- choosing:end -->"
TURNS = "<!-- turns:begin -->", "<!-- turns:end -->"


def splice(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from the marker ``begin`` to the marker ``end`` (both included)
    replaced by ``block`` (which carries the markers itself)."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + block + text[stop:]


def load(results: Path) -> dict[str, Any]:
    """Every results file: ``values``, ``bandit``, ``oracle`` (absent: None), ``grid``."""
    paths = {name: results / f"{name}.json" for name in SOURCES}
    found = {k: json.loads(p.read_text()) if p.is_file() else None for k, p in paths.items()}
    grid = grid_stats.load(results / "grid")
    declared = designs.load(results / "designs")
    for name, info in grid.items():
        info["declaration"] = declared.get(name)
    designs.same_settings(grid, declared)
    grid_series.across(grid, declared)
    return {**found, "grid": grid, "designs": declared}


def values_table(values: dict[str, Any]) -> str:
    s, st = values["settings"], values["states"]
    done = st.get("problems_done", s["problems"])
    so_far = "" if done >= s["problems"] else f" (so far: {done} of the {s['problems']} planned)"
    lines = [
        f"{s['model']} on `{s['data']}` {json.dumps(s['data_options'])}: {done} held-out "
        f"problems{so_far} × G = {s['group']} rollouts, {st['states']} states ({s['states']} "
        "prefixes of its own rollouts per problem; every state's row is in "
        f"`docs/results/values.json`), V_MC from {s['mc']} continuations each (mean binomial SE "
        f"{st['mean_binomial_se']:.3f}); Hista block w = {s['hista_w']}. Spread of "
        f"(V_MC − group mean): {st['reference_spread_v_mc_minus_group_mean']:.3f}. `group_mean` "
        "includes the state's own return (the paper's leaky V̂_avg); `loo_mean` leaves it out.",
        "",
        *mse_rows("baseline", st["estimators"]),
    ]
    if "rows" in st:  # a record from before the per-state rows were kept has none to pair
        lines += ["", *values_paired.table(st["rows"], list(st["estimators"]))]
        lines += ["", *values_paired.honest_table(st["rows"], list(st["estimators"]))]
    if "policy" in values.get("kae", {}):
        lines += ["", *values_kae.table(values["kae"])]
    else:  # not finished yet, or a record from before KAE was measured on a moving policy
        lines += ["", "KAE: not yet measured on a policy that changes (on a fixed policy, "
                  "pooling the history wins by construction)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def theory_lines(data: dict[str, Any], rows: list[tuple[str, str]], pk: list[str]) -> list[str]:
    """The evidence besides training runs for the pass@K arms ``pk``: Coq, bandit, oracle."""
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


def answer(data: dict[str, Any], rows: list[tuple[str, str]]) -> list[str]:
    """The page's first lines while no grid has compared an arm: what the pass@K estimators
    target, and the evidence besides training runs."""
    pk = [a for a, e in ESTIMATORS.items() if e.passk and not a.endswith("_k8")]
    said = ", ".join(f"`{a}`" for a in pk)
    return [grid_report.QUESTION, "", f"A pass@K estimator ({said}, with K ≤ G − 1): they "
            "target pass@K by construction; what is proved and measured of each is below. No "
            "paired grid has compared one with `grpo` yet, so whether one beats its pass@8 in "
            "training is not measured here.", "", "The evidence:", "",
            *theory_lines(data, rows, pk)]  # fmt: skip


def grid_lines(arm: str, grid: dict[str, Any]) -> list[str]:
    """``arm``'s bullets from each pass/fail grid that ran it: its paired difference from the
    reference arm at every k, with the verdict."""
    out = []
    for name, info in sorted(grid.items()):
        runs = info["runs"]
        if arm not in runs or grid_stats.REFERENCE not in runs:
            continue
        if arm == grid_stats.REFERENCE:
            out.append(f"* **Pass/fail grid** (`{name}`, {len(runs[arm])} seeds): the reference "
                       "arm the others are compared with.")  # fmt: skip
            continue
        per = grid_report.found_of(runs, info.get("declaration")).get(arm, {})
        found = sorted(per.items())
        if not found:
            continue
        said = "; ".join(
            f"pass@{k} {cell((c['mean'], c['lo'], c['hi']), '+')} ({c['verdict']}, Holm)"
            if "mean" in c else f"pass@{k} {c['verdict']}"
            for k, c in found
        )  # fmt: skip
        out.append(f"* **Pass/fail grid** (`{name}`, {found[0][1]['seeds']} seeds), "
                   f"− `{grid_stats.REFERENCE}`: {said}.")  # fmt: skip
    return out or ["* **Pass/fail grid**: not in a grid."]


def section(arm: str, data: dict[str, Any], texts: tuple[str, str]) -> str:
    """One estimator's entry: objective, oracle, proofs, bandit, pass/fail grids, values, peers.
    ``texts``: ``docs/theorems.md`` and ``docs/integrations.md``."""
    theorem_text, peer_text = texts
    rows = theorems(theorem_text)
    e, name = ESTIMATORS[arm], arm.removesuffix("_k8")
    oracle, bandit = (data["oracle"] or {}).get(arm), (data["bandit"] or {}).get("estimators", {})
    lines = [f"### `{arm}`", "", f"* **Optimises**: {e.optimises} ({e.source})."]
    if oracle:
        lines.append("* **Oracle** (`advest check`): " + "; ".join(
            f"{p}: {v}" for p, v in oracle.items()) + ".")  # fmt: skip
    elif arm in READS_MORE:
        lines.append("* **Oracle**: not run (the oracle checks estimators of rewards alone; this "
                     "one reads tokens, hidden states or history).")  # fmt: skip
    else:
        lines.append("* **Oracle**: not in `docs/results/oracle.json` (`python "
                     "scripts/oracle_runs.py` runs it).")  # fmt: skip
    names = proofs(arm, rows)
    lines.append("* **Proved in Coq** ([theorems](theorems.md)): " + (
        ", ".join(f"`{t}`" for t in names) if names else "nothing") + ".")  # fmt: skip
    caveat = unproved(arm, theorem_text)
    if caveat:
        lines[-1] = lines[-1][:-1] + f"; the theorems page: “{caveat}”"
    k = ARMS[arm].get("k") if arm in ARMS else None  # the arm's own K, where it has one
    if name in bandit and k not in (None, data["bandit"]["settings"]["k"]):
        lines.append(f"* **Bandit**: not run at K = {k} (the bandit's K is "
                     f"{data['bandit']['settings']['k']}: see `{name}`).")  # fmt: skip
    elif name in bandit:
        b, s = bandit[name], data["bandit"]["settings"]
        lines.append(
            f"* **Bandit** (N = {s['n']}, K = {s['k']}, {s['seeds']} seeds): cos(E ĝ, ∇J) "
            f"{b['cos'][0]:.4f} ± {b['cos'][1]:.4f}, fitted scale {b['fitted_scale'][0]:.3f}, "
            f"tail slope of the error {b['slope_tail'][0]:.2f}."
        )
    else:
        lines.append("* **Bandit**: not in the bandit run.")
    lines += grid_lines(arm, data.get("grid") or {})
    values = (data["values"] or {}).get("states", {}).get("estimators", {})
    if name in values:
        v = values[name]
        rows = data["values"]["states"]["rows"]
        said = []
        for ref in (values_paired.REFERENCE, values_paired.HONEST):
            if ref != name:
                mean, lo, hi = values_paired.paired(rows, name, ref=ref)
                said.append(f"minus `{ref}`'s on the same states {mean:+.4f} [{lo:+.4f}, "
                            f"{hi:+.4f}] ({values_paired.word(lo, hi)})")  # fmt: skip
        lines.append(f"* **State values on SmolLM2's traces**: MSE vs V_MC {v['mse']:.4f} "
                     f"[{v['mse_95ci'][0]:.4f}, {v['mse_95ci'][1]:.4f}]; " + "; ".join(said)
                     + f"; Spearman {v['spearman']:.3f}.")  # fmt: skip
    kae = (data["values"] or {}).get("kae") if arm == "kae" else None
    if kae and "policy" in kae:
        lines.append("* **Values on a policy trained between iterations** (SmolLM2, "
                     f"[the table](#state-values-on-smollm2s-traces)): {values_kae.verdicts(kae)}"
                     ".")  # fmt: skip
    found = peers(arm, peer_text)
    lines.append("* **Peer setting it reproduces** ([integrations](integrations.md)): " + (
        "; ".join(found) if found else "no row in the conversion tables") + ".")  # fmt: skip
    return "\n".join(lines) + "\n"


ORACLE_COMMAND = "python scripts/oracle_runs.py runs/oracle"
"""Writes the oracle's reports that ``--oracle runs/oracle`` reads."""
COMMAND = (
    "python scripts/choosing.py --repo . "
    "--values runs/values/smollm2 --bandit runs/bandit/full --bandit_format runs/bandit/format "
    "--oracle runs/oracle"
)


def proved(rows: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Arm → the Coq theorems of ``rows`` (``theorems``) that concern it."""
    return {arm: proofs(arm, rows) for arm in ESTIMATORS}


def page(data: dict[str, Any], theorem_text: str, peer_text: str) -> str:
    rows = theorems(theorem_text)
    grid = data.get("grid") or {}
    lead = grid_answer.lead(grid, proved(rows), data["bandit"]) or answer(data, rows)
    out = ["# Choosing an estimator", "", *lead, ""]
    out += ["<!-- generated by scripts/choosing.py from docs/results/*.json, "
            "docs/theorems.md and docs/integrations.md: do not edit -->", ""]  # fmt: skip
    out += grid_report.section(grid, proved(rows), data["bandit"])
    if data.get("filter"):  # dynamic sampling against grpo, paired as the grids are
        out += [data["filter"]]
    if data["values"]:
        out += ["## State values on SmolLM2's traces", "", values_table(data["values"])]
    arms = list(ESTIMATORS)
    out += ["## Each estimator", ""] + [section(a, data, (theorem_text, peer_text)) for a in arms]
    out += ["## Regenerate", "", "```bash", ORACLE_COMMAND, COMMAND, "```", ""]
    return "\n".join(out)


def readme_block(data: dict[str, Any], rows: list[tuple[str, str]]) -> str:
    """The README's measured block: the page's answer, each grid's paired differences from the
    reference arm, and the values tables."""
    grid = data.get("grid") or {}
    lead = grid_answer.lead(grid, proved(rows), data["bandit"]) or answer(data, rows)
    out = [BEGIN, "", *lead]
    series = grid_series.series_of(grid_report.designs(grid))
    for key, name, info, runs in [(k, *m) for k, ms in series.items() for m in ms]:
        if grid_stats.REFERENCE not in runs:
            continue
        model = info["design"]["model"] or "the embedded tiny model"
        done = grid_answer.runs_finished(sum(len(r) for r in runs.values()))
        table, _ = grid_report.comparison_table(runs, info.get("declaration"))
        steps = info["design"]["steps"]
        title = f"`{name}`" if len(series[key]) == 1 else f"`{key}` after {steps} steps (`{name}`)"
        out += ["", f"The pass/fail grid {title} ({model}, {done}): each arm "
                f"minus `{grid_stats.REFERENCE}`, paired over seeds and shared held-out "
                "prompts, with 95% bootstrap intervals and verdicts Holm-corrected over the "
                "design's declared family:", "", *table[:-1]]  # fmt: skip
    page = "the page *Choosing an estimator* (`docs/choosing.md`)"
    out += ["", f"Each grid's design, its per-arm table, the test and the bootstrap: {page}, "
            "generated from `docs/results/`.", ""]  # fmt: skip
    if data["values"]:
        out += ["Value estimation on SmolLM2's own traces (`advest experiment values`):", "",
                values_table(data["values"])]  # fmt: skip
    out += [f"Regenerate this block and `docs/choosing.md`: `{ORACLE_COMMAND}`, then "
            f"`{COMMAND}`.", "", END]  # fmt: skip
    return "\n".join(out)


def render(root: Path) -> tuple[str, str]:
    """(docs/choosing.md, README.md) as they should read from the results files: the README's
    measured block, its bandit bullets (``bandit_lines``) and its two-turn table
    (``docs/results/turns.json``)."""
    data = {**load(root / "docs" / "results"), "filter": filter_groups_compare.section(root)}
    theorem_text = (root / "docs" / "theorems.md").read_text()
    peer_text = (root / "docs" / "integrations.md").read_text()
    readme = splice((root / "README.md").read_text(), BEGIN, END,
                    readme_block(data, theorems(theorem_text)))  # fmt: skip
    bullets = "\n".join(bandit_lines.block(data["bandit"], data["bandit_format"]))
    readme = splice(readme, bandit_lines.BEGIN, bandit_lines.END, bullets)
    two_turns = json.loads((root / "docs" / "results" / "turns.json").read_text())
    readme = splice(readme, *TURNS, "\n".join([TURNS[0], turns.render(two_turns), TURNS[1]]))
    return page(data, theorem_text, peer_text), readme


def write(root: Path) -> None:
    """Rewrite ``root``'s ``docs/choosing.md`` and README blocks from its results files."""
    doc, readme = render(root)
    (root / "docs" / "choosing.md").write_text(doc)
    (root / "README.md").write_text(readme)


def main(argv: list[str] | None = None) -> int:
    import choosing_data

    p = argparse.ArgumentParser("scripts/choosing.py", description=__doc__)
    p.add_argument("--repo", type=Path, required=True, help="the repository's root")
    for key in SOURCES:
        p.add_argument(f"--{key}", type=Path, default=None, help=f"the {key} results folder")
    a = p.parse_args(argv)
    sources = {k: getattr(a, k) for k in SOURCES}
    choosing_data.collect(sources, a.repo / "docs" / "results")
    write(a.repo)
    print(f"wrote {a.repo / 'docs' / 'choosing.md'} and the README blocks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
