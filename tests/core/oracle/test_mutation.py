"""Mutation checks: deliberately wrong fast estimators must make the suite's checks fail.

Each mutant is a known failure mode (spec/maxk.md §Algorithm, spec/group.md §Pitfalls)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
import torch

import advest.fast._maxk_core
import advest.fast._weights
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.oracle.reports.catalogue import CATALOGUE, Row, rows
from tests.checks import assert_matches_reference

G1 = [[Fraction(x) for x in (3, 1, 4, 1, 5)], [Fraction(x) for x in (0, 0, 1, 2, 2)]]


def _suite_detects(row: Row, batch: list[list[Fraction]], ks: list[int]) -> bool:
    try:
        for k in ks:
            assert_matches_reference(row, torch.float64, batch, k)
    except AssertionError:
        return True
    return False


def test_wrong_ei_weight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """γ_q = C(q−1, K−1)/C(N−1, K−1) instead of C(q−1, K−2)/...: wrong already at K = 2."""
    real = fast._weights.weights

    def mutant(n: int, k: int, device: torch.device) -> fast._weights.Weights:
        w = real(n, k, device)
        return w._replace(gamma=w.alpha)

    monkeypatch.setattr(fast._maxk_core, "weights", mutant)
    fast._maxk_core._coefficients_cached.cache_clear()  # the cache holds the real weights
    try:
        # (maxpo is immune by design: γ cancels in EI − b = M⁺ − M⁻.)
        for name in ("ei", "l2o_baseline", "pkpo_sloo_minus_one", "ei_l1o"):
            assert _suite_detects(rows(name)[0], G1, [2, 3]), name
    finally:
        fast._maxk_core._coefficients_cached.cache_clear()  # and must not keep the mutant's


def test_min_rank_tie_handling_is_caught() -> None:
    """Min ranks instead of one stable sort: r = (0, 0, 1), K = 3 gives EI = 0 for the 1."""

    def min_rank_ei(rewards: torch.Tensor, k: int) -> torch.Tensor:
        r = rewards.double()  # [B, G]
        lower = r.unsqueeze(-1) > r.unsqueeze(-2)  # [B, G, G]: r_j < r_i
        min_rank = (r.unsqueeze(-1) > r.unsqueeze(-2)).sum(-1)  # [B, G]: 0-based min rank of j
        gamma = fast._weights.weights(r.shape[1], k, r.device).gamma[min_rank]  # [B, G]
        gaps = (r.unsqueeze(-1) - r.unsqueeze(-2)) * lower  # [B, G, G]: r_i − r_j where r_j < r_i
        return (gaps * gamma.unsqueeze(-2)).sum(-1).to(rewards.dtype)

    row = dataclasses.replace(rows("ei")[0], fast=min_rank_ei)
    assert _suite_detects(row, [[Fraction(0), Fraction(0), Fraction(1)]], [3])


def test_one_pass_variance_with_a_floor_is_caught() -> None:
    """verl's vectorised GRPO: std = sqrt(max(E[r²] − E[r]², 1e-6)) fails on offset rewards."""

    def floored_grpo(rewards: torch.Tensor, *, eps: float = 1e-6, ddof: int = 1) -> torch.Tensor:
        g = rewards.shape[1]
        mean = rewards.mean(-1, keepdim=True)
        var = ((rewards**2).sum(-1, keepdim=True) - g * mean**2) / (g - ddof)
        return (rewards - mean) / (torch.sqrt(torch.clamp(var, min=1e-6)) + eps)

    row = dataclasses.replace(rows("grpo")[0], fast=floored_grpo)
    offset = [[Fraction(1000.0), Fraction(1000.0001), Fraction(1000.0), Fraction(1000.0001)]]
    assert _suite_detects(row, offset, [1])


@pytest.mark.parametrize("scale", [1 + 1e-6, 0.5])
def test_a_scaled_estimator_is_caught(scale: float) -> None:
    """A wrong constant (e.g. a forgotten or extra K/N) is caught by the differential test."""
    original: Callable[..., torch.Tensor] = fast.maxk.canonical
    row = dataclasses.replace(
        next(r for r in CATALOGUE if r.id == "canonical"),
        fast=lambda rewards, k: original(rewards, k) * scale,
    )
    assert _suite_detects(row, G1, [2])


