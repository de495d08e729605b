"""Clip-Cov and KL-Cov (Cui et al., arXiv:2505.22617) as policy losses: fast == reference, the
selection rules of notes §3/§5 (spec/covariance.md), gradients, reductions, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from advest.fast.covariance import clip_cov as fast_clip
from advest.fast.covariance import kl_cov as fast_kl
from advest.fast.covariance import token_covariance
from advest.reference.covariance import clip_cov as ref_clip
from advest.reference.covariance import kl_cov as ref_kl
from advest.reference.covariance import token_covariance as ref_cov

Ragged = list[list[float]]
T = 4


@st.composite
def populations(draw: st.DrawFn) -> tuple[int, int, Ragged, Ragged, Ragged]:
    """B·G responses of 0..T valid tokens (at least one overall): ℓ, ℓ_old, per-token A."""
    b, g = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, T), min_size=b * g, max_size=b * g))
    assume(sum(lengths) > 0)
    value = st.one_of(st.sampled_from([-1.0, -0.5, 0.0]), st.floats(-5, 0, width=32).map(float))
    delta = st.one_of(st.sampled_from([0.0, 0.5, -0.5]), st.floats(-1, 1, width=32).map(float))
    ell = [draw(st.lists(value, min_size=n, max_size=n)) for n in lengths]
    old = [[x - draw(delta) for x in row] for row in ell]
    if draw(st.booleans()):  # outcome advantages broadcast to tokens
        scalars = draw(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), min_size=b * g))
        adv = [[scalars[i % len(scalars)]] * n for i, n in enumerate(lengths)]
    else:
        adv = [
            draw(st.lists(st.floats(-3, 3, width=32).map(float), min_size=n, max_size=n))
            for n in lengths
        ]
    return b, g, ell, old, adv


def _pack(b: int, g: int, rows: Ragged, fill: float) -> torch.Tensor:
    """B·G ragged responses (row-major) -> [B, G, T] padded with a garbage ``fill``."""
    out = torch.full((b * g, T), fill, dtype=torch.float64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float64)
    return out.reshape(b, g, T)


def _tensors(
    pop: tuple[int, int, Ragged, Ragged, Ragged],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    b, g, ell, old, adv = pop
    mask = _pack(b, g, [[1.0] * len(r) for r in ell], 0.0) != 0
    return _pack(b, g, ell, -123.0), _pack(b, g, old, 55.0), _pack(b, g, adv, 77.0), mask


def _unpack(x: torch.Tensor, rows: Ragged) -> list[list[float]]:
    flat = x.reshape(-1, T)
    return [flat[i, : len(r)].tolist() for i, r in enumerate(rows)]


def _covs(pop: tuple[int, int, Ragged, Ragged, Ragged]) -> list[Fraction]:
    _, _, ell, _, adv = pop
    return [c for row in ref_cov([[Fraction(x) for x in r] for r in ell], _q(adv)) for c in row]


def _q(rows: Ragged) -> list[list[Fraction]]:
    return [[Fraction(x) for x in r] for r in rows]


def _vanilla(
    lp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, lo: float, hi: float
) -> torch.Tensor:
    """The plain PPO per-token loss −min(ρA, clip(ρ)A) (training/losses.py's form)."""
    ratio = torch.exp(lp - old)
    return -torch.minimum(ratio * adv, ratio.clamp(1 - lo, 1 + hi) * adv)


def _assert_close(got: list[list[float]], want: list[list[Fraction]]) -> None:
    for g_row, w_row in zip(got, want, strict=True):
        for x, y in zip(g_row, w_row, strict=True):
            assert abs(x - float(y)) <= 1e-9 * max(1.0, abs(float(y))), (got, want)


def _no_near_ties(
    covs: list[Fraction], pivots: list[Fraction], cells: list[tuple[float, float]]
) -> bool:
    """Float rounding cannot flip a comparison: every Cov is either exactly a pivot with the same
    (ℓ, A) as every other token at that value, or at least 1e-9 away from it."""
    for p in pivots:
        near = [i for i, c in enumerate(covs) if abs(c - p) <= Fraction(1, 10**9)]
        if len({cells[i] for i in near}) > 1 or any(covs[i] != p for i in near):
            return False
    return True


CLIP_PARAMS = st.tuples(
    st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]),  # clip_cov_ratio
    st.sampled_from([-0.5, 0.05, 1.0]),  # clip_cov_lb
    st.sampled_from([0.5, 5.0, 50.0]),  # clip_cov_ub
    st.sampled_from([0.2, 1.0]),  # clip_low = clip_high
)


