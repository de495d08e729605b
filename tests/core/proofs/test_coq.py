"""The Coq proofs (proofs/coq/*.v) compile, every listed theorem is closed under the global
context (no Admitted, no axiom), a planted Admitted or Axiom is caught, and each theorem is
linked from the spec row it proves."""

from __future__ import annotations

import math
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from advest.proofs import coq_check as coq
from advest.spec.maxk_weights import BinomRatio

ROOT = Path(__file__).parents[3]

# The tests that run coqc are marked `coq` (nox -s coq, where Coq is installed); the rest read
# the .v files, the pins and the spec, and run in the core loop.


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


def _replace_theorem(path: Path, theorem: str, replacement: str) -> None:
    """Replace the whole ``Theorem theorem ... Qed.`` block of ``path``."""
    text = path.read_text()
    start = text.index(f"Theorem {theorem} ")
    end = text.index("Qed.", start) + len("Qed.")
    path.write_text(text[:start] + replacement + text[end:])


def test_the_pinned_statements_list_every_theorem_and_definition_with_its_claim() -> None:
    """proofs/coq/statements.json is generated from THEOREMS and the .v files: one entry per
    theorem (its statement as Coq prints it, the claim in words and the spec row) and one per
    Definition; no stale entry."""
    pins = coq.pinned()
    theorems = pins["theorems"]
    assert isinstance(theorems, dict) and set(theorems) == {t.name for t in coq.THEOREMS}
    for t in coq.THEOREMS:
        pin = theorems[t.name]
        assert isinstance(pin, dict)
        assert pin["math"] == t.statement and pin["spec"] == t.spec, t.name
        assert pin["coq"].startswith(t.name.split(".")[1] + " : forall"), t.name
    assert set(pins["definitions"]) == set(coq.definitions())


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


@pytest.mark.parametrize("theorem", coq.UNBIASED, ids=lambda t: t.name)
def test_each_unbiasedness_theorem_is_cited_where_the_spec_claims_it(theorem: coq.Theorem) -> None:
    """spec/maxk.md §Unbiasedness names each Unbiased.v (or Biased.v) theorem that cites it, and
    the claims table of spec/group.md each one that cites an estimator there (RLOO, GRPO)."""
    link = f"[`{theorem.name}`](../proofs/coq/{theorem.name.split('.')[0]}.v)"
    if coq.UNBIASED_SPEC in theorem.spec:
        section = (ROOT / "spec" / "maxk.md").read_text().split("## Unbiasedness", 1)[1]
        assert link in section.split("\n## ", 1)[0]
    estimators = re.findall(r"group\.md (\w+)", theorem.spec)
    rows = (ROOT / "spec" / "group.md").read_text().splitlines()
    for name in estimators:
        assert any(r.startswith(f"| `{name}` ") and link in r for r in rows), name
    assert estimators or coq.UNBIASED_SPEC in theorem.spec


def test_every_coq_theorem_the_spec_links_is_a_pinned_theorem_of_that_file() -> None:
    """A link [`File.name`](../proofs/coq/File.v) in spec/*.md names a theorem of THEOREMS (so
    its statement is pinned and checked) and points at the file that proves it."""
    links = [
        m
        for page in sorted((ROOT / "spec").glob("*.md"))
        for m in re.findall(r"\[`(\w+)\.(\w+)`\]\(\.\./proofs/coq/(\w+)\.v\)", page.read_text())
    ]
    assert len(links) >= 20
    names = {t.name for t in coq.THEOREMS}
    for stem, name, file in links:
        assert f"{stem}.{name}" in names and stem == file, (stem, name, file)


@pytest.mark.parametrize("theorem", coq.MAXRL + coq.BASELINES, ids=lambda t: t.name)
def test_each_theorem_is_cited_in_the_row_of_the_claim_it_proves(theorem: coq.Theorem) -> None:
    """The claims table of the page a MaxRL.v or Baselines.v theorem names links the theorem from
    the row of its claim: "maxrl.md claim 2" -> spec/maxrl.md's row "| claim 2, ...",
    "kae.md 15" -> spec/kae.md's row "| 15 ..."."""
    page, key = theorem.spec.split(" ", 1)
    prefix = f"| {key}," if key.startswith("claim") else f"| {key} "
    table = (ROOT / "spec" / page).read_text().split("## Claimed properties", 1)[1]
    rows = [r for r in table.splitlines() if r.startswith(prefix)]
    assert len(rows) == 1, (page, key)
    stem = theorem.name.split(".")[0]
    assert f"[`{theorem.name}`](../proofs/coq/{stem}.v)" in rows[0]


