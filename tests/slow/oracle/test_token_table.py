"""The slow tier of tests/core/oracle/test_token_oracle.py: its tests that take tens of seconds each
(the core session stays within its few minutes)."""

from __future__ import annotations


def test_spec_oracle_md_shows_the_token_table_the_oracle_computes_now() -> None:
    from pathlib import Path

    from advest.oracle.reports.token_report import advest_table

    page = (Path(__file__).resolve().parents[3] / "spec" / "oracle.md").read_text()
    shown = page.split("<!-- token-table -->\n")[1].split("\n<!-- /token-table -->")[0]
    assert shown == advest_table(), "regenerate the table in spec/oracle.md: advest_table()"