@given(pop=populations(), params=CLIP_PARAMS, seed=st.integers(0, 2**31))
def test_clip_cov_fast_equals_reference_with_the_same_draws(
    pop: tuple[int, int, Ragged, Ragged, Ragged],
    params: tuple[float, float, float, float],
    seed: int,
) -> None:
    ratio, lb, ub, eps = params
    _, _, ell, old, adv = pop
    covs = _covs(pop)
    assume(all(abs(c - Fraction(x)) > Fraction(1, 10**9) for c in covs for x in (lb, ub)))
    lp, lp_old, a, mask = _tensors(pop)
    kw = dict(clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub, clip_low=eps, clip_high=eps)
    got = fast_clip(lp, lp_old, a, mask, generator=torch.Generator().manual_seed(seed), **kw)
    draws = torch.rand(lp.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    want = ref_clip(ell, old, adv, _unpack(draws, ell), **kw)  # type: ignore[arg-type]
    assert [[bool(x) for x in r] for r in _unpack(got.selected.double(), ell)] == want.selected
    _assert_close(_unpack(got.loss, ell), want.loss)
    assert bool((got.loss[~mask] == 0).all()) and not bool(got.selected[~mask].any())


@given(
    pop=populations(),
    fraction=st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0]),
    beta=st.sampled_from([0.1, 1.0]),
)
def test_kl_cov_fast_equals_reference(
    pop: tuple[int, int, Ragged, Ragged, Ragged], fraction: float, beta: float
) -> None:
    _, _, ell, old, adv = pop
    covs = _covs(pop)
    cells = [(x, y) for lr, ar in zip(ell, adv, strict=True) for x, y in zip(lr, ar, strict=True)]
    n = 0 if fraction == 0 else max(1, math.floor(Fraction(str(fraction)) * len(covs)))
    ranked = sorted(covs, reverse=True)
    assume(n in (0, len(covs)) or _no_near_ties(covs, [ranked[n - 1]], cells))
    lp, lp_old, a, mask = _tensors(pop)
    got = fast_kl(lp, lp_old, a, mask, kl_cov_fraction=fraction, kl_cov_coef=beta)
    want = ref_kl(ell, old, adv, kl_cov_fraction=fraction, kl_cov_coef=beta)
    assert [[bool(x) for x in r] for r in _unpack(got.selected.double(), ell)] == want.selected
    _assert_close(_unpack(got.loss, ell), want.loss)
    assert bool((got.loss[~mask] == 0).all()) and not bool(got.selected[~mask].any())


@given(pop=populations(), params=CLIP_PARAMS, seed=st.integers(0, 2**31))
def test_clip_cov_zeroes_min_of_n_and_the_candidates_and_only_band_tokens_ppo_left_unclipped(
    pop: tuple[int, int, Ragged, Ragged, Ragged],
    params: tuple[float, float, float, float],
    seed: int,
) -> None:
    ratio, lb, ub, eps = params
    lp, lp_old, a, mask = _tensors(pop)
    out = fast_clip(
        lp, lp_old, a, mask, generator=torch.Generator().manual_seed(seed),
        clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub, clip_low=eps, clip_high=eps,
    )  # fmt: skip
    n_valid = int(mask.sum())
    x, y = lp[mask], a[mask]
    cov = torch.zeros_like(lp)
    cov[mask] = (y - y.mean()) * (x - x.mean())
    ratio_t = torch.exp(lp - lp_old)
    ppo_clipped = -a * ratio_t.clamp(1 - eps, 1 + eps) > -a * ratio_t
    candidates = mask & ~ppo_clipped & (cov > lb) & (cov < ub)
    n = max(1, math.floor(Fraction(str(ratio)) * n_valid))
    assert int(out.selected.sum()) == min(n, int(candidates.sum()))
    assert bool((out.selected <= candidates).all())
    assert bool((out.loss[out.selected] == 0).all())
    keep = mask & ~out.selected
    torch.testing.assert_close(out.loss[keep], _vanilla(lp, lp_old, a, eps, eps)[keep])