@pytest.mark.parametrize("theorem", coq.THEOREMS, ids=lambda t: t.name)
def test_each_spec_claim_links_to_its_coq_theorem(theorem: coq.Theorem) -> None:
    """The claims table of spec/maxk.md names the Coq theorem in every row it proves."""
    table = (ROOT / "spec" / "maxk.md").read_text().split("## Claimed properties", 1)[1]
    rows = [line for line in table.splitlines() if re.match(r"\| [IP]\d", line)]
    ids = re.findall(r"\b[IP]\d+\b", theorem.spec)
    for claim_id in ids:
        row = next(r for r in rows if re.match(rf"\| ({claim_id}\b|[IP]\d+, {claim_id}\b)", r))
        assert theorem.name in row, (claim_id, theorem.name)


def test_the_shared_evaluation_is_the_linear_form_the_coq_theorem_states() -> None:
    """spec.maxk_weights.evaluate (what proofs call; fast's sorted path equals it bit for bit)
    on exact random data equals Evaluation.linear_form: own_p x_p + Σ_{q<p} below_q x_q +
    Σ_{q>p} above_q x_q, with diag = own − below, step = below − above as
    Evaluation.fast_evaluation reads."""
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


# --- the Coq statements are about the code: Sorted.v's weights and forms read back into Python ---

SORTED_V = coq.COQ_DIR / "Sorted.v"
# Sorted.v's names for spec.maxk_weights.WEIGHTS (m_hat is taken in Counting.v by M̂_K itself).
COQ_WEIGHT_NAMES = {"m_hat_w": "m_hat"}
# The coefficient definitions of Sorted.v, their Coq text, and what they mean in Python.
COQ_COEFFICIENTS = {
    "one": ("1", lambda n, k: Fraction(1)),
    "neg_one": ("-1", lambda n, k: Fraction(-1)),
    "k_over_n": ("K%:R / n%:R", lambda n, k: Fraction(k, n)),
    "minus_k_over_n_minus_1": ("- (K%:R / n.-1%:R)", lambda n, k: Fraction(-k, n - 1)),
}


def _binz(a: int, da: int, b: int, db: int) -> int:
    """Sorted.binz, transcribed: C(a − da, b − db), 0 where an offset exceeds its base."""
    return math.comb(a - da, b - db) if da <= a and db <= b else 0


def _coq_weights() -> dict[str, tuple[int, int, int, int]]:
    text = SORTED_V.read_text()
    found = re.findall(r"^Definition (\w+) := ratio (\d+) (\d+) (\d+) (\d+)\.$", text, re.M)
    return {COQ_WEIGHT_NAMES.get(name, name): tuple(map(int, o)) for name, *o in found}


def _coq_forms() -> dict[str, tuple[list[tuple[str, str]], ...]]:
    text = SORTED_V.read_text()
    forms = {}
    for name, body in re.findall(r"^Definition form_(\w+) : form :=(.*?)\.$", text, re.M | re.S):
        lists = re.findall(r"\[::(.*?)\]", body, re.S)
        assert len(lists) == 3, (name, body)
        forms[name] = tuple(
            [(c, COQ_WEIGHT_NAMES.get(w, w)) for c, w in re.findall(r"\((\w+), (\w+)\)", part)]
            for part in lists
        )
    return forms


def _coq_ratio(offsets: tuple[int, int, int, int], n: int, k: int) -> list[Fraction]:
    """Sorted.ratio t k dn dk at j = 0..n−1 (x / 0 = 0 in a Coq field)."""
    t, kk, dn, dk = offsets
    den = _binz(n, dn, k, dk)
    return [Fraction(_binz(j + 1, t, k, kk), den) if den else Fraction(0) for j in range(n)]


