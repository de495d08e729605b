"""Meta-tests: the names in fast (the registry), reference, spec and the catalogue are one set."""

from __future__ import annotations

import importlib
import re
from fractions import Fraction
from pathlib import Path

import pytest
import torch

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.fast import registry
from advest.oracle.reports.catalogue import (
    CATALOGUE,
    EPISODE_NAMES,
    FAMILIES,
    HISTORY_CATALOGUE,
    TOKEN_CATALOGUE,
    Row,
)

SPEC = Path(__file__).parents[3] / "spec"


def _spec_names() -> set[str]:
    """Estimators documented in spec/*.md: each has a '### `name`' heading."""
    text = "".join(p.read_text() for p in SPEC.glob("*.md"))
    return set(re.findall(r"^### `([a-z_0-9]+)`", text, flags=re.M))


def test_every_registered_estimator_has_a_catalogue_row_a_reference_and_a_spec_section() -> None:
    registered = set(registry.names())
    kind = {n: registry.entry(n).kind for n in registered}
    outcome = {n for n, f in kind.items() if f in ("sequence", "multi_reward")}
    assert {row.name for row in CATALOGUE} == outcome
    assert {row.name for row in TOKEN_CATALOGUE} == {n for n, f in kind.items() if f == "token"}
    history = {n for n, f in kind.items() if f == "history"}
    assert {row.name for row in HISTORY_CATALOGUE} == history
    episode = {n for n, f in kind.items() if f == "episode"}
    assert set(EPISODE_NAMES) == episode  # judged by the episode oracle
    assert all(registry.entry(n).stateful for n in history)
    reference_names: set[str] = set()
    fast_names: set[str] = set()
    for family in FAMILIES:
        reference_names |= set(importlib.import_module(f"advest.reference.{family}").__all__)
        fast_names |= set(importlib.import_module(f"advest.fast.{family}").__all__)
    assert registered <= reference_names
    assert fast_names == registered
    assert _spec_names() == registered


def test_registry_returns_the_module_function_and_lists_names_on_a_miss() -> None:
    assert registry.get("maxpo") is fast.maxk.maxpo
    assert registry.get("grpo") is fast.group.grpo
    with pytest.raises(KeyError, match=r"unknown estimator 'maxpoo'; valid names: .*maxpo"):
        registry.get("maxpoo")


def test_the_registrys_largest_k_is_the_top_of_the_catalogues_k_values() -> None:
    """``Entry.k_max`` (from ``K_MAX_OFFSET``) and the catalogue's K values (written apart)
    agree for every estimator with a K domain and every group size, K = G's included."""
    domains = {row.name: row.k_domain for row in CATALOGUE if row.k_domain is not None}
    assert {"k<=n", "k<=n-1", "k=n"} <= set(domains.values())  # every domain is exercised
    for row in CATALOGUE:
        if row.k_domain is not None:
            e = registry.entry(row.name)
            assert e.k_range == row.k_domain
            assert [e.k_max(n) for n in range(2, 10)] == [
                max(row.k_values(n)) for n in range(2, 10)
            ]


def _spec_costs(family: str) -> dict[str, str]:
    """The Cost table of ``spec/<family>.md``: ``| `name` | O(order) |`` rows under '## Cost'."""
    text = (SPEC / f"{family}.md").read_text()
    section = text.split("\n## Cost\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z_0-9]+)` \| O\((.+)\) \|$", section, flags=re.M))


def test_each_spec_page_states_the_cost_its_estimators_register() -> None:
    """The order on the page is the registry's ``cost`` (what docs/cost.md measures), for every
    estimator of the family and no other."""
    for family in registry.families():
        stated = {e.name: e.cost for e in registry.entries() if e.family == family}
        assert _spec_costs(family) == stated, family


