"""Gather the results files the "Choosing an estimator" page is generated from besides the
pass/fail grids' (``docs/results/grid/``, written by the grid itself): the value-estimation
benchmark, the bandit and the oracle's verdicts, each condensed into one JSON file under
``docs/results/`` (small enough to commit; every number in them was written by the experiment
that measured it).

``python scripts/choosing.py --repo . --values DIR --bandit DIR --oracle DIR`` calls
``collect`` and then renders the page; a source not given keeps its file.
"""

from __future__ import annotations

import json
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


def values(out: Path, dest: Path) -> None:
    """``advest experiment values``'s folder → ``dest/values.json``: its settings, scores and
    every row (per state; per KAE iteration, sample count and prompt); of an unfinished run,
    the parts finished so far (``values.so_far``)."""
    from advest.experiments import values as benchmark

    done = out / "metrics.json"
    metrics = json.loads(done.read_text()) if done.is_file() else benchmark.so_far(out)
    if "states" not in metrics:
        print(f"{out}: no problem has finished yet; docs/results/values.json is left as it is")
        return
    config = json.loads((out / "config.json").read_text())
    keep = ("model", "data", "data_options", "problems", "group", "states", "mc", "iterations",
            "max_new_tokens", "temperature", "hista_w", "kae_prompts", "kae_train", "kae_lr",
            "kae_lora_r")  # fmt: skip
    record = {"settings": {k: config[k] for k in keep}, **metrics}
    (dest / "values.json").write_text(json.dumps(record, indent=1) + "\n")


def bandit(out: Path, dest: Path, file: str = "bandit.json") -> None:
    """``advest experiment bandit``'s folder → ``dest/bandit.json``: per estimator, the bias
    sweep's fit to its objective's gradient (cosine, fitted scale, tail slope), and the two
    variance sweeps' ratios to EI's (mean, se over seeds) along A and along K."""
    metrics = json.loads((out / "metrics.json").read_text())
    keep = ("seeds", "n", "k", "bias_actions", "bias_batches", "var_batches", "k_sweep_actions",
            "format_weight")  # fmt: skip
    est = {
        name: {key: d[key] for key in ("cos", "fitted_scale", "slope_tail", "scale_divided_out")}
        for name, d in metrics["bias"]["estimators"].items()
    }
    variance = {
        axis: {
            "values": metrics[key]["values"],
            "ratio_to_ei": {
                name: d["ratio_to_ei"]
                for name, d in metrics[key]["estimators"].items()
                if d["ratio_to_ei"] is not None and name != "ei"
            },
        }
        for axis, key in (("actions", "variance_vs_actions"), ("k", "variance_vs_k"))
    }
    settings = {k: metrics["config"][k] for k in keep}
    record = {"settings": settings, "estimators": est, "variance": variance}
    (dest / file).write_text(json.dumps(record, indent=1) + "\n")


def bandit_format(out: Path, dest: Path) -> None:
    """The bandit run with a second "format" reward (``--format_weight``) →
    ``dest/bandit_format.json``, in ``bandit``'s shape."""
    bandit(out, dest, "bandit_format.json")


def oracle(folder: Path, dest: Path) -> None:
    """``advest check NAME --json folder/NAME.json`` files → ``dest/oracle.json``: per
    estimator and property, "yes" when every (dtype, N) the oracle tried says yes, else the
    first other verdict with its evidence, dtype and N."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("schema") != "advest-check":
            raise ValueError(f"{path}: not an `advest check --json` report (schema advest-check)")
        findings = doc["findings"]
        verdicts: dict[str, str] = {}
        for prop in ORACLE_PROPS:
            rows = [f for f in findings if f["prop"] == prop]
            if rows:
                verdicts[prop] = _verdict(rows)
        out[path.stem] = verdicts
    (dest / "oracle.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


def _verdict(rows: list[dict[str, Any]]) -> str:
    """One property's verdict over the (dtype, N) the oracle tried: "yes" when every checked
    one says yes (the N it could not check named after it), else the first other verdict."""
    unchecked = [f for f in rows if str(f["verdict"]).startswith("not checked")]
    checked = [f for f in rows if f not in unchecked]
    bad = [f for f in checked if not str(f["verdict"]).startswith("yes")]
    if bad or not checked:
        f = (bad or unchecked)[0]
        where = ", ".join(str(x) for x in (f["dtype"], f"N={f['n']}" if f["n"] else "") if x)
        return f"{f['verdict']} ({where}: {f['evidence']})" if where else (
            f"{f['verdict']} ({f['evidence']})")  # fmt: skip
    said = _agreed(checked)
    done = sorted({f["n"] for f in checked if f["n"]})
    left = sorted({f["n"] for f in unchecked if f["n"] and f["n"] not in done})
    if not left:
        return said
    if not said.startswith("N="):
        said = f"N={', '.join(map(str, done))}: {said}"
    return f"{said}; N={', '.join(map(str, left))}: not checked ({unchecked[0]['evidence']})"


def _agreed(rows: list[dict[str, Any]]) -> str:
    """Verdicts that all say yes: the one text, or each N's text where they differ (the
    unbiased scale c grows with N)."""
    texts = list(dict.fromkeys(str(f["verdict"]) for f in rows))
    if len(texts) == 1:
        return texts[0]
    by_n = dict.fromkeys((f["n"], str(f["verdict"])) for f in rows)
    return "; ".join(f"N={n}: {v}" for n, v in by_n)


def collect(sources: dict[str, Path | None], dest: Path) -> None:
    """Each given source folder (``values``, ``bandit``, ``bandit_format``, ``oracle``) → its
    file."""
    dest.mkdir(parents=True, exist_ok=True)
    makers = {"values": values, "bandit": bandit, "bandit_format": bandit_format, "oracle": oracle}
    for key, folder in sources.items():
        if folder is not None:
            makers[key](folder, dest)
