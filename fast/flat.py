"""Any registered estimator on rows as trainers hold them: flat rows ``[N]`` (or ``[N, T]``) with a
group id per row, groups of several sizes, and a mask of rows that are not samples.

verl, SkyRL and NeMo-RL hand an advantage estimator one row per response and an id per row
(``index`` / ``uid`` / ``prompt_ids``); after filtering, dynamic sampling or multi-output agent
loops the groups have several sizes, and placeholder rows sit beside real ones. ``by_group``
regroups such rows into one ``[B_s, G_s, ...]`` call per group size (the estimator's own batched
form, so each group is computed exactly as it would be alone in a ``[B, G]`` call), and scatters
the advantages back to the rows::

    rewards [N], index [N] (str, int, any hashable; a numpy object array; rows of [N, L] prompt
    token ids), valid [N] bool (False: a row that is no sample)  ->  advantages [N] or [N, T]

Ids are only compared for equality, never used as positions: negative, sparse or string ids
give the same advantages as ``0..B-1`` (verl PR 7150). A masked row gets 0 and is not seen by the
estimator, so it moves nothing of its group (NeMo-RL PR 3837). An estimator whose statistics span
the batch (``claims.batch_coupled``: a batch std, a shrinkage across prompts) needs one call over
every row, so it takes groups of one size only, and says so otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from . import _ranks, calling, registry
from ._ranks import Group
from .shaping import Transform


def groups(index: Sequence[Any] | Any) -> list[tuple[Tensor, list[Any]]]:
    """The batch's groups, by size: one ``([B_s, G_s] int64, ids)`` pair per group size G_s,
    whose row b lists the batch rows of ``ids[b]`` (ids in order of first appearance). ``index``:
    a list, a numpy array (object arrays of strings included) or a tensor; a 2-D tensor or array
    (NeMo-RL's prompt token ids ``[N, L]``) groups rows that are equal."""
    keys = _keys(index)
    _check_ids(keys)
    positions: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        try:
            positions.setdefault(key, []).append(i)
        except TypeError:
            raise TypeError(
                f"index: the id of row {i} ({key!r}) is not hashable; give one str or int per row"
            ) from None
    if not positions:
        raise ValueError("index is empty: no samples to group")
    by_size: dict[int, list[Any]] = {}
    for key, rows in positions.items():
        by_size.setdefault(len(rows), []).append(key)
    return [
        (torch.tensor([positions[key] for key in ids], dtype=torch.int64), ids)
        for _, ids in sorted(by_size.items())
    ]


def _keys(index: Any) -> list[Any]:
    """One hashable id per row: a tensor's or array's rows become tuples (``[N, L]`` ids)."""
    listed = index.tolist() if hasattr(index, "tolist") else list(index)
    return [tuple(key) if isinstance(key, list) else key for key in listed]


def _check_ids(keys: list[Any]) -> None:
    """An id that is not equal to itself (NaN, or a row of ids holding one) would be a new group
    at every row, since a dict finds a key by equality: refused, naming its rows."""
    bad = [i for i, key in enumerate(keys) if not _self_equal(key)]
    if bad:
        shown = ", ".join(map(str, bad[:8])) + (
            f" (and {len(bad) - 8} more)" if len(bad) > 8 else ""
        )
        raise ValueError(
            f"index: the id of row{'s' * (len(bad) > 1)} {shown} ({keys[bad[0]]!r}) is not "
            "equal to itself, so each such row would be a group of one; give every row a "
            "comparable id (no NaN)"
        )


def _self_equal(key: Any) -> bool:
    if isinstance(key, tuple):
        return all(_self_equal(part) for part in key)
    try:
        return bool(key == key)
    except Exception:  # an id whose comparison fails is refused by hashing, later
        return True


def _as_rewards(rewards: Any) -> Tensor:
    """``rewards [N]`` as a tensor: a tensor as is; a list, tuple or numpy array of numbers as
    float64 (a Python float is a double: nothing is rounded); anything else refused."""
    if isinstance(rewards, Tensor):
        return rewards
    try:
        values = torch.as_tensor(rewards if hasattr(rewards, "dtype") else list(rewards))
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"rewards must be a tensor, a numpy array or a list of numbers, one per row; got "
            f"{type(rewards).__name__} that torch cannot read as numbers"
        ) from None
    if values.dtype == torch.bool or values.is_complex() or values.dim() != 1:
        raise TypeError(
            f"rewards must be real numbers, one per row ([N]); got {values.dtype} of shape "
            f"{list(values.shape)}"
        )
    if hasattr(rewards, "dtype") and values.is_floating_point():  # a numpy array keeps its own
        return values
    return torch.as_tensor(list(rewards), dtype=torch.float64)  # no round trip through float32


