"""Gather the results files the "Choosing an estimator" page is generated from: the real-model
experiment's summary, the value-estimation benchmark, the bandit and the oracle's verdicts, each
condensed into one JSON file under ``docs/results/`` (small enough to commit; every number in
them was written by the experiment that measured it).

``python -m advest.experiments.choosing --real DIR --values DIR --bandit DIR --oracle
DIR`` calls ``collect`` and then renders the page; a source not given keeps its file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

ORACLE_PROPS = (
    "centred",
    "shift invariant",
    "scale equivariant",
    "unbiased",
    "singleton group",
    "all-equal groups",
)
"""The oracle's properties the page shows, in its order (``advest check`` reports more)."""


def real(out: Path, dest: Path) -> None:
    """``advest experiment real``'s folder → ``dest/real.json`` (its summary, the runs planned
    and finished) and ``dest/real_passk.png``."""
    from advest.experiments import real_report

    if not (out / "metrics.json").is_file():
        print(f"{out}: no run has finished yet; docs/results/real.json is left as it is")
        return
    summary = real_report.write(out)
    common, seeds = real_report.on_common_seeds(json.loads((out / "metrics.json").read_text()))
    config = json.loads((out / "config.json").read_text())
    planned = len(planned_runs(config))
    finished = sum(e["seeds"] for arms in summary.values() for e in arms.values())
    base = config["base"]
    keep = ("steps", "prompts_per_step", "group_size", "max_new_tokens", "lr", "lora_r",
            "eval_prompts", "eval_samples", "temperature")  # fmt: skip
    record = {
        "planned_runs": planned,
        "finished_runs": finished,
        "arms_planned": list(config["arms"]),
        "seeds_planned": config["seeds"],
        "settings": {k: base[k] for k in keep},
        "tasks": config["tasks"],
        "summary": summary,
        # rankings and the best arm compare arms on the seeds all of them have
        "compared": {t: a for t, a in real_report.summarise_results(common).items() if a},
        "compared_seeds": seeds,
    }
    (dest / "real.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.copyfile(out / "passk.png", dest.parent / "real_passk.png")


def compared(real: dict[str, Any]) -> dict[str, Any]:
    """Per task, the arms the page ranks: their results on the seeds every arm has
    (``real["compared"]``), or the whole summary in a record written before that existed."""
    found: dict[str, Any] = real.get("compared", real["summary"])
    return found


def shared(real: dict[str, Any]) -> str:
    """The seeds every arm has (``real["compared_seeds"]``), as the page says them."""
    seeds = sorted({s for task in real.get("compared_seeds", {}).values() for s in task})
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def planned_runs(config: dict[str, Any]) -> set[tuple[str, str, int]]:
    """The (task, arm, seed) runs the experiment's commands asked for: the union of its pieces
    (one per command into the same folder), or its one command's tasks × arms × seeds."""
    pieces = config.get("pieces") or [config]
    return {
        (task, arm, seed)
        for piece in pieces
        for task in piece["tasks"]
        for arm in piece["arms"]
        for seed in range(piece.get("first_seed", 0), piece.get("first_seed", 0) + piece["seeds"])
    }


def values(out: Path, dest: Path) -> None:
    """``advest experiment values``'s folder → ``dest/values.json`` (its scores and settings,
    without the per-state rows)."""
    if not (out / "metrics.json").is_file():
        print(f"{out}: the benchmark has not finished; docs/results/values.json is left as it is")
        return
    metrics = json.loads((out / "metrics.json").read_text())
    config = json.loads((out / "config.json").read_text())
    states = {k: v for k, v in metrics["states"].items() if k != "rows"}
    keep = ("model", "data", "data_options", "problems", "group", "states", "mc", "iterations",
            "max_new_tokens", "temperature", "hista_w")  # fmt: skip
    record = {"settings": {k: config[k] for k in keep}, "states": states, "kae": metrics["kae"]}
    (dest / "values.json").write_text(json.dumps(record, indent=1) + "\n")


def bandit(out: Path, dest: Path) -> None:
    """``advest experiment bandit``'s folder → ``dest/bandit.json``: per estimator, the bias
    sweep's fit to its objective's gradient (cosine, fitted scale, tail slope)."""
    metrics = json.loads((out / "metrics.json").read_text())
    keep = ("seeds", "n", "k", "bias_actions", "bias_batches")
    est = {
        name: {key: d[key] for key in ("cos", "fitted_scale", "slope_tail", "scale_divided_out")}
        for name, d in metrics["bias"]["estimators"].items()
    }
    record = {"settings": {k: metrics["config"][k] for k in keep}, "estimators": est}
    (dest / "bandit.json").write_text(json.dumps(record, indent=1) + "\n")


def oracle(folder: Path, dest: Path) -> None:
    """``advest check NAME --json folder/NAME.json`` files → ``dest/oracle.json``: per
    estimator and property, "yes" when every (dtype, N) the oracle tried says yes, else the
    first other verdict with its evidence, dtype and N."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("*.json")):
        findings = json.loads(path.read_text())
        verdicts: dict[str, str] = {}
        for prop in ORACLE_PROPS:
            rows = [f for f in findings if f["prop"] == prop]
            if not rows:
                continue
            bad = [f for f in rows if not str(f["verdict"]).startswith("yes")]
            if not bad:
                verdicts[prop] = _agreed(rows)
                continue
            f = bad[0]
            where = ", ".join(str(x) for x in (f["dtype"], f"N={f['n']}" if f["n"] else "") if x)
            verdicts[prop] = f"{f['verdict']} ({where}: {f['evidence']})" if where else (
                f"{f['verdict']} ({f['evidence']})")  # fmt: skip
        out[path.stem] = verdicts
    (dest / "oracle.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


def _agreed(rows: list[dict[str, Any]]) -> str:
    """Verdicts that all say yes: the one text, or each N's text where they differ (the
    unbiased scale c grows with N)."""
    texts = list(dict.fromkeys(str(f["verdict"]) for f in rows))
    if len(texts) == 1:
        return texts[0]
    by_n = dict.fromkeys((f["n"], str(f["verdict"])) for f in rows)
    return "; ".join(f"N={n}: {v}" for n, v in by_n)


def collect(sources: dict[str, Path | None], dest: Path) -> None:
    """Each given source folder (``real``, ``values``, ``bandit``, ``oracle``) → its file."""
    dest.mkdir(parents=True, exist_ok=True)
    makers = {"real": real, "values": values, "bandit": bandit, "oracle": oracle}
    for key, folder in sources.items():
        if folder is not None:
            makers[key](folder, dest)
