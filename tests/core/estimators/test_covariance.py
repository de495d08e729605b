"""Covariance-aware reweighting: fast == reference, spec/covariance.md's properties, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from advest.fast.covariance import covariance_weights as fast_cw
from advest.reference.covariance import covariance_weights as ref_cw

Ragged = list[list[float]]


@st.composite
def scopes(draw: st.DrawFn, max_g: int = 4, max_t: int = 5) -> tuple[Ragged, Ragged, int]:
    """One group: G responses of 1..T valid tokens, log-probs and per-token advantages."""
    g = draw(st.integers(1, max_g))
    lengths = draw(st.lists(st.integers(1, max_t), min_size=g, max_size=g))
    value = st.one_of(
        st.sampled_from([-1.0, -0.5, 0.0, 0.25]),  # ties
        st.floats(-20, 0, allow_nan=False, width=32).map(float),
    )
    ell = [draw(st.lists(value, min_size=n, max_size=n)) for n in lengths]
    per_response = draw(st.booleans())
    if per_response:  # outcome advantages broadcast to tokens
        adv_scalar = draw(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), min_size=g, max_size=g))
        adv = [[a] * n for a, n in zip(adv_scalar, lengths, strict=True)]
    else:
        adv = [
            draw(st.lists(st.floats(-3, 3, width=32).map(float), min_size=n, max_size=n))
            for n in lengths
        ]
    return ell, adv, max_t


def _pack(
    groups: list[tuple[Ragged, Ragged]], t: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ragged groups (same G) -> logprobs, advantages, mask [B, G, T], padding with garbage."""
    b, g = len(groups), len(groups[0][0])
    lp = torch.full((b, g, t), -123.0, dtype=torch.float64)
    adv = torch.full((b, g, t), 77.0, dtype=torch.float64)
    mask = torch.zeros((b, g, t), dtype=torch.bool)
    for i, (ell, a) in enumerate(groups):
        for j, (row_l, row_a) in enumerate(zip(ell, a, strict=True)):
            lp[i, j, : len(row_l)] = torch.tensor(row_l, dtype=torch.float64)
            adv[i, j, : len(row_a)] = torch.tensor(row_a, dtype=torch.float64)
            mask[i, j, : len(row_l)] = True
    return lp, adv, mask


def _mismatches(
    got: torch.Tensor, want: list[list[Fraction]], tol: float = 1e-9
) -> list[tuple[int, int, float, Fraction]]:
    """(response j, token t, fast, exact) for every valid token where fast is off by more than
    tol times the output scale (spec/tolerances.py: max w̃ over the scope, >= 1 as mean w̃ = 1);
    every reference token is compared."""
    assert got.shape[0] == len(want) and all(len(row) <= got.shape[1] for row in want)
    scale = max(abs(float(w)) for row in want for w in row)
    return [
        (j, t, float(got[j, t]), w)
        for j, row in enumerate(want)
        for t, w in enumerate(row)
        if not abs(float(got[j, t]) - float(w)) <= tol * scale
    ]


@pytest.mark.parametrize("ddof", [1, 0])
@given(scope=scopes(), other=scopes())
def test_fast_equals_reference_per_group(
    ddof: int, scope: tuple[Ragged, Ragged, int], other: tuple[Ragged, Ragged, int]
) -> None:
    ell, adv, t = scope
    ell2, adv2, _ = other
    g = len(ell)
    ell2, adv2 = (ell2 * g)[:g], (adv2 * g)[:g]  # a second group with the same G
    lp, a, mask = _pack([(ell, adv), (ell2, adv2)], t)
    out = fast_cw(lp, a, mask, ddof=ddof)
    assert not _mismatches(out.weights[0], ref_cw(ell, adv, ddof=ddof))
    assert not _mismatches(
        out.weights[1], ref_cw(ell2, adv2, ddof=ddof)
    )  # isolation: computed alongside group 0
    assert bool((out.weights[~mask] == 0).all())
    torch.testing.assert_close(out.advantages, out.weights * a * mask)


