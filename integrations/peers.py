"""What the peer adapters (verl, SkyRL, TRL) share, written once: which advest estimators a peer
can run (one rule, from each registry entry's ``inputs`` and ``stateful``), the estimator a
peer's "divide by the std" option picks, and where K comes from.

A peer runs an estimator when its advantage call can feed every input the entry declares
(``Peer.passes``) and, for a stateful (history) estimator, when the peer keeps one instance
across steps. A new estimator needs no edit here: its entry decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from advest.fast import calling, registry
from advest.fast.episode import turns_from_tokens
from advest.fast.flat import by_group
from advest.fast.shaping import SHAPINGS, Transform, shaping

WHAT = {
    "token_ids": "token ids",
    "mask": "the token mask",
    "logprobs": "rollout log-probs",
    "advantages": "a base estimator's advantages",
    "hidden": "hidden states",
    "texts": "decoded texts",
    "offsets": "character offsets",
    "prompt_ids": "a stable id per prompt across steps",
    "reward_parts": "each reward's own score",
    "reward_weights": "the reward weights",
    "sum_pi_squared": "Σπ² of the rollout policy",
    "turn_rewards": "each turn's reward",
    "turn_ids": "the turn of each token",
}
"""How each input a peer may lack is named in a refusal."""


@dataclass(frozen=True)
class Peer:
    """A trainer advest plugs into: what its advantage call passes an estimator."""

    name: str
    passes: frozenset[str]
    """The registry inputs (``registry.INPUTS``) the peer's advantage call can feed."""
    stateless_because: str = ""
    """Why a stateful estimator cannot keep its history there ("" where it can)."""

    def cannot_run(self) -> dict[str, str]:
        """advest's estimators this peer cannot run, each with the reason."""
        out: dict[str, str] = {}
        for name in registry.names():
            reason = self.why_not(name)
            if reason:
                out[name] = reason
        return out

    def why_not(self, name: str) -> str:
        """Why this peer cannot run ``name`` ("" when it can)."""
        entry = registry.entry(name)
        if entry.stateful and self.stateless_because:
            return f"keeps a history across steps; {self.stateless_because}"
        missing = [i for i in entry.inputs if i not in self.passes]
        if missing:
            named = ", ".join(WHAT.get(i, i) for i in missing)
            return f"needs {named}, which {self.name}'s advantage call does not pass"
        return ""


STD_VARIANTS = {"group": "grpo", "none": "dr_grpo", "batch": "grpo_batch_std"}
"""A peer's std option → the advest estimator that computes that GRPO variant: divided by the
group's std (the default), not divided (Dr. GRPO), divided by the batch's std."""


def with_std(name: str, value: Any, option: str, who: str) -> str:
    """The estimator a peer's std option asks for with ``name`` configured: a GRPO variant for
    ``grpo``; any other estimator decides its own scale, so only the default is accepted (a
    refusal, not a silent no-op). ``value``: True/"group" (divide by the group's std, the
    default), False/"none", or "batch"; ``option`` shows the setting as the user wrote it (e.g.
    ``algorithm.norm_adv_by_std_in_grpo=False``), ``who`` the estimator as the peer names it."""
    scale = {True: "group", False: "none"}.get(value, value)
    if scale not in STD_VARIANTS:
        raise ValueError(f"{option}: takes {sorted(STD_VARIANTS)} (or true / false)")
    if name == "grpo":
        return STD_VARIANTS[scale]
    if scale != "group":
        variant = STD_VARIANTS[scale]
        raise ValueError(
            f"{option} has no meaning for {who}, which decides its own scale; leave it at its "
            f"default, or use the grpo estimator ({option}: {variant}) or {variant}"
        )
    return name


def k_for(name: str, configured: Any, default: int | None, how: str) -> int | None:
    """K for ``name``: the peer's configured value, else ``default``; None for an estimator
    without K; a ValueError saying ``how`` to set it when a max@K estimator has none."""
    if "k" not in registry.entry(name).inputs:
        return None
    k = default if configured is None else configured
    if k is None:
        raise ValueError(f"advest_{name} is a max@K estimator: {how}")
    return int(k)


