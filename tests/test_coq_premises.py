"""Each unbiasedness theorem's premises and constant c, parsed from its pinned Coq statement,
match what advest claims outside statements.json: the premises listed here and the scale of its
estimator (its registry entry's Claims.pg_scale). A theorem weakened and re-pinned (an
impossible premise, a ``False ->``) fails here, since re-pinning rewrites statements.json but
not this table."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from advest.fast import registry
from advest.proofs import coq

# The two hypotheses every expectation theorem carries: π sums to 1, the score has mean 0.
_MODEL = ("\\sum_v pi v = 1", "\\sum_v pi v * s v = 0")
_K_IN = ("(0 < K)%N", "(K <= N)%N")

# theorem -> (estimator whose declared pg_scale the constant must equal, premises beyond _MODEL)
UNBIASED = {
    "Unbiased.rloo_is_unbiased": ("rloo", ()),
    "Unbiased.ei_is_unbiased": ("ei", _K_IN),
    "Unbiased.maxpo_is_unbiased": ("maxpo", _K_IN),
    "Unbiased.canonical_is_unbiased": ("canonical", _K_IN),
    "Unbiased.pkpo_s_is_unbiased": ("pkpo_s", _K_IN),
    "Unbiased.pkpo_sloo_is_unbiased": ("pkpo_sloo", _K_IN),
    "Unbiased.pkpo_sloo_minus_one_is_unbiased": ("pkpo_sloo_minus_one", _K_IN),
    "Unbiased.bagirov_centred_is_unbiased": ("bagirov_centered", (*_K_IN, "(K < N)%N")),
}


def pg_scale(estimator: str, n: int, k: int) -> Fraction:
    """The scale c(N, K) advest declares for ``estimator``: its registry entry's
    ``Claims.pg_scale`` (the one place this test reads it)."""
    scale = registry.entry(estimator).scale
    assert scale is not None, f"{estimator}: its registry entry claims no unbiasedness scale"
    return scale(n, k)


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


@pytest.mark.parametrize("name", sorted(UNBIASED))
def test_an_unbiasedness_theorem_carries_exactly_its_declared_premises_and_scale(
    name: str,
) -> None:
    estimator, extra = UNBIASED[name]
    pin = coq.pinned()["theorems"][name]
    assert isinstance(pin, dict)
    premises, conclusion = premises_and_conclusion(pin["coq"])
    assert premises == [*_MODEL, *extra], f"{name}: premises {premises}"
    c = constant(conclusion)
    assert re.fullmatch(r"[NK()\s/*+-]+|1", c), f"{name}: constant {c!r} is not a form in N, K"
    for n in range(1, 7):
        for k in range(1, n + 1):
            if "(K < N)%N" in extra and k == n:
                continue
            # c matched the N, K arithmetic pattern above, so eval sees nothing else.
            got = eval(c, {}, {"N": Fraction(n), "K": Fraction(k)})
            assert got == pg_scale(estimator, n, k), f"{name}: c({n},{k}) = {got}"


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
