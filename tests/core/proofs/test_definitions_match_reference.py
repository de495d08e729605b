"""The definitions the proofs reason about (``proofs.definitions``) are the reference's.

z3 (``proofs.bounded``) and sympy (``proofs.unbiased``) prove their claims about
``proofs.definitions.Definitions``, a second transcription of spec/maxk.md §Conventions over
sample indices; the tests of the code check ``reference.maxk``. This file ties the two: run over
exact Fractions, every estimator both define gives the same exact values on a table of hostile
groups (ties, zeros, flat groups, signs, an offset) for every N <= 9 and every K of its domain.
A form one side names and the other lacks is listed below with the reason, so a new one fails
``test_every_form_is_mapped_or_declared_missing`` until it is mapped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import pytest

import advest.reference.maxk as rm
from advest.proofs.definitions import Definitions

# definition method -> (reference function, the K it accepts: "k<=n" or "k<=n-1")
SHARED: dict[str, tuple[str, str]] = {
    "m_plus": ("m_plus", "k<=n"),
    "m_minus": ("m_minus", "k<=n-1"),
    "m_hat": ("m_hat", "k<=n"),  # one value per group, not per sample
    "ei": ("ei", "k<=n"),
    "l2o_baseline": ("l2o_baseline", "k<=n-1"),
    "maxpo": ("maxpo", "k<=n-1"),
    "canonical": ("canonical", "k<=n-1"),
    "ei_l1o": ("ei_l1o", "k<=n"),  # and N >= 2
    "pkpo_s": ("pkpo_s", "k<=n"),
    "pkpo_sloo": ("pkpo_sloo", "k<=n-1"),
    "pkpo_sloo_minus_one": ("pkpo_sloo_minus_one", "k<=n"),
}
REFERENCE_ONLY: dict[str, str] = {
    "comparator_max": "C_i; the proofs use it only inside EI (Definitions._ei_on)",
    "tang_passk": "EI at K = N; the proofs reach it as Definitions.ei with k = n",
    "chen_passk": "binary only; proved from spec.maxk_weights.chen_raw, not from a subset form",
    "bagirov_transform": "Eq. 9's sorted weights; proved as the form 'bagirov' = pkpo_s (I6)",
    "bagirov_centered": "transform minus its mean; proved as K(N−K)/N²·Δ (I10)",
    "bagirov_zscore": "irrational (a square root); no proof reasons about it",
}
DEFINITIONS_ONLY: dict[str, str] = {}


class FractionAlgebra:
    """One group of exact rewards: the values themselves, max over indices with max(∅) = 0."""

    def __init__(self, values: Sequence[Fraction]) -> None:
        self.values = list(values)
        self._max: dict[tuple[int, ...], Fraction] = {}  # the subsets recur across forms

    def const(self, q: Fraction) -> Fraction:
        return q

    def value(self, i: int) -> Fraction:
        return self.values[i]

    def max_of(self, items: Sequence[int]) -> Fraction:
        key = tuple(items)
        if key not in self._max:
            self._max[key] = max((self.values[i] for i in key), default=Fraction(0))
        return self._max[key]


def _definitions_forms() -> set[str]:
    """The public forms of ``Definitions`` (its methods not starting with '_')."""
    return {
        name
        for name, member in vars(Definitions).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_every_form_is_mapped_or_declared_missing() -> None:
    definitions, reference = _definitions_forms(), set(rm.__all__)
    assert definitions == set(SHARED) | set(DEFINITIONS_ONLY), (
        "proofs.definitions.Definitions forms not in SHARED or DEFINITIONS_ONLY: "
        f"{sorted(definitions - set(SHARED) - set(DEFINITIONS_ONLY))}; "
        f"listed but absent: {sorted((set(SHARED) | set(DEFINITIONS_ONLY)) - definitions)}"
    )
    mapped = {ref for ref, _ in SHARED.values()}
    assert reference == mapped | set(REFERENCE_ONLY), (
        "reference.maxk functions neither mapped in SHARED nor declared in REFERENCE_ONLY: "
        f"{sorted(reference - mapped - set(REFERENCE_ONLY))}; "
        f"listed but absent: {sorted((mapped | set(REFERENCE_ONLY)) - reference)}"
    )
    assert not mapped & set(REFERENCE_ONLY)


def _hostile_groups(n: int) -> list[list[Fraction]]:
    """Groups of n exact rewards: zeros, flat, one-hot, ties at the top and at the bottom,
    distinct with signs, an offset with a tiny spread, binary, and few levels; each in a fixed
    non-sorted order so the definitions' index bookkeeping is exercised. For n >= 8 (seconds per
    group: the brute force is exponential) only the four with the most structure: tied maximum,
    mixed signs, offset, four levels."""
    f = Fraction
    j = list(range(n))
    groups = [
        [f(0)] * n,
        [f(-3, 2)] * n,
        [f(int(i == n // 2)) for i in j],
        [f(5) if i % 3 == 0 else f(i, 4) for i in j],  # tied maximum (every third sample)
        [f(-7) if i % 2 else f(i + 1, 3) for i in j],  # tied minimum
        [f((-1) ** i * (i + 1), i + 2) for i in j],  # distinct, mixed signs
        [f(10**6) + f(i % 3, 10**7) for i in j],  # offset + tiny spread, ties
        [f((i * 5) % 3 == 1) for i in j],  # binary
        [f((i * 7) % 4, 2) - 1 for i in j],  # four levels with zeros
    ]
    return groups if n < 8 else [groups[3], groups[5], groups[6], groups[8]]


def _k_max(domain: str, n: int) -> int:
    return n if domain == "k<=n" else n - 1


def _values(d: Definitions, form: str) -> Fraction | list[Fraction]:
    method: Callable[..., Any] = getattr(d, form)
    if form == "m_hat":
        return Fraction(method())
    return [Fraction(method(i)) for i in range(d.n)]


@pytest.mark.parametrize("n", range(1, 10))
def test_definitions_equal_the_reference_exactly(n: int) -> None:
    """Every shared form, every hostile group of n, every K of its domain: equal Fractions."""
    compared = 0
    for r in _hostile_groups(n):
        for k in range(1, n + 1):
            d = Definitions(FractionAlgebra(r), n, k)
            for form, (name, domain) in SHARED.items():
                if k > _k_max(domain, n) or (form == "ei_l1o" and n < 2):
                    continue
                want = getattr(rm, name)(r, k)
                got = _values(d, form)
                assert got == want, f"{form} vs reference.maxk.{name}: r={r}, K={k}"
                compared += 1
    assert compared > 0


@pytest.mark.parametrize("n", [1, 2, 5])
def test_the_mapped_domains_are_the_references(n: int) -> None:
    """SHARED's domains are the reference's: it refuses the first K past them."""
    r = [Fraction(i) for i in range(n)]
    for name, domain in SHARED.values():
        with pytest.raises(ValueError, match=f"{name} needs 1 <= K"):
            getattr(rm, name)(r, _k_max(domain, n) + 1)
