"""The coq tier of tests/core/proofs/test_proofs.py: the tests of that file that run in
`nox -s coq` (its folder gives them the marker)."""

from __future__ import annotations

from advest.proofs import bounded
from advest.proofs.run import run, summary_rows


def test_every_claim_has_its_expected_status_over_the_ci_range() -> None:
    """N <= 7 for every claim except the measured exceptions of bounded.CI_EXCLUDED; the Coq
    theorems (general N) are part of the run."""
    records = run(max_n=7, unbiased_max_n=4, progress=False, ci=True)
    wrong = [(r.claim, r.parameters, r.status) for r in records if r.status != r.expected]
    assert not wrong
    assert sum(r.status == "proved" for r in records) > 200
    assert any(r.method.startswith("coq") for r in records)
    assert {c.__name__ for c, _, m in bounded.CLAIMS if m < 7} == set(bounded.CI_EXCLUDED)
    rows = summary_rows(records)
    # its spec page
    assert all(
        row[1].startswith(("maxk.md", "group.md", "maxrl.md", "kae.md", "hista.md", "episode.md"))
        for row in rows
    )
