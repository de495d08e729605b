"""The cost-growth table (docs/cost.md): the page is what ``experiments/cost/report.py`` renders
(``scripts/cost.py``) from the committed measurements (``docs/results/cost.json``) and the
registry, every registered estimator is measured along each of its axes, and none grows faster
than the order its registry entry states. Nothing here times anything: the committed numbers
are fitted, and a planted faster growth in a copy of them is flagged (the slow tier measures a
planted O(G²) estimator)."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest

from advest.experiments import cost
from advest.experiments.cost import fit as cost_fit
from advest.experiments.cost import measure as cost_measure
from advest.experiments.cost import report
from advest.fast import registry

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import cost as cost_script  # noqa: E402


@pytest.fixture(scope="module")
def results() -> report.Results:
    return cost.load(ROOT / "docs" / "results" / "cost.json")


def test_the_page_is_what_the_results_file_renders(results: report.Results) -> None:
    assert (ROOT / "docs" / "cost.md").read_text() == cost_script.page(ROOT), (
        f"regenerate: {cost_script.COMMAND} --render"
    )


def test_a_changed_measurement_changes_the_page(results: report.Results) -> None:
    """The drift test can fail: grpo's times growing by another √G move its slope on the page."""
    moved = copy.deepcopy(results)
    for r in moved["devices"]["cpu"]["estimators"]["grpo"]["G"]:
        r["seconds"] *= r["sizes"]["G"] ** 0.5
    assert report.page(moved, None, "") != report.page(results, None, "")


def test_every_registered_estimator_is_measured_along_each_of_its_axes(
    results: report.Results,
) -> None:
    """On the CPU, at the sizes of the docs' table: a new estimator fails here until
    ``python scripts/cost.py --repo . --only NAME`` has measured it."""
    section = results["devices"]["cpu"]
    assert section["environment"]["scale"] == "full"
    assert set(section["estimators"]) == set(registry.names())
    for e in registry.entries():
        measured = section["estimators"][e.name]
        assert list(measured) == cost_measure.axes(e), e.name
        for axis, rows in measured.items():
            assert [r["sizes"] for r in rows] == cost_measure.points(e, axis, "full"), e.name


def test_no_estimator_grows_faster_than_its_stated_order(results: report.Results) -> None:
    """Every committed fit (each device's, each estimator's, each axis's) spans a decade and
    grows, in time and in peak memory, no faster than the registry's stated order plus
    ``cost_fit.MARGIN``."""
    for device, section in results["devices"].items():
        found = report.device_fits(section)
        assert found and all(f.assessed for f in found), device
        assert cost_fit.exceeding(found) == [], device


def test_a_planted_extra_power_of_g_in_the_committed_numbers_is_flagged(
    results: report.Results,
) -> None:
    """The check can fail: grpo's committed G axis with every time and every peak multiplied
    by G (one more power of G than measured) exceeds its stated B·G, in time and memory."""
    rows = copy.deepcopy(results["devices"]["cpu"]["estimators"]["grpo"]["G"])
    for r in rows:
        r["seconds"] *= r["sizes"]["G"]
        r["peak_bytes"] *= r["sizes"]["G"]
    planted = cost_fit.fit("grpo", "G", rows, registry.entry("grpo").cost)
    assert planted.exceeds() == ["time", "memory"]
    assert cost_fit.exceeding([planted])[0].startswith("grpo: time along G grows as G^")


def test_an_understated_order_is_flagged_against_the_committed_numbers(
    results: report.Results,
) -> None:
    """The registry's statement is what is checked: KTAE's committed G axis against B·G·T (its
    Fisher grid is quadratic in G) exceeds it."""
    rows = results["devices"]["cpu"]["estimators"]["ktae"]["G"]
    assert cost_fit.fit("ktae", "G", rows, "B·G·T").exceeds() == ["time", "memory"]
    assert cost_fit.fit("ktae", "G", rows, registry.entry("ktae").cost).exceeds() == []


def test_the_fit_reads_slopes_through_an_outlier_and_names_the_growth() -> None:
    """Theil–Sen on exact power laws returns their exponents; one point 5× slow (a machine
    hiccup) moves it little; the best model of exact G log G data is G log G; the stated slope of
    G log G over 64..1024 is about 1.2."""
    xs = [64.0, 128.0, 256.0, 512.0, 1024.0]
    assert cost_fit.theil_sen(xs, [x**2 for x in xs]) == pytest.approx(2.0)
    hiccup = [x * (5 if x == 256 else 1) for x in xs]
    assert cost_fit.theil_sen(xs, hiccup) == pytest.approx(1.0, abs=0.35)
    assert cost_fit.best_model(xs, [x * math.log2(x) for x in xs], "G") == "G log G"
    assert cost_fit.best_model(xs, [3.0] * 5, "G") == "1"
    rows = [{"sizes": {"B": 1, "G": int(x)}, "seconds": x, "peak_bytes": int(x)} for x in xs]
    assert cost_fit.fit("x", "G", rows, "B·G log G").stated == pytest.approx(1.18, abs=0.02)


def test_every_axis_reaches_a_decade_and_k_its_domains_top() -> None:
    """The sizes the docs' table measures: the fitted range of each axis spans at least a decade
    with at least 5 sizes, K ends at the top of its domain, and an order names only sizes its
    estimator has (no T without tokens, no K without K)."""
    from advest.spec import cost as orders

    for e in registry.entries():
        for axis in cost_measure.axes(e):
            pts = cost_measure.points(e, axis, "full")
            fitted = cost_fit.fit_range([{"sizes": p} for p in pts], axis)
            xs = [r["sizes"][axis] for r in fitted]
            assert len(xs) >= 5 and max(xs) >= 10 * min(xs), (e.name, axis)
            if axis == "K":
                assert max(xs) == e.k_max(pts[-1]["G"])
        names = orders.parse(e.cost)[1]
        assert "T" not in names or e.kind not in cost_measure.OUTCOME, e.name
        assert "K" not in names or e.needs_k, e.name
