"""KAE: kernelized advantage estimation, literally: Nadaraya–Watson smoothing over training
iterations, per prompt, leave-one-out over the current group.

Source: Gong, Ye, Zhu, Zhang, Zhou, Shi, *Kernelized Advantage Estimation: From Nonparametric
Statistics to LLM Reasoning*, arXiv:2604.28005; the normaliser, kernels, relative
bandwidth and cold start are advest's reading, pinned in spec/kae.md. For prompt x at the global,
1-based iteration i, with history H(x) = the pairs (I_j, Z_j) of rewards x received at earlier
iterations and current rewards Z_1..Z_G:

    u_j = (i − I_j)/(i·h)
    N_g = Σ_H K(u_j)·Z_j + K(0)·Σ_{k≠g} Z_k,    M_g = Σ_H K(u_j) + K(0)·(G − 1)
    V̂_g = N_g/M_g  (0 if M_g = 0: cold start),  A_g = Z_g − V̂_g

The history is kept as individual rewards (the literal multiset H(x)), never aggregated and never
pruned. Everything is an exact rational except the exponential kernel's exp, evaluated to 50
digits, and the std of ``normalize="batch"`` (60-digit square root). The window i·h is the float64
product of i and h (one rounding, exact for dyadic h such as 0.25 or 0.5), so that "weight exactly
0" is the same predicate here and in fast/kae.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

from ._exact import Number, exp, public, std, to_fractions

Kernel = Callable[[Fraction], Fraction]
History = Sequence[tuple[int, Number]]
EPS = Fraction(1e-6)


def triangular(u: Fraction) -> Fraction:
    """K(u) = max(0, 1 − u)."""
    return max(Fraction(0), 1 - u)


def exponential(u: Fraction) -> Fraction:
    """K(u) = e^{−u} (50 digits)."""
    return exp(-u)


KERNELS: dict[str, Kernel] = {"triangular": triangular, "exponential": exponential}


def _kernel(kernel: str | Kernel) -> Kernel:
    if callable(kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}; got {kernel!r}")
    return KERNELS[kernel]


def _check_h(h: Number) -> Fraction:
    if isinstance(h, bool) or not isinstance(h, int | float | Fraction):
        raise TypeError(f"h must be a positive number; got {type(h)}")
    if (isinstance(h, float) and not math.isfinite(h)) or not h > 0:
        raise ValueError(f"h (the relative bandwidth) must be finite and > 0; got h={h!r}")
    return Fraction(h)


def window(i: int, h: Number) -> Fraction:
    """i·h, the kernel's width in iterations, as the float64 product (spec/kae.md)."""
    return Fraction(float(i) * float(h))


def _check_i(i: int) -> None:
    if isinstance(i, bool) or not isinstance(i, int) or i < 1:
        raise ValueError(f"the iteration i must be an int >= 1; got i={i!r}")


def kernel_weight(kernel: str | Kernel, i: int, iteration: int, h: Number) -> Fraction:
    """K(u) with u = (i − I)/(i·h): the weight, at iteration i, of a reward from iteration I < i."""
    _check_i(i)
    if not iteration < i:
        raise ValueError(
            f"history must be strictly older than the iteration: entry from I={iteration} at i={i}"
        )
    _check_h(h)
    return _kernel(kernel)(Fraction(i - iteration) / window(i, h))


class GroupResult(NamedTuple):
    values: list[Fraction]  # V̂_g
    advantages: list[Fraction]  # A_g = Z_g − V̂_g
    cold_starts: int  # responses with M_g = 0 (baseline 0)