def test_a_tiny_but_nonzero_variance_gives_finite_weights_not_nan() -> None:
    """Every exp(−c²/2σ²) underflows to 0 here; the weights must still be the reference's
    (found by hypothesis: a Σw = 0 made w̃ = 0/0)."""
    ell, adv = [[-1.0, -0.5]], [[1.0, 1.5e-15]]
    lp, a, mask = _pack([(ell, adv)], 2)
    out = fast_cw(lp, a, mask, ddof=0)
    assert bool(torch.isfinite(out.weights).all())
    assert not _mismatches(out.weights[0], ref_cw(ell, adv, ddof=0))


SMALL_EXAMPLE = ([[-1.0, -0.5, 0.0], [-2.0, 0.25]], [[1.0, 1.0, 1.0], [-1.0, -1.0]], 5)


@pytest.mark.parametrize("size", [1e-4, 1e-8, 1e-16])
@example(scope=SMALL_EXAMPLE)
@given(scope=scopes())
def test_weights_at_small_scales_equal_the_reference(
    size: float, scope: tuple[Ragged, Ragged, int]
) -> None:
    """Log-probs and advantages around 1e-8 give c ~ 1e-16 and σ² ~ 1e-32: the rounding-noise
    floor on σ² must be (16ε·max|c|)², a square; left unsquared (~1e-31) it exceeds σ² and makes
    every weight 1.0. The weights are scale-free, so they also equal those at size 1."""
    ell, adv, t = scope
    small_l = [[size * x for x in row] for row in ell]
    small_a = [[size * x for x in row] for row in adv]
    lp, a, mask = _pack([(small_l, small_a)], t)
    want = ref_cw(small_l, small_a)
    assert not _mismatches(fast_cw(lp, a, mask).weights[0], want)
    if scope == SMALL_EXAMPLE:  # the control: these weights are not all 1
        assert any(abs(float(w) - 1) > 0.1 for row in want for w in row)


def test_rounding_in_the_centring_is_not_taken_for_a_spread_of_c() -> None:
    """At two tokens the exact c are equal (c = (ℓ₁ − ℓ̄)(A₁ − Ā) = (ℓ₂ − ℓ̄)(A₂ − Ā)), so w ≡ 1;
    scaled by 1e-4 the centred inputs round relative to the inputs, not to their spread, and a
    floor on σ² set by |c| alone took that rounding for signal (found by hypothesis: weights 0
    and 2)."""
    ell, adv = [[-1e-4, -0.5e-4]], [[2.5e-4, 2.671875e-4]]
    lp, a, mask = _pack([(ell, adv)], 2)
    assert ref_cw(ell, adv) == [[1, 1]]
    assert not _mismatches(fast_cw(lp, a, mask).weights[0], ref_cw(ell, adv))


@given(scope=scopes())
def test_batch_scope_with_one_group_equals_group_scope(scope: tuple[Ragged, Ragged, int]) -> None:
    ell, adv, t = scope
    lp, a, mask = _pack([(ell, adv)], t)
    torch.testing.assert_close(
        fast_cw(lp, a, mask, scope="batch").weights, fast_cw(lp, a, mask).weights
    )


@given(s1=scopes(max_g=2), s2=scopes(max_g=2))
def test_batch_scope_equals_reference_on_all_tokens(
    s1: tuple[Ragged, Ragged, int], s2: tuple[Ragged, Ragged, int]
) -> None:
    g = min(len(s1[0]), len(s2[0]))
    groups = [(s1[0][:g], s1[1][:g]), (s2[0][:g], s2[1][:g])]
    lp, a, mask = _pack(groups, 5)
    out = fast_cw(lp, a, mask, scope="batch").weights
    want = ref_cw(groups[0][0] + groups[1][0], groups[0][1] + groups[1][1])
    assert not _mismatches(torch.cat([out[0], out[1]]), want)


