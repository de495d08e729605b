"""KAE: kernelized advantage estimation, batched, with the history held as tensors.

Notation: ``prompt_ids: [B]`` (int, a stable id per prompt), ``rewards: [B, G]``; output
``[B, G]``. Definitions, conventions and the checkpoint format: spec/kae.md. One call is one
training iteration i (1, 2, ...): the baseline of response g of prompt x is the Nadaraya–Watson
mean of x's earlier rewards, weighted by K((i − I)/(i·h)), and of the group's other G − 1 rewards
(weight K(0) = 1); all of the call's rewards are appended afterwards.

History: one row per visit (prompt id, iteration I, count n, sum s in float64), in four flat
tensors sorted by (prompt id, I). A call finds each group's rows with ``searchsorted``, gathers
them into a padded ``[B, L]`` block (L = the deepest live history in the call) and reduces it:
O(B·L) for the baselines plus one O(V log V) stable sort to append the B new rows. No Python
loop over groups, prompts or visits; the one host sync reads L.

Exactness of pruning: the triangular kernel's dead rows (i − I ≥ i·h, the one float64 predicate
for "weight 0") are the oldest of each prompt, so each group's live rows are a suffix of its
segment; only that suffix is gathered, left-aligned. Pruned and unpruned buffers therefore reduce
bit-identical blocks and give bit-identical advantages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from advest.spec.tolerances import pair

from . import _ranks
from ._checks import check_finite, check_rewards
from ._ranks import Group
from .registry import defined_in, register

KernelName = Literal["triangular", "exponential"]
Normalize = Literal["none", "batch"]
EPS = 1e-6
# Pruning needs "dead at i" to imply "dead at every later i" in float64: i·h rounds by at most
# i·2⁻⁵³, which stays below 1 − h (the slack one iteration adds) when h <= 1 − 2⁻²⁰ and i < 2³².
PRUNE_MAX_H = 1 - 2**-20
_TENSORS = ("seen_prompt_ids", "visit_prompt_ids", "visit_iterations", "visit_counts")
_KEYS = {"iteration", "cold_start_count", "h", "kernel", *_TENSORS, "visit_sums"}


@dataclass(frozen=True)
class KAEConfig:
    """KAE's hyperparameters (spec/kae.md §Decisions)."""

    h: float = 0.25
    """Relative bandwidth: the kernel's window is i·h iterations at iteration i (h > 0)."""
    kernel: KernelName = "triangular"
    """K(u) = max(0, 1 − u) ("triangular") or e^{−u} ("exponential")."""
    normalize: Normalize = "none"
    """"batch": divide the call's advantages by (their std, ddof 1, + 1e-6); no re-centring."""
    prune: bool = True
    """Delete history rows whose triangular weight is 0 now and forever (never changes output)."""

    def __post_init__(self) -> None:
        h = self.h
        if isinstance(h, bool) or not isinstance(h, int | float):
            raise TypeError(f"h must be a float; got {type(h)}")
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"h (the relative bandwidth) must be finite and > 0; got h={h!r}")
        if self.kernel not in ("triangular", "exponential"):
            raise ValueError(
                f"kernel must be 'triangular' or 'exponential'; got kernel={self.kernel!r}"
            )
        if self.normalize not in ("none", "batch"):
            raise ValueError(f"normalize must be 'none' or 'batch'; got {self.normalize!r}")

    @property
    def prunable(self) -> bool:
        return self.prune and self.kernel == "triangular" and self.h <= PRUNE_MAX_H


def _empty(dtype: torch.dtype, device: torch.device | None = None) -> Tensor:
    return torch.zeros(0, dtype=dtype, device=device)