@pytest.mark.parametrize(("lb", "ub"), [(0.0, 1.0), (1.0, 5.0), (0.5, 1.5)])
def test_clip_cov_band_is_open_at_both_ends(lb: float, ub: float) -> None:
    """Every token's Cov is exactly 1 ((ℓ − ℓ̄) and (A − Ā) are ±1 together) and no token is
    PPO-clipped (ρ = 1): a band with 1 at either end selects none of them, one with 1 inside
    selects n = 1 (spec/covariance.md: clip_cov_lb < Cov < clip_cov_ub)."""
    lp = torch.tensor([[[-1.0, -1.0], [-3.0, -3.0]]], dtype=torch.float64)
    adv = torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, 2, dtype=torch.bool)
    assert token_covariance(lp, adv[..., None].expand(1, 2, 2), mask).eq(1).all()
    out = fast_clip(
        lp, lp, adv, mask, generator=torch.Generator().manual_seed(0),
        clip_cov_lb=lb, clip_cov_ub=ub,
    )  # fmt: skip
    assert int(out.selected.sum()) == (1 if lb < 1 < ub else 0)


@given(pop=populations(), fraction=st.sampled_from([0.1, 0.3, 1.0]))
def test_kl_cov_penalises_exactly_the_max_of_one_and_floor_k_n_top_covariance_tokens(
    pop: tuple[int, int, Ragged, Ragged, Ragged], fraction: float
) -> None:
    lp, lp_old, a, mask = _tensors(pop)
    out = fast_kl(lp, lp_old, a, mask, kl_cov_fraction=fraction, kl_cov_coef=0.7)
    n_valid = int(mask.sum())
    assert int(out.selected.sum()) == max(1, math.floor(Fraction(str(fraction)) * n_valid))
    cov = token_covariance(lp, a, mask)
    rest = mask & ~out.selected
    if bool(rest.any()):
        assert float(cov[out.selected].min()) >= float(cov[rest].max())
    base = -a * torch.exp(lp - lp_old)  # unclipped: KL-Cov ignores the PPO clip range
    torch.testing.assert_close(out.loss[rest], base[rest])
    pen = base + 0.7 * (lp - lp_old).abs()
    torch.testing.assert_close(out.loss[out.selected], pen[out.selected])


def test_clip_cov_selection_is_a_uniform_random_subset_reproducible_from_the_seed() -> None:
    """Six candidates, n = ⌊0.34·6⌋ = 2: each is chosen with probability 1/3; a seed repeats."""
    lp = torch.tensor([[[-1.0, -2.0, -3.0], [-3.0, -2.0, -1.0]]], dtype=torch.float64)
    adv = torch.tensor([[[1.0, 2.0, 3.0], [-3.0, -2.0, -1.0]]], dtype=torch.float64)
    mask = torch.ones(1, 2, 3, dtype=torch.bool)
    kw = dict(clip_cov_ratio=0.34, clip_cov_lb=-100.0, clip_cov_ub=100.0)
    counts = torch.zeros(1, 2, 3)
    trials = 1500
    for seed in range(trials):
        sel = fast_clip(lp, lp, adv, mask, generator=torch.Generator().manual_seed(seed), **kw)
        assert int(sel.selected.sum()) == 2
        counts += sel.selected
    freq = counts / trials  # sd of each frequency: sqrt(1/3 · 2/3 / 1500) ≈ 0.012
    assert bool(((freq - 1 / 3).abs() < 0.05).all()), freq
    again = [
        fast_clip(lp, lp, adv, mask, generator=torch.Generator().manual_seed(7), **kw)
        for _ in range(2)
    ]
    assert torch.equal(again[0].selected, again[1].selected)


def test_clip_cov_gives_selected_tokens_zero_gradient_and_the_rest_the_vanilla_gradient() -> None:
    old = torch.tensor([[[-1.0, -2.0, -0.5], [-0.3, -1.5, -4.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]]], dtype=torch.bool)
    theta = (old + torch.tensor([[[0.05, -0.1, 0.3], [0.02, 0.4, 9.0]]])).requires_grad_()
    out = fast_clip(theta, old, adv, mask, generator=torch.Generator().manual_seed(0),
                    clip_cov_ratio=0.4, clip_cov_lb=-10.0, clip_cov_ub=10.0)  # fmt: skip
    assert int(out.selected.sum()) == 2
    out.loss.sum().backward()
    assert theta.grad is not None
    assert bool((theta.grad[out.selected] == 0).all()) and bool((theta.grad[~mask] == 0).all())
    ref = theta.detach().clone().requires_grad_()
    _vanilla(ref, old, adv.unsqueeze(-1), 0.2, 0.2).sum().backward()
    assert ref.grad is not None
    keep = mask & ~out.selected
    torch.testing.assert_close(theta.grad[keep], ref.grad[keep])
    assert bool((theta.grad[keep] != 0).any())  # the check above is not vacuous


