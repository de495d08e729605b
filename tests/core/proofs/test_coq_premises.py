"""Each unbiasedness theorem's premises and constant c, parsed from its pinned Coq statement,
match what advest claims outside statements.json: the premises listed here and the scale of its
estimator (its registry entry's Claims.pg_scale). A theorem weakened and re-pinned (an
impossible premise, a ``False ->``) fails here, since re-pinning rewrites statements.json but
not this table."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from advest.fast import registry
from advest.proofs import coq_check as coq

# The two hypotheses every expectation theorem carries: π sums to 1, the score has mean 0.
_MODEL = ("\\sum_v pi v = 1", "\\sum_v pi v * s v = 0")
_K_IN = ("(0 < K)%N", "(K <= N)%N")

# theorem -> (estimator whose declared pg_scale the constant must equal, premises beyond _MODEL,
# the constant as an expression in N and K where the estimator declares no pg_scale: KAE's is
# stateful, Chen's raw M+ − M̂ has no registry entry of its own)
UNBIASED: dict[str, tuple[str | None, tuple[str, ...], str | None]] = {
    "Unbiased.rloo_is_unbiased": ("rloo", (), None),
    "Unbiased.ei_is_unbiased": ("ei", _K_IN, None),
    "Unbiased.maxpo_is_unbiased": ("maxpo", _K_IN, None),
    "Unbiased.canonical_is_unbiased": ("canonical", _K_IN, None),
    "Unbiased.pkpo_s_is_unbiased": ("pkpo_s", _K_IN, None),
    "Unbiased.pkpo_sloo_is_unbiased": ("pkpo_sloo", _K_IN, None),
    "Unbiased.pkpo_sloo_minus_one_is_unbiased": ("pkpo_sloo_minus_one", _K_IN, None),
    "Unbiased.bagirov_centred_is_unbiased": ("bagirov_centered", (*_K_IN, "(K < N)%N"), None),
    "Unbiased.m_plus_minus_m_hat_is_unbiased": (None, (*_K_IN, "(K < N)%N"), "(N - K) / K"),
    "Baselines.kae_is_unbiased": (None, (), "N"),
    "Baselines.loo_baseline_is_unbiased": (
        None, ("(forall i : 'I_m, leaves_out (R:=R) (Y:=Y) i (b i))",), "N"),
}  # fmt: skip

# MaxRL's theorems: N·Σ_{k=1}^{upper} (1/k)·∇pass@k, minus ∇pass@N where the form is biased
# (spec/maxrl.md claims 1-2; the estimators declare no pg_scale: their target is this sum)
MAXRL: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "MaxRL.maxrl_unbiased_is_unbiased": ((), "N", False),
    "MaxRL.maxrl_bias": ((), "N", True),
    "MaxRL.maxrl_is_unbiased_for_one_sample_fewer": (("(0 < N)%N",), "N - 1", False),
}


def pg_scale(estimator: str | None, n: int, k: int, own: str | None = None) -> Fraction:
    """The scale c(N, K) advest declares: ``estimator``'s registry entry's ``Claims.pg_scale``
    (the one place this test reads it), or ``own`` (an N, K expression of the table above)."""
    if estimator is None:
        assert own is not None
        return value(own, n, k)
    scale = registry.entry(estimator).scale
    assert scale is not None, f"{estimator}: its registry entry claims no unbiasedness scale"
    return scale(n, k)


FORM = r"[NK\s/*+0-9-]*(\([NK\s/*+0-9-]+\)[NK\s/*+0-9-]*)*"
"""Arithmetic on N, K and integers, with one level of balanced brackets."""


def value(expr: str, n: int, k: int) -> Fraction:
    """An arithmetic expression in N and K at (n, k), exactly."""
    assert re.fullmatch(FORM, expr), f"{expr!r} is not a form in N, K"
    # the pattern above leaves eval nothing but arithmetic on N, K and integers
    return Fraction(eval(expr, {}, {"N": Fraction(n), "K": Fraction(k)}))


def _top_level(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` where no bracket is open."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] in "({[":
            depth += 1
        elif text[i] in ")}]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i].strip())
            start = i = i + len(sep)
            continue
        i += 1
    return [*parts, text[start:].strip()]


def premises_and_conclusion(statement: str) -> tuple[list[str], str]:
    """The premises (binders dropped) and the conclusion of a printed ``name : forall ..., ...``."""
    body = statement.split(" : ", 1)[1]
    parts = []
    for part in _top_level(body, " -> "):
        # "forall (x : T) ..., P": the binders are not premises; keep P.
        while part.startswith("forall "):
            part = _top_level(part[len("forall ") :], ", ")[1]
        parts.append(part)
    return parts[:-1], parts[-1]


def constant(conclusion: str) -> str:
    """The factor before ``grad`` or ``(\\sum_v ...)`` on the right of the conclusion, "1" when
    there is none, as a Python expression in N and K."""
    rhs = _top_level(conclusion, " = ")[-1]
    factor = re.split(r"grad |\(\\sum_v ", rhs)[0].strip()
    factor = factor.removesuffix("*").strip() or "1"
    return factor.replace("%:R", "").replace("m", "N")


def disagreements(pins: dict[str, dict[str, str]], page: str) -> list[str]:
    """Every way the pinned statements ``pins`` disagree with this file's tables (premises,
    constant, registry scale) and with the statement column of ``page`` (docs/theorems.md)."""
    rows = doc_statements(page)
    out: list[str] = []
    for name, (estimator, extra, own) in sorted(UNBIASED.items()):
        premises, conclusion = premises_and_conclusion(pins[name]["coq"])
        if premises != [*_MODEL, *extra]:
            out.append(f"{name}: premises {premises}")
            continue
        c, doc_c = constant(conclusion), latex_constant(rows[name])
        if not all(re.fullmatch(FORM, x) for x in (c, doc_c)):
            out.append(f"{name}: a constant that is not a form in N, K: {c!r}, page {doc_c!r}")
            continue
        strict = "(K < N)%N" in extra
        if strict != ("K<N" in rows[name].replace(" ", "")):
            out.append(f"{name}: K < N is {'missing from' if strict else 'extra on'} the page")
        for n in range(1, 7):
            for k in range(1, n + 1):
                if (strict and k == n) or (n == 1 and estimator == "rloo"):
                    continue
                want = pg_scale(estimator, n, k, own)
                got = value(c, n, k)
                if got != want:
                    out.append(f"{name}: Coq's constant c({n},{k}) = {got}, declared {want}")
                if value(doc_c, n, k) != got:
                    out.append(f"{name}: the page's constant {doc_c!r} != Coq's {c!r} at {n},{k}")
    for name, (extra, upper, minus_last) in sorted(MAXRL.items()):
        premises, conclusion = premises_and_conclusion(pins[name]["coq"])
        if premises != [*_MODEL, *extra]:
            out.append(f"{name}: premises {premises}")
        coq_upper = re.search(r"\\sum_\(k < (N\.-1|N)\)", conclusion)
        doc_upper = re.search(r"\\sum_\{k=1\}\^\{(N-1|N)\}", rows[name])
        got = None if coq_upper is None else coq_upper[1].replace(".-1", " - 1")
        if got != upper or doc_upper is None or doc_upper[1].replace("-", " - ") != upper:
            out.append(f"{name}: harmonic sum up to {got} (Coq), "
                       f"{doc_upper and doc_upper[1]} (page), declared {upper}")  # fmt: skip
        coq_minus = conclusion.rstrip().endswith("(pass R (Y:=Y) succ) N")
        doc_minus = "- \\nabla\\mathrm{pass@}N" in rows[name]
        if (coq_minus, doc_minus) != (minus_last, minus_last):
            out.append(f"{name}: − ∇pass@N in Coq {coq_minus}, on the page {doc_minus}")
        if ("N>0" in rows[name].replace(" ", "")) != ("(0 < N)%N" in extra):
            out.append(f"{name}: the page and the premises disagree on N > 0")
    return out


def doc_statements(page: str) -> dict[str, str]:
    """{theorem: its statement cell} of docs/theorems.md's tables."""
    rows = {}
    for line in page.splitlines():
        found = re.match(r"\| \[`([\w.]+)`\]\([^)]*\) \| (.*?) \| ", line)
        if found:
            rows[found[1]] = found[2]
    return rows