@register(
    "kae",
    "history",
    inputs=("prompt_ids", "rewards"),
    # the call's rewards, each group's live history rows, and one sort of every row to append
    cost="B·G + B·L + V log V",
    stateful=True,
    # The one exception to "never max|r|": KAE's history keeps raw per-visit sums s = Σ r in
    # float64 (the checkpoint format of spec/kae.md), and V̂ = (Σ K·s + Σ_{k≠g} r_k)/(Σ K·n + G − 1)
    # is formed at the rewards' offset, so A = r − V̂ carries ~n·ε·max|r| (1e6 + 1e-3: 1.2e-10,
    # 1e-7 of the spread). Removing it needs anchored sums (a per-prompt offset in the state):
    # an open defect, bounded here by offset_rel = 1e-12 (4,500 ulps of max|r|).
    tolerance=pair(
        "output", "kernel-weighted history means, raw sums: see above", offset_rel=1e-12
    ),
)
class KAE:
    """Kernelized advantage estimation over a run (arXiv:2604.28005; spec/kae.md).

    ``KAE(h=0.25, kernel="triangular", normalize="none", prune=True)``; call once per rollout
    batch: ``A = kae(prompt_ids [B], rewards [B, G])`` -> ``[B, G]`` in the dtype of ``rewards``.
    ``cold_start_count`` counts responses whose baseline had no weight (G = 1, no live history).

    Under data parallelism (``group``, a process group whose ranks each hold some of the
    iteration's groups) there is one history: every rank gathers the iteration's groups from
    every rank in rank order, which is the order one process holding the global batch sees
    them, and updates its copy with all of them. The copies stay equal, so any rank's
    ``state_dict`` is the whole history and loading it on every rank resumes it.
    """

    def __init__(
        self,
        h: float = KAEConfig.h,
        kernel: KernelName = KAEConfig.kernel,
        normalize: Normalize = KAEConfig.normalize,
        prune: bool = KAEConfig.prune,
    ) -> None:
        h = float(h) if isinstance(h, int) and not isinstance(h, bool) else h
        self.config = KAEConfig(h, kernel, normalize, prune)
        self.iteration = 1  # the global, 1-based index of the next call
        self.cold_start_count = 0
        self._seen = _empty(torch.int64)  # [P] sorted: every prompt id ever seen
        self._pid = _empty(torch.int64)  # [V] visits, sorted by (prompt id, iteration)
        self._iter = _empty(torch.int64)  # [V]
        self._count = _empty(torch.int64)  # [V] n: rewards in the visit
        self._sum = _empty(torch.float64)  # [V] s: their sum

    def __call__(self, prompt_ids: Tensor, rewards: Tensor, group: Group = None) -> Tensor:
        """A = Z − V̂ with V̂_g = (hn + S − Z_g)/(hd + G − 1), 0 where that denominator is 0.
        ``prompt_ids [B]``, ``rewards [B, G]`` -> ``[B, G]`` (this rank's groups)."""
        check_rewards(rewards)
        ids = _check_prompt_ids(prompt_ids, rewards)
        if group is None:
            return self._step(ids, rewards)
        # the rank's rows travel once (B ids and B·G rewards per rank); no statistic is reduced
        all_rewards, start = _ranks.gather(rewards, group, "rewards")  # [B_all, G]
        all_ids, _ = _ranks.gather(ids, group, "prompt_ids")  # [B_all]
        return self._step(all_ids, all_rewards)[start : start + ids.shape[0]]

    def _step(self, ids: Tensor, rewards: Tensor) -> Tensor:
        """One iteration on the whole batch: ``ids [B]``, ``rewards [B, G]`` -> ``[B, G]``."""
        self._to(rewards.device)
        B, G = rewards.shape
        i = self.iteration
        Z = rewards.to(torch.float64)
        hn, hd, habs, L = self._history_sums(ids, i)  # [B] each; L live visits at most
        S = Z.sum(dim=1, keepdim=True)  # [B, 1]
        den = hd[:, None] + (G - 1)  # [B, 1]; K(0) = 1 per other current sample
        cold = (den == 0).expand(B, G)
        others = S - Z  # Σ_{k≠g} Z_k, formed before adding hn: hn may be far smaller than S
        V = torch.where(cold, 0.0, (hn[:, None] + others) / torch.where(cold, 1.0, den))
        A = Z - V
        self.cold_start_count += int(cold.sum())
        self._append(ids, i, G, S[:, 0])
        self.iteration = i + 1
        if self.config.normalize == "batch":
            # A's rounding error: the sums' (G + L terms), the weights', the division's and
            # the subtraction's, each a few ulps of what was summed (spec/kae.md)
            size = (habs[:, None] + Z.abs().sum(dim=1, keepdim=True)) / torch.where(
                cold, 1.0, den
            ) + Z.abs()
            A = _batch_normalized(A, 8 * (G + L + 2) * 2**-53 * float(size.max()))
        return A.to(rewards.dtype)

    def value(self, prompt_ids: Tensor) -> Tensor:
        """``[B]`` float64: Σ K(u)·s / Σ K(u)·n over each prompt's history at the next iteration,
        i.e. the baseline a G = 1 group would get (0 where every weight is 0). A prompt id never
        seen raises ``ValueError`` naming it."""
        ids = _check_ids_tensor(prompt_ids)
        self._to(ids.device)
        known = torch.isin(ids, self._seen)
        if not bool(known.all()):
            b = int((~known).nonzero()[0])
            raise ValueError(
                f"prompt_ids[{b}] = {int(ids[b])} was never seen by this KAE (no history)"
            )
        hn, hd, _, _ = self._history_sums(ids, self.iteration)
        return torch.where(hd > 0, hn / torch.where(hd > 0, hd, 1.0), 0.0)

    # -- history -------------------------------------------------------------------------------

    def _weights(self, iterations: Tensor, i: int) -> Tensor:
        """K((i − I)/(i·h)) in float64 for I < i; the triangular zero uses one predicate."""
        width = float(i) * self.config.h  # i·h, rounded once (spec/kae.md)
        dist = (i - iterations).to(torch.float64)
        if self.config.kernel == "exponential":
            return torch.exp(-dist / width)
        return torch.where(dist >= width, 0.0, 1 - dist / width)

    def _history_sums(self, ids: Tensor, i: int) -> tuple[Tensor, Tensor, Tensor, int]:
        """hn = Σ K(u)·s, hd = Σ K(u)·n and Σ K(u)·|s| over each group's live visits, ``[B]``
        each, and the most live visits a group has."""
        B = ids.numel()
        zeros = torch.zeros(B, dtype=torch.float64, device=ids.device)
        if self._pid.numel() == 0:
            return zeros, zeros.clone(), zeros.clone(), 0
        lo = torch.searchsorted(self._pid, ids)
        hi = torch.searchsorted(self._pid, ids, right=True)
        if self.config.kernel == "triangular":
            lo = lo + self._dead_prefix(lo, hi, i)
        idx, valid = _ragged(lo, hi)  # [B, L]
        w = torch.where(valid, self._weights(self._iter[idx], i), 0.0)
        s = self._sum[idx]
        hn, hd, habs = (w * s).sum(dim=1), (w * self._count[idx]).sum(dim=1), (w * s.abs()).sum(1)
        return hn, hd, habs, idx.shape[1]

    def _dead_prefix(self, lo: Tensor, hi: Tensor, i: int) -> Tensor:
        """``[B]``: how many of each segment's oldest rows have weight 0 at iteration i (they are
        a prefix, rows being sorted by iteration within a prompt)."""
        idx, valid = _ragged(lo, hi)
        dead = valid & (self._weights(self._iter[idx], i) == 0)
        return dead.sum(dim=1)

    def _append(self, ids: Tensor, i: int, G: int, S: Tensor) -> None:
        """Add one visit (i, G, S) per group, keep rows sorted by (prompt id, I), then prune."""
        pid = torch.cat([self._pid, ids])
        order = torch.sort(pid, stable=True).indices  # stable: older visits stay first
        self._pid = pid[order]
        self._iter = torch.cat([self._iter, torch.full_like(ids, i)])[order]
        self._count = torch.cat([self._count, torch.full_like(ids, G)])[order]
        self._sum = torch.cat([self._sum, S])[order]
        self._seen = torch.unique(torch.cat([self._seen, ids]))
        self._prune(i + 1)

    def _prune(self, i: int) -> None:
        """Drop rows with weight 0 at iteration i (the next to read them): dead for good."""
        if not self.config.prunable or self._pid.numel() == 0:
            return
        keep = self._weights(self._iter, i) > 0
        if not bool(keep.all()):
            self._pid, self._iter = self._pid[keep], self._iter[keep]
            self._count, self._sum = self._count[keep], self._sum[keep]

    def _to(self, device: torch.device) -> None:
        """The history follows the device of the inputs (moved once, e.g. after loading)."""
        if self._pid.device != device:
            self._seen, self._pid = self._seen.to(device), self._pid.to(device)
            self._iter, self._count = self._iter.to(device), self._count.to(device)
            self._sum = self._sum.to(device)

    # -- checkpointing -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Tensors, ints, a float and a str: loadable with ``torch.load(weights_only=True)``."""
        return {
            "iteration": self.iteration,
            "cold_start_count": self.cold_start_count,
            "h": self.config.h,
            "kernel": self.config.kernel,
            "seen_prompt_ids": self._seen,
            "visit_prompt_ids": self._pid,
            "visit_iterations": self._iter,
            "visit_counts": self._count,
            "visit_sums": self._sum,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; inconsistent state raises ``ValueError`` naming the field."""
        _check_state(state, self.config)
        device = self._pid.device
        self.iteration = state["iteration"]
        self.cold_start_count = state["cold_start_count"]
        pid = state["visit_prompt_ids"]
        # canonical order: by prompt id, then iteration (two stable sorts)
        order = torch.sort(state["visit_iterations"], stable=True).indices
        order = order[torch.sort(pid[order], stable=True).indices]
        # fancy indexing copies, so the caller's tensors are never aliased
        self._seen = state["seen_prompt_ids"].clone()
        self._pid, self._iter = pid[order], state["visit_iterations"][order]
        self._count, self._sum = state["visit_counts"][order], state["visit_sums"][order]
        self._to(device)
        self._prune(self.iteration)


kae = KAE
"""The registered name (``fast.registry.get("kae")``) of the class ``KAE``."""


def _ragged(lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
    """Row b = indices lo_b .. hi_b − 1, left-aligned and padded: ``[B, L]`` indices (clamped
    to valid rows) and a validity mask; L = max(hi − lo) (a host sync)."""
    n = hi - lo
    L = int(n.max()) if n.numel() else 0
    col = torch.arange(L, device=lo.device)
    valid = col[None, :] < n[:, None]
    idx = torch.where(valid, lo[:, None] + col[None, :], 0)
    return idx, valid


def _batch_normalized(A: Tensor, rounding: float) -> Tensor:
    """A/(std over the call, ddof 1, + 1e-6); unchanged with < 2 responses or no spread: a
    spread within ``rounding`` (a bound on A's rounding error) is none, since advantages that
    are exactly equal come out an ulp or so apart (a baseline 3·w/w rounds to 3 + 1 ulp), and
    dividing those by ~1e-6 would turn an exact 0 spread into a 1e6-fold scaling."""
    if A.numel() < 2 or bool(A.amax() - A.amin() <= rounding):
        return A
    c = A - A.mean()
    std = torch.sqrt((c**2).sum() / (A.numel() - 1))
    return A / (std + EPS)


def _check_ids_tensor(prompt_ids: object) -> Tensor:
    if not isinstance(prompt_ids, Tensor):
        raise TypeError(f"prompt_ids must be a torch.Tensor of shape [B]; got {type(prompt_ids)}")
    if prompt_ids.is_floating_point() or prompt_ids.is_complex() or prompt_ids.dtype == torch.bool:
        raise TypeError(f"prompt_ids must be an integer tensor (int64); got {prompt_ids.dtype}")
    if prompt_ids.dim() != 1:
        raise ValueError(f"prompt_ids must have shape [B]; got shape {tuple(prompt_ids.shape)}")
    return prompt_ids.to(torch.int64)


def _check_prompt_ids(prompt_ids: object, rewards: Tensor) -> Tensor:
    ids = _check_ids_tensor(prompt_ids)
    if ids.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"prompt_ids has {ids.shape[0]} entries but rewards has {rewards.shape[0]} groups"
        )
    if ids.shape[0] == 0:
        raise ValueError("kae needs at least one group; got B=0")
    if ids.device != rewards.device:
        raise ValueError(f"prompt_ids is on {ids.device} but rewards is on {rewards.device}")
    return ids


def _check_state(state: object, config: KAEConfig) -> None:
    """Every field present, typed and consistent (see ``load_state_dict``)."""
    if not isinstance(state, dict) or set(state) != _KEYS:
        got = sorted(state) if isinstance(state, dict) else type(state)
        raise ValueError(f"a KAE state_dict has exactly the keys {sorted(_KEYS)}; got {got}")
    for key in ("iteration", "cold_start_count"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < int(key == "iteration"):
            raise ValueError(f"state_dict[{key!r}] must be an int >= {int(key == 'iteration')}")
    if state["h"] != config.h or state["kernel"] != config.kernel:
        raise ValueError(
            f"state_dict was saved with h={state['h']!r}, kernel={state['kernel']!r}; this KAE "
            f"has h={config.h!r}, kernel={config.kernel!r}"
        )
    for key in (*_TENSORS, "visit_sums"):
        t, dtype = state[key], torch.float64 if key == "visit_sums" else torch.int64
        if not isinstance(t, Tensor) or t.dtype != dtype or t.dim() != 1:
            raise ValueError(f"state_dict[{key!r}] must be a 1-D {dtype} tensor")
    n = state["visit_prompt_ids"].numel()
    for key in ("visit_iterations", "visit_counts", "visit_sums"):
        if state[key].numel() != n:
            raise ValueError(f"state_dict[{key!r}] has {state[key].numel()} rows, not {n}")
    seen = state["seen_prompt_ids"].cpu()
    if seen.numel() > 1 and not bool((seen[1:] > seen[:-1]).all()):
        raise ValueError("state_dict['seen_prompt_ids'] must be sorted and unique")
    iters, i = state["visit_iterations"].cpu(), state["iteration"]
    bad = (iters < 1) | (iters >= i)
    if bool(bad.any()):
        j = int(bad.nonzero()[0])
        raise ValueError(
            f"visit {j} has iteration {int(iters[j])}; history must be strictly older than the "
            f"iteration i={i} (and >= 1)"
        )
    if bool((state["visit_counts"] < 1).any()):
        raise ValueError("state_dict['visit_counts'] must be >= 1 (rewards per visit)")
    check_finite(state["visit_sums"], "state_dict['visit_sums']")
    unknown = ~torch.isin(state["visit_prompt_ids"].cpu(), seen)
    if bool(unknown.any()):
        j = int(unknown.nonzero()[0])
        raise ValueError(
            f"visit {j} has prompt id {int(state['visit_prompt_ids'][j])}, which is not in "
            "state_dict['seen_prompt_ids']"
        )


__all__ = defined_in(__name__)  # every estimator registered above