def test_registry_refuses_a_cost_it_cannot_read_and_fills_the_kinds_default() -> None:
    with pytest.raises(ValueError, match=r"estimator 'x': cost 'B·Q': unknown size 'Q'"):
        registry.register("x", cost="B·Q", tolerance={})(lambda rewards: rewards)
    assert "x" not in registry.names()
    for e in registry.entries():
        assert e.cost, e.name
    assert registry.entry("grpo").cost == registry.COST_BY_KIND["sequence"] == "B·G"
    assert registry.entry("turn_rloo").cost == registry.COST_BY_KIND["episode"]


def test_registry_refuses_duplicates() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("maxpo", k_range="k<=n-1", tolerance={})(lambda r, k: r)


def test_registry_entries_say_how_to_call_each_estimator() -> None:
    rewards = torch.rand(3, 6, dtype=torch.float64)
    for name in registry.names():
        e = registry.entry(name)
        if e.kind != "sequence":
            continue  # own inputs: test_gdpo.py, test_covariance.py, test_ktae.py, test_kae.py,
            # test_episode.py
        args: list[object] = [rewards]
        if e.needs_k:
            args.append(2)
        if e.needs_lengths:
            args.append(torch.ones(3, 6))
        rewards_in = (rewards > 0.5).double() if name == "chen_passk" else rewards
        out = e.fn(rewards_in, *args[1:])
        assert out.shape == (3, 6) and out.dtype == torch.float64


def test_every_proof_and_test_named_in_the_spec_exists() -> None:
    """spec/*.md links each claim to a test or a proof; every link must resolve."""
    import ast
    import importlib

    text = "".join(p.read_text() for p in SPEC.glob("*.md"))
    proofs = set(re.findall(r"proofs\.(\w+)\.(\w+)", text))
    assert len(proofs) >= 12
    for module, name in proofs:
        assert hasattr(importlib.import_module(f"advest.proofs.{module}"), name), (module, name)
    tests_dir = Path(__file__).parents[2]
    named = set(re.findall(r"(test_\w+\.py)::(test_\w+)", text))
    assert len(named) >= 20
    for file, name in named:  # a file's tiers share its name (tests/core/x/, tests/slow/x/)
        trees = [ast.parse(path.read_text()) for path in tests_dir.rglob(file)]
        defined = {n.name for t in trees for n in ast.walk(t) if isinstance(n, ast.FunctionDef)}
        assert name in defined, (file, name)


SHIPPED = sorted(p.name for p in (SPEC.parent / "advest").iterdir() if p.is_symlink())
"""Every package folder that ships (the advest/ links name them)."""


def test_nothing_that_ships_imports_the_tests() -> None:
    """The tests' helpers (tests/checks.py, ...) live in tests/, and shipped code never needs
    them: a wheel carries no tests/."""
    root = Path(__file__).parents[3]
    offenders = [
        f"{path.relative_to(root)}: {line.strip()}"
        for package in SHIPPED
        for path in sorted((root / package).rglob("*.py"))
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from|import)\s+(advest\.)?tests\b", line)
    ]
    assert not offenders


def test_the_default_rows_carry_the_scale_the_registry_declares() -> None:
    """The registry entry's Claims.pg_scale is the claim the catalogue's default-option row makes
    (checked by exact enumeration in tests/core/experiments/test_bandit.py) and the scale the bandit
    experiment divides by, so neither keeps a table of its own."""
    from advest.experiments.bandit import pg_scale

    cited = {row.name: row.pg_scale for row in CATALOGUE if not row.options and row.pg_scale}
    # the episode estimators' scale is checked on episode trees (tests/core/oracle/test_episodes.py)
    outcome = [e for e in registry.entries() if e.kind in ("sequence", "multi_reward")]
    declared = {e.name: e.scale for e in outcome if e.scale is not None}
    assert cited == declared and set(declared) >= {"maxpo", "rloo", "dr_grpo", "pkpo_s"}
    for name, scale in declared.items():
        k = 1 if registry.entry(name).k_range is None else 2
        assert pg_scale(name, 4, 2) == float(scale(4, k)), name


