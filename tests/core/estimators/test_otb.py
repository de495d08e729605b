"""The optimal token baseline (spec/otb.md): its variance claim and unbiasedness by exact
enumeration of small token trees, fast against the exact reference on hostile batches, the
degenerate cases, and bad input."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import product

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import advest.reference.otb as ref
from advest.fast import otb as fst

Q = Fraction
EOS = 2
V = 3  # tokens a, b and EOS


# --- exact enumeration: a tabular softmax policy on a token tree -----------------------------


@dataclass(frozen=True)
class Tree:
    """Responses of at most T tokens over {a, b, EOS}; each prefix without EOS (a node) has its
    own logits, so π(·|node) is a free distribution and ∇_{z_node} log π(v|node) = e_v − π."""

    T: int
    pi: dict[tuple[int, ...], tuple[Fraction, ...]]  # node → π(·|node) over V tokens
    reward: dict[tuple[int, ...], Fraction]  # complete response → R

    def responses(self) -> list[tuple[tuple[int, ...], Fraction]]:
        """Every complete response with its probability (EOS ends it, or T tokens do)."""
        out = []
        for y in product(range(V), repeat=self.T):
            end = next((t + 1 for t, v in enumerate(y) if v == EOS), self.T)
            if any(v == EOS for v in y[end:]) or y[end:] != (0,) * (self.T - end):
                continue  # count each response once: pad its tail with token 0
            y = y[:end]
            p = Q(1)
            for t in range(len(y)):
                p *= self.pi[y[:t]][y[t]]
            out.append((y, p))
        assert sum(p for _, p in out) == 1
        return out

    def score(self, y: tuple[int, ...], t: int) -> dict[tuple[tuple[int, ...], int], Fraction]:
        """s_t = ∇ log π(y_t | y_<t) as a sparse vector over (node, token) logits."""
        node = y[:t]
        return {(node, v): Q(v == y[t]) - self.pi[node][v] for v in range(V)}

    def proxy(self, y: tuple[int, ...], t: int) -> Fraction:
        """w_t = 1 − 2π(y_t) + Σ_v π(v)², the logit-gradient proxy of verl and spec/otb.md."""
        p = self.pi[y[:t]]
        return 1 - 2 * p[y[t]] + sum((x * x for x in p), Q(0))


def _add(acc: dict[object, Fraction], vec: dict[object, Fraction], c: Fraction) -> None:
    for key, value in vec.items():
        acc[key] = acc.get(key, Q(0)) + c * value


def _norm2(vec: dict[object, Fraction]) -> Fraction:
    return sum((x * x for x in vec.values()), Q(0))


def per_token_estimate(tree: Tree, y: tuple[int, ...], b: list[Fraction]) -> dict:  # type: ignore[type-arg]
    """g(b) = Σ_t m_t s_t (R − b_t): the gradient the policy loss takes with advantages
    A_t = R − b_t (the outcome reward is every token's return)."""
    g: dict[object, Fraction] = {}
    for t in range(len(y)):
        _add(g, tree.score(y, t), tree.reward[y] - b[t])  # type: ignore[arg-type]
    return g


def prefix_estimate(tree: Tree, y: tuple[int, ...], t: int, b: Fraction) -> dict:  # type: ignore[type-arg]
    """h_t(b) = m_t ∇log π(y_≤t) (R − b): the whole prefix's score times the advantage."""
    h: dict[object, Fraction] = {}
    if t < len(y):
        for j in range(t + 1):
            _add(h, tree.score(y, j), tree.reward[y] - b)  # type: ignore[arg-type]
    return h


def population_baselines(tree: Tree, cumulative: bool) -> list[Fraction]:
    """b_t = E[m_t W_t R]/E[m_t W_t], W the cumulative proxy Σ_{j≤t} w_j (OTB) or w_t."""
    num, den = [Q(0)] * tree.T, [Q(0)] * tree.T
    for y, p in tree.responses():
        running = Q(0)
        for t in range(len(y)):
            running = running + tree.proxy(y, t) if cumulative else tree.proxy(y, t)
            num[t] += p * running * tree.reward[y]
            den[t] += p * running
    return [n / d if d else Q(0) for n, d in zip(num, den, strict=True)]


def moments(tree: Tree, b: list[Fraction]) -> tuple[dict, Fraction]:  # type: ignore[type-arg]
    """(E[g(b)], E‖g(b)‖²) exactly, from the explicit gradient vectors."""
    mean: dict[object, Fraction] = {}
    second = Q(0)
    for y, p in tree.responses():
        g = per_token_estimate(tree, y, b)
        _add(mean, g, p)
        second += p * _norm2(g)
    return {k: v for k, v in mean.items() if v}, second


def _rational(draw: st.DrawFn, n: int) -> tuple[Fraction, ...]:
    weights = [draw(st.integers(1, 6)) for _ in range(n)]
    return tuple(Q(w, sum(weights)) for w in weights)


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    T = draw(st.integers(2, 3))
    nodes = [y for n in range(T) for y in product(range(2), repeat=n)]
    pi = {node: _rational(draw, V) for node in nodes}
    stub = Tree(T, pi, {})
    reward = {y: Q(draw(st.integers(-2, 4)), draw(st.integers(1, 3))) for y, _ in stub.responses()}
    return Tree(T, pi, reward)


SMALL = Tree(
    2,
    {
        (): (Q(1, 2), Q(1, 4), Q(1, 4)),
        (0,): (Q(1, 3), Q(1, 3), Q(1, 3)),
        (1,): (Q(3, 5), Q(1, 5), Q(1, 5)),
    },
    {
        (0, 0): Q(1),
        (0, 1): Q(0),
        (0, 2): Q(1),
        (1, 0): Q(0),
        (1, 1): Q(1),
        (1, 2): Q(0),
        (2,): Q(0),
    },
)


@settings(max_examples=40, deadline=None)
@given(tree=trees(), shift=st.lists(st.fractions(-3, 3, max_denominator=5), min_size=3, max_size=3))
@example(tree=SMALL, shift=[Q(1, 3), Q(-1, 2), Q(0)])
def test_the_proxy_is_the_exact_squared_prefix_score_and_no_constant_baseline_adds_bias(
    tree: Tree, shift: list[Fraction]
) -> None:
    """With per-prefix logits, ‖∇log π(y_≤t)‖² = W_t = Σ_{j≤t}(1 − 2π_j + Σπ_j²) exactly, and
    E[g(b)] = E[g(0)] for any constants b_t (the mask of token t is decided by y_<t)."""
    for y, _ in tree.responses():
        running = Q(0)
        for t in range(len(y)):
            running += tree.proxy(y, t)
            prefix: dict[object, Fraction] = {}
            for j in range(t + 1):
                _add(prefix, tree.score(y, j), Q(1))  # type: ignore[arg-type]
            assert _norm2(prefix) == running
    assert moments(tree, shift[: tree.T])[0] == moments(tree, [Q(0)] * tree.T)[0]


@settings(max_examples=40, deadline=None)
@given(tree=trees(), b=st.lists(st.fractions(-3, 3, max_denominator=7), min_size=3, max_size=3))
@example(tree=SMALL, b=[Q(0), Q(0), Q(0)])
def test_otb_is_the_exact_variance_minimiser_of_the_prefix_score_estimator(
    tree: Tree, b: list[Fraction]
) -> None:
    """E‖h_t(b)‖² − E‖h_t(b*_t)‖² = E[m_t W_t]·(b − b*_t)² for every b: OTB's b*_t =
    E[m_t W_t R]/E[m_t W_t] is the unique minimiser of the second moment of each prefix
    estimator h_t (its variance too when no response ends before t + 1: then E[h_t] does not
    depend on b)."""
    star = population_baselines(tree, cumulative=True)
    responses = tree.responses()
    for t in range(tree.T):
        mass = sum((p * sum((tree.proxy(y, j) for j in range(t + 1)), Q(0))
                    for y, p in responses if t < len(y)), Q(0))  # fmt: skip

        # The mean of h_t moves with b by b·∇P(alive at t); its square is in var(), so compare
        # second moments, where the identity is exact.
        def second(c: Fraction, t: int = t) -> Fraction:
            return sum((p * _norm2(prefix_estimate(tree, y, t, c)) for y, p in responses), Q(0))

        for c in b:
            assert second(c) - second(star[t]) == mass * (c - star[t]) ** 2


@settings(max_examples=40, deadline=None)
@given(tree=trees(), b=st.lists(st.fractions(-3, 3, max_denominator=7), min_size=3, max_size=3))
@example(tree=SMALL, b=[Q(0), Q(0), Q(0)])
def test_for_the_loss_estimator_the_minimiser_is_per_token_and_otb_pays_the_exact_gap(
    tree: Tree, b: list[Fraction]
) -> None:
    """Var[g(b)] − Var[g(b^tok)] = Σ_t E[m_t w_t](b_t − b^tok_t)² for every b, with
    b^tok_t = E[m_t w_t R]/E[m_t w_t] (``cumulative=False``): among per-token constant baselines
    it is the unique minimiser of the variance of the loss's gradient estimate, and OTB's
    cumulative b* pays exactly Σ_t E[m_t w_t](b*_t − b^tok_t)² more."""
    tok = population_baselines(tree, cumulative=False)
    star = population_baselines(tree, cumulative=True)
    mass = [Q(0)] * tree.T
    for y, p in tree.responses():
        for t in range(len(y)):
            mass[t] += p * tree.proxy(y, t)
    mean0, best = moments(tree, tok)
    for trial in (b[: tree.T], star):
        mean, second = moments(tree, trial)
        assert mean == mean0  # unbiased whatever b: variances differ as second moments do
        gap = sum((m * (x - y) ** 2 for m, x, y in zip(mass, trial, tok, strict=True)), Q(0))
        assert second - best == gap


def test_on_the_small_tree_otb_and_the_per_token_minimiser_differ() -> None:
    """The numbers spec/otb.md quotes: SMALL's baselines and the variance of g(b), exactly."""
    tok = population_baselines(SMALL, cumulative=False)
    star = population_baselines(SMALL, cumulative=True)
    assert star == [Q(27, 100), Q(15947, 31665)] and tok == [Q(27, 100), Q(617, 1065)]
    mean, _ = moments(SMALL, [Q(0), Q(0)])
    square = _norm2(mean)

    def var(b: list[Fraction]) -> Fraction:
        return moments(SMALL, b)[1] - square

    alive = [Q(0), Q(0)]  # the mean reward of the responses alive at t: a group-mean baseline
    for t in range(2):
        pairs = [(p, SMALL.reward[y]) for y, p in SMALL.responses() if t < len(y)]
        alive[t] = sum((p * r for p, r in pairs), Q(0)) / sum((p for p, _ in pairs), Q(0))
    assert var(tok) == Q(1188977, 6390000)  # 0.18607: the minimum
    assert var(star) == Q(75714882727, 401068890000)  # 0.18878: OTB, 1.5 % above it
    assert var(alive) > var(star) and var([Q(0), Q(0)]) == Q(843479, 2160000)  # 0.39050


def group_expectation(tree: Tree, n: int, cumulative: bool = True) -> dict:  # type: ignore[type-arg]
    """E[Σ_i g_i(A_i)] over every group of n i.i.d. responses, A from reference.otb.from_weights
    on the group (ε = 0, zero tail on, W from the proxy of the exact π): the estimator as run."""
    responses = tree.responses()
    total: dict[object, Fraction] = {}
    for group in product(responses, repeat=n):
        prob = math.prod((p for _, p in group), start=Q(1))
        ys = [y for y, _ in group]
        mask = [[t < len(y) for t in range(tree.T)] for y in ys]
        W = []
        for y in ys:
            row, running = [], Q(0)
            for t in range(tree.T):
                if t < len(y):
                    running = running + tree.proxy(y, t) if cumulative else tree.proxy(y, t)
                row.append(running if t < len(y) else Q(0))
            W.append(row)
        adv = ref.from_weights([tree.reward[y] for y in ys], mask, W, eps=Q(0), zero_tail=True)
        for y, a in zip(ys, adv, strict=True):
            for t in range(len(y)):
                _add(total, tree.score(y, t), prob * a[t])  # type: ignore[arg-type]
    return {k: v for k, v in total.items() if v}


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_group_estimate_is_biased_except_for_one_response(n: int) -> None:
    """The baseline a group computes includes each response's own reward and weight: for n >= 2,
    E[Σ_i g_i] is not c·∇J for any c (on SMALL, E[ĝ]/∇J runs from 0.76 to 1.28 over the
    coordinates at n = 2, from 0.98 to 2.20 at n = 3). n = 1 has no baseline: E[ĝ] = ∇J."""
    grad, _ = moments(SMALL, [Q(0), Q(0)])  # ∇J = E[g(0)]
    got = group_expectation(SMALL, n)
    assert set(got) <= set(grad)
    ratios = {got.get(k, Q(0)) / v for k, v in grad.items()}
    if n == 1:
        assert ratios == {Q(1)}
    else:
        assert len(ratios) > 1
        assert min(ratios) < {2: Q(77, 100), 3: Q(99, 100)}[n] < max(ratios)


# --- fast against the exact reference on hostile batches ----------------------------------------

Batch = dict[str, list]  # type: ignore[type-arg]
REWARD_KINDS = [
    st.sampled_from([0.0, 1.0]),
    st.integers(-3, 3).map(float),
    st.integers(0, 3).map(lambda j: 1e3 + j * 2.0**-12),
    st.integers(0, 3).map(lambda j: 1e6 + j * 1e-7),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
]


@st.composite
def positions(draw: st.DrawFn) -> tuple[float, float]:
    """(log π of the sampled token, Σπ²) of a softmax over 4 tokens: spread out, nearly
    deterministic (π = 1 − 1e-12) or exactly deterministic (log π = 0, Σπ² = 1)."""
    kind = draw(st.sampled_from(["soft", "sharp", "one"]))
    if kind == "one":
        return 0.0, 1.0
    scale = 1.0 if kind == "soft" else 40.0
    logits = torch.tensor([draw(st.floats(-1, 1)) * scale for _ in range(4)], dtype=torch.float64)
    p = torch.softmax(logits, 0)
    y = draw(st.integers(0, 3))
    return float(p[y].log()), float((p**2).sum())


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    B, G, T = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kind = draw(st.sampled_from(REWARD_KINDS))
    rewards = [[draw(kind) for _ in range(G)] for _ in range(B)]
    lengths = [[draw(st.integers(0, T)) for _ in range(G)] for _ in range(B)]
    mask = [[[t < n for t in range(T)] for n in row] for row in lengths]
    if draw(st.booleans()):  # holes: tool output inside a response
        b, i, t = (
            draw(st.integers(0, B - 1)),
            draw(st.integers(0, G - 1)),
            draw(st.integers(0, T - 1)),
        )
        mask[b][i][t] = not mask[b][i][t]
    cells = [[[draw(positions()) for _ in range(T)] for _ in range(G)] for _ in range(B)]
    return {
        "rewards": rewards,
        "mask": mask,
        "logprobs": [[[c[0] for c in row] for row in g] for g in cells],
        "sum_pi_squared": [[[c[1] for c in row] for row in g] for g in cells],
    }


def _tensors(batch: Batch, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    out = {k: torch.tensor(v, dtype=dtype) for k, v in batch.items() if k != "mask"}
    return {**out, "mask": torch.tensor(batch["mask"])}


def _bound(batch: Batch, b: int, want: list[list[Fraction]], dtype: torch.dtype, eps: float,
           cumulative: bool) -> list[Fraction]:  # fmt: skip
    """Per position t of group b, the error fast (float64 inside) may make: each path weight
    carries (T + 2)·8u of the magnitude C_{i,t} = Σ_{j≤t}(1 + 2π_j + Σπ²_j) it sums, which moves
    B_t by Σ_i |R_i − B_t|·δW_i / (Σ_i W_i + ε − Σ_i δW_i); the sums over the group add
    (G + 2)·u·max|R|, and a float32 output its own rounding. Unbounded where Σ W + ε is within
    twice the rounding of 0: B_t jumps to 0 at 0 (with ε = 0 and π = 1 − 1e-12, w ≈ 1e-24)."""
    u = Q(2.0**-52)
    r = [Q(x) for x in batch["rewards"][b]]
    m, lp, s = batch["mask"][b], batch["logprobs"][b], batch["sum_pi_squared"][b]
    G, T = len(r), len(m[0])
    W = ref.path_weights(m, [[Q(x) for x in row] for row in lp],
                         [[Q(x) for x in row] for row in s], cumulative=cumulative)  # fmt: skip
    top = max(abs(x) for x in r)
    out = []
    for t in range(T):
        alive = [i for i in range(G) if m[i][t]]
        den = sum((W[i][t] for i in alive), Q(0)) + Q(eps)
        base = sum((r[i] * W[i][t] for i in alive), Q(0)) / den if den else Q(0)
        spread, slack = Q(0), Q(0)
        for i in alive:
            terms = [j for j in (range(t + 1) if cumulative else [t]) if m[i][j]]
            C = sum((1 + 2 * math.exp(lp[i][j]) + s[i][j] for j in terms), 0.0)
            dW = 8 * (T + 2) * u * Q(C)
            spread, slack = spread + abs(r[i] - base) * dW, slack + dW
        # |B̃ − B| ≤ Σ|R_i − B|·δW_i / (den − Σ δW_i) while rounding cannot reach den = 0 (where
        # B jumps to 0); within rounding of it nothing is determined: no bound.
        cond = spread / (den - slack) if den > 2 * slack else Q(10) ** 30
        out_round = Q(torch.finfo(dtype).eps) * max(
            (abs(x) for x in (want[i][t] for i in range(G))), default=Q(0)
        )
        out.append(cond + (G + 2) * u * top + out_round + Q(torch.finfo(dtype).tiny))
    return out


def _worst(batch: Batch, dtype: torch.dtype, plant: bool = False, **options: object) -> Fraction:
    """max |fast − reference| / bound over the batch (≤ 1 passes); the reference reads the
    inputs as rounded to ``dtype``."""
    x = _tensors(batch, dtype)
    rounded = {k: v.double().tolist() if k != "mask" else batch["mask"] for k, v in x.items()}
    out = fst.optimal_token_baseline(**x, **options)  # type: ignore[arg-type]
    assert out.dtype == dtype and out.shape == x["mask"].shape
    if plant:
        out = torch.zeros_like(out)
    worst = Q(0)
    eps, cum = float(options.get("eps", 1e-8)), bool(options.get("cumulative", True))  # type: ignore[arg-type]
    for b in range(len(batch["rewards"])):
        want = ref.optimal_token_baseline(
            rounded["rewards"][b], batch["mask"][b], rounded["logprobs"][b],
            rounded["sum_pi_squared"][b], **options,  # type: ignore[arg-type]
        )  # fmt: skip
        bound = _bound(rounded, b, want, dtype, eps, cum)
        for i, row in enumerate(want):
            for t, y in enumerate(row):
                worst = max(worst, abs(Q(float(out[b, i, t])) - y) / bound[t])
    return worst


OPTIONS = st.fixed_dictionaries(
    {
        "eps": st.sampled_from([1e-8, 0.0, 1e-3]),
        "zero_tail": st.booleans(),
        "cumulative": st.booleans(),
    }
)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@settings(max_examples=60, deadline=None)
@given(batch=batches(), options=OPTIONS)
@example(  # a unique longest response, one empty, a deterministic token, an offset
    batch={"rewards": [[1e3, 1e3 + 2.0**-12, 1e3]], "mask": [[[1, 1, 1], [1, 0, 0], [0, 0, 0]]],
           "logprobs": [[[0.0, -0.5, -2.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]],
           "sum_pi_squared": [[[1.0, 0.4, 0.3], [0.5, 1.0, 1.0], [1.0, 1.0, 1.0]]]},
    options={"eps": 0.0, "zero_tail": True, "cumulative": True},
)  # fmt: skip
@example(  # G = 1
    batch={"rewards": [[0.7]], "mask": [[[1, 1]]], "logprobs": [[[-0.1, -0.2]]],
           "sum_pi_squared": [[[0.8, 0.7]]]},
    options={"eps": 1e-8, "zero_tail": True, "cumulative": True},
)  # fmt: skip
@example(  # one response left at t, its weight within rounding of 0, ε = 0: B_t jumps there
    batch={"rewards": [[0.0, 1.0]], "mask": [[[1, 0], [1, 1]]],
           "logprobs": [[[-1.0, 0.0], [0.0, -1.1399770016857606e-12]]],
           "sum_pi_squared": [[[0.5, 1.0], [1.0, 0.99999999999772]]]},
    options={"eps": 0.0, "zero_tail": False, "cumulative": False},
)  # fmt: skip
def test_fast_equals_reference_on_hostile_batches(
    dtype: torch.dtype, batch: Batch, options: dict[str, object]
) -> None:
    assert _worst(batch, dtype, **options) <= 1


def test_an_all_zero_output_fails_the_comparison() -> None:
    """The planted defect: a fast version that returns zeros is caught by the same bound."""
    batch = {
        "rewards": [[1.0, 0.0, 1.0, 0.0]],
        "mask": [[[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]]],
        "logprobs": [[[-0.3, -1.0, -0.2], [-0.7, -0.1, 0.0], [-1.5, 0.0, 0.0], [-0.2, -0.4, -0.9]]],
        "sum_pi_squared": [[[0.6, 0.4, 0.7], [0.5, 0.8, 1.0], [0.3, 1.0, 1.0], [0.7, 0.5, 0.4]]],
    }
    assert _worst(batch, torch.float64) <= 1
    assert _worst(batch, torch.float64, plant=True) > 1e6


# --- worked example, degenerate groups, bad input --------------------------------------------

P = [[0.5, 0.75, 0.5], [0.5, 0.5, 0.5], [0.25, 0.5, 0.5]]
MASK = [[1, 1, 1], [1, 1, 0], [1, 0, 0]]


def _example(rewards: list[float], **options: object) -> tuple[list[list[Fraction]], torch.Tensor]:
    lp = [[math.log(x) for x in row] for row in P]
    s2 = [[x * x + (1 - x) ** 2 for x in row] for row in P]
    want = ref.optimal_token_baseline(rewards, MASK, lp, s2, **options)  # type: ignore[arg-type]
    got = fst.optimal_token_baseline(
        torch.tensor([rewards], dtype=torch.float64), torch.tensor([MASK]),
        torch.tensor([lp], dtype=torch.float64), torch.tensor([s2], dtype=torch.float64),
        **options,  # type: ignore[arg-type]
    )  # fmt: skip
    return want, got[0]


def test_worked_example_zero_tail_and_singleton() -> None:
    want, got = _example([1.0, 0.0, 1.0], eps=0.0)
    exact = [[Q(4, 17), Q(8, 13), Q(1)], [Q(-13, 17), Q(-5, 13), Q(0)], [Q(4, 17), Q(0), Q(0)]]
    for w_row, e_row, g_row in zip(want, exact, got.tolist(), strict=True):
        # log p is a float: exp(log p) = p to ~1e-16, the only distance from the exact value
        assert all(abs(w - e) < Q(1, 10**15) for w, e in zip(w_row, e_row, strict=True))
        assert g_row == pytest.approx([float(e) for e in e_row], abs=1e-15)
    _, no_tail = _example([1.0, 0.0, 1.0], eps=0.0, zero_tail=False)
    assert float(no_tail[0, 2]) == pytest.approx(0.0, abs=1e-15)  # its own baseline
    one = fst.optimal_token_baseline(
        torch.tensor([[0.3], [-2.0]]),
        torch.ones(2, 1, 4),
        -torch.rand(2, 1, 4),
        torch.rand(2, 1, 4),
    )
    assert torch.equal(one, torch.tensor([[0.3], [-2.0]]).unsqueeze(-1).expand(2, 1, 4))


def test_all_equal_groups_keep_the_epsilon_shrinkage_and_the_tail() -> None:
    """Every reward 1: off the tail A = ε/(ΣW + ε) (0 with eps=0), and the unique longest
    response's tail gets A = R = 1, as in verl. Padding holding NaN is never read."""
    want, got = _example([1.0, 1.0, 1.0])
    W0 = Q(1, 2) + Q(1, 2) + Q(9, 8)
    assert abs(want[1][0] - Q(1e-8) / (W0 + Q(1e-8))) < Q(1, 10**20)  # W from float log p
    assert want[0][2] == 1 and float(got[0, 2]) == 1.0
    _, got0 = _example([1.0, 1.0, 1.0], eps=0.0)
    assert float(got0[:, :2].abs().max()) < 1e-15 and got0[0, 2] == 1.0
    lp = torch.tensor([[[-0.1, float("nan")], [-0.2, -0.3]]])
    s2 = torch.tensor([[[0.8, float("nan")], [0.7, 0.6]]])
    out = fst.optimal_token_baseline(
        torch.tensor([[1.0, 0.0]]), torch.tensor([[[1, 0], [1, 1]]]), lp, s2
    )
    assert bool(torch.isfinite(out).all()) and out[0, 0, 1] == 0


BAD = [
    ({"logprobs": 0.5}, ValueError, "logprobs must be log-probabilities"),
    ({"sum_pi_squared": 1.5}, ValueError, "sum_pi_squared must lie in"),
    ({"sum_pi_squared": float("inf")}, ValueError, "sum_pi_squared"),
    ({"logprobs": float("nan")}, ValueError, "logprobs"),
    ({"eps": -1.0}, ValueError, "finite eps"),
    ({"mask": 2}, ValueError, "mask must be boolean"),
]


@pytest.mark.parametrize(("change", "error", "match"), BAD)
def test_bad_input_raises_clear_errors(change: dict[str, float], error: type, match: str) -> None:
    """The same error type from both, the message naming the argument; the value is planted at
    a valid position (response 0, token 1)."""
    rewards = [1.0, 0.0]
    mask = [[1, 1], [1, 0]]
    lp = [[-0.1, -0.2], [-0.3, -0.4]]
    s2 = [[0.8, 0.7], [0.6, 0.5]]
    eps = change.get("eps", 1e-8)
    for key, table in (("logprobs", lp), ("sum_pi_squared", s2), ("mask", mask)):
        if key in change:
            table[0][1] = change[key]  # type: ignore[call-overload]
    with pytest.raises(error, match=match):
        ref.optimal_token_baseline(rewards, mask, lp, s2, eps=eps)
    with pytest.raises(error, match=match):
        fst.optimal_token_baseline(
            torch.tensor([rewards]),
            torch.tensor([mask]),
            torch.tensor([lp]),
            torch.tensor([s2]),
            eps=eps,
        )
    # log-probs one token shorter and one token longer than the mask: both named
    for wrong in (torch.tensor([lp])[..., :1], torch.nn.functional.pad(torch.tensor([lp]), (0, 1))):
        with pytest.raises(
            ValueError, match=r"logprobs must have shape \[B, G, T\] .* the mask's T"
        ):
            fst.optimal_token_baseline(
                torch.tensor([rewards]), torch.tensor([mask]), wrong, torch.tensor([s2])
            )


def test_with_no_epsilon_a_position_without_weight_has_no_baseline() -> None:
    """eps = 0 and a policy certain of every token (π = 1, Σπ² = 1, so every weight
    1 − 2π + Σπ² is 0): B_t = 0/0 is taken as 0, so A = R at every valid token, in both."""
    rewards = [1.0, 0.0, 0.5]
    mask = [[1, 1, 0], [1, 1, 1], [1, 0, 0]]
    zeros = [[0.0] * 3 for _ in rewards]
    ones = [[1.0] * 3 for _ in rewards]
    exact = ref.optimal_token_baseline(rewards, mask, zeros, ones, eps=0.0, zero_tail=False)
    want = [[Fraction(r) * m for m in row] for r, row in zip(rewards, mask, strict=True)]
    assert exact == want
    out = fst.optimal_token_baseline(
        torch.tensor([rewards], dtype=torch.float64),
        torch.tensor([mask], dtype=torch.bool),
        torch.zeros(1, 3, 3, dtype=torch.float64),
        torch.ones(1, 3, 3, dtype=torch.float64),
        eps=0.0,
        zero_tail=False,
    )
    assert out[0].tolist() == [[float(v) for v in row] for row in want]
