"""The cost-growth experiment's report (``advest experiment cost``): the table of each
measured estimator's fitted time and memory slopes beside its registry entry's stated order,
the collectives' table, and the plot against G; the repository's ``docs/cost.md`` and
``docs/cost.png`` are this report of ``docs/results/cost.json`` (``scripts/cost.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advest.fast import registry

from . import fit as cost_fit
from . import measure as cost_measure
from .fit import Fit

Results = dict[str, Any]
"""``{"devices": {device: {"environment": {...}, "estimators": {name: {axis: rows}}}}}``."""
AXES = ("G", "K", "B", "T")


def device_fits(section: Results) -> list[Fit]:
    """The fits of one device's measurements against the registry's stated orders (an
    estimator measured but no longer registered is left out)."""
    costs = {e.name: e.cost for e in registry.entries()}
    measured = {n: v for n, v in section["estimators"].items() if n in costs}
    return cost_fit.fits(measured, costs)


def _cell(f: Fit | None) -> str:
    if f is None:
        return "—"
    over = f.exceeds()
    t = f"**{f.time:.2f}**" if "time" in over else f"{f.time:.2f}"
    m = f"**{f.memory:.2f}**" if "memory" in over else f"{f.memory:.2f}"
    return f"{t} / {m} ({f.stated:.2f})" + (" ✗" if over else "")


def table(section: Results) -> list[str]:
    """One row per measured estimator: its stated order, each axis's fitted time / memory
    slopes with the stated slope, and the best-fitting model of its time in G."""
    by = {(f.name, f.axis): f for f in device_fits(section)}
    head = "| estimator | kind | stated | " + " | ".join(AXES) + " | time in G, best model |"
    lines = [head, "|---" * (len(AXES) + 4) + "|"]
    for e in registry.entries():
        if e.name not in section["estimators"]:
            lines.append(f"| `{e.name}` | {e.kind} | O({e.cost}) | not measured |" + " |" * 4)
            continue
        cells = [_cell(by.get((e.name, a))) for a in AXES]
        best = by[(e.name, "G")].model
        lines.append(f"| `{e.name}` | {e.kind} | O({e.cost}) | {' | '.join(cells)} | {best} |")
    return lines


def _sizes_text(device: str, section: Results) -> str:
    """Each axis's sizes and the sizes held fixed along it, as measured: read from the rows of
    the estimator with the most axes in each group of kinds."""
    groups = (
        ("outcome kinds", cost_measure.OUTCOME),
        ("token and episode kinds", ("token", "episode")),
    )
    parts = []
    for label, kinds in groups:
        found = [
            section["estimators"][e.name]
            for e in registry.entries()
            if e.kind in kinds and e.name in section["estimators"]
        ]
        if not found:
            continue
        widest = max(found, key=len)
        axes = []
        for axis, rows in widest.items():
            xs = [r["sizes"][axis] for r in rows]
            fixed = ", ".join(
                f"{k} = {rows[-1]['sizes'][k]}" for k in widest if k not in (axis, "B")
            )
            axes.append(f"{axis} from {min(xs)} to {max(xs)}" + (f" ({fixed})" if fixed else ""))
        parts.append(f"{label}: " + "; ".join(axes))
    kind = "cuda" if device.startswith("cuda") else "cpu"
    b_max = " or ".join(str(v) for v in cost_measure.B_MAX[kind].values())
    parts.append(
        f"B along the other axes: per estimator, the largest power of two up to {b_max} (outcome "
        "or token kinds) at which its stated order at the axis's largest size stays within "
        f"2^{cost_measure.WORK[kind].bit_length() - 1} (every point's sizes are in the results "
        "file)"
    )
    return ". ".join(parts)


INTRO = """# Cost growth

How the time and the peak memory of one call of every registered estimator grow with its sizes,
beside the order its registry entry states (`cost=` in `fast/registry.py`, the Cost table of its
spec page, the *cost* column of `advest list`). Each estimator is called as a trainer calls it
(`fast.calling`) on synthetic inputs, one axis at a time, the other sizes held fixed. Time is the
median of repeated calls after a warm-up; on CPU it is this process's CPU time with one torch
thread, with freed memory kept in the process as a caching allocator keeps it (so that glibc's
handing back of large buffers, a step at one size, is not read as growth). Peak memory is the
most bytes one call holds at once through torch's allocator, above what it held before: on CPU
from the profiler's allocation and free events (tensors and operators' buffers; not Python
objects), on CUDA `torch.cuda.max_memory_allocated`.