def test_the_weights_the_coq_theorems_use_are_the_weights_of_spec_maxk_weights() -> None:
    """Every weight of Sorted.v is the BinomRatio of the same name (offsets negated), and the
    coefficients are the ones FORMS uses."""
    from advest.spec.maxk_weights import WEIGHTS

    coq_weights = _coq_weights()
    assert len(coq_weights) == 7
    for name, (t, kk, dn, dk) in coq_weights.items():
        w = WEIGHTS[name]
        assert (w.top, w.k, w.den_n, w.den_k) == (-t, -kk, -dn, -dk), name
    text = SORTED_V.read_text()
    for name, (coq_text, _) in COQ_COEFFICIENTS.items():
        assert re.search(rf"^Definition {name} : R := {re.escape(coq_text)}\.$", text, re.M), name


def _rows(combos: tuple[list[tuple[str, str]], ...], n: int, k: int) -> list[list[Fraction]]:
    """(own, below, above) of a Coq form as exact vectors over j = 0..n−1."""
    weights = _coq_weights()
    out = []
    for combo in combos:
        row = [Fraction(0)] * n
        for coef, weight in combo:
            c = COQ_COEFFICIENTS[coef][1](n, k)
            row = [r + c * w for r, w in zip(row, _coq_ratio(weights[weight], n, k), strict=True)]
        out.append(row)
    return out


# every N to 32, then two large ones: the exact rows cost O(N³) fractions, and N from 33 to 64
# took 85% of this test's time in the core session (the Coq theorems hold for every N)
@pytest.mark.parametrize("n", [*range(1, 33), 48, 64])
def test_each_coq_form_is_the_form_fast_evaluates(n: int) -> None:
    """Sorted.v's form_<name> (the right-hand side of its theorem) equals spec.maxk_weights.FORMS
    [name] as exact coefficient vectors, for every K at this N; and fast's float64 weight tables
    equal the Coq formulas to 1e-12 (zeros exactly)."""
    import numpy as np
    import torch

    from advest.fast._weights import weights
    from advest.spec.maxk_weights import FORM_DEFINITIONS, FORMS, form_rows

    forms = _coq_forms()
    assert set(forms) == set(FORMS) == set(FORM_DEFINITIONS)
    for k in range(1, n + 1):
        for name, combos in forms.items():
            if k == n and FORM_DEFINITIONS[name][1]:
                continue  # M⁻ is undefined at K = N; the theorem assumes K < N
            coq_own, coq_below, coq_above = _rows(combos, n, k)

            def exact(ratio: BinomRatio, k: int = k) -> np.ndarray:  # type: ignore[type-arg]
                out = np.empty(n, dtype=object)
                out[:] = [ratio.exact(q, n, k) for q in range(1, n + 1)]
                return out

            diag, step, above = form_rows(FORMS[name], n, k, exact)
            below = [s + a for s, a in zip(step, above, strict=True)]  # step = below − above
            own = [d + b for d, b in zip(diag, below, strict=True)]  # diag = own − below
            assert (coq_own, coq_below, coq_above) == (own, below, list(above)), (name, n, k)
        table = weights(n, k, torch.device("cpu"))
        for name, offsets in _coq_weights().items():
            exact_w = _coq_ratio(offsets, n, k)
            fast_w = getattr(table, name).tolist()
            for e, f in zip(exact_w, fast_w, strict=True):
                assert (e == 0) == (f == 0), (name, n, k)
                assert abs(f - float(e)) <= 1e-12 * float(e), (name, n, k, f, e)


def test_every_form_has_its_sorted_theorem_with_the_matching_definition() -> None:
    """Theorem <definition>_sorted p : <definition> K mx p = lformF form_<form> p, for every form
    of FORMS, each listed in coq.THEOREMS (so Print Assumptions checks it)."""
    from advest.spec.maxk_weights import FORM_DEFINITIONS

    text = SORTED_V.read_text()
    found = re.findall(
        r"^Theorem (\w+)_sorted p : (\w+) K mx p = lformF form_(\w+) p\.$", text, re.M
    )
    pairs = {form: definition for definition, used, form in found if used == definition}
    assert pairs == {f: d for f, (d, _) in FORM_DEFINITIONS.items()}
    listed = {t.name for t in coq.THEOREMS}
    assert {f"Sorted.{d}_sorted" for d in pairs.values()} <= listed


