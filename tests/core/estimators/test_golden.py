"""The golden vectors of shared/notes (committed in spec/golden/): exactly in the reference,
to 1e-12 in fast (float64)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch

import advest.fast.gdpo
import advest.fast.group
import advest.fast.maxk
import advest.fast.maxrl  # noqa: F401  (binds the submodules used as fast.*)
import advest.reference.gdpo as rgdpo
import advest.reference.group as rg
import advest.reference.maxk as rm
import advest.reference.maxrl as rmaxrl
from advest import fast

# Every test here runs on both max@K paths, forced (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("maxk_path")

GOLDEN = Path(__file__).parents[3] / "spec" / "golden"
MAXK = json.loads((GOLDEN / "maxk.json").read_text())
GROUP = json.loads((GOLDEN / "group.json").read_text())
EXACT_NAMES = [
    "ei", "l2o_baseline", "maxpo", "canonical", "ei_l1o", "pkpo_s", "pkpo_sloo",
    "pkpo_sloo_minus_one", "bagirov_transform", "bagirov_centered",
]  # fmt: skip


def _q(values: list[str]) -> list[Fraction]:
    return [Fraction(v) for v in values]


def _fast(fn: Any, r: list[Fraction], *args: Any, **kw: Any) -> list[float]:
    out: list[float] = fn(torch.tensor([[float(x) for x in r]], dtype=torch.float64), *args, **kw)[
        0
    ].tolist()
    return out


@pytest.mark.parametrize("case", sorted(MAXK["golden"]))
def test_maxk_golden_vectors(case: str) -> None:
    g = MAXK["golden"][case]
    r, k = _q(g["r"]), g["K"]
    for name in EXACT_NAMES:
        want = _q(g[name])
        assert getattr(rm, name)(r, k) == want, name
        assert _fast(getattr(fast.maxk, name), r, k) == pytest.approx(
            [float(w) for w in want], abs=1e-12
        )
    assert rm.m_plus(r, k) == _q(g["M_plus"])
    assert rm.m_minus(r, k) == _q(g["M_minus"])
    assert rm.m_hat(r, k) == Fraction(g["M_hat"])
    for ddof in (0, 1):
        z = g[f"bagirov_zscore_ddof{ddof}"]
        exact = rm.bagirov_zscore(r, k, ddof=ddof)
        centred = _q(g["bagirov_centered"])
        variance = Fraction(z["variance"])
        for zi, ci in zip(exact, centred, strict=True):  # z² · variance == centred², same sign
            assert abs(zi * zi * variance - ci * ci) < Fraction(1, 10**45) and zi * ci >= 0
        assert [float(x) for x in exact] == pytest.approx(z["approx"], abs=1e-12)
        assert _fast(fast.maxk.bagirov_zscore, r, k, ddof=ddof) == pytest.approx(
            z["approx"], abs=1e-12
        )
    if "chen_passk_raw" in g:
        assert rm.chen_passk(r, k, normalize=False) == _q(g["chen_passk_raw"])
        sigma2 = Fraction(g["chen_sigma2"])
        normalised = g["chen_passk_normalized_approx"]
        assert [float(x) for x in rm.chen_passk(r, k)] == pytest.approx(normalised, abs=1e-12)
        assert _fast(fast.maxk.chen_passk, r, k) == pytest.approx(normalised, abs=1e-12)
        raw = _q(g["chen_passk_raw"])
        for a, b in zip(rm.chen_passk(r, k), raw, strict=True):
            assert abs(a * a * sigma2 - b * b) < Fraction(1, 10**45)


@pytest.mark.parametrize("case", sorted(MAXK["golden_k_eq_n"]))
def test_k_equal_n_golden_vectors_and_domain_errors(case: str) -> None:
    g = MAXK["golden_k_eq_n"][case]
    r = [Fraction(x) for x in case.split("=[")[1].split("]")[0].split(",")]
    k = len(r)
    for name, values in g.items():
        want = _q(values)
        got = rm.tang_passk(r) if name == "tang_passk" else getattr(rm, name)(r, k)
        assert got == want, name
        fn = getattr(fast.maxk, name)
        got_fast = _fast(fn, r) if name == "tang_passk" else _fast(fn, r, k)
        assert got_fast == pytest.approx([float(w) for w in want], abs=1e-12)
    for name in (
        "l2o_baseline",
        "maxpo",
        "canonical",
        "pkpo_sloo",
        "bagirov_centered",
        "bagirov_zscore",
    ):
        with pytest.raises(ValueError, match=f"{name} needs 1 <= K <= N-1; got K={k}, N={k}"):
            getattr(rm, name)(r, k)
        with pytest.raises(ValueError, match=f"{name} needs 1 <= K <= N-1; got K={k}, N={k}"):
            getattr(fast.maxk, name)(torch.tensor([[float(x) for x in r]]), k)


def test_group_golden_vectors() -> None:
    r = _q(GROUP["r"])
    assert rg.dr_grpo(r) == _q(GROUP["dr_grpo"])
    assert rg.rloo(r) == _q(GROUP["rloo"])
    opo = GROUP["opo"]
    assert rg.opo(r, opo["lengths"]) == _q(opo["advantage"])
    sigma = float(Fraction(GROUP["grpo_sigma2_ddof1"])) ** 0.5
    want_grpo = [float(x) / (sigma + 1e-6) for x in _q(GROUP["dr_grpo"])]
    assert [float(x) for x in rg.grpo(r)] == pytest.approx(want_grpo, rel=1e-14)
    assert _fast(fast.group.grpo, r) == pytest.approx(want_grpo, rel=1e-14)
    assert _fast(fast.group.dr_grpo, r) == [float(x) for x in _q(GROUP["dr_grpo"])]
    assert _fast(fast.group.rloo, r) == pytest.approx(
        [float(x) for x in _q(GROUP["rloo"])], abs=1e-14
    )
    got_opo = fast.group.opo(
        torch.tensor([[float(x) for x in r]], dtype=torch.float64), torch.tensor([opo["lengths"]])
    )
    assert got_opo[0].tolist() == [float(x) for x in _q(opo["advantage"])]
    rpp = GROUP["reinforce_pp"]
    batch = [r, _q(rpp["second_group"])]
    scale = float(Fraction(rpp["batch_variance_ddof1"])) ** 0.5 + 1e-6
    want = [float(c) / scale for c in _q(rpp["centred"])]
    assert [float(x) for g in rg.reinforce_pp(batch) for x in g] == pytest.approx(want, rel=1e-14)
    got = fast.group.reinforce_pp(
        torch.tensor([[float(x) for x in g] for g in batch], dtype=torch.float64)
    )
    assert got.flatten().tolist() == pytest.approx(want, rel=1e-14)


MAXRL = json.loads((GOLDEN / "maxrl.json").read_text())


@pytest.mark.parametrize("case", MAXRL["cases"], ids=lambda c: ",".join(c["r"]))
def test_maxrl_golden_vectors(case: dict[str, Any]) -> None:
    r = _q(case["r"])
    forms = {
        "maxrl": (rmaxrl.maxrl, fast.maxrl.maxrl, {}),
        "maxrl_unbiased": (rmaxrl.maxrl_unbiased, fast.maxrl.maxrl_unbiased, {}),
        "maxrl_unbiased_no_baseline": (
            rmaxrl.maxrl_unbiased,
            fast.maxrl.maxrl_unbiased,
            {"baseline": False},
        ),
    }
    for key, (exact, batched, options) in forms.items():
        want = _q(case[key])
        assert exact(r, **options) == want, key
        scale = max(abs(float(w)) for w in want)
        assert _fast(batched, r, **options) == pytest.approx(
            [float(w) for w in want], abs=1e-12 * scale
        ), key


def test_grpo_batch_std_golden_vector() -> None:
    golden = GROUP["grpo_batch_std"]
    batch = [_q(GROUP["r"]), _q(GROUP["reinforce_pp"]["second_group"])]
    scale = float(Fraction(golden["batch_variance_ddof1"])) ** 0.5 + 1e-6
    want = [float(c) / scale for c in _q(golden["centred"])]
    assert [float(x) for g in rg.grpo_batch_std(batch) for x in g] == pytest.approx(want, rel=1e-14)
    got = fast.group.grpo_batch_std(
        torch.tensor([[float(x) for x in g] for g in batch], dtype=torch.float64)
    )
    assert got.flatten().tolist() == pytest.approx(want, rel=1e-14)


GDPO = json.loads((GOLDEN / "gdpo.json").read_text())


@pytest.mark.parametrize("case", GDPO["cases"], ids=lambda c: c["name"])
def test_gdpo_golden_vectors(case: dict[str, Any]) -> None:
    """The reference to 1e-35 (its square roots are good to ~60 digits), fast float64 to 1e-12
    of max|A| (every case is well conditioned)."""
    parts = [[_q(sample) for sample in group] for group in case["parts"]]
    weights = _q(case["weights"])
    options = {k: case[k] for k in ("eps", "ddof", "convention") if k in case}
    want_s, want = case["normalised_sum"], case["advantages"]
    got_s = rgdpo.normalised_sum(parts, weights, **options)
    got = rgdpo.gdpo(parts, weights, case.get("lengths"), **options)
    for got_rows, want_rows in ((got_s, want_s), (got, want)):
        for g, w in zip(got_rows, want_rows, strict=True):
            assert all(
                abs(x - Fraction(y)) < Fraction(1, 10**35) for x, y in zip(g, w, strict=True)
            )
    lengths = None if "lengths" not in case else torch.tensor(case["lengths"])
    x = torch.tensor([[[float(v) for v in s] for s in g] for g in parts], dtype=torch.float64)
    fast_out = fast.gdpo.gdpo(x, [float(v) for v in weights], lengths, **options)
    scale = max(1.0, max(abs(float(v)) for g in want for v in g))
    assert fast_out.tolist() == [
        pytest.approx([float(v) for v in g], abs=1e-12 * scale) for g in want
    ]


OTB = json.loads((GOLDEN / "otb.json").read_text())


@pytest.mark.parametrize("case", OTB["cases"], ids=lambda c: c["name"])
def test_otb_golden_vectors(case: dict[str, Any]) -> None:
    """The reference to 1e-35 (its exp is good to ~50 digits), fast float64 to 1e-12 of max|R|
    (every case is well conditioned: Σ W ≥ 0.05 wherever a baseline is formed)."""
    import advest.fast.otb
    import advest.reference.otb as rotb

    r = [float(x) for x in case["rewards"]]
    lp = [[float(x) for x in row] for row in case["logprobs"]]
    s2 = [[float(x) for x in row] for row in case["sum_pi_squared"]]
    options = {k: case[k] for k in ("eps", "zero_tail", "cumulative") if k in case}
    want = case["advantages"]
    got = rotb.optimal_token_baseline(r, case["mask"], lp, s2, **options)
    for g, w in zip(got, want, strict=True):
        assert all(abs(x - Fraction(y)) < Fraction(1, 10**35) for x, y in zip(g, w, strict=True))
    fast_out = advest.fast.otb.optimal_token_baseline(
        torch.tensor([r], dtype=torch.float64),
        torch.tensor([case["mask"]]),
        torch.tensor([lp], dtype=torch.float64),
        torch.tensor([s2], dtype=torch.float64),
        **options,
    )[0]
    scale = max(1.0, max(abs(x) for x in r))
    assert fast_out.tolist() == [
        pytest.approx([float(v) for v in g], abs=1e-12 * scale) for g in want
    ]


EPISODE = json.loads((GOLDEN / "episode.json").read_text())


@pytest.mark.parametrize("case", EPISODE["cases"], ids=lambda c: c["name"])
@pytest.mark.parametrize("name", ["turn_rloo", "turn_index_mean"])
def test_episode_golden_vectors(case: dict[str, Any], name: str) -> None:
    """The reference exactly; fast float64 within 1e-12 of what the advantages are made of: the
    larger of max |A| and the group's reward spread × K (sums of up to K rewards), never of the
    rewards' size (the tiny-spread case's advantages are 1e-7 on rewards of 1e6)."""
    import advest.fast.episode
    import advest.reference.episode as repisode

    rewards = [[float(x) for x in e] for e in case["turn_rewards"]]
    want = [[Fraction(x) for x in e] for e in case[name]]
    assert getattr(repisode, name)(rewards) == want
    K = max(len(e) for e in rewards)
    padded = torch.tensor([[e + [0.0] * (K - len(e)) for e in rewards]], dtype=torch.float64)
    T = max(len(t) for t in case["turn_ids"])
    ids = torch.tensor([[t + [-1] * (T - len(t)) for t in case["turn_ids"]]])
    got = getattr(advest.fast.episode, name)(padded, ids)[0]
    flat = [x for e in rewards for x in e]
    spread = (max(flat) - min(flat)) * K
    scale = max(max(abs(float(x)) for e in want for x in e), spread)
    for i, t in enumerate(ids[0].tolist()):
        exact = [0.0 if k < 0 else float(want[i][k]) for k in t]
        assert got[i].tolist() == pytest.approx(exact, abs=1e-12 * scale), (i, name)
