"""The MaxPO softmax-bandit experiment (Takashiro et al., arXiv:2606.06080, §5.1 and App. G.1).

A actions with rewards r ~ N(0, I_A) and logits θ ~ N(0, I_A), policy π = softmax(θ), objective
J = E[max of K i.i.d. rewards]. One gradient estimate from N i.i.d. actions a_1..a_N ~ π is

    ĝ = (1 / scale) Σ_i A_i (e_{a_i} − π)      (the softmax score ∇_θ log π(a) = e_a − π),

with A = ``fast.registry.get(name)`` on the rewards ``[M, N]`` of M independent batches at once,
and ``scale`` the catalogue's ``pg_scale(N, K)`` (``spec.scales``: E[Σ A_i ∇log π] = scale · ∇J),
so every unbiased estimator estimates ∇J itself. ``ei_l1o`` has no claimed scale (it is biased);
it is divided by N/K, the scale of the EI it modifies. The normalised contrasts (``chen_passk``,
``bagirov_zscore``, ``grpo``) have no scale at all: they are compared with the best-fitting
multiple c·∇J (c fitted on the mean of all M estimates) and by cosine similarity.
``chen_passk`` accepts only pass/fail rewards, so it runs on the same bandit with r → [r > 0]
and is compared with the max@K gradient of those rewards.

MaxRL (``maxrl``, ``maxrl_unbiased``; spec/maxrl.md) needs rewards ≥ 0 and makes its claims for
pass/fail rewards, so it too runs on [r > 0], against its own objective: the exact
∇J_MaxRL = N Σ_{k=1}^{N} (1/k) ∇pass@k (``target_gradient``; scale 1). ``maxrl_unbiased`` is
unbiased for it; ``maxrl`` (the trainers' form) misses the K = N term −∇pass@N, and in a
one-prompt bandit every ∇pass@k is a multiple of ∇p, so that bias is a pure rescaling here.

Two rewards (GDPO). Every action also has a second score s_a ~ N(0, 1), drawn independently of
r (a stand-in for a format or length reward: a fixed function of the response). Every
estimator's reward is r + w·s with w = ``format_weight`` (∇J is of that sum; w = 0, the
default, leaves the single-reward bandit unchanged), as advest's trainer forms ``rewards`` from
``--reward_weights``, and every estimate is called with ``reward_parts`` [M, N, 2] = (r, s) and
``reward_weights`` (1, w) too; only ``gdpo`` reads them. ``gdpo`` is scale free (compared like
``grpo``), and its batch whitening runs over all M groups of a sweep at once (M prompts of the
same bandit): with M in the hundreds or more that is a near-constant rescaling.

Three measurements (mean ± standard error over seeds, one fresh instance (r, θ) per seed):

* **bias**: ‖mean of the first M estimates − ∇J‖ against M (log-log slope ≈ −1/2 when unbiased,
  a plateau when biased);
* **variance vs A** and **variance vs K**: the total variance tr Cov(ĝ) from M estimates, and its
  ratio to EI's on the same sampled actions (common random numbers).

∇J is exact in float64 (``exact_gradient``; it matches ``spec.bandit.gradient``'s rationals).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .arms import ARMS, binary_only, harmonic, normalised, scaled
from .exact import exact_gradient as exact_gradient  # public here, as the tests read it
from .exact import objective as objective
from .report import batch_grid, fit_to, loglog_slope, mean_se, plot, summary

F64 = torch.float64


@dataclass
class Config:
    """Every size of one run (written to config.json). Full mode: about 1 CPU-minute."""

    seeds: int = 20
    """Bandit instances (independent reward vectors and policies)."""
    n: int = 8
    """Batch size N: samples per gradient estimate."""
    k: int = 4
    """max@K comparator size for the bias and variance-vs-A sweeps."""
    bias_actions: int = 100
    """Actions A of the bias sweep."""
    bias_batches: int = 10_000
    """The largest M (estimates averaged) of the bias sweep."""
    var_batches: int = 10_000
    """M: estimates per total-variance measurement."""
    actions: list[int] = field(default_factory=lambda: [2**i for i in range(1, 11)])
    """Action counts A of the variance-vs-A sweep (each ≥ 2)."""
    ks: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5, 6, 7])
    """K values of the variance-vs-K sweep (1 … N−1)."""
    k_sweep_actions: int = 100
    """Actions A of the variance-vs-K sweep."""
    estimators: list[str] = field(default_factory=lambda: list(ARMS))
    """Registered estimator names compared (must include ei)."""
    format_weight: float = 0.0
    """Weight w of the second reward s (every reward is r + w·s; gdpo reads r and s apart)."""
    quick: bool = False
    """Small sizes: under 30 s on one core (flags given explicitly still apply)."""


QUICK = Config(
    seeds=2,
    bias_batches=1_000,
    var_batches=400,
    actions=[2, 16, 128],
    ks=[1, 2, 4, 7],
    k_sweep_actions=32,
    quick=True,
)


# ---------------------------------------------------------------- sampling and estimates


def _generator(*parts: object) -> torch.Generator:
    """A generator seeded from a tuple of ints/strings: runs are reproducible, streams distinct."""
    return torch.Generator().manual_seed(zlib.crc32(repr(parts).encode()))


def instance(num_actions: int, seed: int) -> tuple[Tensor, Tensor]:
    """One bandit (rewards [A], logits [A]), both N(0, 1) in float64, seeded by (seed, A)."""
    gen = _generator("instance", seed, num_actions)
    r = torch.randn(num_actions, generator=gen, dtype=F64)
    return r, torch.randn(num_actions, generator=gen, dtype=F64)


def format_scores(num_actions: int, seed: int) -> Tensor:
    """The second reward s [A] ~ N(0, 1) of one bandit, float64, from its own stream (so r and θ
    are those of ``instance`` whatever the weight)."""
    return torch.randn(num_actions, generator=_generator("format", seed, num_actions), dtype=F64)


def reward_parts(
    num_actions: int, seed: int, weight: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One bandit with two rewards: (total r + w·s [A], logits [A], parts (r, s) [A, 2],
    weights (1, w) [2])."""
    r, theta = instance(num_actions, seed)
    parts = torch.stack([r, format_scores(num_actions, seed)], dim=1)
    weights = torch.tensor([1.0, weight], dtype=F64)
    return parts @ weights, theta, parts, weights