def located(
    error: Exception, order: Tensor, ids: list[Any], peer: str = "batch", label: str = "group id"
) -> ValueError:
    """An estimator's error with its "group b" (a position after regrouping by ``groups``) named
    as the caller names it: its ``label`` (verl's "uid"), the id and the rows of ``peer``'s
    batch."""
    message = str(error)
    found = re.search(r"group (\d+)", message)
    if found is None:
        return ValueError(f"{message} ({peer}: {len(ids)} ids of {order.shape[1]} samples)")
    b = int(found.group(1))
    rows = ", ".join(str(int(r)) for r in order[b])
    where = f"{label} {ids[b]!r} ({peer} rows {rows})"
    return ValueError(message[: found.start()] + where + message[found.end() :])


PER_ROW = frozenset(registry.INPUTS) - {"k", "reward_weights", "prompt_ids", "advantages"}
"""The inputs held one per row (``[N, ...]``, or a list of N texts): regrouped with the rows."""


def by_group(
    estimator: str | calling.Plan,
    rewards: Tensor | Sequence[float],
    index: Sequence[Any] | Any,
    *,
    valid: Tensor | None = None,
    k: int | None = None,
    options: dict[str, Any] | None = None,
    peer: str = "batch",
    label: str = "group id",
    nonfinite: Literal["refuse", "mask"] = "refuse",
    shaping: Transform | None = None,
    group: Group = None,
    **fields: Any,
) -> Tensor:
    """``estimator`` (a registered name, or a ``calling.plan``) on flat rows: ``rewards [N]``,
    ``index [N]`` (the group id of each row), ``valid [N]`` bool (None: every row is a sample),
    and whatever else the estimator consumes, one per row (``lengths [N]``, ``token_ids [N, T]``,
    ``mask [N, T]``, ``reward_parts [N, R]``, texts as a list of N strings, ...) or whole
    (``reward_weights [R]``). A stateful (history) estimator takes the group ids as its
    ``prompt_ids``, which must then be integers. Returns ``[N]`` (``[N, T]`` for a token-level
    estimator) in the rewards' dtype, 0 on masked rows.

    Groups of each size are one batched call, equal to the ``[B, G]`` call on equal groups. A
    group smaller than K, or than the estimator's smallest group, is refused naming its id and
    rows (``label``, e.g. verl's "uid", and ``peer``'s rows, e.g. "verl batch"); so are several
    group sizes for an estimator whose statistics span the batch, and an id not equal to itself
    (NaN). ``rewards`` may be a list or numpy array of numbers (read as float64). A NaN or
    infinite reward of a sample row is refused naming its group id and rows (``nonfinite=
    "refuse"``) or is absent (``"mask"``: as if ``valid`` were False there; a reward that never
    arrived). ``shaping`` (``fast.shaping``) transforms each group's rewards by its ``lengths``
    before the estimator sees them. ``group``: the process group whose ranks hold the rows
    (``_over_ranks``): each rank gets what one process holding every rank's rows would."""
    plan = resolve(estimator, options, k)
    n = (rewards := _as_rewards(rewards)).shape[0]
    if group is not None:
        more = {"nonfinite": nonfinite, "shaping": shaping}
        return _over_ranks(plan, rewards, index, valid, group, (peer, label), fields, more)
    rows = sample_rows(rewards, valid, nonfinite).nonzero().squeeze(-1)  # [M]: in order
    keys = _keys(index)
    if len(keys) != n:
        raise ValueError(f"index has {len(keys)} ids for {n} rewards; give one id per row")
    by_size = groups([keys[int(r)] for r in rows])
    _check_sizes(plan, by_size, rows, f"{label} %r ({peer} rows %s)")
    return _estimate(plan, rewards, rows, by_size, fields, shaping, (peer, label))


