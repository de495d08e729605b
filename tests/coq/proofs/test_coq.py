"""The coq tier of tests/core/proofs/test_coq.py: the tests of that file that run in
`nox -s coq` (its folder gives them the marker)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from advest.proofs import coq_check as coq
from tests.core.proofs.test_coq import _binz, _planted, _replace_theorem


def test_coq_is_installed() -> None:
    """CI installs Coq with apt-get (README test command); a missing coqc is a failure, not a
    skip."""
    assert coq.coqc() is not None, "coqc not found: apt-get install coq libcoq-mathcomp-..."


def test_every_coq_theorem_is_closed_under_the_global_context() -> None:
    records = coq.check_shipped()
    assert len(records) == len(coq.THEOREMS) >= 8
    not_closed = [(r.notes, r.evidence) for r in records if r.status != "proved"]
    assert not not_closed
    assert all(r.evidence == f"Print Assumptions: {coq.CLOSED}" for r in records)
    assert all(r.method.startswith("coq") and r.parameters["N"] == "all" for r in records)


def test_a_planted_admitted_or_axiom_is_not_counted_as_proved(tmp_path: Path) -> None:
    """One copy with both holes (one coqc run): an Admitted proof and a proof by an Axiom."""
    _planted(tmp_path, "maxpo_equals_canonical", "Admitted.")
    extra = "Axiom cheat : forall P : Prop, P.\n"
    _planted(tmp_path, "pkpo_sloo_closed_form", "exact: cheat.\nQed.", extra, copy=False)
    records = {r.notes[0]: r for r in coq.check(tmp_path)}
    hit = records["Counting.maxpo_equals_canonical"]
    assert hit.status == "unknown" and "maxpo_equals_canonical" in hit.evidence
    # the theorem that uses it inherits the hole
    assert records["Counting.mean_ei_equals_mean_l2o"].status == "unknown"
    hit = records["Counting.pkpo_sloo_closed_form"]
    assert hit.status == "unknown" and "cheat" in hit.evidence
    assert records["Counting.canonical_sums_to_zero"].status == "proved"


def test_a_planted_tautology_or_weakened_statement_is_not_counted_as_proved(
    tmp_path: Path,
) -> None:
    """One copy, one coqc run: I13 and Symmetry.shift_rules (I14) replaced by True (closed,
    compiles), and the conclusions of Unbiased.pkpo_sloo_is_unbiased and MaxRL.maxrl_closed_form
    weakened by "\\/ True" (theorems no other proof uses, so every other file still compiles);
    each differs from its pinned statement, so each comes back unknown, naming the statement;
    the untouched theorems stay proved."""
    for f in coq.FILES:
        shutil.copy(coq.COQ_DIR / f, tmp_path / f)
    _replace_theorem(
        tmp_path / "Counting.v",
        "mean_ei_equals_mean_l2o",
        "Theorem mean_ei_equals_mean_l2o : True.\nProof. by []. Qed.",
    )
    _replace_theorem(
        tmp_path / "Unbiased.v",
        "pkpo_sloo_is_unbiased",
        "Theorem pkpo_sloo_is_unbiased :\n"
        "  E (fun y => \\sum_i pkpo_sloo K (fset y) i * s (y i)) = grad K"
        " \\/ True.\nProof. by right. Qed.",
    )
    _replace_theorem(
        tmp_path / "MaxRL.v",
        "maxrl_closed_form",
        "Theorem maxrl_closed_form N : pass_rate != 0 ->\n"
        "  E pi (fun y : {ffun 'I_N -> Y} => \\sum_i maxrl binary y i * s (y i)) =\n"
        "  N%:R * ((1 - (1 - pass_rate) ^+ N) / pass_rate - (1 - pass_rate) ^+ N.-1)"
        " * pass_rate_grad \\/ True.\nProof. by right. Qed.",
    )
    _replace_theorem(
        tmp_path / "Symmetry.v", "shift_rules", "Theorem shift_rules : True.\nProof. by []. Qed."
    )
    records = {r.notes[0]: r for r in coq.check(tmp_path)}
    planted = (
        "Counting.mean_ei_equals_mean_l2o",
        "Unbiased.pkpo_sloo_is_unbiased",
        "MaxRL.maxrl_closed_form",
        "Symmetry.shift_rules",
    )
    for name in planted:
        assert records[name].status == "unknown", name
        assert records[name].evidence.startswith("statement differs"), records[name].evidence
    assert "True" in records["Counting.mean_ei_equals_mean_l2o"].evidence
    assert "shift_rules : True" in records["Symmetry.shift_rules"].evidence
    others = [r for name, r in records.items() if name not in planted]
    assert len(others) == len(coq.THEOREMS) - len(planted)
    assert all(r.status == "proved" for r in others)


def test_a_changed_definition_unpins_every_theorem(tmp_path: Path) -> None:
    """The statements name definitions (canonical, E, grad, ...): a definition whose printed body
    differs from the pinned one leaves no theorem proved. Planted: Sorted's coefficient `one`
    becomes 1 * 1 (equal in value, so every proof still compiles)."""
    for f in coq.FILES:
        shutil.copy(coq.COQ_DIR / f, tmp_path / f)
    path = tmp_path / "Sorted.v"
    old = "Definition one : R := 1."
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, "Definition one : R := 1 * 1."))
    records = coq.check(tmp_path)
    assert all(r.status == "unknown" for r in records)
    assert all(r.evidence == "definitions differ from statements.json: Sorted.one" for r in records)


def test_a_proof_that_does_not_compile_proves_nothing(tmp_path: Path) -> None:
    source = _planted(tmp_path, "pkpo_sloo_closed_form", "by [].\nQed.")
    records = coq.check(source)
    assert all(r.status == "unknown" for r in records)
    assert "Counting.v" in records[0].evidence


def test_sorted_binz_is_the_binomial_coq_computes() -> None:
    """The transcription ``_binz`` agrees with Coq's own evaluation of Sorted.binz."""
    cases = [
        (a, da, b, db) for a in range(10) for da in range(3) for b in range(10) for db in range(3)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for f in coq.FILES:
            shutil.copy(coq.COQ_DIR / f, work / f)
        for f in coq.FILES:
            subprocess.run(["coqc", "-q", "-Q", ".", "Advest", f], cwd=work, check=True)
        terms = "; ".join(f"binz {a} {da} {b} {db}" for a, da, b, db in cases)
        (work / "B.v").write_text(
            "From mathcomp Require Import all_ssreflect.\nFrom Advest Require Import Sorted.\n"
            "Eval vm_compute in [:: " + terms + "].\n"
        )
        out = subprocess.run(
            ["coqc", "-q", "-Q", ".", "Advest", "B.v"], cwd=work, capture_output=True, text=True
        )
    values = re.search(r"\[::(.*?)\]", out.stdout, re.S)
    assert values, out.stdout + out.stderr
    got = [int(v) for v in re.findall(r"\d+", values.group(1))]
    assert got == [_binz(*c) for c in cases]
