"""The README's bandit bullets, rendered from ``docs/results/bandit.json`` (the default run) and
``docs/results/bandit_format.json`` (the run with a second "format" reward): every number and
every word that compares one is chosen from those files, by the rules stated in the bullets
(``scripts/choosing.py`` writes the block; its drift test fails when the README differs).

Rules: a tail slope "falls as M^−½" when slope + 2 se < −0.4 and "levels off" when
slope − 2 se > −0.25 (an unbiased estimator's error falls as M^−½; a bias leaves a floor); a
variance ratio is "below 1" when ratio + 2 se < 1, "above 1" when ratio − 2 se > 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advest.experiments.bandit.arms import harmonic

BEGIN, END = "<!-- bandit:begin -->", "<!-- bandit:end -->"
FALLS, LEVELS = -0.4, -0.25
"""The tail-slope thresholds (with 2 se) of "falls as M^−½" and "levels off"."""
RATIO_ARMS = ("maxpo", "pkpo_sloo")
"""The estimators whose variance ratio to EI's the README spells out (the rest: the file)."""

Pair = Sequence[float]  # (mean, se over seeds)


def pm(x: Pair, digits: int = 2) -> str:
    """ "mean ± se", with a true minus sign."""
    return f"{x[0]:.{digits}f} ± {x[1]:.{digits}f}".replace("-", "−")


def slope_word(x: Pair) -> str:
    if x[0] + 2 * x[1] < FALLS:
        return "falls"
    return "levels off" if x[0] - 2 * x[1] > LEVELS else "between"


def ratio_word(x: Pair) -> str:
    if x[0] + 2 * x[1] < 1:
        return "below 1"
    return "above 1" if x[0] - 2 * x[1] > 1 else "within 2 se of 1"


def _names(words: dict[str, str], word: str) -> str:
    return ", ".join(f"`{n}`" for n, w in words.items() if w == word) or "none"


def bias_bullet(b: dict[str, Any]) -> str:
    s, est = b["settings"], b["estimators"]
    slopes = ", ".join(f"`{n}` {pm(d['slope_tail'], 3)}" for n, d in est.items())
    words = {n: slope_word(d["slope_tail"]) for n, d in est.items()}
    free = [n for n, d in est.items() if d["scale_divided_out"] is None]
    between = _names(words, "between")
    return (
        "* **MaxPO bandit** (Takashiro et al. §5.1 and App. G.1, `advest experiment bandit`; "
        f"softmax over A = {s['bias_actions']} actions, N = {s['n']}, K = {s['k']}, "
        f"{s['seeds']} seeds, exact ∇J, the mean of M = 1 … {s['bias_batches']:,} estimates): "
        "the slope of its error against M over the last decade of M (mean ± se over seeds; the "
        "maxrl family against its own objective, the rest against ∇max@K; "
        f"{', '.join(f'`{n}`' for n in free)} divided by their fitted scale first): {slopes}. "
        f"Falls as M^−½ (slope + 2 se < −{-FALLS}): {_names(words, 'falls')}; levels off "
        f"(slope − 2 se > −{-LEVELS}, a bias): {_names(words, 'levels off')}"
        + (f"; in between: {between}." if between != "none" else ".")
    )


def ratio_bullet(b: dict[str, Any], name: str) -> str:
    s, v = b["settings"], b["variance"]
    parts = []
    for axis, label, fixed in (("actions", "A", f"K = {s['k']}"),
                               ("k", "K", f"A = {s['k_sweep_actions']}")):  # fmt: skip
        xs, ratios = v[axis]["values"], v[axis]["ratio_to_ei"][name]
        cells = ", ".join(f"{pm(r)} ({label} = {x})" for x, r in zip(xs, ratios, strict=True))
        words = {str(x): ratio_word(r) for x, r in zip(xs, ratios, strict=True)}
        said = "; ".join(
            f"{w} at {label} = {', '.join(x for x, u in words.items() if u == w)}"
            for w in ("below 1", "above 1", "within 2 se of 1")
            if w in words.values()
        )
        parts.append(f"Along {label} ({fixed}): {cells}; {said}")
    return (
        f"* **var(`{name}`) / var(`ei`)** in the same bandit (the total variance of "
        f"{s['var_batches']:,} estimates on the same sampled actions, mean ± se over "
        f'{s["seeds"]} seeds; "below 1" when ratio + 2 se < 1). ' + ". ".join(parts) + "."
    )


def format_bullet(b: dict[str, Any]) -> str:
    s, est = b["settings"], b["estimators"]
    names = ",".join(est)
    own = [n for n in est if harmonic(n)]
    fits = "; ".join(
        f"`{n}` c = {pm(est[n]['fitted_scale'], 3)}, tail slope {pm(est[n]['slope_tail'])}"
        for n in own
    )
    cos = ", ".join(f"`{n}` {pm(d['cos'], 4)}" for n, d in est.items() if not harmonic(n))
    return (
        "* **MaxRL and GDPO in the bandit** (the same bandit, N = "
        f"{s['n']}, K = {s['k']}, A = {s['bias_actions']}, {s['seeds']} seeds, M up to "
        f"{s['bias_batches']:,}; `--estimators [{names}] --format_weight {s['format_weight']}`: "
        'every action also has a second N(0, 1) "format" score s, the reward is '
        f"r + {s['format_weight']} s, and `gdpo` reads r and s apart). The maxrl family runs on "
        "pass/fail [r > 0] against its own objective N Σ_k (1/k) ∇pass@k, with c the fitted "
        f"scale of the mean estimate (1 when unbiased): {fits}. The others' cosine with "
        f"∇max@{s['k']}: {cos}."
    )


def block(bandit: dict[str, Any] | None, formatted: dict[str, Any] | None) -> list[str]:
    """The bullets between BEGIN and END (a missing file: a line saying so)."""
    out = [BEGIN]
    if bandit is None:
        out.append("* The bandit: no results file (`docs/results/bandit.json`) yet.")
    else:
        out.append(bias_bullet(bandit))
        out += [ratio_bullet(bandit, n) for n in RATIO_ARMS if n in bandit["variance"]["k"][
            "ratio_to_ei"]]  # fmt: skip
    if formatted is not None:
        out.append(format_bullet(formatted))
    return [*out, END]