def _estimate(
    plan: calling.Plan,
    rewards: Tensor,
    rows: Tensor,
    by_size: list[tuple[Tensor, list[Any]]],
    fields: dict[str, Any],
    shaping: Transform | None,
    names: tuple[str, str],
) -> Tensor:
    """``by_group``'s calls, one per group size: ``[N]`` (``[N, T]``), 0 on rows not in
    ``rows`` (the sample rows, ``[M]``)."""
    n, (peer, label) = rewards.shape[0], names
    source = {"rewards": rewards, **fields}
    out: Tensor | None = None
    for order, ids in by_size:
        batch_rows = rows[order]  # [B_s, G_s]: positions in the caller's rows
        inputs = {
            name: _gather(value, batch_rows) if name in PER_ROW else value
            for name, value in source.items()
        }
        if "prompt_ids" in plan.fields:
            inputs["prompt_ids"] = _prompt_ids(ids, plan.entry.name)
        if shaping is not None:  # the estimator's baseline is the shaped rewards' (prime-rl #2040)
            inputs["rewards"] = _shaped(shaping, inputs)
        try:
            adv = calling.value(plan.output(inputs))  # [B_s, G_s] or [B_s, G_s, T]
        except (ValueError, TypeError) as error:
            raise located(error, batch_rows, ids, peer, label) from None
        if out is None:
            out = rewards.new_zeros((n, *adv.shape[2:]))
        out[batch_rows.reshape(-1)] = adv.reshape(-1, *adv.shape[2:]).to(out.dtype)
    assert out is not None  # ``groups`` refuses a batch without rows
    return out


def resolve(
    estimator: str | calling.Plan, options: dict[str, Any] | None = None, k: int | None = None
) -> calling.Plan:
    """``estimator`` as a plan: a plan as given, a name resolved with ``options`` and ``k``."""
    if isinstance(estimator, calling.Plan):
        return estimator
    return calling.plan(estimator, options=options, k=k)


def _over_ranks(
    plan: calling.Plan,
    rewards: Tensor,
    index: Sequence[Any] | Any,
    valid: Tensor | None,
    group: Group,
    names: tuple[str, str],
    fields: dict[str, Any],
    options: dict[str, Any],
) -> Tensor:
    """``by_group`` on this rank's rows ``[N_r]`` of a batch spread over ``group``'s ranks, a
    group's rows on any ranks (packing, agent loops); every rank passes the same fields
    (``valid``: all or none) and ``options`` (``nonfinite``, ``shaping``). The
    ids travel first (one collective): when every group lies on one rank and the estimator needs
    no collective, the rank's own call is already exact and nothing else travels. Otherwise every
    rank gathers the rows (padded to the longest ``T``), computes the whole batch as one process
    would (a history updated once with every group, in rank order) and keeps its own rows: exact
    by construction, at N times the estimator's compute and the rows' transfer."""
    n, (peer, label) = rewards.shape[0], names
    keys = _keys(index)
    if len(keys) != n:
        raise ValueError(f"index has {len(keys)} ids for {n} rewards; give one id per row")
    keep = torch.ones(n, dtype=torch.bool) if valid is None else valid.cpu()
    mine = {key for key, ok in zip(keys, keep.tolist(), strict=True) if ok}
    every, _ = _ranks.objects([list(mine)], group)  # [world] lists of ids
    seen: set[Any] = set()
    split = False
    for ids in every:
        split = split or not seen.isdisjoint(ids)
        seen.update(ids)
    if not split and not plan.collective:
        if not mine:  # only placeholder rows here: no group to compute, none waits for this rank
            T = _width(fields)
            return rewards.new_zeros(n) if T is None else rewards.new_zeros(n, T)
        return by_group(
            plan, rewards, keys, valid=valid, peer=peer, label=label, **options, **fields
        )
    whole_rewards, start = _ranks.gather(rewards, group, "rewards")
    whole_keys, _ = _ranks.objects(keys, group)
    whole_valid = None if valid is None else _ranks.gather(valid, group, "valid")[0]
    whole_fields = {
        name: _gather_field(value, group, name) if name in PER_ROW else value
        for name, value in fields.items()
    }
    local = plan.over(None)  # the whole batch is here: no collective inside
    out = by_group(
        local,
        whole_rewards,
        whole_keys,
        valid=whole_valid,
        peer=peer,
        label=label,
        **options,
        **whole_fields,
    )
    out = out[start : start + n]
    T = _width(fields)
    return out if out.dim() == 1 or T is None else out[:, :T]


def _gather_field(value: Any, group: Group, name: str) -> Any:
    """A per-row input of every rank, concatenated in rank order (lists as lists)."""
    if isinstance(value, list):
        return _ranks.objects(value, group)[0]
    return _ranks.gather(torch.as_tensor(value), group, name, ragged=True)[0]


def _width(fields: dict[str, Any]) -> int | None:
    """This rank's token width T: the second dim of its ``mask [N, T]`` (None without one)."""
    mask = fields.get("mask")
    return None if mask is None else int(torch.as_tensor(mask).shape[1])