def test_baselines_kae_is_reference_kae_group_with_the_history_as_two_numbers() -> None:
    """Baselines.kae (as pinned) with h_w = Σ K(u_j), h_z = Σ K(u_j) Z_j is reference.kae's
    group advantage, cold starts (G = 1, no history weight: V̂ = 0, which Coq's x / 0 = 0 gives)
    included: the Coq theorem is about the code's formula."""
    import random

    from advest.reference.kae import kae_group, kernel_weight

    body = coq.pinned()["definitions"]["Baselines.kae"]
    assert isinstance(body, str)
    assert "r (y g) - (hz + \\sum_(k | k != g) r (y k)) / (hw + m.-1%:R)" in body
    rng = random.Random(0)
    for _ in range(200):
        i = rng.randint(2, 12)
        history = [
            (rng.randint(1, i - 1), Fraction(rng.randint(-5, 9), rng.randint(1, 4)))
            for _ in range(rng.randint(0, 4))
        ]
        rewards = [
            Fraction(rng.randint(-5, 9), rng.randint(1, 4)) for _ in range(rng.randint(1, 5))
        ]
        h, kernel = Fraction(rng.choice([1, 2, 4]), 4), rng.choice(["triangular", "exponential"])
        weights = [kernel_weight(kernel, i, past, h) for past, _ in history]
        hw = sum(weights, Fraction(0))
        hz = sum((w * z for w, (_, z) in zip(weights, history, strict=True)), Fraction(0))
        n, denominator = len(rewards), hw + (len(rewards) - 1)
        # Baselines.kae, transcribed: r_g − (h_z + Σ_{k≠g} r_k) / (h_w + N − 1), x / 0 = 0
        want = [
            rewards[g]
            - (
                (hz + sum((rewards[k] for k in range(n) if k != g), Fraction(0))) / denominator
                if denominator
                else Fraction(0)
            )
            for g in range(n)
        ]
        got = kae_group(history, rewards, i=i, h=h, kernel=kernel).advantages
        assert got == want, (history, rewards, i, h, kernel)


THEOREMS_PAGE = ROOT / "docs" / "theorems.md"


def _theorem_page_rows(text: str) -> dict[str, list[str]]:
    """{File.name: the row's cells} for every table row of docs/theorems.md that names a theorem."""
    rows = {}
    for line in text.splitlines():
        found = re.match(r"\| \[`(\w+)\.(\w+)`\]\(proofs/coq/(\w+)\.v\) \|", line)
        if found:
            stem, name, file = found.groups()
            assert stem == file, line
            assert f"{stem}.{name}" not in rows, f"two rows for {stem}.{name}"
            rows[f"{stem}.{name}"] = [c.strip() for c in line.strip().strip("|").split(" | ")]
    return rows


def test_the_theorems_page_has_one_row_per_pinned_theorem_with_its_claim() -> None:
    """docs/theorems.md lists every theorem of proofs/coq/statements.json, once, and no other;
    each row has 4 cells (name, statement, claim, paper) and its claim cell holds the pinned spec
    row, so a theorem added to THEOREMS without a row here fails."""
    pins = coq.pinned()["theorems"]
    assert isinstance(pins, dict)
    rows = _theorem_page_rows(THEOREMS_PAGE.read_text())
    assert sorted(set(pins) - set(rows)) == [], "pinned but not on docs/theorems.md"
    assert sorted(set(rows) - set(pins)) == [], "on docs/theorems.md but not pinned"
    for name, cells in rows.items():
        pin = pins[name]
        assert isinstance(pin, dict)
        assert len(cells) == 4 and all(cells), (name, cells)
        assert pin["spec"] in cells[2], (name, pin["spec"], cells[2])


def test_the_theorems_page_check_fails_on_a_missing_row() -> None:
    """The check above, run on the page without one row, names that theorem."""
    text = THEOREMS_PAGE.read_text()
    line = next(x for x in text.splitlines() if "[`MaxRL.maxrl_bias`]" in x)
    rows = _theorem_page_rows(text.replace(line + "\n", ""))
    assert set(coq.pinned()["theorems"]) - set(rows) == {"MaxRL.maxrl_bias"}
