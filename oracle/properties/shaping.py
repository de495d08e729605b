"""The shaping family of the oracle: a reward shaping (``fast.shaping``'s or a user's) checked for
the invariants it declares (``fast.shaping.KEEPS``), each a function returning a ``Finding``.

A target is one of two callables on ``rewards [B, G]`` and ``lengths [B, G]`` (float64):

* a *shaping* (``advantages=False``): returns shaped rewards; the oracle composes it with a
  centred estimator the way advest does (``fast.by_group(estimator, ..., shaping=fn)``);
* a *shaped advantage* (``advantages=True``): a trainer's own composition, returning advantages,
  as prime-rl's ``compute_advantages`` with GR³ inside (its #2040 took the baseline from the
  unshaped rewards).

The inputs: every binary group of G = 4 with lengths that are all zero, all equal, rising,
falling, one non-zero and spread (the 0/0 of prime-rl #2377 lives in the first ones), and
rewards in [0, 1] drawn with a fixed seed; so a verdict is the same on every machine.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import Tensor

from advest.fast import by_group
from advest.fast.shaping import KEEPS

from .findings import Finding

Target = Callable[[Tensor, Tensor], Tensor]
G = 4
LENGTHS = ([0, 0, 0, 0], [5, 5, 5, 5], [1, 2, 3, 4], [4, 3, 2, 1], [0, 0, 7, 0], [20, 1, 18, 3])
ESTIMATOR = "dr_grpo"
"""The centred estimator a shaping is composed with: r − mean(r), no division (so the
advantages' order is the shaped rewards')."""


def inputs(seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    """``(rewards [B, G], lengths [B, G])`` batches: every binary group against every length
    pattern, then rewards in [0, 1] (quarters) with lengths up to 24, drawn with ``seed``."""
    binary = torch.tensor(list(itertools.product([0.0, 1.0], repeat=G)), dtype=torch.float64)
    out = []
    for pattern in LENGTHS:
        lengths = torch.tensor(pattern, dtype=torch.float64).expand_as(binary)
        out.append((binary, lengths.contiguous()))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(4):
        rewards = torch.randint(0, 5, (8, G), generator=gen).double() / 4
        out.append((rewards, torch.randint(0, 25, (8, G), generator=gen).double()))
    return out


def advantages_of(fn: Target, advantages: bool) -> Target:
    """``fn`` as a shaped advantage: itself, or the shaping composed with ``ESTIMATOR``."""
    if advantages:
        return fn

    def composed(rewards: Tensor, lengths: Tensor) -> Tensor:
        B, size = rewards.shape  # any group size: the search draws 1..8
        index = torch.arange(B).repeat_interleave(size)  # [N]
        flat = by_group(ESTIMATOR, rewards.reshape(-1), index, shaping=fn,
                        lengths=lengths.reshape(-1))  # fmt: skip
        return flat.view(B, size)

    return composed


def _first(bad: Tensor) -> int:
    return int(bad.nonzero()[0, 0])


Batches = list[tuple[Tensor, Tensor]]
"""``(rewards [B, G], lengths [B, G])`` pairs: ``inputs()``, or one input the search drew."""


def finite(fn: Target, advantages: bool = False, batches: Batches | None = None) -> Finding:
    """Finite rewards and lengths ≥ 0 (all-zero lengths and costs included) give finite
    output: no division by a quantity that can be zero."""
    for rewards, lengths in inputs() if batches is None else batches:
        out = fn(rewards, lengths)
        bad = ~torch.isfinite(out).all(-1)
        if bool(bad.any()):
            b = _first(bad)
            where = f"rewards {rewards[b].tolist()}, lengths {lengths[b].tolist()}"
            return Finding("finite", "no: non-finite output", f"{out[b].tolist()} on {where}")
    return Finding("finite", "yes", "finite on every input")


def centred(fn: Target, advantages: bool = False, batches: Batches | None = None) -> Finding:
    """With a centred estimator after the shaping, each group's advantages sum to zero."""
    worst = 0.0
    for rewards, lengths in inputs() if batches is None else batches:
        a = advantages_of(fn, advantages)(rewards, lengths)
        total = a.sum(-1).abs()
        if not bool(torch.isfinite(total).all()):
            return Finding("centred", "no: non-finite output", "NaN or inf advantages")
        if float(total.max()) > 1e-9 * (1 + float(a.abs().max())):
            b = int(total.argmax())
            where = f"rewards {rewards[b].tolist()}, lengths {lengths[b].tolist()}"
            return Finding("centred", "no", f"Σ_i A_i = {float(a[b].sum()):.4g} on {where}")
        worst = max(worst, float(total.max()))
    return Finding("centred", "yes", f"max |Σ_i A_i| = {worst:.2g}")


def pass_over_fail(fn: Target, advantages: bool = False, batches: Batches | None = None) -> Finding:
    """Within a group of rewards in {0, 1}, a passing sample never gets a lower advantage than
    a failing one."""
    for rewards, lengths in inputs() if batches is None else batches:
        a = advantages_of(fn, advantages)(rewards, lengths)
        passing, failing = rewards == 1, rewards == 0
        low = torch.where(passing, a, torch.inf).amin(-1)
        high = torch.where(failing, a, -torch.inf).amax(-1)
        bad = low < high
        if bool(bad.any()):
            b = _first(bad)
            where = f"rewards {rewards[b].tolist()}, lengths {lengths[b].tolist()}"
            return Finding(
                "pass_over_fail", "no", f"a pass gets {float(low[b]):.4g} < a fail's "
                f"{float(high[b]):.4g} on {where}: advantages {a[b].tolist()}"
            )  # fmt: skip
    return Finding("pass_over_fail", "yes", "every pass at or above every fail")


def per_group(fn: Target, advantages: bool = False, batches: Batches | None = None) -> Finding:
    """A group's output depends on that group alone: each group of a batch gives what it gives
    alone (so masking and regrouping by ``by_group`` see the same)."""
    for rewards, lengths in inputs() if batches is None else batches:
        together = fn(rewards, lengths)
        for b in range(rewards.shape[0]):
            alone = fn(rewards[b : b + 1], lengths[b : b + 1])[0]
            # NaN in both is the same output here: finiteness is the ``finite`` check's
            if not torch.allclose(together[b], alone, rtol=0, atol=0, equal_nan=True):
                return Finding(
                    "per_group", "no", f"group {b} gives {together[b].tolist()} in its batch, "
                    f"{alone.tolist()} alone (lengths {lengths[b].tolist()})"
                )  # fmt: skip
    return Finding("per_group", "yes", "every group as alone")


CHECKS: dict[str, Callable[[Target, bool, Batches | None], Finding]] = {
    "finite": finite,
    "centred": centred,
    "pass_over_fail": pass_over_fail,
    "per_group": per_group,
}


def check(fn: Target, keeps: tuple[str, ...] = KEEPS, *, advantages: bool = False) -> list[Finding]:
    """The findings of ``fn`` for each invariant it declares (``keeps``), in ``KEEPS`` order, on
    the explicit inputs (``oracle.search.shaping`` then searches each that held)."""
    unknown = sorted(set(keeps) - set(KEEPS))
    if unknown:
        raise ValueError(f"unknown invariants {unknown}; valid: {', '.join(KEEPS)}")
    return [CHECKS[name](fn, advantages, None) for name in KEEPS if name in keeps]