@given(scope=scopes())
def test_kernel_shape_normalisation_and_signs(scope: tuple[Ragged, Ragged, int]) -> None:
    """0 < w̃ on valid tokens, mean w̃ = 1 over the scope, w̃ <= N_S/Σw with equality where c = 0,
    and sign(w̃A) = sign(A)."""
    ell, adv, t = scope
    lp, a, mask = _pack([(ell, adv)], t)
    out = fast_cw(lp, a, mask)
    w = out.weights[mask]
    assert bool((w > 0).all())
    assert abs(float(w.mean()) - 1) <= 1e-12
    assert bool((torch.sign(out.advantages[mask]) == torch.sign(a[mask])).all())


def test_weights_are_all_one_when_every_covariance_has_the_same_size() -> None:
    """Reduction to the base estimator: |c| equal everywhere gives w̃ ≡ 1."""
    lp = torch.tensor([[[-1.0, -3.0], [-3.0, -1.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)  # c = ±1 on every token
    mask = torch.ones(1, 2, 2, dtype=torch.bool)
    assert fast_cw(lp, adv, mask).weights.tolist() == [[[1.0, 1.0], [1.0, 1.0]]]


@pytest.mark.parametrize("case", ["constant_advantage", "constant_logprob", "single_token"])
def test_degenerate_scopes_give_weight_one_exactly(case: str) -> None:
    lp = torch.tensor([[[-0.1, -2.0, -0.5], [-0.2, -3.0, 0.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]]], dtype=torch.bool)
    if case == "constant_advantage":
        adv = torch.full((1, 2), 0.3, dtype=torch.float64)  # e.g. KAE on a constant-reward group
    elif case == "constant_logprob":
        lp = torch.full_like(lp, -0.7)
    else:
        mask = torch.zeros_like(mask)
        mask[0, 0, 0] = True
    w = fast_cw(lp, adv, mask).weights
    assert bool((w[mask] == 1).all()) and bool((w[~mask] == 0).all())


@given(
    scope=scopes(),
    shift_l=st.floats(-5, 5),
    shift_a=st.floats(-5, 5),
    scale=st.sampled_from([-2.0, 0.5, 3.0]),
)
def test_weights_are_invariant_to_shifts_and_scales_of_logprobs_and_advantages(
    scope: tuple[Ragged, Ragged, int], shift_l: float, shift_a: float, scale: float
) -> None:
    ell, adv, t = scope
    lp, a, mask = _pack([(ell, adv)], t)
    base = fast_cw(lp, a, mask).weights
    moved = fast_cw(scale * lp + shift_l, scale * a + shift_a, mask).weights
    degenerate_now = bool((base[mask] == 1).all())
    if not degenerate_now:
        torch.testing.assert_close(moved, base, rtol=1e-6, atol=1e-9)


@given(scope=scopes(), data=st.data())
def test_permuting_responses_permutes_weights(
    scope: tuple[Ragged, Ragged, int], data: st.DataObject
) -> None:
    ell, adv, t = scope
    perm = data.draw(st.permutations(range(len(ell))))
    lp, a, mask = _pack([(ell, adv)], t)
    lp2, a2, mask2 = _pack([([ell[j] for j in perm], [adv[j] for j in perm])], t)
    torch.testing.assert_close(
        fast_cw(lp2, a2, mask2).weights, fast_cw(lp, a, mask).weights[:, list(perm)]
    )


@given(scope=scopes())
def test_weights_fall_strictly_with_the_size_of_the_covariance(
    scope: tuple[Ragged, Ragged, int],
) -> None:
    """w̃ is a strictly decreasing function of |c| (equal |c|, equal w̃), c = (ℓ − ℓ̄)(A − Ā)."""
    ell, adv, t = scope
    lp, a, mask = _pack([(ell, adv)], t)
    w = fast_cw(lp, a, mask).weights[mask].tolist()
    x, y = lp[mask], a[mask]
    c = ((x - x.mean()) * (y - y.mean())).abs().tolist()
    if all(v == 1.0 for v in w):
        return  # degenerate scope
    for i in range(len(c)):
        for j in range(len(c)):
            if c[i] < c[j] - 1e-9 * max(c):
                assert w[i] > w[j], (c, w)
            elif abs(c[i] - c[j]) <= 1e-12 * max(c):
                assert w[i] == pytest.approx(w[j], rel=1e-9)


def test_worked_example_of_the_notes() -> None:
    lp = torch.tensor([[[-0.1, -2.0, -0.5], [-0.2, -3.0, 0.0]]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]]], dtype=torch.bool)
    for ddof, want in (
        (1, [1.1467, 1.2374, 1.2997, 0.9646, 0.3516]),
        (0, [1.1620, 1.2779, 1.3589, 0.9361, 0.2652]),
    ):
        got = fast_cw(lp, adv, mask, ddof=ddof).weights[mask].tolist()
        assert [round(x, 4) for x in got] == want
        ref = ref_cw([[-0.1, -2.0, -0.5], [-0.2, -3.0]], [1, -1], ddof=ddof)
        assert [round(float(x), 4) for row in ref for x in row] == want


def test_weights_are_detached_and_scale_the_base_gradient_per_token() -> None:
    """∂L/∂θ of the surrogate with w̃·A is the base per-token gradient times w̃."""
    lp_old = torch.tensor([[[-0.1, -2.0], [-0.2, -3.0]]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    out = fast_cw(lp_old, adv, torch.ones(1, 2, 2, dtype=torch.bool))
    assert not out.weights.requires_grad and not out.advantages.requires_grad
    theta = (lp_old.detach() + 0.05).requires_grad_()
    ratio = torch.exp(theta - lp_old.detach())
    (-(out.advantages * ratio).sum()).backward()
    base = -(adv.detach().unsqueeze(-1) * ratio.detach())  # ∂(−A ρ)/∂θ = −A ρ
    assert theta.grad is not None
    torch.testing.assert_close(theta.grad, out.weights * base)


def test_bad_input_raises_clear_errors() -> None:
    lp = torch.zeros(2, 3, 4)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    # wider, narrower and fewer dimensions than [B, G] = (2, 3): each named, none broadcast
    for shape in ((2, 4), (2, 2), (2,), (2, 3, 5)):
        with pytest.raises(ValueError, match=r"advantages must have shape \[B, G\] or \[B, G, T"):
            fast_cw(lp, torch.zeros(shape), mask)
    with pytest.raises(ValueError, match="mask has shape"):
        fast_cw(lp, torch.zeros(2, 3), mask[:, :, :2])
    empty = mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match="mask leaves group 1 without valid tokens"):
        fast_cw(lp, torch.zeros(2, 3), empty)
    bad = lp.clone()
    bad[1, 2, 0] = math.nan
    with pytest.raises(
        ValueError, match=r"logprobs has a non-finite value in group 1 \(sample 2, token 0\)"
    ):
        fast_cw(bad, torch.zeros(2, 3), mask)
    padded = lp.clone()
    padded[1, 2, 3] = -math.inf
    no_pad = mask.clone()
    no_pad[1, 2, 3] = False
    assert bool(torch.isfinite(fast_cw(padded, torch.randn(2, 3), no_pad).weights).all())
    with pytest.raises(TypeError, match="floating-point"):
        fast_cw(lp.long(), torch.zeros(2, 3), mask)
    with pytest.raises(ValueError, match="scope must be"):
        fast_cw(lp, torch.zeros(2, 3), mask, scope="token")  # type: ignore[arg-type]
    for scale in (2.0, 0.5, -1.0):  # above 1, between 0 and 1, below 0
        with pytest.raises(ValueError, match="mask must be boolean or hold only 0 and 1"):
            fast_cw(lp, torch.zeros(2, 3), mask.double() * scale)
    with pytest.raises(ValueError, match="no valid tokens"):
        ref_cw([[], []], [1.0, 0.0])
    for shape in ((2, 3), (2, 3, 4, 1)):  # a rank other than 3, below or above
        with pytest.raises(ValueError, match=r"logprobs must have shape \[B, G, T\]; got \("):
            fast_cw(torch.zeros(shape), torch.zeros(2, 3), torch.ones(shape, dtype=torch.bool))
