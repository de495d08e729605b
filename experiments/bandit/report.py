"""The bandit experiment's statistics and report (``advest experiment bandit``): means and
standard errors over seeds, log-log slopes, the fitted multiple of ∇J, the figures and
summary.md, from the metrics ``bandit.run`` measured. Which estimators are drawn dashed (the
normalised ones) and which run on pass/fail rewards are the experiment's to say, so they are
arguments."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

F64 = torch.float64


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (ddof = 1; 0 for a single value)."""
    t = torch.tensor(list(values), dtype=F64)
    se = float(t.std() / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return float(t.mean()), se


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx = torch.log(torch.tensor(list(xs), dtype=F64))
    ly = torch.log(torch.tensor(list(ys), dtype=F64))
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx * lx).sum())


def batch_grid(top: int, per_decade: int = 4) -> list[int]:
    """Distinct integers from 1 to ``top``, log-spaced (``per_decade`` per factor of 10)."""
    steps = max(1, round(math.log10(top) * per_decade))
    return sorted({round(10 ** (i * math.log10(top) / steps)) for i in range(steps + 1)})


def fit_to(mean: Tensor, target: Tensor) -> dict[str, float]:
    """cos(mean, target); c = ⟨mean, target⟩/‖target‖²; ‖mean − c·target‖/‖c·target‖."""
    c = float(mean @ target / (target @ target))
    cos = float(mean @ target / (mean.norm() * target.norm()))
    resid = float((mean - c * target).norm() / (abs(c) * target.norm()))
    return {"cos": cos, "scale": c, "relative_residual": resid}


# ---------------------------------------------------------------- the three sweeps


def plot(metrics: dict[str, Any], folder: Path, dashed: Sequence[str] = ()) -> list[str]:
    """figure1.png (error vs M, variance vs A, variance vs K) and ratios.png (var / var(EI))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bias, va, vk = metrics["bias"], metrics["variance_vs_actions"], metrics["variance_vs_k"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name, d in bias["estimators"].items():
        m, s = (torch.tensor(col, dtype=F64) for col in zip(*d["error_mean_se"], strict=True))
        style = "--" if name in dashed else "-"
        axes[0].plot(bias["batches"], m, style, label=name)
        axes[0].fill_between(bias["batches"], (m - s).clamp(min=1e-12), m + s, alpha=0.2)
    top = bias["batches"][0], bias["batches"][-1]
    first = bias["estimators"][next(iter(bias["estimators"]))]["error_mean_se"][0][0]
    axes[0].plot(top, [first, first * (top[1] / top[0]) ** -0.5], "k:", label="M^{-1/2}")
    axes[0].set(xscale="log", yscale="log", xlabel="M (batches)", ylabel="‖mean ĝ / c − ∇J‖")
    axes[0].set_title(f"error (A={metrics['config']['bias_actions']})")
    for ax, v, xlabel in ((axes[1], va, "A (actions)"), (axes[2], vk, "K")):
        for name, d in v["estimators"].items():
            m, s = (torch.tensor(col, dtype=F64) for col in zip(*d["variance"], strict=True))
            ax.errorbar(v["values"], m, yerr=s, marker="o", ms=3, capsize=2, label=name)
        ax.set(yscale="log", xlabel=xlabel, ylabel="total variance tr Cov(ĝ)")
    axes[1].set_xscale("log", base=2)
    axes[1].set_title(f"variance vs A (K={metrics['config']['k']})")
    axes[2].set_title(f"variance vs K (A={metrics['config']['k_sweep_actions']})")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"softmax bandit, N={metrics['config']['n']}, {metrics['config']['seeds']} seeds")
    fig.tight_layout()
    fig.savefig(folder / "figure1.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, v, xlabel in ((axes[0], va, "A (actions)"), (axes[1], vk, "K")):
        for name, d in v["estimators"].items():
            if name != "ei" and d["ratio_to_ei"] is not None:
                m, s = (torch.tensor(c, dtype=F64) for c in zip(*d["ratio_to_ei"], strict=True))
                ax.errorbar(v["values"], m, yerr=s, marker="o", ms=3, capsize=2, label=name)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set(xlabel=xlabel, ylabel="var / var(EI)", yscale="log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_xscale("log", base=2)
    fig.tight_layout()
    fig.savefig(folder / "ratios.png", dpi=110)
    plt.close(fig)
    return ["figure1.png", "ratios.png"]


def _pm(pair: Sequence[float], digits: int = 3) -> str:
    return f"{pair[0]:.{digits}g} ± {pair[1]:.2g}"


def summary(
    metrics: dict[str, Any], binary_only: Sequence[str] = (), harmonic: Sequence[str] = ()
) -> str:
    """summary.md: the fitted slopes, the fits to ∇J, and the variance tables."""
    cfg, bias = metrics["config"], metrics["bias"]
    lines = [
        "# MaxPO softmax bandit (MaxPO paper §5.1, App. G.1)",
        "",
        f"N = {cfg['n']}, K = {cfg['k']}, seeds = {cfg['seeds']} (mean ± standard error over "
        f"seeds), quick = {cfg['quick']}, wall time {metrics['wall_seconds']:.1f} s. "
        f"Reward r + w·s, w = {cfg.get('format_weight', 0.0):g} (gdpo reads r and s apart).",
        "",
        f"## Bias: ‖(mean of M estimates)/c − ∇J‖, A = {cfg['bias_actions']}, "
        f"M = 1 … {cfg['bias_batches']}",
        "",
        "c = 1 for estimators divided by their known scale; fitted for the normalised ones. "
        f"Tail slope: M ≥ {bias['tail_batches'][0]}. {', '.join(binary_only)} run on pass/fail "
        f"rewards [r > 0]; ∇J is ∇max@K except for {', '.join(harmonic)}: the MaxRL objective's "
        "N Σ_{k=1}^{N} (1/k) ∇pass@k.",
        "",
        "| estimator | scale divided out | log-log slope | tail slope | cos(E ĝ, ∇J) "
        "| fitted c | ‖E ĝ − c∇J‖/‖c∇J‖ |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, d in bias["estimators"].items():
        scale = d["scale_divided_out"]
        lines.append(
            f"| {name} | {'none' if scale is None else f'{scale:g}'} | {_pm(d['slope'])} | "
            f"{_pm(d['slope_tail'])} | {_pm(d['cos'], 5)} | {_pm(d['fitted_scale'])} | "
            f"{_pm(d['relative_residual'])} |"
        )
    for key, label in (("variance_vs_actions", "A"), ("variance_vs_k", "K")):
        v = metrics[key]
        fixed = (
            f"K = {cfg['k']}" if key == "variance_vs_actions" else f"A = {cfg['k_sweep_actions']}"
        )
        names = list(v["estimators"])
        lines += [
            "",
            f"## Total variance vs {label} ({fixed}, M = {cfg['var_batches']} per estimate)",
            "",
            f"| {label} | "
            + " | ".join(names)
            + " | "
            + " | ".join(f"{n}/ei" for n in names if n != "ei")
            + " |",
            "|---|" + "---|" * (2 * len(names) - 1),
        ]
        for i, x in enumerate(v["values"]):
            cells = [_pm(v["estimators"][n]["variance"][i]) for n in names]
            cells += [_pm(v["estimators"][n]["ratio_to_ei"][i]) for n in names if n != "ei"]
            lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
