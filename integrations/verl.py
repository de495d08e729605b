"""advest inside verl (tested against verl 0.9.1), and verl's estimators inside ``advest check``.

verl's advantage-estimator convention (``verl/trainer/ppo/core_algos.py``)::

    fn(token_level_rewards [bs, T], response_mask [bs, T], index [bs] (uids), config=AlgoConfig,
       **kwargs) -> (advantages [bs, T], returns [bs, T])

with the outcome reward at the last valid token, and the samples of one prompt sharing a uid in
``index``, in any order. ``register()`` adds every sequence-level advest estimator to verl's
registry as ``advest_<name>``; ``VerlCall`` lets the oracle call any function of this shape on
rewards ``[B, G]``. One grouping function (``groups``) serves both.

Not registered, and why: verl's ``compute_advantage`` passes an estimator only
``token_level_rewards``, ``response_mask``, ``index``, ``config`` (and ``reward_baselines``);
token ids, log-probs, hidden states and decoded texts never reach it (only ``gdpo`` is handed the
batch), so ``ktae`` (token ids), ``covariance_weights`` (log-probs), ``hista`` (hidden states)
and ``numca`` (texts and offsets) cannot be fed; ``kae`` needs a stable id per prompt across
steps, and verl's uids are fresh ``uuid4`` strings every step. ``gdpo`` needs each reward's own
score, which ``compute_advantage`` hands only to the estimator named ``gdpo`` (verl's own, which
verl refuses to replace): registered under another name it would silently be GDPO of the summed
reward. ``optimal_token_baseline`` likewise needs log-probs and Σπ², which
``compute_advantage`` passes only to verl's own two token baselines (advest's equals verl's,
tests/verl/check_otb.py). ``gdpo`` below is advest's GDPO with the signature and config keys of
verl's function, for code that calls an estimator itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..fast import calling, registry
from ..spec.oracle.tolerance import LENGTH_T

SKIPPED: dict[str, str] = {
    "ktae": "needs token ids, which verl's compute_advantage does not pass to an estimator",
    "covariance_weights": "needs rollout log-probs, which compute_advantage does not pass",
    "hista": "needs hidden states, which verl's batch does not carry",
    "numca": "needs decoded texts and character offsets, which compute_advantage does not pass",
    "kae": "needs a stable id per prompt across steps; verl's uids are fresh uuid4s each step",
    "gdpo": "needs each reward's own score, which compute_advantage passes only to the "
    "estimator named 'gdpo' (verl's own); call advest.integrations.verl.gdpo yourself",
    "optimal_token_baseline": "needs old_log_probs and sum_pi_squared, which compute_advantage "
    "passes only to the estimators named optimal_token_baseline and tir_optimal_token_baseline "
    "(verl's own, which advest's equals: spec/otb.md)",
}


def groups(index: Sequence[Any] | np.ndarray) -> list[tuple[Tensor, list[Any]]]:
    """The batch's groups, by size: one ``([B_s, G_s] int64, uids)`` pair per group size G_s,
    whose row b lists the batch rows of ``uids[b]`` (uids in order of first appearance). verl's
    multi-output agent loops give groups of several sizes; each size is one batched call."""
    positions: dict[Any, list[int]] = {}
    for i, uid in enumerate(list(index)):
        positions.setdefault(uid, []).append(i)
    if not positions:
        raise ValueError("index is empty: no samples to group")
    by_size: dict[int, list[Any]] = {}
    for uid, rows in positions.items():
        by_size.setdefault(len(rows), []).append(uid)
    return [
        (torch.tensor([positions[u] for u in uids], dtype=torch.int64), uids)
        for _, uids in sorted(by_size.items())
    ]


def located(error: Exception, order: Tensor, uids: list[Any], peer: str = "verl") -> ValueError:
    """An estimator's error with its "group b" (a position after regrouping by ``groups``) named
    as the peer (verl, SkyRL) names it: the uid and its batch rows."""
    import re

    message = str(error)
    found = re.search(r"group (\d+)", message)
    if found is None:
        return ValueError(f"{message} ({peer} batch: {len(uids)} uids of {order.shape[1]} samples)")
    b = int(found.group(1))
    rows = ", ".join(str(int(r)) for r in order[b])
    where = f"uid {uids[b]!r} ({peer} batch rows {rows})"
    return ValueError(message[: found.start()] + where + message[found.end() :])


def _setting(config: Any, key: str, default: Any) -> Any:
    """``key`` of verl's algorithm config: a dict, an OmegaConf node or an ``AlgoConfig``."""
    if config is None:
        return default
    if hasattr(config, "get"):
        return config.get(key, default)
    return getattr(config, key, default)


