"""The grid designs' declarations (``docs/results/designs/NAME.toml``), each committed before the
runs it declares (STYLE.md rule 32): the question, the arms with K and G, the seeds, the
held-out set, the primary comparison, the family of comparisons and its correction, the
margins of any equivalence test, and the date. A declaration written after its data were seen
says so (``seen_before``, ``kind``) and is ``exploratory`` until a replication
(``replicated_by``) runs. Designs sharing a ``series`` are one set of runs at several step
counts (or one sweep), and the page shows them as one design.

The family of comparisons that the page corrects is read from the declaration: every arm in
``compared`` minus ``reference`` at every pass@k in ``ks``; ``stats.corrected`` applies
Holm's correction to it. The arms a declaration picks from, each an estimator's settings, are
``ARMS``: the first three are every design's own."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from ..stats import cell
from .stats import compare, corrected

REQUIRED = (
    "name", "kind", "declared", "question", "arms", "K", "G", "learning_rate",
    "learning_rate_tuned", "seeds", "held_out", "primary_comparison", "reference", "compared",
    "ks", "correction", "equivalence_margins", "seen_before", "exploratory",
)  # fmt: skip
"""What every grid design's declaration states (a pilot compares nothing and is not a grid
design of the page: it needs only the fields a pilot has)."""
PILOT = ("name", "kind", "declared", "question", "arms", "K", "G", "learning_rate",
         "learning_rate_tuned", "seeds", "held_out", "primary_comparison", "correction",
         "equivalence_margins")  # fmt: skip

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"estimator": "grpo"},
    "maxpo": {"estimator": "maxpo", "k": 4},
    "pkpo_sloo": {"estimator": "pkpo_sloo", "k": 4},
    "chen_passk": {"estimator": "chen_passk", "k": 4},
    "kae": {"estimator": "kae"},
    "rloo": {"estimator": "rloo"},
    "maxpo_k8": {"estimator": "maxpo", "k": 8, "group_size": 16},
    "pkpo_sloo_k8": {"estimator": "pkpo_sloo", "k": 8, "group_size": 16},
    # dynamic sampling: grpo on groups with signal, drawn until the step has them
    "grpo_filter": {"estimator": "grpo", "filter_groups": True},
}
"""Arm → estimator settings. The first three are the design; the others run as the budget
allows (``--arms``), in the order given."""
DESIGN_ARMS = tuple(ARMS)[:3]
"""The design's arms; others count as planned once a run of theirs exists."""


class DeclarationError(ValueError):
    """A declaration that lacks a field, or names another design than its file."""


def load(folder: Path) -> dict[str, dict[str, Any]]:
    """name → declaration of every ``*.toml`` in ``folder`` (absent folder: none). Raises
    ``DeclarationError`` naming the file and the missing fields."""
    out: dict[str, dict[str, Any]] = {}
    raw = {p: tomllib.loads(p.read_text()) for p in sorted(folder.glob("*.toml"))
           if folder.is_dir()}  # fmt: skip
    for path, d in raw.items():
        if "same_as" in d:  # the same declared design run again elsewhere: its fields, but for
            # the few that say when and where this copy was written
            base = next((b for b in raw.values() if b.get("name") == d["same_as"]), None)
            if base is None or "same_as" in base:
                raise DeclarationError(f"{path.name}: same_as names no declaration of its own "
                                       f"({d['same_as']!r})")  # fmt: skip
            d = {**base, **d}
        need = PILOT if d.get("kind") == "pilot" else REQUIRED
        missing = [f for f in need if f not in d]
        if missing:
            raise DeclarationError(f"{path.name} does not state {', '.join(missing)}")
        if d["name"] != path.stem:
            raise DeclarationError(f"{path.name} declares {d['name']!r}; name it {path.stem}")
        out[d["name"]] = d
    return out


def family(d: dict[str, Any], arms: set[str]) -> list[tuple[str, int]]:
    """The declared family: (arm, k) for every compared arm that has runs, every declared k."""
    return [(a, int(k)) for a in d["compared"] if a in arms for k in d["ks"]]


