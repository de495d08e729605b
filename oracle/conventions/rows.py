"""The oracle's grouped input model: an estimator called on flat rows with a group id per row, as
trainers hold their data (``oracle.properties.grouped`` judges it). Every convention below is
adapted to one call, ``RowCall``::

    call(rewards [N], ids (one per row: list or numpy array), valid [N] bool or None) -> [N]

with the advantage of each row (for a token-level output, the one value it holds along the
response; a masked row's largest |A| over its tokens, which should be 0).

Conventions (``advest check --convention``):

* ``flat``: ``fn(rewards [N], index [N], ...) -> [N]``; a parameter named ``valid``,
  ``valid_mask`` or ``mask`` receives the valid-row mask ``[N]`` bool.
* ``verl`` / ``skyrl``: token-level rewards ``[N, T]`` (the reward on the last valid token), a
  response mask (all zero on a masked row: no response token), and the ids as ``index``;
  SkyRL's keywords (``grpo_norm_by_std``, ``gamma``, ``lambd``, ``values``) for ``skyrl``.
* ``nemo_rl``: ``fn(rewards [N], prompt_ids [N, L] int64, valid_mask [N] float) -> [N]``
  (NeMo-RL groups rows whose prompt token ids are equal).
* ``prime_rl``: ``fn(groups: list of [G_i] tensors) -> list of [G_i]``: no ids, no mask.
* ``plain``: ``[B, G]``: equal groups only, ids are positions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal, get_args

import numpy as np
import torch
from torch import Tensor

from ..inputs.tolerance import LENGTH_T
from .harness import Estimator, Guard, OracleError, OutOfScope, check_output

RowConvention = Literal["flat", "verl", "skyrl", "nemo_rl", "prime_rl"]
ROW_CONVENTIONS: tuple[RowConvention, ...] = get_args(RowConvention)
MASK_NAMES = ("valid", "valid_mask", "mask")
"""The parameter names a flat estimator's valid-row mask may have."""


def _lengths(rewards: Tensor, draw: int = 0) -> Tensor:
    """``[N]`` response lengths 1..LENGTH_T, a function of each row's reward and ``draw``: a
    response keeps its length when the rows are permuted, relabelled or called alone, and
    another ``draw`` gives other lengths (the ``response length`` row)."""
    import zlib

    return torch.tensor(
        [1 + zlib.crc32(f"{r!r}/{draw}".encode()) % LENGTH_T for r in rewards.tolist()]
    )


def _rows_by_id(ids: Any) -> dict[Any, list[int]]:
    """The rows of each id, the ids in order of first appearance (a list or an array)."""
    rows: dict[Any, list[int]] = {}
    for i, key in enumerate(ids.tolist() if hasattr(ids, "tolist") else list(ids)):
        rows.setdefault(key, []).append(i)
    return rows


class RowCall:
    """A user's callable on flat rows (the base class: the ``flat`` convention). ``takes_ids``:
    it sees the ids (so relabelling them is a property to judge); ``takes_mask``: it can be told
    that a row is no sample; ``ragged``: it takes groups of several sizes in one call."""

    takes_ids, takes_mask, ragged = True, True, True
    binary = False
    """Judged on 0/1 rewards (set by the checks when it refuses the 1/8 grid: pass/fail only)."""

    def __init__(self, fn: Callable[..., Any], guard: Guard) -> None:
        self.fn, self.guard = fn, guard
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            names = []
        self.mask_name = next((m for m in MASK_NAMES if m in names), None)
        self.takes_mask = self.mask_name is not None

    def __call__(self, rewards: Tensor, ids: Any, valid: Tensor | None = None) -> Tensor:
        inputs: dict[str, Any] = {"rewards": rewards, "index": ids}
        if valid is not None and self.mask_name is not None:
            inputs[self.mask_name] = valid
        elif valid is not None:
            raise OracleError("the flat convention's callable takes no valid-row mask")
        given = self.guard.copies(**inputs)
        kwargs = {k: v for k, v in given.items() if k not in ("rewards", "index")}
        out = self.fn(given["rewards"], given["index"], **kwargs)
        self.guard.compare(inputs, given)
        return check_output(out, rewards, "advantages (flat convention, [N])")


