"""GDPO with several rewards (spec/gdpo.md): fast against the exact reference on hostile
batches, the claims (centring, per-reward affine invariance, weight scale, the two-sample vote,
what it is not unbiased for) and bad input. The single-reward properties run through the
catalogue rows (tests/core/estimators/test_properties.py)."""

from __future__ import annotations

from fractions import Fraction
from itertools import product
from typing import Any

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import advest.reference.gdpo as ref
import advest.reference.group as rg
from advest.fast import gdpo as fst
from advest.oracle.reports.catalogue import tolerance_entry as entry
from advest.reference._exact import std
from advest.spec.tolerances import output_floor

Q = Fraction
Parts = list[list[list[Fraction]]]
EXACT = Q(1, 10**40)  # the reference's 60-digit square roots, with room to spare


# --- hostile batches of several rewards -------------------------------------------------------


def _column_values() -> st.SearchStrategy[st.SearchStrategy[Fraction]]:
    """One kind of values per reward: binary, small ints (ties), rationals, wide floats, or a
    large offset with a tiny spread (1e6 + j·1e-7)."""
    offset = st.sampled_from([(1e6, 1e-7), (1e3, 2.0**-12), (-1e3, 1e-4), (0.5, 1e-2)]).map(
        lambda bs: st.integers(0, 3).map(lambda j: Q(bs[0] + j * bs[1]))
    )
    return st.one_of(
        st.just(st.sampled_from([Q(0), Q(1)])),
        st.just(st.integers(-3, 3).map(Q)),
        st.just(st.fractions(-10, 10, max_denominator=12)),
        st.just(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(Q)),
        offset,
    )


WEIGHTS = st.sampled_from([Q(1), Q(1, 2), Q(2), Q(-1), Q(0), Q(1, 1000), Q(37, 10)])


@st.composite
def multi_batches(draw: st.DrawFn, max_b: int = 3, max_g: int = 8, max_r: int = 4) -> Parts:
    """[B][G][R] exact rewards, each reward column of its own kind; sometimes a group flat in
    one reward, sometimes two equal columns."""
    B, G, R = draw(st.integers(1, max_b)), draw(st.integers(1, max_g)), draw(st.integers(1, max_r))
    columns = []
    for _ in range(R):
        values = draw(_column_values())
        columns.append([[draw(values) for _ in range(G)] for _ in range(B)])
    if draw(st.booleans()):
        j, b = draw(st.integers(0, R - 1)), draw(st.integers(0, B - 1))
        columns[j][b] = [columns[j][b][0]] * G
    if R >= 2 and draw(st.booleans()):
        columns[1] = [list(group) for group in columns[0]]
    return [[[columns[j][b][i] for j in range(R)] for i in range(G)] for b in range(B)]


