"""The page's oracle verdicts: which `advest check` each arm gets (derived from the registry and
the real-model arms), a real check's report condensed as the page shows it, and a property the
oracle could not check at one N named as such instead of hiding the N it did check."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import choosing_data  # noqa: E402
import oracle_runs  # noqa: E402


def test_each_arm_is_judged_in_its_family_at_its_own_k(tmp_path: Path) -> None:
    def flags(arm: str) -> list[str]:
        cmd = oracle_runs.command(arm, tmp_path)
        return cmd[cmd.index("check") + 1 : cmd.index("--json")]

    assert flags("grpo") == ["advest.fast.group:grpo", "--family", "outcome"]
    assert flags("maxpo") == ["advest.fast.maxk:maxpo", "--family", "maxk", "--k", "4"]
    assert flags("maxpo_k8")[-2:] == ["--k", "8"]
    assert flags("maxrl") == ["advest.fast.maxrl:maxrl", "--family", "maxrl"]
    # the estimators that read tokens, hidden states or history are not the oracle's
    assert "kae" not in oracle_runs.arms() and "chen_passk" in oracle_runs.arms()


def _row(n: int, verdict: str, evidence: str = "e") -> dict[str, Any]:
    return {
        "prop": "unbiased",
        "verdict": verdict,
        "evidence": evidence,
        "dtype": "float32",
        "n": n,
    }


def test_an_n_it_could_not_check_is_named_beside_the_ones_it_did(tmp_path: Path) -> None:
    def verdict(*rows: dict[str, Any]) -> str:
        doc = {"schema": "advest-check", "version": 1, "findings": list(rows)}
        (tmp_path / "x.json").write_text(json.dumps(doc))
        (out := tmp_path / "out").mkdir(exist_ok=True)
        choosing_data.oracle(tmp_path, out)
        return str(json.loads((out / "oracle.json").read_text())["x"]["unbiased"])

    too_many = _row(18, "not checked", "3^18 reward tuples is too many to enumerate")
    assert verdict(_row(9, "yes, c = 9/8"), too_many) == (
        "N=9: yes, c = 9/8; N=18: not checked (3^18 reward tuples is too many to enumerate)"
    )
    assert verdict(_row(9, "yes, c = 9/8"), _row(10, "no", "off")).startswith("no (float32, N=10")
    assert verdict(too_many).startswith("not checked (float32, N=18")


def test_a_file_that_is_not_an_oracle_report_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("[]")
    with pytest.raises(ValueError, match=r"old\.json: not an `advest check --json` report"):
        choosing_data.oracle(tmp_path, tmp_path)
