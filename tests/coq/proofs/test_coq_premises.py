"""The coq tier of tests/core/proofs/test_coq_premises.py: the tests of that file that run in
`nox -s coq` (its folder gives them the marker)."""

from __future__ import annotations

import shutil
from pathlib import Path

from advest.proofs import coq_check as coq
from tests.core.proofs.test_coq_premises import PAGE, disagreements


def test_a_weakened_theorem_re_pinned_by_the_pin_writer_fails_here(tmp_path: Path) -> None:
    """The audit's attack, end to end in the real prover: weaken ``pkpo_s_is_unbiased`` with a
    ``False`` premise in a copy of proofs/coq/, let Coq prove it and the project's own pin
    writer re-pin it; the pin is then self-consistent (what ``advest prove`` compares), and this
    file's tables still refuse it."""
    source = tmp_path / "coq"
    shutil.copytree(coq.COQ_DIR, source)
    unbiased = source / "Unbiased.v"
    text = unbiased.read_text()
    head = "Theorem pkpo_s_is_unbiased :"
    assert text.count(head) == 1
    unbiased.write_text(text.replace(head, "Theorem pkpo_s_is_unbiased (planted : False) :"))
    pins = tmp_path / "statements.json"
    coq.write_statements(pins, source)  # Coq proves the weakened theorem: the proof is unchanged
    repinned = coq.pinned(pins)["theorems"]
    assert "False" in repinned["Unbiased.pkpo_s_is_unbiased"]["coq"]  # type: ignore[index]
    found = disagreements(repinned, PAGE.read_text())  # type: ignore[arg-type]
    assert found and all(f.startswith("Unbiased.pkpo_s_is_unbiased") for f in found), found