def _k(config: Any, default: int | None, name: str) -> int:
    k = _setting(config, "advest_k", None)
    k = default if k is None else k
    if k is None:
        raise ValueError(
            f"advest_{name} is a max@K estimator: set algorithm.advest_k in verl's config, or "
            "call advest.integrations.verl.register(k=K)"
        )
    return int(k)


def with_std_setting(name: str, config: Any) -> str:
    """verl's ``algorithm.norm_adv_by_std_in_grpo`` where it has a meaning: with
    ``advest_grpo``, False is Dr. GRPO's r − group mean (``dr_grpo``). Every other estimator
    decides its own scale, so False is refused rather than ignored."""
    norm = _setting(config, "norm_adv_by_std_in_grpo", True)
    if norm:
        return name
    if name == "grpo":
        return "dr_grpo"
    raise ValueError(
        f"algorithm.norm_adv_by_std_in_grpo=False has no meaning for advest_{name}, which "
        "decides its own scale; leave it at its default (True), or use advest_grpo (False: "
        "Dr. GRPO's r − group mean) or advest_dr_grpo"
    )


def adapter(name: str, k: int | None = None) -> Callable[..., tuple[Tensor, Tensor]]:
    """advest's ``name`` with verl's calling convention (sequence-level estimators only)."""
    entry = registry.entry(name)
    if name in SKIPPED or entry.stateful or entry.family == "token":
        raise ValueError(
            f"advest_{name} cannot run inside verl: {SKIPPED.get(name, 'token level')}"
        )
    needs_k = "k" in entry.inputs

    # verl's compute_advantage passes keywords this estimator has no use for
    # (reward_baselines, future additions); accepting **kwargs is verl's own convention.
    def advantage(
        token_level_rewards: Tensor,
        response_mask: Tensor,
        index: Sequence[Any] | np.ndarray,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor]:
        bs = token_level_rewards.shape[0]
        scores = token_level_rewards.sum(dim=-1)  # [bs]: the outcome reward sits on one token
        per_sample = scores.new_zeros(bs)
        K = _k(config, k if k is not None else _DEFAULT_K.get("k"), name) if needs_k else None
        estimator = calling.plan(with_std_setting(name, config), k=K)
        lengths = response_mask.sum(dim=-1)  # [bs]
        for order, uids in groups(index):  # [B_s, G_s] per group size
            inputs = {"rewards": scores[order], "lengths": lengths[order]}  # [B_s, G_s] each
            try:
                adv = estimator.per_sample(inputs)  # [B_s, G_s]
            except (ValueError, TypeError) as error:
                raise located(error, order, uids) from None
            per_sample[order.reshape(-1)] = adv.reshape(-1).to(per_sample.dtype)
        out = per_sample.unsqueeze(-1) * response_mask  # [bs, T], zero on padding as in verl
        return out, out

    advantage.__name__ = f"advest_{name}"
    advantage.__doc__ = f"advest's {name} in verl's advantage-estimator convention."
    return advantage


_ADAPTERS: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {}
_DEFAULT_K: dict[str, int] = {}
"""``register(k=K)``'s K, read by every registered adapter at call time."""


def register(k: int | None = None) -> dict[str, str]:
    """Add every sequence-level advest estimator to verl's registry as ``advest_<name>``.

    Idempotent: the same function is registered for each name whatever ``k``, and ``k`` (when
    given) sets the default K of the max@K estimators, which ``algorithm.advest_k`` in the
    config passed to the estimator overrides. The ``verl.plugins`` entry point
    (``advest.integrations.verl_plugin``) calls this in every process that imports verl.
    Returns the estimators *not* registered, each with the reason."""
    from verl.trainer.ppo.core_algos import register_adv_est

    if k is not None:
        _DEFAULT_K["k"] = int(k)
    for name in registry.names():
        entry = registry.entry(name)
        if name in SKIPPED or entry.stateful or entry.family == "token":
            continue
        if name not in _ADAPTERS:
            _ADAPTERS[name] = adapter(name)
        register_adv_est(f"advest_{name}")(_ADAPTERS[name])
    return dict(SKIPPED)