def test_kl_cov_at_the_rollout_policy_has_the_unpenalised_loss_and_gradient() -> None:
    """d|x|/dx = 0 at x = 0: on the first mini-batch the penalty acts on neither loss nor grad."""
    old = torch.tensor([[[-1.0, -2.0, -0.5], [-0.3, -1.5, -4.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, 3, dtype=torch.bool)
    theta = old.clone().requires_grad_()
    out = fast_kl(theta, old, adv, mask, kl_cov_fraction=0.5, kl_cov_coef=1.0)
    assert int(out.selected.sum()) == 3
    out.loss.sum().backward()
    plain = -adv.unsqueeze(-1).expand(1, 2, 3)  # −Aρ at ρ = 1, and its gradient −Aρ
    torch.testing.assert_close(out.loss.detach(), plain)
    assert theta.grad is not None
    torch.testing.assert_close(theta.grad, plain)


def test_kl_cov_gradient_adds_beta_times_sign_only_on_selected_tokens() -> None:
    old = torch.tensor([[[-1.0, -2.0, -0.5], [-0.3, -1.5, -4.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]]], dtype=torch.bool)
    shift = torch.tensor([[[0.1, -0.2, 0.3], [-0.1, 0.2, 5.0]]], dtype=torch.float64)
    theta = (old + shift).requires_grad_()
    out = fast_kl(theta, old, adv, mask, kl_cov_fraction=0.4, kl_cov_coef=0.5)
    out.loss.sum().backward()
    ratio = torch.exp(shift)
    want = -adv.unsqueeze(-1) * ratio + 0.5 * torch.sign(shift) * out.selected
    assert theta.grad is not None
    torch.testing.assert_close(theta.grad[mask], want[mask])
    assert bool((theta.grad[~mask] == 0).all())


@given(pop=populations(), seed=st.integers(0, 2**31))
def test_nothing_selected_reduces_to_the_plain_ppo_and_policy_gradient_losses(
    pop: tuple[int, int, Ragged, Ragged, Ragged], seed: int
) -> None:
    """Clip-Cov with an empty band is the vanilla clipped loss; KL-Cov with fraction 0 is −Aρ."""
    lp, lp_old, a, mask = _tensors(pop)
    gen = torch.Generator().manual_seed(seed)
    clip = fast_clip(lp, lp_old, a, mask, generator=gen, clip_cov_lb=1.0, clip_cov_ub=1.0)
    assert not bool(clip.selected.any())
    zero = torch.zeros((), dtype=torch.float64)
    want = torch.where(
        mask,
        _vanilla(torch.where(mask, lp, zero), torch.where(mask, lp_old, zero), a, 0.2, 0.2),
        zero,
    )
    torch.testing.assert_close(clip.loss, want)
    kl = fast_kl(lp, lp_old, a, mask, kl_cov_fraction=0.0)
    assert not bool(kl.selected.any())
    torch.testing.assert_close(kl.loss[mask], (-a * torch.exp(lp - lp_old))[mask])


@given(
    pop=populations(),
    shift_l=st.sampled_from([-3.0, 0.5, 2.0]),
    shift_a=st.sampled_from([-1.0, 0.25, 4.0]),
    scale=st.sampled_from([0.5, 3.0]),
)
def test_selection_is_invariant_to_shifts_and_top_k_to_positive_scaling(
    pop: tuple[int, int, Ragged, Ragged, Ragged], shift_l: float, shift_a: float, scale: float
) -> None:
    """Exact (reference): Cov is unchanged by adding constants to all ℓ or all A; top-k is
    unchanged by scaling A by a > 0. (Clip-Cov's band is absolute: see the next test.)"""
    _, _, ell, old, adv = pop
    draws = [[((7 * i + 3 * t) % 11) / 11 for t in range(len(r))] for i, r in enumerate(ell)]
    kw = dict(clip_cov_ratio=0.5, clip_cov_lb=0.05, clip_cov_ub=5.0)
    base_c = ref_clip(ell, old, adv, draws, **kw).selected  # type: ignore[arg-type]
    base_k = ref_kl(ell, old, adv, kl_cov_fraction=0.3).selected
    ell2 = [[Fraction(x) + Fraction(shift_l) for x in r] for r in ell]
    old2 = [[Fraction(x) + Fraction(shift_l) for x in r] for r in old]  # ρ unchanged
    adv2 = [[Fraction(x) + Fraction(shift_a) for x in r] for r in adv]
    adv_mean_shift = ref_clip(ell2, old2, _q(adv), draws, **kw).selected  # type: ignore[arg-type]
    assert adv_mean_shift == base_c
    assert ref_kl(ell2, old2, adv2, kl_cov_fraction=0.3).selected == base_k
    scaled = [[Fraction(scale) * Fraction(x) for x in r] for r in adv]
    assert ref_kl(ell, old, scaled, kl_cov_fraction=0.3).selected == base_k


def test_clip_cov_band_is_absolute_so_scaling_advantages_changes_the_selection() -> None:
    ell, adv = (
        [[-0.1, -2.0, -0.5], [-0.2, -3.0]],
        [1.0, -1.0],
    )  # Cov = [.848, −.672, .528, −1.152, 2.208]
    draws = [[0.1, 0.2, 0.3], [0.4, 0.5]]
    kw = dict(clip_cov_ratio=1.0, clip_cov_lb=0.5, clip_cov_ub=1.2)
    assert ref_clip(ell, ell, adv, draws, **kw).selected == [[True, False, True], [False, False]]  # type: ignore[arg-type]
    scaled = ref_clip(ell, ell, [0.5, -0.5], draws, **kw).selected  # type: ignore[arg-type]
    assert scaled == [[False, False, False], [False, True]]  # Cov halves: only 2.208/2 in (.5, 1.2)
    shifted = ref_clip(ell, ell, [3.0, 1.0], draws, **kw).selected  # type: ignore[arg-type]
    assert shifted == [[True, False, True], [False, False]]


def test_selection_counts_follow_prime_floor_max_one_and_read_fractions_as_decimals() -> None:
    lp = torch.linspace(-3, -0.1, 100, dtype=torch.float64).reshape(1, 1, 100)
    adv = torch.linspace(-1, 1, 100, dtype=torch.float64).reshape(1, 1, 100)
    mask = torch.ones(1, 1, 100, dtype=torch.bool)
    assert int(fast_kl(lp, lp, adv, mask, kl_cov_fraction=0.29).selected.sum()) == 29  # float: 28
    assert int(fast_kl(lp, lp, adv, mask).selected.sum()) == 1  # max(1, ⌊0.002·100⌋)
    assert int(fast_kl(lp, lp, adv, mask, kl_cov_fraction=0.0).selected.sum()) == 0
    gen = torch.Generator().manual_seed(0)
    band = dict(clip_cov_lb=-1e9, clip_cov_ub=1e9)
    assert int(fast_clip(lp, lp, adv, mask, generator=gen, **band).selected.sum()) == 1
    zero = fast_clip(lp, lp, adv, mask, generator=gen, clip_cov_ratio=0.0, **band)
    assert int(zero.selected.sum()) == 1  # PRIME: max(1, ⌊0·N⌋)
    assert (
        int(fast_clip(lp, lp, adv, mask, generator=gen, clip_cov_ratio=0.07, **band).selected.sum())
        == 7
    )


def test_worked_example_selection_on_the_notes_covariance_example() -> None:
    """Notes §2.3's group: Cov = [0.848, −0.672, 0.528, −1.152, 2.208]."""
    ell, adv = [[-0.1, -2.0, -0.5], [-0.2, -3.0]], [1.0, -1.0]
    assert ref_kl(ell, ell, adv, kl_cov_fraction=0.4).selected == [
        [True, False, False],
        [False, True],
    ]
    lp = torch.tensor([[[-0.1, -2.0, -0.5], [-0.2, -3.0, 0.0]]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]]], dtype=torch.bool)
    a = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    out = fast_kl(lp, lp, a, mask, kl_cov_fraction=0.4)
    assert out.selected.tolist() == [[[True, False, False], [False, True, False]]]
    got = ref_clip(
        ell, ell, adv, [[0.5, 0.1, 0.2], [0.3, 0.9]], clip_cov_ratio=0.4, clip_cov_lb=0.5
    )
    assert got.selected == [[True, False, True], [False, False]]  # band (.5, 5): .848, .528, 2.208
    assert got.loss == [[0, -1, 0], [1, 1]]


def test_bad_input_raises_clear_errors() -> None:
    lp = torch.zeros(2, 3, 4, dtype=torch.float64)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    adv = torch.zeros(2, 3, dtype=torch.float64)
    gen = torch.Generator()
    with pytest.raises(ValueError, match="old_logprobs has shape"):
        fast_kl(lp, lp[:, :, :2], adv, mask)
    with pytest.raises(TypeError, match=r"old_logprobs must be a torch\.Tensor"):
        fast_kl(lp, [0.0], adv, mask)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="old_logprobs must be a floating-point"):
        fast_kl(lp, lp.long(), adv, mask)
    bad = lp.clone()
    bad[1, 2, 0] = math.nan
    with pytest.raises(
        ValueError, match=r"old_logprobs has a non-finite value in group 1 \(sample 2, token 0\)"
    ):
        fast_clip(lp, bad, adv, mask, generator=gen)
    with pytest.raises(ValueError, match=r"logprobs has a non-finite value in group 1"):
        fast_kl(bad, lp, adv, mask)
    with pytest.raises(ValueError, match="without valid tokens"):
        fast_kl(lp, lp, adv, torch.zeros_like(mask))
    with pytest.raises(ValueError, match=r"advantages must have shape \[B, G\] or \[B, G, T\]"):
        fast_kl(lp, lp, torch.zeros(3, 2), mask)
    with pytest.raises(ValueError, match=r"kl_cov_fraction must be a fraction in \[0, 1\]"):
        fast_kl(lp, lp, adv, mask, kl_cov_fraction=0.2 * 100)  # a PRIME percentage, not a fraction
    with pytest.raises(ValueError, match="kl_cov_coef must be >= 0"):
        fast_kl(lp, lp, adv, mask, kl_cov_coef=-1.0)
    # the boundary is allowed: β = 0 selects tokens but penalises none (the loss is −Aρ alone)
    zero_coef = fast_kl(lp + 0.5, lp, adv, mask, kl_cov_fraction=0.5, kl_cov_coef=0.0)
    assert bool(zero_coef.selected.any())
    torch.testing.assert_close(
        zero_coef.loss, fast_kl(lp + 0.5, lp, adv, mask, kl_cov_fraction=0.0).loss
    )
    with pytest.raises(ValueError, match="clip_cov_ratio must be a fraction"):
        fast_clip(lp, lp, adv, mask, generator=gen, clip_cov_ratio=-0.1)
    with pytest.raises(ValueError, match="clip_cov_lb must be finite"):
        fast_clip(lp, lp, adv, mask, generator=gen, clip_cov_lb=math.nan)
    with pytest.raises(ValueError, match="need 0 <= clip_low <= 1"):
        fast_clip(lp, lp, adv, mask, generator=gen, clip_low=1.5)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        fast_clip(lp, lp, adv, mask, generator=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no valid tokens"):
        ref_kl([[], []], [[], []], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"old_logprobs\[1\] has 1 tokens but logprobs\[1\] has 2"):
        ref_kl([[-1.0], [-1.0, -2.0]], [[-1.0], [-1.0]], [1.0, 0.0])
    with pytest.raises(ValueError, match="draws must hold one number per valid token"):
        ref_clip([[-1.0, -2.0]], [[-1.0, -2.0]], [1.0], [[0.5]])
    with pytest.raises(ValueError, match="draws must hold one number per valid token"):
        ref_clip([[-1.0, -2.0]], [[-1.0, -2.0]], [1.0], [[0.5, 0.5], [0.5]])  # a rollout too many
    with pytest.raises(ValueError, match="draws must hold one number per valid token"):
        ref_clip([[-1.0, -2.0]], [[-1.0, -2.0]], [1.0], [[0.5, 0.5, 0.5]])  # a token too many
    with pytest.raises(ValueError, match=r"kl_cov_fraction must be a fraction in \[0, 1\]"):
        ref_kl([[-1.0]], [[-1.0]], [1.0], kl_cov_fraction=2)
    padded = lp.clone()
    padded[1, 2, 3] = math.inf  # padding may hold anything, even with grad
    no_pad = mask.clone()
    no_pad[1, 2, 3] = False
    theta = padded.clone().requires_grad_()
    fast_clip(theta, lp, adv, no_pad, generator=gen).loss.sum().backward()
    assert theta.grad is not None and bool(torch.isfinite(theta.grad).all())