def sample_actions(pi: Tensor, batches: int, n: int, gen: torch.Generator) -> Tensor:
    """[M, N] int64 i.i.d. actions ~ π by inverse CDF (no [M, A] probability matrix)."""
    cdf = torch.cumsum(pi, dim=0)
    u = torch.rand(batches, n, generator=gen, dtype=F64) * cdf[-1]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=pi.numel() - 1)


def pg_scale(name: str, n: int, k: int) -> float | None:
    """The registry's pg_scale(N, K) of ``name`` (its default options' ``Claims.pg_scale``), or
    for a biased estimator the scale it is compared at (``Claims.comparison_scale``)."""
    from advest.fast.registry import entry

    if harmonic(name):  # target_gradient already carries MaxRL's N
        return 1.0
    claims = entry(name).claims
    scale = claims.pg_scale or claims.comparison_scale
    if scale is None:
        return None
    k_eff = 1 if entry(name).k_range is None else k
    return float(scale(n, k_eff))


def target_gradient(name: str, theta: Tensor, seen: Tensor, n: int, k: int) -> Tensor:
    """The gradient ``name`` is compared with: ∇max@K of ``seen``, or for MaxRL the gradient of
    its objective N Σ_{j=1}^{N} (1/j) pass@j (spec/maxrl.md claim 1, which carries the N). [A]"""
    if not harmonic(name):
        return exact_gradient(theta, seen, k)
    total = torch.zeros_like(seen)
    for j in range(1, n + 1):
        total += n / j * exact_gradient(theta, seen, j)
    return total


def advantages(
    name: str, rewards: Tensor, k: int, parts: Tensor | None = None, weights: Tensor | None = None
) -> Tensor:
    """A registered estimator on ``rewards [M, N]`` (its K only if it takes one), and on
    ``reward_parts`` [M, N, R] and ``reward_weights`` [R] when given, with ``lengths`` all 1;
    the plan takes what the estimator reads. [M, N]."""
    from advest.fast.calling import plan

    # A bandit response is one action: length 1 (read only by estimators that take lengths).
    source = {"rewards": rewards, "lengths": torch.ones_like(rewards, dtype=torch.long)}
    if parts is not None and weights is not None:
        source |= {"reward_parts": parts, "reward_weights": weights}
    return plan(name, k=k).per_sample(source)