def latex_constant(statement: str) -> str:
    """The factor before ``\\nabla J_K`` (or before ``\\mathbb E_\\pi[r\\,s]``) on the right of
    the last ``=`` of a statement cell, as an N, K expression: ``\\frac NK`` → ``(N)/(K)``,
    ``\\frac{N-K}N`` → ``(N-K)/(N)``, none → ``1``."""
    rhs = statement.rsplit("=", 1)[1]
    rhs = re.split(r"\\nabla J_|\\mathbb E_\\pi\[r", rhs)[0]
    rhs = rhs.replace("\\,", " ").replace("$", "").strip()
    arg = r"(\{[^{}]*\}|\w)"  # a braced group or one letter
    rhs = re.sub(
        rf"\\frac\s*{arg}\s*{arg}", lambda m: f"({m[1].strip('{}')})/({m[2].strip('{}')})", rhs
    )
    return rhs.strip() or "1"


PAGE = Path(__file__).resolve().parents[3] / "docs" / "theorems.md"


def test_unbiasedness_theorems_match_their_tables_the_registry_and_the_page() -> None:
    """Each theorem's premises and constant, parsed from its pin, equal this file's table and the
    estimator's declared scale; the page's statement column says the same constant and the same
    K < N, N > 0 and harmonic-sum bounds."""
    pins = coq.pinned()["theorems"]
    assert disagreements(pins, PAGE.read_text()) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("theorem", "old", "new"),
    [  # each a weakening a re-pin would accept, or a page that drifted from the proof
        ("Unbiased.pkpo_s_is_unbiased", "(0 < K)%N ->", "False -> (0 < K)%N ->"),
        ("Unbiased.ei_is_unbiased", "(K <= N)%N ->", "(K <= N)%N -> (N < K)%N ->"),
        ("Unbiased.maxpo_is_unbiased", "= N%:R / K%:R * grad", "= N%:R / K%:R * (2 * grad"),
        ("Unbiased.canonical_is_unbiased", "= N%:R / K%:R * grad", "= 2 * N%:R / K%:R * grad"),
        ("MaxRL.maxrl_bias", "\\sum_(k < N)", "\\sum_(k < N.-1)"),
        ("Baselines.kae_is_unbiased", "forall (hw hz : R)", "forall (hw hz : R), hw = 0 ->"),
        ("page:Unbiased.ei_is_unbiased", "\\frac NK\\nabla J_K", "\\frac KN\\nabla J_K"),
        ("page:Unbiased.bagirov_centred_is_unbiased", " ($K<N$)", ""),
        ("page:MaxRL.maxrl_unbiased_is_unbiased", "\\sum_{k=1}^{N}", "\\sum_{k=1}^{N-1}"),
    ],
)
def test_a_planted_weakening_or_drift_is_seen(theorem: str, old: str, new: str) -> None:
    pins = json.loads(json.dumps(coq.pinned()["theorems"]))
    page = PAGE.read_text()
    if theorem.startswith("page:"):
        name = theorem.removeprefix("page:")
        row = next(line for line in page.splitlines() if f"[`{name}`]" in line)
        assert old in row, (name, old)
        page = page.replace(row, row.replace(old, new, 1))
    else:
        name = theorem
        assert old in pins[name]["coq"], (name, old)
        pins[name]["coq"] = pins[name]["coq"].replace(old, new, 1)
    found = disagreements(pins, page)
    assert found and all(f.startswith(name) for f in found), found


