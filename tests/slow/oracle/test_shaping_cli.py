"""The slow tier of the shaping family's command line: ``advest check --family shaping`` (a child
process per target, as a user runs it) finds each gallery twin's bug and passes its fixed twin
(tests/core/oracle/test_bug_gallery.py checks the same verdicts in process)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("twin", "found"),
    [
        ("prime_rl_2040", "| centred | no |"),
        ("prime_rl_2377", "| finite | no: non-finite output |"),
    ],
)
def test_advest_check_family_shaping_finds_each_gallery_twins_bug(
    twin: str, found: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from advest import cli

    monkeypatch.chdir(Path(__file__).parents[3] / "scripts")  # the twins' module, as a user runs it
    for side, caught in (("buggy", True), ("fixed", False)):
        cli.main(["check", f"gallery_shaping_bugs:{twin}_{side}", "--family", "shaping"])
        out = capsys.readouterr().out
        assert (found in out) is caught, out