def estimates(
    name: str,
    actions: Tensor,
    r: Tensor,
    pi: Tensor,
    k: int,
    parts: Tensor | None = None,
    weights: Tensor | None = None,
) -> Tensor:
    """ĝ_m = (1/scale) Σ_i A_{m,i} (e_{a_{m,i}} − π) for every batch m. actions [M, N] → [M, A];
    ``parts`` [A, R] are the rewards of each action apart (their weighted sum is ``r``)."""
    rewards = r[actions]  # [M, N]
    sampled_parts = parts[actions] if parts is not None else None  # [M, N, R]
    adv = advantages(name, rewards, k, sampled_parts, weights).to(F64)
    g = torch.zeros(actions.shape[0], pi.numel(), dtype=F64)
    g.scatter_add_(1, actions, adv)
    g -= adv.sum(dim=1, keepdim=True) * pi
    scale = pg_scale(name, actions.shape[1], k)
    return g / scale if scale is not None else g


def rewards_seen(name: str, r: Tensor) -> Tensor:
    """The reward vector ``name`` runs on: pass/fail [r > 0] for the binary-only estimators."""
    return (r > 0).to(F64) if binary_only(name) else r


# ---------------------------------------------------------------- statistics


def bias_sweep(cfg: Config) -> dict[str, Any]:
    """‖mean of M estimates − ∇J‖ for M on a log grid; slopes per seed (full range, last decade)."""
    grid = batch_grid(cfg.bias_batches)
    tail = [m for m in grid if m * 10 >= cfg.bias_batches]
    per: dict[str, dict[str, list[Any]]] = {
        name: {"error": [], "slope": [], "slope_tail": [], "fit": []} for name in cfg.estimators
    }
    for seed in range(cfg.seeds):
        r, theta, parts, weights = reward_parts(cfg.bias_actions, seed, cfg.format_weight)
        pi = torch.softmax(theta, dim=0)
        actions = sample_actions(pi, cfg.bias_batches, cfg.n, _generator("bias", seed))
        for name in cfg.estimators:
            seen = rewards_seen(name, r)
            grad = target_gradient(name, theta, seen, cfg.n, cfg.k)
            g = estimates(name, actions, seen, pi, cfg.k, parts, weights)
            fit = fit_to(g.mean(dim=0), grad)
            # Scale-free estimators are divided by c, fitted on all M estimates: error to ∇J itself.
            c = fit["scale"] if pg_scale(name, cfg.n, cfg.k) is None else 1.0
            prefix = g.cumsum(dim=0)[[m - 1 for m in grid]]  # [len(grid), A]
            means = prefix / torch.tensor(grid, dtype=F64)[:, None]
            err = (means / c - grad).norm(dim=1).tolist()
            per[name]["error"].append(err)
            per[name]["slope"].append(loglog_slope(grid, err))
            per[name]["slope_tail"].append(
                loglog_slope(tail, err[-len(tail) :]) if len(tail) > 1 else float("nan")
            )
            per[name]["fit"].append(fit)
    out: dict[str, Any] = {"batches": grid, "tail_batches": tail, "estimators": {}}
    for name, d in per.items():
        out["estimators"][name] = {
            "error_mean_se": [mean_se(col) for col in zip(*d["error"], strict=True)],
            "slope": mean_se(d["slope"]),
            "slope_tail": mean_se(d["slope_tail"]),
            "slope_per_seed": d["slope"],
            "cos": mean_se([f["cos"] for f in d["fit"]]),
            "fitted_scale": mean_se([f["scale"] for f in d["fit"]]),
            "relative_residual": mean_se([f["relative_residual"] for f in d["fit"]]),
            "scale_divided_out": pg_scale(name, cfg.n, cfg.k),
        }
    return out


def total_variances(
    cfg: Config, num_actions: int, k: int, seed: int, names: Sequence[str]
) -> dict[str, float]:
    """tr Cov(ĝ) of each estimator from cfg.var_batches estimates, on one set of actions."""
    r, theta, parts, weights = reward_parts(num_actions, seed, cfg.format_weight)
    pi = torch.softmax(theta, dim=0)
    actions = sample_actions(pi, cfg.var_batches, cfg.n, _generator("var", seed, num_actions, k))
    return {
        name: float(estimates(name, actions, r, pi, k, parts, weights).var(dim=0).sum())
        for name in names
    }