def test_the_unmutated_estimators_pass_the_same_checks() -> None:
    """Control: the checks above fail because of the mutations, not by construction."""
    for name in ("ei", "maxpo", "l2o_baseline", "pkpo_sloo_minus_one", "canonical"):
        assert not _suite_detects(rows(name)[0], G1, [2, 3])
    assert not _suite_detects(rows("ei")[0], [[Fraction(0), Fraction(0), Fraction(1)]], [3])


# --- the survivors file against the measured run (scripts/mutation_campaign.py) ------------------
ROOT = Path(__file__).resolve().parents[3]
SURVIVORS = ROOT / "tests" / "mutation_survivors.md"
RESULTS = ROOT / "scripts" / "mutation_results" / "results.jsonl"
_EQUIVALENT = re.compile(r"^- `(.+?)` — (.+)$")  # what scripts/mutation.py parses
_LISTED = re.compile(r"^[-*] `(.+?)`")  # any entry: equivalent, killed or open


def _current_results() -> list[dict[str, object]]:
    """The latest outcome of each mutant whose module is unchanged since it ran (the campaign
    records a hash of the module's source with each outcome)."""
    latest: dict[str, dict[str, object]] = {}
    for line in RESULTS.read_text().splitlines() if RESULTS.exists() else []:
        row = json.loads(line)
        if not row.get("baseline"):
            latest[row["key"]] = row
    return [
        row
        for key, row in latest.items()
        if hashlib.sha256((ROOT / key.split(" | ")[0]).read_bytes()).hexdigest()[:16] == row["sha"]
    ]


def test_every_surviving_mutant_of_the_measured_run_is_argued_in_the_survivors_file() -> None:
    """A survivor of the committed run is either argued equivalent, or listed as killed or open:
    the score's denominator never leaves out a mutant silently."""
    listed = {
        m.group(1) for line in SURVIVORS.read_text().splitlines() if (m := _LISTED.match(line))
    }
    survivors = [str(r["key"]) for r in _current_results() if r["outcome"] == "survived"]
    assert [key for key in survivors if key not in listed] == []


def test_each_equivalent_survivor_names_a_line_its_module_still_has() -> None:
    """An argument about a line that has since changed argues nothing: each equivalent entry's
    line (before the mutation) is still, verbatim, a line of its module."""
    entries = [
        m.groups() for line in SURVIVORS.read_text().splitlines() if (m := _EQUIVALENT.match(line))
    ]
    assert entries
    for key, reason in entries:
        module, _operator, change = key.split(" | ", 2)
        lines = {line.strip() for line in (ROOT / module).read_text().splitlines()}
        # the line itself may hold " -> " (a return annotation): try each split
        assert any(change.startswith(line + " -> ") for line in lines if line), key
        assert len(reason) > 20, key


def test_the_mutation_map_runs_each_familys_own_tests_on_its_modules() -> None:
    """The mutation benchmark's map (scripts/mutation.toml, with its fall-back by name) against
    the registry: the mutants of fast/<family>.py and reference/<family>.py run the family's
    own test file, wherever one exists, so a new family needs no entry in the map."""
    import importlib
    import sys
    from pathlib import Path

    from advest.fast import registry

    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "scripts"))
    try:
        mutation = importlib.import_module("mutation")  # the script, as its sibling imports it
    finally:
        sys.path.remove(str(root / "scripts"))
    config = mutation._config()
    checked = 0
    for family in registry.families():
        own = f"tests/core/estimators/test_{family}.py"
        if not (root / own).exists():
            continue
        for package in ("fast", "reference"):
            assert own in mutation._tests(config, f"{package}/{family}.py"), (package, family)
            checked += 1
    assert checked >= 12
    assert "tests/core/estimators/test_throwaway.py" not in mutation._tests(
        config, "fast/throwaway.py"
    )