def _tensor(parts: Parts, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([[[float(x) for x in s] for s in g] for g in parts], dtype=dtype)


def _rounded(parts: Parts, dtype: torch.dtype) -> Parts:
    return [[[Q(x) for x in s] for s in g] for g in _tensor(parts, dtype).double().tolist()]


def _bound(parts: Parts, weights: list[Fraction], want: list[list[Fraction]], dtype: torch.dtype,
           **options: object) -> Fraction:  # fmt: skip
    """rel · max(max|A|, κ) + floor: κ (``_kappa``) bounds what cancellation between rewards
    can leave (the per-group ``output`` scale of spec/tolerances.py covers one reward only)."""
    top = max((abs(x) for g in want for x in g), default=Q(0))
    kappa = _kappa(parts, weights, **options)
    return Q(entry("gdpo", dtype).rel) * max(top, kappa) + Q(output_floor(dtype))


def _kappa(parts: Parts, weights: list[Fraction], **options: object) -> Fraction:
    """κ = Σ_j |w_j|·max|n^(j)| / (std(s) + ε): the size of the terms of the weighted sum in
    output units."""
    R = len(weights)
    eps, ddof = Q(options.get("eps", 1e-6)), int(options.get("ddof", 1))  # type: ignore[call-overload]
    # verl's convention keeps a singleton group's r/(1 + ε): its size enters the cancellation
    conv: Any = {"convention": options["convention"]} if "convention" in options else {}
    size = Q(0)
    for j in range(R):
        one_hot = [Q(int(i == j)) for i in range(R)]
        n_j = ref.normalised_sum(parts, one_hot, eps=float(eps), ddof=ddof, **conv)
        size += abs(weights[j]) * max(abs(x) for g in n_j for x in g)
    s = [
        x for g in ref.normalised_sum(parts, weights, eps=float(eps), ddof=ddof, **conv) for x in g
    ]
    sigma = Q(0) if len(s) <= ddof else std(s, ddof)
    return size / (sigma + eps) if sigma + eps > 0 else Q(0)


def _fast_error(
    parts: Parts, weights: list[Fraction], dtype: torch.dtype, **options: object
) -> Fraction:
    """The largest |fast − reference| over the batch, in units of the allowed error ``_bound``
    (≤ 1 passes). The reference runs on the inputs as rounded to ``dtype``."""
    exact_in = _rounded(parts, dtype)
    want = ref.gdpo(exact_in, weights, **options)  # type: ignore[arg-type]
    out = fst.gdpo(_tensor(exact_in, dtype), torch.tensor([float(w) for w in weights],
                   dtype=torch.float64), **options)  # type: ignore[arg-type]  # fmt: skip
    assert out.dtype == dtype and out.shape == (len(parts), len(parts[0]))
    allowed = _bound(exact_in, weights, want, dtype, **options)
    got = [Q(x) for g in out.double().tolist() for x in g]
    exact = [y for g in want for y in g]
    return max(abs(x - y) for x, y in zip(got, exact, strict=True)) / allowed


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@given(parts=multi_batches(), weights=st.lists(WEIGHTS, min_size=4, max_size=4))
@example(parts=[[[Q(1)], [Q(1)]]], weights=[Q(1)] * 4)  # G = 2, flat
@example(parts=[[[Q(5)]], [[Q(7)]]], weights=[Q(1)] * 4)  # G = 1
@example(parts=[[[Q(10**6 + j * 1e-7), Q(j % 2)] for j in range(4)]], weights=[Q(1), Q(-1)] * 2)
def test_fast_equals_reference_on_hostile_batches_of_several_rewards(
    dtype: torch.dtype, parts: Parts, weights: list[Fraction]
) -> None:
    w = weights[: len(parts[0][0])]
    assert _fast_error(parts, w, dtype) <= 1
    assert _fast_error(parts, w, dtype, eps=0.0, ddof=0) <= 1


@pytest.mark.parametrize(("G", "R"), [(64, 1), (256, 2), (1024, 1), (1024, 4)])
def test_fast_equals_reference_on_large_groups(G: int, R: int) -> None:
    """G up to 1024 with ties and an offset (1e6 + k/7 for k < 50), two prompts."""
    gen = torch.Generator().manual_seed(G + R)
    x = torch.randint(0, 50, (2, G, R), generator=gen).double() / 7
    x[..., 0] += 1e6
    parts = [[[Q(v) for v in s] for s in g] for g in x.tolist()]
    assert _fast_error(parts, [Q(1), Q(-1, 2), Q(3), Q(1, 10)][:R], torch.float64) <= 1


# --- claims ---------------------------------------------------------------------------------


@given(parts=multi_batches(max_g=6), weights=st.lists(WEIGHTS, min_size=4, max_size=4))
def test_every_group_sums_to_zero(parts: Parts, weights: list[Fraction]) -> None:
    w = weights[: len(parts[0][0])]
    for group in ref.gdpo(parts, w):
        assert sum(group, Q(0)) == 0  # exactly: each group is a rational multiple of a sum 0
    out = fst.gdpo(_tensor(parts, torch.float64), [float(x) for x in w])
    top = float(out.abs().max()) if out.numel() else 0.0
    # rewards that cancel in the weighted sum leave rounding of the size of their terms (κ), not
    # of the output: [4, 4, 3]·1e-6 and [2, 2, 3]·1e-6 with weights (1, 1) give s = 0 exactly,
    # float s ~ 1e-17, divided by std + ε ~ 1e-6 (found by hypothesis)
    kappa = float(_kappa(parts, w))
    assert out.sum(dim=-1).abs().max() <= 1e-12 * max(top, kappa, 1.0) * len(parts[0])


def _close(a: list[list[Fraction]], b: list[list[Fraction]], tol: Fraction) -> bool:
    pairs = [(x, y) for ga, gb in zip(a, b, strict=True) for x, y in zip(ga, gb, strict=True)]
    return all(abs(x - y) <= tol for x, y in pairs)


@given(
    parts=multi_batches(max_b=3, max_g=5, max_r=3),
    scales=st.lists(st.fractions(Q(1, 8), 8).filter(lambda a: a > 0), min_size=3, max_size=3),
    shifts=st.lists(st.fractions(-5, 5, max_denominator=4), min_size=9, max_size=9),
)
def test_a_positive_affine_rescaling_of_each_reward_leaves_gdpo_unchanged(
    parts: Parts, scales: list[Fraction], shifts: list[Fraction]
) -> None:
    """r^(j)_b -> a_j r^(j)_b + c_bj: exact (to the square roots) with ε = 0; with ε > 0 the
    shifts alone leave it unchanged."""
    R = len(parts[0][0])
    w = [Q(1), Q(2), Q(-1, 3)][:R]
    moved = [[[scales[j] * s[j] + shifts[3 * b + j] for j in range(R)] for s in g]
             for b, g in enumerate(parts)]  # fmt: skip
    assert _close(ref.gdpo(parts, w, eps=0.0), ref.gdpo(moved, w, eps=0.0), EXACT)
    shifted = [[[s[j] + shifts[3 * b + j] for j in range(R)] for s in g]
               for b, g in enumerate(parts)]  # fmt: skip
    assert _close(ref.gdpo(parts, w), ref.gdpo(shifted, w), EXACT)


@given(parts=multi_batches(max_g=5, max_r=3), c=st.sampled_from([Q(1, 3), Q(7), Q(1, 1000)]))
def test_a_positive_scale_of_the_weights_leaves_gdpo_unchanged(parts: Parts, c: Fraction) -> None:
    w = [Q(1), Q(-2), Q(1, 2)][: len(parts[0][0])]
    scaled = [c * x for x in w]
    assert _close(ref.gdpo(parts, w, eps=0.0), ref.gdpo(parts, scaled, eps=0.0), EXACT)
    a = fst.gdpo(_tensor(parts, torch.float64), [float(x) for x in w], eps=0.0)
    b = fst.gdpo(_tensor(parts, torch.float64), [float(x) for x in scaled], eps=0.0)
    assert torch.allclose(a, b, rtol=0, atol=1e-9 * max(1.0, float(a.abs().max())))


@given(parts=multi_batches(max_b=1, max_g=7, max_r=1), w=WEIGHTS, v=WEIGHTS)
def test_one_reward_one_prompt_is_grpo_and_equal_columns_add_their_weights(
    parts: Parts, w: Fraction, v: Fraction
) -> None:
    r = [s[0] for s in parts[0]]
    got = ref.gdpo(parts, eps=0.0)[0]
    flat = max(r) == min(r)
    want = [Q(0)] * len(r) if flat else rg.grpo(r, eps=0.0)
    assert all(abs(x - y) <= EXACT for x, y in zip(got, want, strict=True))
    doubled = [[[s[0], s[0]] for s in parts[0]]]
    assert _close(ref.gdpo(doubled, [w, v]), ref.gdpo(parts, [w + v]), EXACT)


def _sign(x: Fraction) -> int:
    return (x > 0) - (x < 0)


@pytest.mark.parametrize("weights", [[Q(1), Q(2), Q(4)], [Q(1), Q(1), Q(1)], [Q(3), Q(-1), Q(1)]])
def test_two_samples_are_a_weighted_vote_of_the_rewards_preferences(
    weights: list[Fraction],
) -> None:
    """B = 1, G = 2, ε = 0: A_1 = −A_2 = sign(Σ_j w_j sign(r1_j − r2_j))/√2, for every pair of
    reward vectors in {0, 1, 2}³."""
    levels = list(product(range(3), repeat=3))
    for x, y in product(levels, repeat=2):
        parts = [[[Q(v) for v in x], [Q(v) for v in y]]]
        ballots = [w * _sign(Q(a - b)) for w, a, b in zip(weights, x, y, strict=True)]
        vote = _sign(sum(ballots, Q(0)))
        got = ref.gdpo(parts, weights, eps=0.0)[0]
        assert abs(got[0] ** 2 - Q(vote * vote, 2)) <= EXACT and _sign(got[0]) == vote, (x, y)
        assert got[1] == -got[0]
    fast = fst.gdpo(torch.tensor([[[2.0, 0, 1], [1, 1, 1]]]), [float(w) for w in weights], eps=0.0)
    want = _sign(weights[0] - weights[1]) / 2**0.5
    assert fast[0].tolist() == pytest.approx([want, -want], abs=1e-7)


# A softmax bandit with three actions, each scored by two rewards; ∇ in the logits.
PI = [[Q(1, 2), Q(1, 3), Q(1, 6)], [Q(1, 5), Q(1, 5), Q(3, 5)]]
R1, R2 = [Q(1), Q(0), Q(0)], [Q(0), Q(1), Q(3)]


def _expected(
    pi: list[Fraction], rewards: list[list[Fraction]], n: int, w: list[Fraction]
) -> list[Fraction]:
    """E[Σ_i A_i (e_{a_i} − π)] over every tuple of n actions, GDPO with B = 1 and ε = 0."""
    total = [Q(0)] * len(pi)
    for actions in product(range(len(pi)), repeat=n):
        prob = Q(1)
        for a in actions:
            prob *= pi[a]
        adv = ref.gdpo([[[r[a] for r in rewards] for a in actions]], w, eps=0.0)[0]
        for a_i, value in zip(actions, adv, strict=True):
            for c in range(len(pi)):
                total[c] += prob * value * ((1 if c == a_i else 0) - pi[c])
    return total


def _grad(pi: list[Fraction], r: list[Fraction]) -> list[Fraction]:
    """∇_θ E_π[r] = π_c (r_c − E_π[r])."""
    mean = sum((p * x for p, x in zip(pi, r, strict=True)), Q(0))
    return [p * (x - mean) for p, x in zip(pi, r, strict=True)]


def _coefficients(
    e: list[Fraction], g1: list[Fraction], g2: list[Fraction]
) -> tuple[Fraction, Fraction]:
    """(a, b) with E = a·∇J_1 + b·∇J_2 (three actions: both gradients lie in the plane Σ_c = 0,
    which they span, so two components determine a and b)."""
    det = g1[0] * g2[1] - g1[1] * g2[0]
    assert det != 0
    return (e[0] * g2[1] - e[1] * g2[0]) / det, (g1[0] * e[1] - g1[1] * e[0]) / det


def _not_parallel(u: tuple[Fraction, Fraction], v: tuple[Fraction, Fraction]) -> bool:
    size = (abs(u[0]) + abs(u[1])) * (abs(v[0]) + abs(v[1]))
    return abs(u[0] * v[1] - u[1] * v[0]) > size / 100


@pytest.mark.parametrize("n", [2, 3])
def test_gdpo_is_not_unbiased_for_any_weighted_sum_of_the_rewards(n: int) -> None:
    """E[ĝ] = a·∇J_1 + b·∇J_2 with (a : b) changing with the policy: no fixed weights (its own,
    1 : 2, included) make GDPO unbiased at any scale; and rescaling reward 2 by 3 changes
    ∇(J_1 + 2·J_2) but leaves E[ĝ] unchanged (claim 2). The weights (1, 2) cannot cancel: with
    (1, 1), two rewards that order a two-action tuple oppositely sum to exactly 0, which the
    reference's square roots cannot see when ε = 0 (spec/gdpo.md, "Conditioning")."""
    w = [Q(1), Q(2)]
    coefficients = []
    for pi in PI:
        e = _expected(pi, [R1, R2], n, w)
        coefficients.append(_coefficients(e, _grad(pi, R1), _grad(pi, R2)))
        tripled = _expected(pi, [R1, [3 * x for x in R2]], n, w)
        assert all(abs(x - y) <= EXACT for x, y in zip(e, tripled, strict=True))
    assert _not_parallel(coefficients[0], coefficients[1]), coefficients
    assert all(_not_parallel(c, (w[0], w[1])) for c in coefficients), coefficients


# --- verl's convention and bad input ------------------------------------------------------------


@given(parts=multi_batches(max_g=6, max_r=3), data=st.data())
def test_verl_convention_fast_equals_reference(parts: Parts, data: st.DataObject) -> None:
    B, G = len(parts), len(parts[0])
    row = st.lists(st.integers(1, 9), min_size=G, max_size=G)
    lengths = data.draw(st.lists(row, min_size=B, max_size=B))
    if sum(map(sum, lengths)) < 2:
        lengths[0][0] = 2
    w = [Q(1), Q(1, 2), Q(-2)][: len(parts[0][0])]
    want = ref.gdpo(parts, w, lengths, convention="verl-0.9.1")
    got = fst.gdpo(_tensor(parts, torch.float64), [float(x) for x in w], torch.tensor(lengths),
                   convention="verl-0.9.1")  # fmt: skip
    top = max(max(abs(x) for g in want for x in g), Q(1))
    kappa = _bound(parts, w, want, torch.float64, convention="verl-0.9.1") / Q(
        entry("gdpo", torch.float64).rel
    )
    for g_out, g_want in zip(got.tolist(), want, strict=True):
        for x, y in zip(g_out, g_want, strict=True):
            assert abs(Q(x) - y) <= Q(1e-9) * max(top, kappa), (x, float(y))


def test_bad_input_is_refused_naming_the_argument() -> None:
    parts = torch.rand(2, 3, 2)
    cases: list[tuple[dict[str, object], type[Exception], str]] = [
        (
            {"reward_parts": torch.rand(2, 3)},
            ValueError,
            r"reward_parts must have shape \[B, G, R\]",
        ),
        ({"reward_parts": torch.zeros(2, 3, 2, dtype=torch.long)}, TypeError, "floating-point"),
        (
            {"reward_parts": torch.zeros(2, 0, 2)},
            ValueError,
            r"reward_parts has shape \(2, 0, 2\): each group needs >= 1 sample",
        ),
        (
            {"reward_parts": torch.zeros(2, 3, 0)},
            ValueError,
            r"reward_parts has shape \(2, 3, 0\): each group .* each sample >= 1 reward",
        ),
        (
            {"reward_parts": torch.tensor([[[0.0], [float("nan")]]])},
            ValueError,
            r"reward_parts has a non-finite value in group 0",
        ),
        ({"reward_weights": [1.0]}, ValueError, r"reward_weights has shape \(1,\).*R = 2"),
        ({"reward_weights": [1.0, float("inf")]}, ValueError, "reward_weights has a non-finite"),
        ({"reward_weights": ["a", 1]}, TypeError, "reward_weights must be R numbers"),
        ({"lengths": torch.ones(2, 4)}, ValueError, "lengths has shape"),
        ({"lengths": torch.zeros(2, 3)}, ValueError, "lengths must be >= 1; group 0"),
        ({"convention": "verl-0.9.1"}, ValueError, "pass lengths"),
        (
            {"convention": "verl-0.9.1", "lengths": torch.ones(2, 3), "ddof": 0},
            ValueError,
            "ddof=1",
        ),
        ({"convention": "verl"}, ValueError, "gdpo needs convention in"),
        ({"eps": -1.0}, ValueError, "gdpo needs a finite eps"),
        ({"ddof": 2}, ValueError, "gdpo needs ddof in"),
    ]
    for change, error, message in cases:
        kwargs: dict[str, object] = {"reward_parts": parts, **change}
        with pytest.raises(error, match=message):
            fst.gdpo(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reward_weights has 1 entries; reward_parts has R = 2"):
        ref.gdpo([[[0, 1], [1, 0]]], [1])
    with pytest.raises(ValueError, match="reward_parts needs at least one group; got B=0"):
        ref.gdpo([])  # the reference is defined for B >= 1 (an IndexError would name nothing)
    with pytest.raises(ValueError, match="reward_parts group 1 is not"):
        ref.gdpo([[[0, 1], [1, 0]], [[0], [1]]])
    with pytest.raises(ValueError, match="reward_parts has a non-finite value"):
        ref.gdpo([[[0, float("nan")]]])
    with pytest.raises(ValueError, match="pass lengths"):
        ref.gdpo([[[0], [1]]], convention="verl-0.9.1")
