"""``advest experiment cost``: how the time and peak memory of one call of every registered
estimator grow with G, K, B and T, beside the order its registry entry states
(``fast/registry.py``, ``cost=``; ``spec.cost``). Measured by ``measure``, fitted by ``fit``,
reported by ``report``: ``OUT/cost.json`` (the raw numbers, one section per device), with
``--ranks`` ``OUT/cost_ranks.json`` (the collectives' cost, ``ranks``), and the page
``OUT/cost.md`` with its plot ``OUT/cost.png``. The repository's ``docs/cost.md`` is this report
of ``docs/results/cost.json``, which ``scripts/cost.py`` merges measurements into;
``tests/core/experiments/test_cost.py`` fails when a committed measurement grows faster than its
estimator's stated order.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import torch

from advest.fast import registry

from . import fit as cost_fit
from . import measure as cost_measure
from . import ranks as cost_ranks
from .report import Results, device_fits, page, plot

COMMAND = "advest experiment cost"


def load(path: Path) -> Results:
    """A results file (absent: no device measured)."""
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
    one size, not growth (``bench.MALLOC``). Process-wide: the command line's choice."""
    from advest.experiments.cost.bench import retain_freed_memory

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


def parser() -> Any:
    from advest.parsing import new_parser, switch

    p = new_parser("advest experiment cost", __doc__ or "")
    p.add_argument("--device", type=str, default="cpu", help="cpu or cuda")
    p.add_argument(
        "--scale",
        type=str,
        choices=sorted(cost_measure.SCALES),
        default="full",
        help="the sizes: full (the docs' table), quick, tiny (runs the code only)",
    )
    switch(p, "quick", False, "the same as --scale quick")
    p.add_argument("--only", type=str, nargs="+", default=None, help="these estimators")
    switch(p, "ranks", False, "measure the collectives' cost too (about a minute)")
    p.add_argument("--out", type=str, default="runs/cost", help="the results and the page")
    return p


def main(argv: list[str]) -> int:
    """Measure into ``OUT``; the page and plot are rendered from everything ``OUT`` holds (an
    earlier measurement of other estimators or another device is kept)."""
    a = parser().parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    section = run(a.device, "quick" if a.quick else a.scale, a.only, retain())
    results = merge(load(out / "cost.json"), a.device, section)
    (out / "cost.json").write_text(dump(results))
    if a.ranks:
        (out / "cost_ranks.json").write_text(json.dumps(cost_ranks.measure(), indent=1) + "\n")
    write(results, out)
    for line in cost_fit.exceeding(device_fits(section)):
        print(f"exceeds: {line}")
    return 0


def write(results: Results, folder: Path, command: str = COMMAND) -> None:
    """``folder/cost.md`` and ``folder/cost.png`` from ``results`` and ``folder``'s
    ``cost_ranks.json`` (if any)."""
    ranks = folder / "cost_ranks.json"
    found = json.loads(ranks.read_text()) if ranks.is_file() else None
    (folder / "cost.md").write_text(page(results, found, command))
    plot(results, folder / "cost.png")


def run_bench(ns: Any) -> int:
    """``advest bench``: the sequence-level estimator benchmark (``bench.command``), then the
    token-level one against the trainer's forward pass (``tokens.run``)."""
    from . import bench as sequences
    from .tokens import run as run_tokens

    code = sequences.command(ns)
    run_tokens(T=64 if ns.quick else 256, repeats=3 if ns.quick else 5)
    return code