def test_the_premise_parser_sees_a_planted_weakening() -> None:
    pin = coq.pinned()["theorems"]["Unbiased.pkpo_s_is_unbiased"]
    assert isinstance(pin, dict)
    weakened = pin["coq"].replace("(0 < K)%N ->", "False -> (0 < K)%N ->")
    assert premises_and_conclusion(weakened)[0] == [*_MODEL, "False", *_K_IN]


def test_every_definition_form_is_pinned_whatever_its_indentation(tmp_path: Path) -> None:
    """An indented ``Definition``, a ``Local``/attributed one, a ``Fixpoint``, a ``Let`` and a
    ``Notation`` are all found (the column-0 scan missed the first ones: indenting
    ``Definition rloo`` and changing its 1/(N−1) to 1/N once gave 52/52 proved)."""
    for name in coq.FILES:
        (tmp_path / name).write_text("")
    (tmp_path / coq.FILES[0]).write_text(
        " Definition a := 1.\n"
        "  Local Definition b := 2.\n"
        "#[local] Definition c := 3.\n"
        "Fixpoint d n := n.\n"
        "  Let e := 4.\n"
        'Local Notation "x ++" := (S x) (at level 2).\n'
    )
    stem = coq.FILES[0][:-2]
    assert coq.definitions(tmp_path) == [
        f"{stem}.a",
        f"{stem}.b",
        f"{stem}.c",
        f"{stem}.d",
        f"{stem}.Let e",
        f'{stem}.Notation "x ++"',
    ]