Each cell reads *time slope / memory slope (stated slope)*: the Theil–Sen slope of log cost
against log size (the median of the slopes between every two sizes) over the sizes within a
factor {span} of the largest, and the same slope of the stated order at the same sizes (so
G log G counts as about 1.2 over G = 64…1024; a size the order does not name, 0). A slope above
the stated one by more than {margin} is **bold** and marked ✗:
`tests/core/experiments/test_cost.py` fails on it. Memory is held to the time's order. The last
column is the growth of the time in G that fits best among 1, G, G log G, G², G² log G and G³
(a constant: the call's fixed cost dominates at these sizes)."""


def page(results: Results, ranks: dict[str, Any] | None, command: str) -> str:
    """The page (``docs/cost.md``), from the results, the collectives' results (``ranks``: None
    before a measurement) and the registry's stated orders; ``command`` regenerates it."""
    out = [INTRO.format(span=cost_fit.SPAN, margin=cost_fit.MARGIN), ""]
    if not results["devices"]:
        out += ["No measurements yet.", ""]
    for device, section in results["devices"].items():
        env = section["environment"]
        setting = (
            f"torch {env['torch']}, {env['threads']} thread, {env['clock']}, allocator "
            f'{env["malloc"]}, sizes "{env["scale"]}", load average {env.get("load")} when it '
            f"began. {_sizes_text(device, section)}."
        )
        out += [f"## {device}: {env['name']}", "", setting, "", *table(section), ""]
        over = cost_fit.exceeding(device_fits(section))
        out += ["Growing faster than stated: " + ("none." if not over else ""), ""]
        out += [f"* {line}" for line in over] + ([""] if over else [])
    out += ranks_section(ranks, f"{command} --ranks")
    out += [
        "![time and peak memory against G](cost.png)",
        "",
        f"Regenerate: `{command}` (all estimators, a few minutes on 2 cores; `--only NAME ...` "
        "re-measures some and keeps the rest).",
        "",
    ]
    return "\n".join(out)


def plot(results: Results, path: Path) -> None:
    """Time and peak memory against G, one row of panels per device: the outcome kinds' time,
    the token kinds' time, everyone's memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = list(results["devices"].items())
    fig, grid = plt.subplots(
        max(1, len(devices)), 3, figsize=(16, 5 * max(1, len(devices))), squeeze=False
    )
    kinds = {e.name: e.kind for e in registry.entries()}
    for row, (device, section) in zip(grid, devices, strict=False):
        for i, (name, by_axis) in enumerate(section["estimators"].items()):
            rows = by_axis.get("G", [])
            xs = [r["sizes"]["G"] for r in rows]
            outcome = kinds.get(name, "sequence") in cost_measure.OUTCOME
            # ten colours, so a line style per ten estimators tells them apart
            line = ("-", "--", ":", "-.")[i // 10 % 4]
            style = {"linewidth": 1, "marker": ".", "label": name, "linestyle": line}
            row[0 if outcome else 1].loglog(xs, [r["seconds"] for r in rows], **style)
            row[2].loglog(xs, [max(r["peak_bytes"], 1) for r in rows], **style)
        titles = ("time, outcome kinds", "time, token and episode kinds", "peak memory")
        for ax, title in zip(row, titles, strict=True):
            ax.set_title(f"{device}: {title}")
            ax.set_xlabel("G")
            ax.set_ylabel("bytes" if "memory" in title else "seconds per call")
            ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def ranks_section(found: dict[str, Any] | None, command: str) -> list[str]:
    """The page's lines on the collectives' cost (none before a measurement)."""
    if found is None:
        return []
    s, worlds = found["setting"], list(found["worlds"])
    head = ["estimator", "collectives per call", "one process, whole batch"]
    for w in worlds:
        head += [f"N = {w}: share alone", f"N = {w}: with collective", f"N = {w}: added"]
    lines = [
        "## Collectives under data parallelism",
        "",
        f"A batch of B = {s['B']} prompts × G = {s['G']} samples split over N {s['backend']} "
        f"processes on the CPU ({s['cores']} cores, load average {s.get('load')} when it began, "
        f"torch {s['torch']}, one thread each); "
        f"milliseconds per call, the median of {s['repeats']}. *Share alone*: the rank's B/N "
        "prompts with no process group (what each rank computed before the ranks shared their "
        "statistics, wrong for these estimators); *with collective*: the same call over the "
        "group, the slowest rank; "
        "*added*: the difference, the price of the right answer. KAE and `by_group` with split "
        "groups gather the rows and compute the whole batch on every rank; the others all-reduce "
        "a few float64 numbers per collective. The last row is one collective alone, right after "
        "a barrier: the added time beyond collectives × that is each collective waiting for the "
        "slowest rank's compute before it, which on cores shared with other jobs (the load "
        "average) is most of it. A group-local estimator is handed no group and pays nothing. "
        "Regenerate: "
        f"`{command}`.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for case, ms in found["whole_ms"].items():
        count = found["worlds"][worlds[0]][case].get("collectives", "")
        cells = [f"`{case}`", str(count), f"{ms:.3f}"]
        for w in worlds:
            r = found["worlds"][w][case]
            added = r["collective_ms"] - r["share_ms"]
            cells += [f"{r['share_ms']:.3f}", f"{r['collective_ms']:.3f}", f"{added:+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]