class TokenRows(RowCall):
    """verl's and SkyRL's convention on flat rows (``conventions.verl`` supplies the call)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        guard: Guard,
        k: int,
        skyrl: bool,
        algorithm: dict[str, Any] | None = None,
    ) -> None:
        from .verl import SYNTHETIC, algo_config, wanted_inputs

        self.fn, self.guard, self.skyrl, self.k = fn, guard, skyrl, k
        self.algorithm = dict(algorithm or {})
        self.config = algo_config(k, **self.algorithm)
        extra = {"grpo_norm_by_std", "lambd"} if skyrl else set()
        self.wanted = wanted_inputs(fn, set(SYNTHETIC) | extra, "which the oracle cannot make up")
        self.takes_mask = True
        self.draw = 0
        """Which draw of response lengths the calls use (the ``response length`` row)."""
        self.fixed_lengths: Tensor | None = None
        """Lengths to use instead of ``_lengths`` (a check that rescales the rewards keeps each
        response's length)."""
        self.std_flag = True
        """SkyRL's ``grpo_norm_by_std`` keyword (the ``std division off`` row)."""

    def __call__(self, rewards: Tensor, ids: Any, valid: Tensor | None = None) -> Tensor:
        from .verl import call_verl

        n, T = rewards.shape[0], LENGTH_T
        fixed = self.fixed_lengths
        length = _lengths(rewards.double(), self.draw) if fixed is None else fixed.clone()
        if valid is not None:
            length = torch.where(valid, length, torch.zeros_like(length))
        mask = (torch.arange(T) < length[:, None]).to(torch.int64)  # [N, T]
        tlr = torch.zeros(n, T, dtype=rewards.dtype)
        has = length > 0
        tlr[has, (length - 1)[has]] = rewards[has]
        inputs: dict[str, Any] = {
            "token_level_rewards": tlr,
            "response_mask": mask,
            "index": ids,
            "values": torch.zeros(n, T, dtype=rewards.dtype),
            "reward_baselines": torch.zeros(n, dtype=rewards.dtype),
            "old_log_probs": torch.full((n, T), -0.693, dtype=rewards.dtype),
            "sum_pi_squared": torch.full((n, T), 0.5, dtype=rewards.dtype),
            "grpo_norm_by_std": self.std_flag,
            "lambd": 1.0,
        }
        adv = check_output(
            call_verl(self.fn, self.guard, self.config, inputs, self.wanted), tlr, "advantages"
        )
        last = adv[torch.arange(n), (length - 1).clamp(min=0)]  # [N]
        spread = (adv - last[:, None]).abs().masked_fill(~mask.bool(), 0).amax()
        if float(spread) > 0:
            raise OutOfScope("its advantage varies along a response: a token-level estimator")
        return torch.where(has, last, adv.abs().amax(-1))


class NemoRows(RowCall):
    """NeMo-RL's ``(rewards, prompt_ids [N, L], valid_mask [N])``: each id becomes a row of
    prompt token ids (its characters' code points, padded), equal ids to equal rows."""

    takes_mask = True

    def __init__(self, fn: Callable[..., Any], guard: Guard) -> None:
        self.fn, self.guard = fn, guard

    def __call__(self, rewards: Tensor, ids: Any, valid: Tensor | None = None) -> Tensor:
        texts = [str(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]
        width = max(len(t) for t in texts) + 1
        prompt_ids = torch.tensor([[len(t), *map(ord, t.ljust(width - 1))] for t in texts])
        mask = torch.ones(len(texts)) if valid is None else valid.to(torch.float32)
        inputs = {"rewards": rewards, "prompt_ids": prompt_ids, "valid_mask": mask}
        given = self.guard.copies(**inputs)
        out = self.fn(given["rewards"], given["prompt_ids"], given["valid_mask"])
        self.guard.compare(inputs, given)
        return check_output(out, rewards, "advantages (nemo_rl convention, [N])")


class GroupList(RowCall):
    """prime-rl's list of groups: ``fn([r_0 [G_0], r_1 [G_1], ...]) -> [A_0, A_1, ...]``, the
    groups in order of their ids' first appearance."""

    takes_ids, takes_mask = False, False

    def __init__(self, fn: Callable[..., Any], guard: Guard) -> None:
        self.fn, self.guard = fn, guard

    def __call__(self, rewards: Tensor, ids: Any, valid: Tensor | None = None) -> Tensor:
        rows = _rows_by_id(ids)
        groups = [rewards[torch.tensor(r)] for r in rows.values()]
        out = self.fn([g.clone() for g in groups])
        if not isinstance(out, (list, tuple)) or len(out) != len(groups):
            raise OracleError(f"prime_rl convention: expected a list of {len(groups)} groups")
        result = torch.empty_like(rewards)
        for where, group, a in zip(rows.values(), groups, out, strict=True):
            result[torch.tensor(where)] = check_output(a, group, "a group's advantages")
        return result


class PlainRows(RowCall):
    """A ``[B, G]`` estimator on rows: equal groups only (a ragged batch is ``OracleError``),
    the rows of id j (in order of first appearance) as its group j."""

    takes_ids, takes_mask, ragged = False, False, False

    def __init__(self, est: Estimator) -> None:
        self.est = est

    def __call__(self, rewards: Tensor, ids: Any, valid: Tensor | None = None) -> Tensor:
        order = torch.tensor(list(_rows_by_id(ids).values()))  # [B, G]: ragged rows fail here
        out = torch.empty_like(rewards)
        out[order.reshape(-1)] = self.est(rewards[order]).reshape(-1)
        return out


class RowsAsPlain:
    """A ``RowCall`` as the ``[B, G]`` checks call an estimator: rewards ``[B, G]`` -> rows with
    ids, shuffled (groups in any order, as trainers' batches are) -> advantages ``[B, G]``."""

    def __init__(self, rows: RowCall) -> None:
        self.rows = rows

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor:
        B, G = rewards.shape
        perm = torch.randperm(B * G, generator=torch.Generator().manual_seed(B * 1000 + G))
        ids = [int(p) // G for p in perm]
        out = self.rows(rewards.reshape(-1)[perm], ids)
        result = torch.empty_like(out)
        result[perm] = out
        return result.reshape(B, G)


def row_call(
    fn: Callable[..., Any],
    convention: RowConvention,
    guard: Guard,
    k: int,
    algorithm: dict[str, Any] | None = None,
) -> RowCall:
    """``fn`` adapted to the grouped model in ``convention`` (``algorithm``: overrides of
    verl's ``AlgoConfig``, for verl and SkyRL)."""
    if convention == "flat":
        return RowCall(fn, guard)
    if convention in ("verl", "skyrl"):
        return TokenRows(fn, guard, k, skyrl=convention == "skyrl", algorithm=algorithm)
    if convention == "nemo_rl":
        return NemoRows(fn, guard)
    return GroupList(fn, guard)


def labellings(ids: list[int]) -> dict[str, Any]:
    """The same grouping under every kind of id trainers use (verl PR 7150: raw labels used as
    dense positions): ``ids`` are 0..B−1."""
    return {
        "ints 0..B−1": list(ids),
        "sparse ints": [1_000_003 * i + 5 for i in ids],
        "negative ints": [-7 * (i + 1) for i in ids],
        "numpy int64": np.array(ids, dtype=np.int64),
        "strings": [f"uid-{(i * 2654435761) % 2**32:08x}" for i in ids],
        "numpy object array of str": np.array([f"p{i}" for i in ids], dtype=object),
    }
