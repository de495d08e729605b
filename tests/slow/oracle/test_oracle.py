"""The slow tier of tests/core/oracle/test_oracle.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advest.cli import main


def test_check_command_prints_a_table_writes_json_and_uses_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "check",
                "advest.fast.maxk:canonical",
                "--family",
                "maxk",
                "--k",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert "| relation to canonical | canonical (N = 2, 3, 6)" not in capsys.readouterr().err
    assert {f["prop"] for f in json.loads(out.read_text())["findings"]} >= {"centred", "unbiased"}
    assert main(["check", "no_such_module:fn"]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert (
        main(
            ["check", "advest.fast.maxk:canonical", "--family", "maxk", "--signature", "k, rewards"]
        )
        == 2
    )
    assert "cannot call" in capsys.readouterr().err
    assert main(["check", "advest.fast.maxk:canonical", "--family", "maxk", "--k", "0"]) == 2
    assert "--k must be an integer >= 1; got 0" in capsys.readouterr().err