def test_a_row_is_declared_rational_exactly_when_its_reference_is_exact() -> None:
    """``Claims.rational`` (exact comparison with the reference) against what the reference
    returns: on small integer rewards whose spread has an irrational square root, an exact
    rational estimator's denominators stay far below 10^40 (a few products of small numbers),
    and one that divides by a standard deviation gives its 60-digit approximation's."""
    batch = [[Fraction(v) for v in g] for g in ([0, 1, 1, 0, 1], [2, 0, 1, 1, 1])]
    for row in CATALOGUE:
        if row.name == "chen_passk":  # binary rewards only
            groups = [[Fraction(v) for v in g] for g in ([0, 1, 1, 0, 1], [1, 0, 0, 0, 1])]
        else:
            groups = batch
        lengths = [[1, 2, 3, 2, 1]] * 2 if row.needs_lengths else None
        out = row.call_reference(groups, row.k_values(5)[0], lengths)
        exact = max(Fraction(v).denominator for g in out for v in g) < 10**40
        assert exact == row.rational, (row.id, row.rational, out[0][0])


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_the_smallest_group_a_row_declares_is_the_smallest_both_implementations_accept(
    row: Row,
) -> None:
    """``Claims.min_n`` (with the K domain: K <= N - 1 needs N >= 2) against behaviour: a group
    of that size is accepted, one sample fewer is refused with a ValueError."""
    smallest = max(row.min_n, 2 if row.k_domain == "k<=n-1" else 1)
    k = row.k_values(smallest)[0]
    b = max(2, row.min_b)
    for impl in ("reference", "fast"):
        _call(row, impl, b, smallest, k)
        if smallest > 1:
            with pytest.raises(ValueError):
                _call(row, impl, b, smallest - 1, min(k, smallest - 1))


def _call(row: Row, impl: str, b: int, n: int, k: int) -> object:
    """``row``'s reference or fast estimator on ``b`` groups of ``n`` alternating 0/1 rewards
    (1 first), every response one token long."""
    groups = [[Fraction(1 - i % 2) for i in range(n)] for _ in range(b)]
    if impl == "reference":
        return row.call_reference(groups, k, [[1] * n] * b if row.needs_lengths else None)
    rewards = torch.tensor([[float(v) for v in g] for g in groups], dtype=torch.float64)
    lengths = torch.ones(rewards.shape, dtype=torch.long) if row.needs_lengths else None
    return row.call_fast(rewards, k, lengths)


# The estimators spec/*.md says give exact zeros on constant groups (spec/group.md, maxk.md,
# maxrl.md, gdpo.md), written apart from the registry: the property test that backs those
# sentences (test_properties.py::test_degenerate_groups_give_exact_zeros) picks its rows by the
# flag, so a flag dropped in a declaration would silently stop checking the spec's claim.
SPEC_EXACT_ZEROS = {
    "grpo", "dr_grpo", "rloo", "grpo_batch_std", "reinforce_pp", "gdpo", "opo", "maxpo",
    "canonical", "bagirov_centered", "bagirov_zscore", "chen_passk", "maxrl",
}  # fmt: skip


def test_every_estimator_the_spec_says_gives_exact_zeros_on_flat_groups_claims_it() -> None:
    claimed = {row.name for row in CATALOGUE if row.exact_zero_on_flat and not row.options}
    assert claimed == SPEC_EXACT_ZEROS


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_the_fewest_groups_a_row_declares_is_the_fewest_both_implementations_accept(
    row: Row,
) -> None:
    """``Claims.min_b`` against behaviour: a batch of that many groups is accepted, one group
    fewer (while at least one) is refused with a ValueError naming the count."""
    n = max(row.min_n, 3)
    k = row.k_values(n)[0]

    for impl in ("reference", "fast"):
        _call(row, impl, row.min_b, n, k)
        if row.min_b > 1:
            with pytest.raises(ValueError, match=f"got B={row.min_b - 1}"):
                _call(row, impl, row.min_b - 1, n, k)
