"""The two max@K paths (spec/maxk_paths.md §Counting path): ``auto`` picks counts exactly when every
group has at most ``MAX_LEVELS`` distinct rewards, and switching paths never moves a result
beyond the float64 contract. (Every differential and property test also runs on both paths,
forced: tests/conftest.py.)"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
import torch

from advest.fast import maxk, registry
from advest.reference import maxk_closed
from tests.maxk_paths import Path, forced_path

SORTED_FAMILY = [
    name
    for name in registry.names()
    if registry.entry(name).k_range is not None and name not in ("tang_passk", "chen_passk")
]


def _k_max(name: str, G: int) -> int:
    return registry.entry(name).k_max(G)


def _run(name: str, path: Path, rewards: torch.Tensor, k: int) -> torch.Tensor:
    fn: Callable[[torch.Tensor, int], torch.Tensor] = getattr(maxk, name)
    with forced_path(path):
        return fn(rewards, k)


def _levels(B: int, G: int, L: int, seed: int) -> torch.Tensor:
    """``[B, G]`` float32 with exactly L distinct values in every group (offset, uneven gaps)."""
    gen = torch.Generator().manual_seed(seed)
    values = 100 + torch.rand(B, L, generator=gen).cumsum(-1) + torch.arange(L)  # ascending
    index = torch.cat(
        [torch.arange(L).expand(B, L), torch.randint(0, L, (B, G - L), generator=gen)], 1
    )
    index = index.gather(1, torch.argsort(torch.rand(B, G, generator=gen), dim=1))
    return values.gather(1, index).float()


@pytest.mark.parametrize("name", SORTED_FAMILY)
def test_auto_counts_up_to_max_levels_and_sorts_beyond(name: str) -> None:
    """Bitwise: auto == forced counts at 2 and max_levels(G) levels, == forced sorted at one
    level more (also when only a later group has too many levels), and sorted at G = 8."""
    G, k = 64, 3
    assert maxk.max_levels(G) == maxk.MAX_LEVELS
    for L in (2, maxk.MAX_LEVELS):
        r = _levels(5, G, L, seed=L)
        assert maxk.path_for(r) == "counts"
        assert torch.equal(_run(name, "auto", r, k), _run(name, "counts", r, k)), L
    many = _levels(5, G, maxk.MAX_LEVELS + 1, seed=0)
    late = torch.cat([_levels(1, G, 2, seed=1), many[1:]])  # the first group passes the probe
    for r in (many, late):
        assert maxk.path_for(r) == "sorted"
        assert torch.equal(_run(name, "auto", r, k), _run(name, "sorted", r, k))
    with forced_path("counts"):
        assert maxk.path_for(many) == "counts"
    assert maxk.path_for(_levels(5, 8, 2, seed=0)) == "sorted"  # G // 8 = 1: sorting 8 is cheap


def _batch(G: int, seed: int) -> torch.Tensor:
    """Hostile groups of G in float64: binary, 3 levels with an offset, flat, one sample apart
    from the rest, 1e3 + tiny spread, negative and mixed signs."""
    gen = torch.Generator().manual_seed(seed)
    binary = (torch.rand(G, generator=gen) > 0.3).double()
    three = 1e3 + torch.randint(0, 3, (G,), generator=gen).double() / 7
    flat = torch.full((G,), -3.5, dtype=torch.float64)
    lone = torch.zeros(G, dtype=torch.float64)
    lone[seed % G] = 1.0
    tiny = 1000.0 + 1e-4 * torch.randint(0, 2, (G,), generator=gen).double()
    signs = torch.randint(-2, 3, (G,), generator=gen).double() * 0.25
    return torch.stack([binary, three, flat, lone, tiny, signs])


@pytest.mark.parametrize("G", [2, 8, 64, 1024])
@pytest.mark.parametrize("name", SORTED_FAMILY)
def test_paths_agree_within_the_float64_contract(name: str, G: int) -> None:
    """counts vs sorted, every K at small G and a spread of K at large G: within 2·1e-9 of
    max(max|r|, max|A|) per group (each path is within 1e-9 of exact), exact zeros on both."""
    r = _batch(G, seed=G)
    top = _k_max(name, G)
    ks = range(1, top + 1) if G <= 8 else sorted({1, 2, 3, G // 2, top - 1, top})
    for k in ks:
        a, b = _run(name, "counts", r, k), _run(name, "sorted", r, k)
        scale = torch.maximum(r.abs().amax(1), torch.maximum(a.abs().amax(1), b.abs().amax(1)))
        err = (a - b).abs().amax(1)
        assert bool((err <= 2e-9 * scale).all()), (k, err / scale)
        if name in ("maxpo", "canonical", "bagirov_centered", "bagirov_zscore"):
            assert not a[2].any() and not b[2].any(), k  # the flat group: exact zeros


@pytest.mark.parametrize(("L", "k"), [(2, 1), (2, 2), (2, 17), (2, 1023), (5, 3), (5, 512)])
def test_counting_path_matches_the_exact_closed_form_at_g_1024(L: int, k: int) -> None:
    """G = 1024 with 2 or 5 levels and an offset, forced counts, in float64 against the exact
    rational closed form (itself checked against the subset definitions)."""
    r = _levels(1, 1024, L, seed=k).double()
    blocks = maxk_closed.blocks([Fraction(x) for x in r[0].tolist()], k)
    want = {"canonical": blocks.canonical, "ei": blocks.ei, "l2o_baseline": blocks.l2o_baseline}
    for name, exact in want.items():
        got = _run(name, "counts", r, k)[0].tolist()
        scale = max(abs(x) for x in [*r[0].tolist(), *map(float, exact)])
        err = max(abs(Fraction(g) - e) for g, e in zip(got, exact, strict=True))
        assert err <= Fraction(1e-9) * Fraction(scale), (name, float(err))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_low_precision_input_gives_the_same_result_on_both_paths(dtype: torch.dtype) -> None:
    """Both paths compute in float64 from the exactly widened input and round once at the end,
    so they agree to the output's last bit or two."""
    r = torch.tensor(
        [[0.0, 1.0, 0.5, 1.0, 0.0, 0.25], [2.0, 2.0, -1.0, 2.0, -1.0, 0.0]], dtype=dtype
    )
    for name in SORTED_FAMILY:
        a, b = _run(name, "counts", r, 2), _run(name, "sorted", r, 2)
        assert a.dtype == b.dtype == dtype
        eps = torch.finfo(dtype).eps
        assert bool(((a.double() - b.double()).abs() <= 2 * eps * (1 + b.double().abs())).all()), (
            name
        )