OPTIONS = ("advest_k",)
"""The ``algorithm.advest_*`` keys the adapters read (added with Hydra's ``+``)."""


def check_config(config: Any) -> None:
    """Refuse, before any worker starts, what an ``advest_*`` estimator would refuse at its first
    step. ``config`` is verl's whole trainer config (``main_ppo``'s Hydra config).

    It dry-runs the adapter verl would call on a batch of the configured shape
    (``data.train_batch_size`` prompts × ``actor_rollout_ref.rollout.n`` samples, distinct
    rewards), the way ``advest train`` checks its own settings: K outside the estimator's range
    for G, ``norm_adv_by_std_in_grpo`` where it has no meaning, a name advest does not have.
    An ``algorithm.advest_*`` key that no adapter reads (a typo) is refused too. Estimators
    not named ``advest_*`` are verl's business and pass untouched."""
    algorithm = _setting(config, "algorithm", None)
    name = str(_setting(algorithm, "adv_estimator", ""))
    keys = [str(key) for key in (algorithm.keys() if hasattr(algorithm, "keys") else ())]
    unknown = [key for key in keys if key.startswith("advest_") and key not in OPTIONS]
    if unknown:
        raise ValueError(
            f"algorithm.{unknown[0]} is not an advest setting; advest reads {', '.join(OPTIONS)}"
        )
    if not name.startswith("advest_"):
        return
    own = name.removeprefix("advest_")
    if own not in registry.names():
        raise ValueError(
            f"algorithm.adv_estimator={name}: advest has no estimator {own!r} (`advest list` "
            "names them)"
        )
    try:
        advantage = _ADAPTERS.get(own) or adapter(own)
    except ValueError as error:
        raise ValueError(f"algorithm.adv_estimator={name}: {error}") from None
    rollout = _setting(_setting(config, "actor_rollout_ref", None), "rollout", None)
    G = int(_setting(rollout, "n", 1))
    B = max(1, int(_setting(_setting(config, "data", None), "train_batch_size", 1)))
    # [B·G, 1]: 0/1 rewards that vary inside every group, as `advest train`'s own dry run
    rewards = (torch.arange(G).repeat(B) % 2).to(torch.float32).reshape(B * G, 1)
    index = np.repeat(np.arange(B), G)  # verl's uids: the G samples of a prompt share one
    try:
        advantage(rewards, torch.ones_like(rewards), index, config=algorithm)
    except (ValueError, TypeError) as error:
        settings = f"actor_rollout_ref.rollout.n={G}"
        if "k" in registry.entry(own).inputs:
            settings += f", algorithm.advest_k={_setting(algorithm, 'advest_k', None)}"
        raise ValueError(f"algorithm.adv_estimator={name} ({settings}): {error}") from None


