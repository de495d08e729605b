"""The Coq proofs (proofs/coq/*.v) compile, every listed theorem is closed under the global
context (no Admitted, no axiom), a planted Admitted or Axiom is caught, and each theorem is
linked from the spec row it proves."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from advest.proofs import coq

ROOT = Path(__file__).parents[1]


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


def _planted(
    tmp_path: Path, theorem: str, proof_replacement: str, extra: str = "", copy: bool = True
) -> Path:
    """A copy of proofs/coq with ``theorem``'s proof replaced (and ``extra`` put before it)."""
    if copy:
        for f in coq.FILES:
            shutil.copy(coq.COQ_DIR / f, tmp_path / f)
    path = tmp_path / "Counting.v"
    text = path.read_text()
    start = text.index(f"Theorem {theorem} ")
    proof = text.index("Proof.", start) + len("Proof.")
    end = text.index("Qed.", proof) + len("Qed.")
    text = text[:start] + extra + text[start:proof] + "\n" + proof_replacement + text[end:]
    path.write_text(text)
    return tmp_path


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


def test_a_proof_that_does_not_compile_proves_nothing(tmp_path: Path) -> None:
    source = _planted(tmp_path, "pkpo_sloo_closed_form", "by [].\nQed.")
    records = coq.check(source)
    assert all(r.status == "unknown" for r in records)
    assert "Counting.v" in records[0].evidence


def test_every_theorem_of_the_v_files_is_listed_and_no_proof_is_left_open() -> None:
    found = set()
    for f in coq.FILES:
        text = (coq.COQ_DIR / f).read_text()
        stem = f[:-2]
        found |= {f"{stem}.{name}" for name in re.findall(r"^Theorem (\w+)", text, re.M)}
        code = re.sub(r"\(\*.*?\*\)", "", text, flags=re.S)  # comments may say "Admitted"
        for word in ("Admitted", "admit", "Axiom", "Parameter", "Conjecture", "Abort"):
            assert not re.search(rf"\b{word}\b", code), f"{f}: {word}"
    assert found == {t.name for t in coq.THEOREMS}


@pytest.mark.parametrize("theorem", coq.THEOREMS, ids=lambda t: t.name)
def test_each_spec_claim_links_to_its_coq_theorem(theorem: coq.Theorem) -> None:
    """The claims table of spec/maxk.md names the Coq theorem in every row it proves."""
    table = (ROOT / "spec" / "maxk.md").read_text().split("## Claimed properties", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| I")]
    ids = re.findall(r"I\d+", theorem.spec)
    for claim_id in ids:
        row = next(r for r in rows if re.match(rf"\| ({claim_id}\b|I\d+, {claim_id}\b)", r))
        assert theorem.name in row, (claim_id, theorem.name)


def test_the_shared_evaluation_is_the_linear_form_the_coq_theorem_states() -> None:
    """spec.maxk_weights.evaluate (what fast and proofs call) on exact random data equals
    Evaluation.linear_form: own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q, with
    diag = own − below, step = below − above as Evaluation.fast_evaluation reads."""
    import random
    from fractions import Fraction

    import numpy as np

    from advest.spec.maxk_weights import evaluate

    rng = random.Random(0)
    for n in (1, 2, 5, 9):
        own, below, above, x = (
            [Fraction(rng.randint(-9, 9), rng.randint(1, 9)) for _ in range(n)] for _ in range(4)
        )

        def arr(v: list[Fraction]) -> np.ndarray:  # type: ignore[type-arg]
            out = np.empty(len(v), dtype=object)
            out[:] = v
            return out

        diag = arr([o - b for o, b in zip(own, below, strict=True)])[None, :]
        step = arr([b - a for b, a in zip(below, above, strict=True)])[None, :]
        got = evaluate(diag, step, arr(above)[:, None], arr(x), lambda v: np.cumsum(v, axis=-1))
        want = [
            own[p] * x[p]
            + sum((below[q] * x[q] for q in range(p)), Fraction(0))
            + sum((above[q] * x[q] for q in range(p + 1, n)), Fraction(0))
            for p in range(n)
        ]
        assert list(got[0]) == want