def kae_group(
    history: History,
    rewards: Sequence[Number],
    *,
    i: int,
    h: Number = 0.25,
    kernel: str | Kernel = "triangular",
) -> GroupResult:
    """V̂, A and the cold-start count of one group at iteration i; ``history`` holds the pairs
    (I_j, Z_j) of this prompt's earlier rewards, each I_j < i (arXiv:2604.28005, NW form)."""
    _check_i(i)
    K = _kernel(kernel)
    Z = to_fractions(rewards)
    G = len(Z)
    history_q = [(I_j, to_fractions([Z_j], "history rewards")[0]) for I_j, Z_j in history]
    weighted = [(kernel_weight(K, i, I_j, h), Z_j) for I_j, Z_j in history_q]
    values, cold = [], 0
    for g in range(G):
        N_g = sum((w * z for w, z in weighted), Fraction(0)) + K(Fraction(0)) * sum(
            (Z[k] for k in range(G) if k != g), Fraction(0)
        )
        M_g = sum((w for w, _ in weighted), Fraction(0)) + K(Fraction(0)) * (G - 1)
        values.append(N_g / M_g if M_g != 0 else Fraction(0))
        cold += M_g == 0
    return GroupResult(values, [z - v for z, v in zip(Z, values, strict=True)], cold)


class KAE:
    """KAE over a run: history keyed by prompt id, iteration counter, cold-start count.

    Each call is one iteration i (1, 2, ...): every group's advantages come from the history of
    iterations < i, then all the call's rewards are appended (same-step groups of one prompt do
    not see each other). ``normalize="batch"`` divides every advantage of the call by (std over
    the call, ddof 1, + 1e-6), unless the call has < 2 responses or zero spread; no re-centring.
    """

    def __init__(
        self, h: Number = 0.25, kernel: str = "triangular", normalize: str = "none"
    ) -> None:
        self.h = _check_h(h)
        _kernel(kernel)
        if normalize not in ("none", "batch"):
            raise ValueError(f"normalize must be 'none' or 'batch'; got {normalize!r}")
        self.kernel, self.normalize = kernel, normalize
        self.iteration = 1
        self.cold_start_count = 0
        self.history: dict[int, list[tuple[int, Fraction]]] = {}

    def __call__(
        self, prompt_ids: Sequence[int], rewards: Sequence[Sequence[Number]]
    ) -> list[list[Fraction]]:
        if len(prompt_ids) != len(rewards) or not rewards:
            raise ValueError(
                f"prompt_ids has {len(prompt_ids)} entries but rewards has {len(rewards)} groups"
                " (need the same number, >= 1)"
            )
        i = self.iteration
        out = []
        for x, Z in zip(prompt_ids, rewards, strict=True):
            result = kae_group(self.history.get(x, []), Z, i=i, h=self.h, kernel=self.kernel)
            self.cold_start_count += result.cold_starts
            out.append(result.advantages)
        for x, Z in zip(prompt_ids, rewards, strict=True):  # append only after every group
            self.history.setdefault(x, []).extend((i, z) for z in to_fractions(Z))
        self.iteration += 1
        return self._normalized(out) if self.normalize == "batch" else out

    def value(self, prompt_ids: Sequence[int]) -> list[Fraction]:
        """Σ_H K(u)Z / Σ_H K(u) at the next iteration (the baseline of a G = 1 group; 0 where
        every weight is 0). A prompt id never seen raises ``ValueError``."""
        i, out = self.iteration, []
        for b, x in enumerate(prompt_ids):
            if x not in self.history:
                raise ValueError(f"prompt_ids[{b}] = {x} was never seen by this KAE (no history)")
            pairs = [
                (kernel_weight(self.kernel, i, I_j, self.h), Z_j) for I_j, Z_j in self.history[x]
            ]
            mass = sum((w for w, _ in pairs), Fraction(0))
            out.append(sum((w * z for w, z in pairs), Fraction(0)) / mass if mass else Fraction(0))
        return out

    @staticmethod
    def _normalized(A: list[list[Fraction]]) -> list[list[Fraction]]:
        flat = [a for row in A for a in row]
        if len(flat) < 2 or max(flat) == min(flat):
            return A
        scale = std(flat, 1) + EPS
        return [[a / scale for a in row] for row in A]


kae = KAE
"""The registered name (``fast.registry.get("kae")``) of the class ``KAE``."""


__all__ = public(globals())  # every public function and class above