def block(d: dict[str, Any]) -> list[str]:
    """The declaration as the page prints it beside the results."""
    tuned = "not tuned for any arm" if not d["learning_rate_tuned"] else "tuned"
    status = ("**exploratory** (chosen after data were seen) until replicated"
              + (f" by `{d['replicated_by']}`" if d.get("replicated_by") else "")
              if d["exploratory"] else f"`{d['same_as']}`'s declaration, made before its "
              "runs, run again on another device" if d.get("same_as")
              else "declared before its runs")  # fmt: skip
    return [
        f"Declared ({d['declared']}; {status}; `docs/results/designs/{d['name']}.toml`):",
        "",
        f"* **Question**: {d['question']}",
        f"* **Arms**: {', '.join(d['arms'])}; K = {d['K']} and G = {d['G']} unless named; "
        f"learning rate {d['learning_rate']}, {tuned}.",
        f"* **Seeds**: {d['seeds']}. **Held-out set**: {d['held_out']}.",
        f"* **Primary comparison**: {d['primary_comparison']}. **Family**: every arm of "
        f"{', '.join(f'`{a}`' for a in d['compared'])} minus `{d['reference']}` at "
        f"{', '.join(f'pass@{k}' for k in d['ks'])}; **correction**: {d['correction']}.",
        f"* **Equivalence margins**: {d['equivalence_margins']}.",
        f"* **Seen before it was declared**: {d['seen_before']}. ({d['kind']}.)",
        "",
    ]


def same_settings(grid: dict[str, Any], declared: dict[str, dict[str, Any]]) -> None:
    """Raises ``DeclarationError`` where a design declared ``same_as`` another ran other
    settings or prompts than that design's runs (``design.json``)."""
    for name, d in declared.items():
        base = grid.get(d.get("same_as", ""))
        if name in grid and base is not None:
            keys = ("design", "train", "held_out")
            if any(grid[name][k] != base[k] for k in keys):
                raise DeclarationError(f"{name}: declared same_as {d['same_as']!r} but its "
                                       "design.json differs from that design's")  # fmt: skip


def planned(d: dict[str, Any] | None) -> tuple[list[str], int] | None:
    """(arms, seeds per arm) a declaration plans: the reference and every compared arm, and the
    seeds its ``seeds`` span ("200-204 (fresh)": 5); None without a declaration or a span."""
    span = re.match(r"(\d+)-(\d+)", str((d or {}).get("seeds", "")))
    if not d or not span:
        return None
    return [d["reference"], *d["compared"]], int(span[2]) - int(span[1]) + 1


def secondary(runs: dict[str, dict[int, Any]], d: dict[str, Any] | None) -> list[str]:
    """The declaration's secondary family (``secondary_pairs``: arm minus arm at pass@
    ``secondary_k``), Holm-corrected over it, as one bullet; none where it declares none."""
    pairs = [(a, b) for a, b in (d or {}).get("secondary_pairs", []) if a in runs and b in runs]
    if not d or not pairs:
        return []
    k = int(d["secondary_k"])
    fixed = corrected({(a, b): compare(runs, a, k, ref=b) for a, b in pairs})
    said = [f"`{a}` − `{b}` " + (f"{cell((c['mean'], c['lo'], c['hi']), '+')} (Holm p "
                                 f"{c['p_holm']:.4f}): {c['verdict']}" if "mean" in c
                                 else c["verdict"]) for (a, b), c in fixed.items()]  # fmt: skip
    return [f"* **Secondary comparison** (declared: {d['secondary']}): at pass@{k}, "
            + "; ".join(said) + ".", ""]  # fmt: skip


def undeclared(grid: dict[str, Any], declared: dict[str, dict[str, Any]]) -> list[str]:
    """The grid's designs (result folders) without a declaration."""
    return sorted(n for n in grid if n not in declared)
