"""The cost-growth table: how the time and peak memory of one call of every registered estimator
grow with G, K, B and T, beside the order its registry entry states (``fast/registry.py``,
``cost=``; ``spec.cost``). Measured by ``cost_measure``, fitted by ``cost_fit``; the raw numbers
go to ``docs/results/cost.json`` (one section per device), and the page ``docs/cost.md`` and its
plot ``docs/cost.png`` are rendered from that file and the registry.
``tests/core/experiments/test_cost.py`` fails when the page differs from what this module renders
or when a committed measurement grows faster than its estimator's stated order.

    python -m advest.experiments.cost                  # measure on CPU (a few minutes), render
    python -m advest.experiments.cost --only ktae      # re-measure one estimator, merge, render
    python -m advest.experiments.cost --render         # re-render from the results file only
    python -m advest.experiments.cost --device cuda --out DIR   # a GPU's results, to DIR
    python -m advest.experiments.cost --collect DIR/cost.json   # merge them here, render
    python -m advest.experiments.cost --ranks          # the collectives' cost (cost_ranks), render
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

import torch

from advest.experiments import cost_fit, cost_measure, cost_ranks
from advest.fast import registry

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "cost.json"
PAGE, PLOT = ROOT / "docs" / "cost.md", ROOT / "docs" / "cost.png"
COMMAND = "python -m advest.experiments.cost"
AXES = ("G", "K", "B", "T")

Results = dict[str, Any]
"""``{"devices": {device: {"environment": {...}, "estimators": {name: {axis: rows}}}}}``."""


def load(path: Path = RESULTS) -> Results:
    return json.loads(path.read_text()) if path.is_file() else {"devices": {}}


def environment(device: str, scale: str, malloc: str) -> dict[str, Any]:
    """What a measurement ran on: the device's name, torch, the clock and the allocator."""
    if device.startswith("cuda"):
        name, clock = torch.cuda.get_device_name(torch.device(device)), "wall time, synchronised"
    else:
        name, clock = f"{_cpu_model()}, {os.cpu_count()} cores", "process CPU time"
    return {
        "device": device,
        "name": name,
        "torch": torch.__version__,
        "threads": 1,
        "clock": clock,
        "malloc": malloc,
        "scale": scale,
        # other jobs on the machine: CPU time leaves them out, the caches they share do not
        "load": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None,
    }


def _cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
    return names[0] if names else platform.machine()


def retain() -> str:
    """Keep freed memory in the process (glibc), as a caching allocator does, so that a buffer
    above glibc's mmap threshold is not page-faulted in again on every call: that is a step at
    one size, not growth (``oracle.bench.MALLOC``). Process-wide: the command line's choice."""
    from advest.oracle.bench import retain_freed_memory

    try:
        retain_freed_memory()
    except ValueError:
        return "default"
    return "retain"


def run(device: str, scale: str, names: list[str] | None, malloc: str) -> Results:
    """Measure ``names`` (every registered estimator when None) on ``device``: one device's
    section of the results."""
    entries = [registry.entry(n) for n in names] if names else registry.entries()
    found = cost_measure.measure(entries, device=device, scale=scale)
    return {"environment": environment(device, scale, malloc), "estimators": found}


def dump(results: Results) -> str:
    """The results file's text: one line per measured point, so that a re-measurement's diff
    reads row by row."""

    def block(value: Any, depth: int) -> str:
        if depth == 6 or not isinstance(value, (dict, list)) or not value:
            return json.dumps(value, ensure_ascii=False)
        pad, inner = " " * depth, " " * (depth + 1)
        if isinstance(value, list):
            items = [inner + block(v, depth + 1) for v in value]
            return "[\n" + ",\n".join(items) + f"\n{pad}]"
        pairs = [f"{inner}{json.dumps(k)}: {block(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(pairs) + f"\n{pad}}}"

    return block(results, 0) + "\n"


def merge(into: Results, device: str, section: Results) -> Results:
    """``into`` with ``section``'s estimators replacing (or joining) that device's."""
    old = into["devices"].get(device, {"estimators": {}})
    estimators = {**old["estimators"], **section["estimators"]}
    devices = {
        **into["devices"],
        device: {**section, "estimators": dict(sorted(estimators.items()))},
    }
    return {"devices": dict(sorted(devices.items()))}


def device_fits(section: Results) -> list[cost_fit.Fit]:
    """The fits of one device's measurements against the registry's stated orders (an
    estimator measured but no longer registered is left out)."""
    costs = {e.name: e.cost for e in registry.entries()}
    measured = {n: v for n, v in section["estimators"].items() if n in costs}
    return cost_fit.fits(measured, costs)


def _cell(f: cost_fit.Fit | None) -> str:
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


def page(results: Results) -> str:
    """docs/cost.md, from the results and the registry's stated orders."""
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
    out += cost_ranks.section(cost_ranks.load())
    out += [
        "![time and peak memory against G](cost.png)",
        "",
        f"Regenerate: `{COMMAND}` (all estimators, a few minutes on 2 cores; `--only NAME ...` "
        "re-measures some and keeps the rest; `--render` only rewrites this page from "
        "`docs/results/cost.json`).",
        "",
    ]
    return "\n".join(out)


def plot(results: Results, path: Path = PLOT) -> None:
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        COMMAND, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument(
        "--scale",
        choices=sorted(cost_measure.SCALES),
        default="full",
        help="the sizes: full (the docs' table), quick, tiny (runs the code only)",
    )
    p.add_argument("--quick", action="store_true", help="the same as --scale quick")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these estimators")
    p.add_argument(
        "--out", type=Path, default=None, help="write DIR/cost.json only (the docs are left alone)"
    )
    p.add_argument(
        "--collect",
        type=Path,
        default=None,
        help="merge a results file written with --out into docs/results/cost.json",
    )
    p.add_argument("--render", action="store_true", help="only re-render the page and plot")
    p.add_argument("--ranks", action="store_true", help="measure the collectives' cost only")
    a = p.parse_args(argv)
    results = load()
    if a.ranks:
        cost_ranks.measure_and_save()
    elif a.collect:
        for device, section in load(a.collect)["devices"].items():
            results = merge(results, device, section)
    elif not a.render:
        section = run(a.device, "quick" if a.quick else a.scale, a.only, retain())
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            mine = merge({"devices": {}}, a.device, section)
            (a.out / "cost.json").write_text(dump(mine))
            for line in cost_fit.exceeding(device_fits(section)):
                print(f"exceeds: {line}")
            return 0
        results = merge(results, a.device, section)
    RESULTS.write_text(dump(results))
    PAGE.write_text(page(results))
    plot(results)
    print(f"wrote {RESULTS}, {PAGE} and {PLOT}")
    for device, section in results["devices"].items():
        for line in cost_fit.exceeding(device_fits(section)):
            print(f"{device}: exceeds: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
