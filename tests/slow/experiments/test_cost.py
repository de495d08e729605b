"""The slow tier of tests/core/experiments/test_cost.py: the cost-growth measurement itself, at the
"quick" sizes, along G, for every registered estimator and a planted one that pairs every two
samples of a group (O(B·G²)) while stating maxpo's B·G log G: the planted one is flagged, the
registered ones are not. Run in a fresh process, as the command line runs it (its allocator
setting is process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor

from advest.experiments import cost
from advest.experiments.cost import fit as cost_fit
from advest.experiments.cost import measure as cost_measure
from advest.fast import registry
from advest.fast.maxk import maxpo

ROOT = Path(__file__).resolve().parents[3]


def planted_pairwise(rewards: Tensor, k: int) -> Tensor:
    """maxpo, after a sigmoid of the difference of every two samples of each group, 16 groups at
    a time: rewards [B, G] -> [B, G] in O(B·G²) time and O(G²) memory."""
    for chunk in torch.split(rewards, 16):
        torch.sigmoid(chunk[:, :, None] - chunk[:, None, :]).sum(-1)
    return maxpo(rewards, k)


def _planted() -> registry.Entry:
    stated = registry.entry("maxpo")
    return registry.Entry("planted_pairwise", "sequence", planted_pairwise, stated.inputs,
                          {}, k_range=stated.k_range, cost=stated.cost)  # fmt: skip


def measure(out: str) -> None:
    """Measure along G (quick sizes) and write the fits to ``out`` as JSON: run in a child."""
    cost.retain()
    entries = [_planted(), *registry.entries()]
    found = cost_measure.measure(entries, scale="quick", only_axes=("G",))
    Path(out).with_suffix(".rows.json").write_text(json.dumps(found["planted_pairwise"]["G"]))
    fits = cost_fit.fits(found, {e.name: e.cost for e in entries})
    Path(out).write_text(json.dumps([asdict(f) for f in fits]))


def test_a_planted_quadratic_estimator_is_flagged_and_the_registered_ones_are_not(
    tmp_path: Path,
) -> None:
    out = tmp_path / "fits.json"
    code = f"from tests.slow.experiments.test_cost import measure; measure({str(out)!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fits = {f["name"]: cost_fit.Fit(**f) for f in json.loads(out.read_text())}
    for f in fits.values():  # printed, for the log: the slopes are not asserted one by one
        print(f"{f.name:24} time {f.time:5.2f}  memory {f.memory:5.2f}  stated {f.stated:5.2f}")
    assert set(fits) == {"planted_pairwise", *registry.names()}
    assert all(f.assessed for f in fits.values())
    assert fits["planted_pairwise"].exceeds() == ["time", "memory"]
    assert cost_fit.exceeding([f for n, f in fits.items() if n != "planted_pairwise"]) == []
    # the flag is about the statement: the same measurement stated as B·G² passes
    rows = json.loads(out.with_suffix(".rows.json").read_text())
    assert cost_fit.fit("planted_pairwise", "G", rows, "B·G²").exceeds() == []
