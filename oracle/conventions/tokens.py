"""How the token oracle calls a token-level estimator: ``Declared`` for advest's form (the
estimator reads the rollout fields it declares, ``[B, G, T]``, through ``advest.fast.calling``)
and ``VerlTokens`` for verl's token-level signature. Both take the fields ``token_trees.inputs``
builds and return advantages ``[B, G, T]`` in the rewards' dtype, called on copies (``Guard``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from advest.fast import calling, registry

from .harness import Guard, OracleError, OutOfScope
from .verl import algo_config, call_verl, wanted_inputs

FLOATS = ("rewards", "logprobs", "sum_pi_squared", "hidden", "values")
"""The float fields: cast to the dtype under check (the others are ids, masks and texts)."""
MADE = (*registry.INPUTS, "values")
"""What the token trees supply: the registry's vocabulary (``advantages`` from GRPO on the
rewards; ``lengths`` from the mask) and the exact critic ``values`` V(y_<t) [B, G, T]."""
NOT_MADE = ("k", "prompt_ids", "reward_parts", "reward_weights")


class TokenEstimator(Protocol):
    """Rollout fields (``token_trees.inputs``, floats in one dtype) -> advantages ``[B, G, T]``."""

    name: str

    def __call__(self, fields: dict[str, Any]) -> Tensor: ...


def cast(fields: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    """``fields`` with every float field in ``dtype``."""
    return {k: (v.to(dtype) if k in FLOATS else v) for k, v in fields.items()}


def check_tokens(out: object, fields: dict[str, Any], what: str) -> Tensor:
    """``out`` as ``[B, G, T]``: a ``[B, G]`` output is a sequence-level advantage, broadcast over
    the valid tokens; OracleError for any other shape, or a dtype other than the rewards'."""
    mask: Tensor = fields["mask"]
    rewards: Tensor = fields["rewards"]
    if not isinstance(out, Tensor):
        raise OracleError(f"{what}: got a {type(out).__name__}, expected a torch.Tensor")
    if out.shape == rewards.shape:
        out = out[..., None] * mask
    if out.shape != mask.shape:
        raise OracleError(
            f"{what}: got shape {list(out.shape)}, expected [B, G, T] = {list(mask.shape)} "
            f"or [B, G] = {list(rewards.shape)}"
        )
    if out.dtype != rewards.dtype:
        raise OracleError(f"{what}: got dtype {out.dtype}, expected {rewards.dtype} (the rewards')")
    return out


def _registered(fn: Callable[..., Any]) -> registry.Entry | None:
    for name in registry.names():
        if registry.entry(name).fn is fn:
            return registry.entry(name)
    return None


class Declared:
    """An estimator in advest's form: ``fn(**{name: field})`` for the fields it declares (its
    registry entry's ``inputs``, else its parameters named in ``MADE``), called through
    ``advest.fast.calling.Plan`` with keyword ``options``; ``advantages`` (for reweighters) are
    GRPO's on the rewards."""

    def __init__(self, fn: Callable[..., Any], guard: Guard, options: dict[str, Any]) -> None:
        entry = _registered(fn)
        self.name = getattr(fn, "__name__", repr(fn))
        if entry is not None:
            self.plan = calling.plan(entry.name, options=options)
            self.plan = calling.Plan(entry, self.plan.base, fn, options, self.plan.fields)
        else:
            params = inspect.signature(fn).parameters.values()
            asked = [p.name for p in params if p.kind != p.VAR_KEYWORD]
            required = [p.name for p in params if p.default is p.empty and p.kind != p.VAR_KEYWORD]
            missing = [n for n in required if n not in MADE or n in NOT_MADE]
            if missing:
                raise OutOfScope(
                    f"needs {', '.join(missing)}, which token trees do not supply (they supply "
                    f"{', '.join(n for n in MADE if n not in NOT_MADE)})"
                )
            inputs = tuple(n for n in asked if n in MADE and n not in NOT_MADE)
            self.plan = calling.plan_for(fn, self.name, "token", inputs, options)
        self.guard = guard

    def __call__(self, fields: dict[str, Any]) -> Tensor:
        source = {k: v for k, v in fields.items() if self.plan.needs(k) or k == "mask"}
        given = self.guard.copies(**source)
        out = calling.value(self.plan.output(given))
        self.guard.compare(source, given)
        return check_tokens(out, fields, f"{self.name}'s output")


VERL_MADE = ("values", "old_log_probs", "sum_pi_squared")
"""verl's batch fields the trees supply exactly: the critic V(y_<t), log π of the sampled token
and Σ_v π(v)² at each position."""


class VerlTokens:
    """A function in verl's token-level convention, ``fn(token_level_rewards [bs, T],
    response_mask [bs, T], index, config, ...) -> (advantages [bs, T], returns)``, with the
    reward at each response's last valid token, uids by group, verl's default ``AlgoConfig``
    (γ = λ = 1) and ``VERL_MADE`` from the tree."""

    def __init__(self, fn: Callable[..., Any], guard: Guard) -> None:
        self.fn, self.guard, self.config = fn, guard, algo_config(1)
        self.name = getattr(fn, "__name__", repr(fn))
        self.wanted = wanted_inputs(fn, set(VERL_MADE), "which token trees do not supply")

    def __call__(self, fields: dict[str, Any]) -> Tensor:
        rewards, mask = fields["rewards"], fields["mask"]
        B, G, T = mask.shape
        flat = mask.reshape(B * G, T)  # [bs, T]
        last = T - 1 - flat.flip(-1).to(torch.int8).argmax(-1)  # [bs]: last valid column
        tlr = torch.zeros(B * G, T, dtype=rewards.dtype)
        alive = flat.any(-1)
        tlr[alive.nonzero()[:, 0], last[alive]] = rewards.reshape(-1)[alive]
        inputs: dict[str, Any] = {
            "token_level_rewards": tlr,
            "response_mask": flat.to(torch.int64),
            "index": np.array([f"uid-{b // G}" for b in range(B * G)], dtype=object),
            "values": fields["values"].reshape(B * G, T),
            "old_log_probs": fields["logprobs"].reshape(B * G, T),
            "sum_pi_squared": fields["sum_pi_squared"].reshape(B * G, T),
        }
        out = call_verl(self.fn, self.guard, self.config, inputs, self.wanted)
        if not isinstance(out, Tensor) or out.shape != (B * G, T):
            got = list(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise OracleError(f"verl convention: got {got}, expected {[B * G, T]}")
        return check_tokens(out.reshape(B, G, T), fields, f"{self.name}'s advantages")
