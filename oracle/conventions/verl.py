"""verl's estimators inside ``advest check`` (tested against verl 0.9.1): ``verl_estimator``
finds one in verl's registry, ``VerlCall`` calls any function of verl's shape on rewards
``[B, G]``.

verl's advantage-estimator convention (``verl/trainer/ppo/core_algos.py``)::

    fn(token_level_rewards [bs, T], response_mask [bs, T], index [bs] (uids), config=AlgoConfig,
       **kwargs) -> (advantages [bs, T], returns [bs, T])

with the outcome reward at the last valid token, and the samples of one prompt sharing a uid in
``index``, in any order. The other direction, advest's estimators inside verl, is
``advest.integrations.verl``; this half serves only the oracle, so it lives with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..inputs.tolerance import LENGTH_T, sample_lengths
from .harness import OracleError, OutOfScope, check_output


def verl_estimator(name: str) -> Callable[..., Any]:
    """verl's registered estimator ``name`` (``get_adv_estimator_fn``)."""
    try:
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    except ImportError as error:
        raise ImportError(
            f"verl:{name} needs verl (pip install 'advest[verl]' next to verl 0.9.1): {error}"
        ) from None
    fn: Callable[..., Any] = get_adv_estimator_fn(name)
    return fn


SYNTHETIC: dict[str, str] = {
    "values": "zeros [bs, T]: a critic that predicts 0 (gae)",
    "gamma": "the config's gamma (verl's default 1.0), as compute_advantage passes it (gae)",
    "lam": "the config's lam (verl's default 1.0), as compute_advantage passes it (gae)",
    "reward_baselines": "zeros [bs]: a greedy response scored 0 (remax)",
    "old_log_probs": "log 1/2 at every token (the optimal token baselines)",
    "sum_pi_squared": "1/2 at every token (the optimal token baselines)",
}
"""Inputs verl's ``compute_advantage`` takes from the batch that the oracle has no rollout
for: each is made up as said here, and the report says so. The oracle's rewards sit at the last
token of each response, so with these, gae and remax give one advantage per response."""


class _Config(dict[str, Any]):
    """verl's algorithm config when verl is not importable: a dict read as attributes too
    (verl's estimators use both ``config.gamma`` and ``config.get(...)``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def algo_config(k: int, **overrides: Any) -> Any:
    """verl's default ``AlgoConfig()`` (gamma = lam = 1, ``norm_adv_by_std_in_grpo``), with
    ``overrides`` of its fields and ``advest_k = k`` for advest's max@K adapters."""
    try:
        from verl.trainer.config import AlgoConfig
    except ImportError:
        defaults = {"gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": True}
        return _Config({**defaults, **overrides, "advest_k": k})
    config = AlgoConfig(**overrides)
    config.advest_k = k  # a new attribute: BaseConfig freezes only its declared fields
    return config