def test_edge_shapes_and_extreme_values_on_the_counting_path() -> None:
    """B = 0, G = 1, ±0.0 ties, and values near the float32 limit (the level search widens to
    float64) or the float64 limit (the counting path declines and the sort runs)."""
    assert _run("ei", "counts", torch.zeros(0, 4), 2).shape == (0, 4)
    assert torch.equal(_run("ei", "counts", torch.tensor([[2.5]]), 1), torch.tensor([[2.5]]))
    zeros = torch.tensor([[-0.0, 0.0, 1.0, 0.0]])
    assert torch.equal(_run("canonical", "counts", zeros, 2), _run("canonical", "sorted", zeros, 2))
    big32 = torch.tensor([[-3e38, 3e38, 3e38, -3e38, 0.0]])
    assert torch.equal(_run("pkpo_s", "counts", big32, 2), _run("pkpo_s", "sorted", big32, 2))
    big64 = torch.tensor([[-5e307, 5e307, 5e307]], dtype=torch.float64)
    with forced_path("counts"):
        assert maxk.path_for(big64) == "sorted"
    assert torch.equal(_run("ei", "counts", big64, 2), _run("ei", "sorted", big64, 2))
    near = big64 / 5  # within range: counts, and within the contract of the sort
    err = (_run("ei", "counts", near, 2) - _run("ei", "sorted", near, 2)).abs().amax()
    assert err <= 1e-9 * 1e307


def test_forced_path_names_the_valid_paths() -> None:
    context = forced_path("fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"path must be one of \('auto', 'sorted', 'counts'\)"):
        context.__enter__()
