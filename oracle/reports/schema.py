"""The versioned JSON document of ``advest check --json`` (``document``), its reader
(``load``) and the verdict-by-verdict difference of two documents (``compare``), behind
``advest check --compare OLD.json NEW.json``. docs/testing.md describes the schema.

A finding is keyed by (property, dtype, N): the same key in two documents is the same question
asked of two versions of an estimator, so a changed verdict under one key is a changed answer."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..conventions.harness import OracleError
from ..properties.findings import Finding

SCHEMA = "advest-check"
VERSION = 1
"""Raised when a field is removed or changes meaning; adding a field keeps the version."""

Key = tuple[str, str, int | None]


def document(findings: list[Finding], **context: Any) -> dict[str, Any]:
    """The JSON object for ``findings``: ``schema``, ``version``, the run's ``context`` (target,
    family, K, convention) and ``findings``, each with prop, verdict, evidence, dtype, n, data,
    searched (the inputs the search drew; 0: explicit) and counterexample (a searched "no": its
    shrunk input, expected, measured; else null)."""
    return {
        "schema": SCHEMA,
        "version": VERSION,
        **context,
        "findings": [asdict(f) for f in findings],
    }


def load(path: str | Path) -> dict[str, Any]:
    """The document in ``path``; OracleError naming the file and what is wrong with it."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise OracleError(f"{path}: cannot read an advest check report: {error}") from error
    if isinstance(doc, list):  # the unversioned list that --json wrote before schema 1
        doc = {"schema": SCHEMA, "version": 0, "findings": doc}
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise OracleError(f'{path}: not an advest check report (no "schema": "{SCHEMA}")')
    if not isinstance(doc.get("version"), int) or doc["version"] > VERSION:
        raise OracleError(
            f"{path}: schema version {doc.get('version')!r}; this advest reads versions "
            f"0 to {VERSION}: upgrade advest"
        )
    for i, f in enumerate(doc.get("findings", [])):
        if not isinstance(f, dict) or not {"prop", "verdict"} <= f.keys():
            raise OracleError(f'{path}: findings[{i}] lacks "prop" or "verdict"')
    return doc


def _verdicts(doc: dict[str, Any]) -> dict[Key, str]:
    """{key: verdict}; a searched finding is keyed apart from the explicit ones of its property
    ("centred (searched)"), and a report written before the search has none."""
    return {
        (
            f["prop"] + (" (searched)" if f.get("searched") else ""),
            f.get("dtype", ""),
            f.get("n"),
        ): f["verdict"]
        for f in doc["findings"]
    }


def _where(key: Key) -> str:
    prop, dtype, n = key
    at = ", ".join(x for x in (dtype, "" if n is None else f"N={n}") if x)
    return f"{prop} [{at}]" if at else prop


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per verdict that differs between ``old`` and ``new`` (changed, gone, added), in
    the order of the old report then the new one; empty when every verdict is the same."""
    before, after = _verdicts(old), _verdicts(new)
    lines = []
    for key, verdict in before.items():
        if key not in after:
            lines.append(f"{_where(key)}: {verdict!r} -> (not checked)")
        elif after[key] != verdict:
            lines.append(f"{_where(key)}: {verdict!r} -> {after[key]!r}")
    lines += [f"{_where(k)}: (not checked) -> {v!r}" for k, v in after.items() if k not in before]
    return lines