def wanted_inputs(fn: Callable[..., Any], supplied: set[str], why: str) -> set[str]:
    """The keyword arguments to pass ``fn`` in verl's convention: ``token_level_rewards`` and
    ``response_mask``; ``index`` and ``config`` where it can take them (``compute_advantage``
    passes them by keyword to every estimator but gae, so a ``**kwargs`` takes them); ``gamma``,
    ``lam`` and the ``supplied`` batch fields it names. A required argument beyond those is
    ``OutOfScope``, with ``why`` (what the caller cannot supply). No readable signature: verl's
    usual four."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {"token_level_rewards", "response_mask", "index", "config"}
    names = {p.name for p in params}
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    wanted = {"token_level_rewards", "response_mask"}
    wanted |= {n for n in ("index", "config") if n in names or var_kw}
    wanted |= names & (supplied | {"gamma", "lam"})
    unknown = [
        p.name
        for p in params
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in wanted
    ]
    if unknown:
        raise OutOfScope(f"needs {', '.join(unknown)}, {why}")
    return wanted


def call_verl(
    fn: Callable[..., Any], guard: Any, config: Any, inputs: dict[str, Any], wanted: set[str]
) -> Any:
    """``fn``'s advantages (the first of the pair it returns) for the ``wanted`` ones of
    ``inputs``, passed as copies that ``guard`` checks were not modified, with ``config`` and
    its γ, λ where wanted. Not a pair: ``OracleError``."""
    inputs = {k: v for k, v in inputs.items() if k in wanted}
    given = guard.copies(**inputs)
    kwargs: dict[str, Any] = dict(given)
    if "config" in wanted:
        kwargs["config"] = config
    kwargs |= {n: config.get(n) for n in ("gamma", "lam") if n in wanted}
    out = fn(**kwargs)
    guard.compare(inputs, given)
    if not isinstance(out, tuple) or len(out) != 2:
        raise OracleError(
            f"verl convention: got {type(out).__name__}, expected a pair (advantages, returns)"
        )
    return out[0]


class VerlCall:
    """The oracle's bound estimator for a function in verl's convention: rewards ``[B, G]`` (and
    response lengths ``[B, G]``, ``sample_lengths`` by default) -> advantages ``[B, G]``. Each
    call builds token-level rewards (the reward at the last valid token), a response mask and
    string uids, shuffles the B·G samples (groups in any order, as verl's batches are), passes
    copies of what the function's signature names (``config``: ``algo_config``; ``SYNTHETIC``
    for the rest), checks the returned pair, and reads one advantage per response. A function
    whose advantage varies along a response, or that needs an input the oracle cannot make up,
    is ``OutOfScope``."""

    T = LENGTH_T

    def __init__(
        self, fn: Callable[..., Any], guard: Any, k: int, algorithm: dict[str, Any] | None = None
    ) -> None:
        self.fn, self.guard, self.config = fn, guard, algo_config(k, **(algorithm or {}))
        made = ", ".join(SYNTHETIC)
        self.wanted = wanted_inputs(
            fn, set(SYNTHETIC), f"which the oracle cannot make up (it makes up {made})"
        )
        self.made_up = sorted(self.wanted & set(SYNTHETIC))

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor:

        B, G = rewards.shape
        bs, T = B * G, self.T
        gen = torch.Generator().manual_seed(B * 1000 + G)
        perm = torch.randperm(bs, generator=gen)  # sample j of the batch is flat[perm[j]]
        by_sample = sample_lengths(rewards.shape) if lengths is None else lengths  # [B, G]
        length = by_sample.reshape(-1)[perm]  # [bs]: a response keeps its length when permuted
        mask = (torch.arange(T) < length[:, None]).to(torch.int64)  # [bs, T]
        flat = rewards.reshape(-1)[perm]  # [bs]
        tlr = torch.zeros(bs, T, dtype=rewards.dtype, device=rewards.device)
        tlr[torch.arange(bs), length - 1] = flat
        index = np.array([f"uid-{int(p) // G}" for p in perm], dtype=object)
        made_up: dict[str, Any] = {
            "values": torch.zeros(bs, T, dtype=rewards.dtype),
            "reward_baselines": torch.zeros(bs, dtype=rewards.dtype),
            "old_log_probs": torch.full((bs, T), math.log(0.5), dtype=rewards.dtype),
            "sum_pi_squared": torch.full((bs, T), 0.5, dtype=rewards.dtype),
        }
        inputs = {"token_level_rewards": tlr, "response_mask": mask, "index": index, **made_up}
        raw = call_verl(self.fn, self.guard, self.config, inputs, self.wanted)
        adv = check_output(raw, tlr, "advantages (verl convention, [bs, T])")
        valid = mask.bool()
        last = adv[torch.arange(bs), length - 1]  # [bs]
        spread = (adv - last[:, None]).abs().masked_fill(~valid, 0).amax()
        if float(spread) > 0:
            with_ = f" (made up: {', '.join(self.made_up)})" if self.made_up else ""
            raise OutOfScope(
                "its advantage varies along a response (by up to "
                f"{float(spread):.3g}{with_}): a token-level estimator; the oracle judges one "
                "advantage per response"
            )
        per_sample = torch.empty_like(last)
        per_sample[perm] = last
        return per_sample.reshape(B, G)


def dispatched(name: str) -> Callable[..., Any]:
    """verl's estimator ``name`` as verl's trainer reaches it: through ``compute_advantage``
    (``verl/trainer/ppo/ray_trainer.py``, called by the v1 trainer's ``_compute_advantage``
    with ``norm_adv_by_std_in_grpo=config.get("norm_adv_by_std_in_grpo", True)`` and the whole
    algorithm config), in verl's estimator convention. An option the dispatch does not forward
    (verl PR 7893) then has no effect here, as in a training run."""
    try:
        from verl import DataProto
        from verl.trainer.ppo.ray_trainer import compute_advantage
    except ImportError as error:
        raise ImportError(
            f"verl:{name} --dispatch needs verl (pip install 'advest[verl]'): {error}"
        ) from None

    def through_compute_advantage(
        token_level_rewards: Tensor,
        response_mask: Tensor,
        index: Any,
        config: Any,
        values: Tensor,
        reward_baselines: Tensor,
    ) -> tuple[Tensor, Tensor]:
        batch = {
            "token_level_rewards": token_level_rewards,
            "response_mask": response_mask,
            "values": values,  # read by gae alone
        }
        if name == "remax":  # verl's trainer computes greedy baselines for remax alone
            batch["reward_baselines"] = reward_baselines
        data = DataProto.from_dict(
            tensors=batch, non_tensors={"uid": np.asarray(index, dtype=object)}
        )
        out = compute_advantage(
            data,
            adv_estimator=name,
            gamma=config.get("gamma", 1.0),
            lam=config.get("lam", 1.0),
            norm_adv_by_std_in_grpo=config.get("norm_adv_by_std_in_grpo", True),
            config=config,
        )
        return out.batch["advantages"], out.batch["returns"]

    through_compute_advantage.__name__ = f"compute_advantage[{name}]"
    return through_compute_advantage