def setting(config: Any, key: str, default: Any = None) -> Any:
    """``key`` of a peer's config: a dict, an OmegaConf node, a dataclass, or None."""
    if config is None:
        return default
    if hasattr(config, "get"):
        return config.get(key, default)
    return getattr(config, key, default)


def shaped(chosen: Any, options: Any, keys: tuple[str, str], name: str = "") -> Transform | None:
    """The reward shaping a peer's settings name (``fast.shaping``; None: none): ``chosen`` a
    shaping's name (None or "": none), ``options`` its options (a mapping of numbers, or None).
    Refused naming ``keys``, the two settings as the user writes them (e.g.
    ``algorithm.advest_shaping``, ``algorithm.advest_shaping_options``): an unknown name or
    option, options without a shaping, and, for the estimator ``name`` when given, an episode
    estimator (it reads each turn's reward, not the one reward a shaping transforms)."""
    key, options_key = keys
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"{options_key} takes a mapping of option to number; got {options!r}")
    given = {str(option): value for option, value in (options or {}).items()}
    if chosen is None or chosen == "":
        if given:
            names = ", ".join(sorted(SHAPINGS))
            raise ValueError(f"{options_key} is set but {key} is not; {key} names one of: {names}")
        return None
    if name and registry.entry(name).kind == "episode":
        raise ValueError(
            f"{key}={chosen}: advest_{name} is an episode estimator, which reads each turn's "
            "reward; a shaping transforms a response's one reward by its length, so it has no "
            f"meaning here. Leave {key} unset, or use a sequence-level estimator"
        )
    for option, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{options_key}: {option} takes a number; got {value!r}")
    try:
        return shaping(str(chosen), **given)
    except KeyError as error:
        raise ValueError(f"{key}: {str(error).strip(chr(34))}") from None
    except ValueError as error:
        raise ValueError(f"{options_key}: {error}") from None


def per_token(
    plan: calling.Plan,
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Sequence[Any] | Any,
    peer: str,
    shaping: Transform | None = None,
) -> Tensor:
    """The advantages ``[bs, T]`` of verl's and SkyRL's convention (rewards on tokens, a response
    mask, a uid per row), zero on padding: a sequence estimator on each row's summed reward (the
    outcome sits on one token) and its response length, broadcast to its tokens; an episode
    estimator on the turns of a multi-turn row (the mask's runs of 1s, each turn's reward the
    sum of the rewards on its tokens and the observation tokens after it). A row with no
    response token is no sample; groups of any size and ids (``fast.flat.by_group``).
    ``shaping`` (``shaped``) transforms each group's summed rewards by the response lengths
    before a sequence estimator sees them."""
    lengths = response_mask.sum(dim=-1)  # [bs]
    valid = lengths.cpu() > 0
    scores = token_level_rewards.sum(dim=-1)  # [bs]
    fields: dict[str, Any] = {"lengths": lengths}
    if plan.entry.kind == "episode":
        turn_rewards, turn_ids = turns_from_tokens(token_level_rewards, response_mask)
        fields = {"turn_rewards": turn_rewards, "turn_ids": turn_ids}
    where = f"{peer} batch"
    out = by_group(
        plan, scores, index, valid=valid, peer=where, label="uid", shaping=shaping, **fields
    )
    if out.dim() == 1:
        out = out.unsqueeze(-1)  # one advantage per response, on each of its tokens
    return out * response_mask


EPISODES = frozenset({"turn_rewards", "turn_ids"})
"""Derived by ``per_token`` from the per-token rewards and the response mask verl and SkyRL
pass: a multi-turn row's turns."""

VERL = Peer(
    "verl",
    frozenset({"rewards", "lengths", "k"}) | EPISODES,
    "verl's uids are fresh uuid4s every step, so no prompt id is stable",
)
SKYRL = Peer(
    "SkyRL",
    frozenset({"rewards", "lengths", "k"}) | EPISODES,
    "SkyRL unpickles its own copy of an estimator in every process, so the history would split",
)
TRL = Peer("TRL", frozenset({"rewards", "lengths", "k", "prompt_ids"}))