def gdpo(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Sequence[Any] | np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    non_tensor_batch: dict[str, Any] | None = None,
    batch: Any = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor]:
    """advest's ``gdpo`` with ``convention="verl-0.9.1"``, called as verl 0.9.1 calls its
    ``compute_gdpo_outcome_advantage``: each reward's score is ``non_tensor_batch[key]`` for the
    keys ``config.gdpo_reward_keys``, the weights are ``config.gdpo_reward_weights`` (default all
    1), the samples of a prompt share a uid in ``index``, and the sum is whitened over the tokens
    of ``response_mask [bs, T]``. Returns (advantages, returns), both ``[bs, T]``.

    Refused with a ``ValueError`` where verl would fall back silently or advest has no
    convention: no reward keys or no ``non_tensor_batch`` (verl would then normalise the summed
    reward alone), ``norm_adv_by_std_in_grpo=False``, prompts with different numbers of
    samples. ``batch`` (verl's prompts and attention mask, used to place each score on the last
    valid token) is not needed: the score is the sample's."""
    keys = _setting(config, "gdpo_reward_keys", None)
    if not keys or non_tensor_batch is None:
        raise ValueError(
            "advest's gdpo reads each reward's own score: set algorithm.gdpo_reward_keys to the "
            "keys your reward function returns and pass non_tensor_batch (verl's own gdpo would "
            "fall back to the summed reward, which is GDPO of one reward)"
        )
    if not norm_adv_by_std_in_grpo or not _setting(config, "norm_adv_by_std_in_grpo", True):
        raise ValueError(
            "algorithm.norm_adv_by_std_in_grpo=False has no meaning for advest's gdpo: the group "
            "std of each reward is GDPO's normalisation"
        )
    missing = [k for k in keys if k not in non_tensor_batch]
    if missing:
        raise ValueError(f"gdpo reward keys {missing} are not in non_tensor_batch")
    weights = _setting(config, "gdpo_reward_weights", None)
    device = token_level_rewards.device
    scores = torch.stack(
        [torch.as_tensor(np.asarray(non_tensor_batch[k], dtype=np.float64)) for k in keys], -1
    ).to(device)  # [bs, R]
    lengths = response_mask.sum(dim=-1)  # [bs]
    (order, uids), *others = groups(index)  # [B, G]
    if others:
        sizes = sorted({order.shape[1], *(o.shape[1] for o, _ in others)})
        raise ValueError(f"advest's gdpo needs every prompt to have as many samples; got {sizes}")
    estimator = calling.plan("gdpo", options={"convention": "verl-0.9.1", "eps": epsilon})
    source = {
        "reward_parts": scores[order],  # [B, G, R]
        "reward_weights": None if weights is None else [float(w) for w in weights],
        "lengths": lengths[order],  # [B, G]
    }
    try:
        adv = estimator.per_sample(source)  # [B, G]
    except (ValueError, TypeError) as error:
        raise located(error, order, uids) from None
    per_sample = token_level_rewards.new_zeros(token_level_rewards.shape[0])
    per_sample[order.reshape(-1)] = adv.reshape(-1).to(per_sample.dtype)
    out = per_sample.unsqueeze(-1) * response_mask  # [bs, T]
    return out, out


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


def algo_config(k: int) -> Any:
    """verl's default ``AlgoConfig()`` (gamma = lam = 1, ``norm_adv_by_std_in_grpo``), with
    ``advest_k = k`` for advest's max@K adapters."""
    try:
        from verl.trainer.config import AlgoConfig
    except ImportError:
        return _Config(gamma=1.0, lam=1.0, norm_adv_by_std_in_grpo=True, advest_k=k)
    config = AlgoConfig()
    config.advest_k = k  # a new attribute: BaseConfig freezes only its declared fields
    return config


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

    def __init__(self, fn: Callable[..., Any], guard: Any, k: int) -> None:
        import inspect

        from ..spec.oracle import OutOfScope

        self.fn, self.guard, self.config = fn, guard, algo_config(k)
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = None
        if params is None:  # no signature to read: verl's usual arguments
            self.wanted = {"token_level_rewards", "response_mask", "index", "config"}
            return
        names = {p.name for p in params}
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        self.wanted = {"token_level_rewards", "response_mask"}
        # what compute_advantage passes every estimator but gae: index and config when the
        # function can take them (a **kwargs takes them, as verl passes them by keyword)
        self.wanted |= {n for n in ("index", "config") if n in names or var_kw}
        self.wanted |= names & set(SYNTHETIC)
        unknown = [
            p.name
            for p in params
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in self.wanted
        ]
        if unknown:
            raise OutOfScope(
                f"needs {', '.join(unknown)}, which the oracle cannot make up (it makes up "
                f"{', '.join(SYNTHETIC)})"
            )
        self.made_up = sorted(names & set(SYNTHETIC))

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor:
        from ..spec.oracle import OracleError, OutOfScope, check_output, sample_lengths

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
        inputs = {"token_level_rewards": tlr, "response_mask": mask, "index": index}
        inputs |= {name: x for name, x in made_up.items() if name in self.wanted}
        inputs = {name: x for name, x in inputs.items() if name in self.wanted}
        given = self.guard.copies(**inputs)
        kwargs: dict[str, Any] = dict(given)
        if "config" in self.wanted:
            kwargs["config"] = self.config
        kwargs |= {n: self.config.get(n) for n in ("gamma", "lam") if n in self.wanted}
        out = self.fn(**kwargs)
        self.guard.compare(inputs, given)
        if not isinstance(out, tuple) or len(out) != 2:
            raise OracleError(
                f"verl convention: got {type(out).__name__}, expected a pair (advantages, returns)"
            )
        adv = check_output(out[0], tlr, "advantages (verl convention, [bs, T])")
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
