"""The slow tier of tests/core/experiments/test_choosing.py: the page "Choosing an estimator" and
the README's blocks read exactly as scripts/choosing.py renders them from the results files (tens
of seconds each: every grid's bootstrap)."""

from __future__ import annotations

import copy

from tests.core.experiments.test_choosing import ROOT, choosing


def test_the_page_and_the_readme_block_are_what_the_results_files_render() -> None:
    page, readme = choosing.render(ROOT)
    command = "python scripts/choosing.py --repo . (see the page's end)"
    assert (ROOT / "docs" / "choosing.md").read_text() == page, f"regenerate: {command}"
    assert (ROOT / "README.md").read_text() == readme, f"regenerate: {command}"


def test_a_changed_result_changes_the_page() -> None:
    """The drift test can fail: one held-out count in a grid's results moves the page."""
    data = choosing.load(ROOT / "docs" / "results")
    theorem_text = (ROOT / "docs" / "theorems.md").read_text()
    peer_text = (ROOT / "docs" / "integrations.md").read_text()
    page = choosing.page(data, theorem_text, peer_text)
    moved = copy.deepcopy(data)
    runs = moved["grid"]["embedded"]["runs"]["maxpo"]
    runs[min(runs)]["after"][0] += 8
    assert choosing.page(moved, theorem_text, peer_text) != page


def test_the_page_holds_dynamic_samplings_paired_comparison_from_its_runs() -> None:
    """--filter_groups against grpo, on the page the grids generate: its section is rendered
    from docs/results/grid_filter/ (one moved held-out count moves it) and is on the page."""
    import filter_groups_compare

    section = filter_groups_compare.section(ROOT)
    assert section.startswith("## Dynamic sampling (`--filter_groups`)")
    assert "Paired difference, grpo_filter − grpo" in section and "over 5 seeds" in section
    assert section in (ROOT / "docs" / "choosing.md").read_text()
    grid = filter_groups_compare.grid_stats.load(ROOT / filter_groups_compare.RESULTS)["embedded"]
    moved = copy.deepcopy(grid)
    runs = moved["runs"]["grpo_filter"]
    runs[min(runs)]["after"][0] += 8
    assert filter_groups_compare.render(moved) != filter_groups_compare.render(grid)