def variance_sweep(cfg: Config, axis: str) -> dict[str, Any]:
    """Total variance (mean ± se over seeds) and its ratio to EI's, along A or along K."""
    names = [n for n in cfg.estimators if scaled(n)]
    xs = cfg.actions if axis == "actions" else cfg.ks
    table: dict[str, Any] = {"axis": axis, "values": xs, "estimators": {}}
    raw = {name: [[0.0] * cfg.seeds for _ in xs] for name in names}
    for i, x in enumerate(xs):
        num_actions, k = (x, cfg.k) if axis == "actions" else (cfg.k_sweep_actions, x)
        for seed in range(cfg.seeds):
            for name, v in total_variances(cfg, num_actions, k, seed, names).items():
                raw[name][i][seed] = v
    for name in names:
        table["estimators"][name] = {
            "variance": [mean_se(row) for row in raw[name]],
            "ratio_to_ei": [
                mean_se([v / e for v, e in zip(row, raw["ei"][i], strict=True)])
                for i, row in enumerate(raw[name])
            ]
            if "ei" in raw
            else None,
        }
    return table


# ---------------------------------------------------------------- outputs


def run(cfg: Config, out: Path) -> dict[str, Any]:
    """All three sweeps; writes config.json, metrics.json, figure1.png, ratios.png, summary.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1) + "\n")
    start = time.perf_counter()
    metrics: dict[str, Any] = {"config": asdict(cfg)}
    metrics["bias"] = bias_sweep(cfg)
    metrics["variance_vs_actions"] = variance_sweep(cfg, "actions")
    metrics["variance_vs_k"] = variance_sweep(cfg, "k")
    metrics["wall_seconds"] = time.perf_counter() - start
    metrics["torch"] = torch.__version__
    metrics["threads"] = torch.get_num_threads()
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    arms = cfg.estimators
    metrics["plots"] = plot(metrics, out, dashed=tuple(n for n in arms if normalised(n)))
    (out / "summary.md").write_text(
        summary(
            metrics,
            binary_only=tuple(n for n in arms if binary_only(n)),
            harmonic=tuple(n for n in arms if harmonic(n)),
        )
    )
    return metrics


def check(cfg: Config) -> None:
    """Bad sizes raise ValueError naming the flag."""
    from advest.fast.registry import names

    if cfg.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {cfg.seeds}")
    if not 1 <= cfg.k <= cfg.n - 1 or any(not 1 <= k <= cfg.n - 1 for k in cfg.ks):
        raise ValueError(f"--k and --ks must lie in 1 … N−1 = {cfg.n - 1}: {cfg.k}, {cfg.ks}")
    if min([cfg.bias_actions, cfg.k_sweep_actions, *cfg.actions]) < 2:
        raise ValueError("every action count (--actions, --bias_actions, ...) must be >= 2")
    if cfg.bias_batches < 10 or cfg.var_batches < 2:
        raise ValueError("--bias_batches must be >= 10 and --var_batches >= 2")
    unknown = [e for e in cfg.estimators if e not in names()]
    if unknown or "ei" not in cfg.estimators:
        raise ValueError(f"--estimators must include ei and name registered ones; bad: {unknown}")


def parser() -> Any:
    from advest.parsing import add_settings, new_parser

    p = new_parser(
        "advest experiment bandit",
        "MaxPO softmax bandit: bias vs M, total variance vs A and vs K (MaxPO §5.1).",
    )
    add_settings(p, Config)
    p.add_argument(
        "--out", type=str | None, default=None, help="output folder (default runs/bandit/<time>/)"
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return p


def parse(argv: Sequence[str]) -> tuple[Config, Path]:
    from advest.parsing import settings

    p = parser()
    ns = p.parse_args(list(argv))
    if ns.quick:  # the quick sizes become the defaults; explicit flags still win
        p.set_defaults(asdict(QUICK))
        ns = p.parse_args(list(argv))
    torch.set_num_threads(ns.threads)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return settings(Config, ns), Path(ns.out or f"runs/bandit/{stamp}")


def main(argv: Sequence[str]) -> int:
    """``advest experiment bandit [--quick] [--out DIR] [--seeds S] ...``."""
    cfg, out = parse(argv)
    try:
        check(cfg)
    except ValueError as error:
        from advest.parsing import fail

        return fail("advest experiment bandit", str(error))
    metrics = run(cfg, out)
    print((out / "summary.md").read_text())
    print(f"wrote {out}/: config.json, metrics.json, {', '.join(metrics['plots'])}, summary.md")
    return 0