def _shaped(shaping: Transform, inputs: dict[str, Any]) -> Tensor:
    """``shaping`` on one size's groups: ``rewards [B_s, G_s]`` by their ``lengths``."""
    if "lengths" not in inputs:
        raise ValueError("shaping reads each sample's length (or cost): pass lengths=[N]")
    rewards: Tensor = inputs["rewards"]
    lengths = torch.as_tensor(inputs["lengths"]).to(rewards.device)
    return shaping(rewards, lengths)


def _valid_rows(valid: Tensor | None, n: int) -> Tensor:
    if valid is None:
        return torch.ones(n, dtype=torch.bool)
    if valid.shape != (n,) or valid.dtype != torch.bool:
        raise ValueError(
            f"valid must be a bool tensor [N] = [{n}]; got {valid.dtype} {list(valid.shape)}"
        )
    if not bool(valid.any()):
        raise ValueError("valid masks every row: no samples to estimate advantages for")
    return valid.cpu()


def sample_rows(
    rewards: Tensor, valid: Tensor | None, nonfinite: Literal["refuse", "mask"] = "refuse"
) -> Tensor:
    """``[N]`` bool: the rows ``by_group`` estimates, ``valid`` (all, if None) less, with
    ``nonfinite="mask"``, the rows whose reward is NaN or infinite."""
    keep = _valid_rows(valid, rewards.shape[0])
    if nonfinite == "mask":
        return _finite_rows(keep, rewards)
    if nonfinite != "refuse":
        raise ValueError(f"nonfinite must be 'refuse' or 'mask'; got {nonfinite!r}")
    return keep


def _finite_rows(keep: Tensor, rewards: Tensor) -> Tensor:
    """``keep [N]`` less the rows whose reward is NaN or infinite (``nonfinite="mask"``)."""
    finite = torch.isfinite(rewards.detach().cpu()).reshape(rewards.shape[0], -1).all(-1)
    keep = keep & finite
    if not bool(keep.any()):
        raise ValueError("every sample row has a non-finite reward: no samples to estimate for")
    return keep


def _check_sizes(
    plan: calling.Plan, by_size: list[tuple[Tensor, list[Any]]], rows: Tensor, named: str
) -> None:
    """Groups too small for K, or several sizes for a batch-coupled estimator, refused; a group
    is ``named % (id, rows)``."""
    entry = plan.entry
    for order, ids in by_size:
        size = order.shape[1]
        if size < entry.claims.min_n:  # e.g. RLOO's leave-one-out needs another sample
            where = ", ".join(str(int(rows[r])) for r in order[0])
            raise ValueError(
                f"{named % (ids[0], where)} has {size} samples: {entry.name} needs groups of at "
                f"least {entry.claims.min_n} samples"
            )
        if plan.k is not None and entry.k_max(size) < plan.k:
            where = ", ".join(str(int(rows[r])) for r in order[0])
            need = plan.k - entry.k_max(0)  # k_max(n) = n − offset: the smallest n for this K
            raise ValueError(
                f"{named % (ids[0], where)} has {size} samples: {entry.name} at K = {plan.k} "
                f"needs groups of at least {need} samples"
            )
    if entry.claims.batch_coupled and len(by_size) > 1:
        sizes = sorted(order.shape[1] for order, _ in by_size)
        raise ValueError(
            f"{entry.name} normalises over the whole batch, so it needs every group the same "
            f"size; got groups of {sizes} samples; drop or pad groups first"
        )


def _gather(value: Any, batch_rows: Tensor) -> Any:
    """``value``'s rows at ``batch_rows [B_s, G_s]``: a tensor or array ``[N, ...]`` ->
    ``[B_s, G_s, ...]``; a list of N items (texts) -> nested lists."""
    if isinstance(value, list):
        return [[value[int(r)] for r in row] for row in batch_rows]
    tensor = torch.as_tensor(value)
    return tensor[batch_rows.to(tensor.device)]


def _prompt_ids(ids: list[Any], name: str) -> Tensor:
    """A history estimator's ``prompt_ids [B_s]``: the group ids themselves, which must be ints
    (a stable id per prompt across steps; a fresh uuid per step would give it no history)."""
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        bad = next(i for i in ids if not isinstance(i, int) or isinstance(i, bool))
        raise ValueError(
            f"{name} keeps a history per prompt, so its group ids must be stable integers per "
            f"prompt; got {bad!r}"
        )
    return torch.tensor(ids, dtype=torch.int64)
