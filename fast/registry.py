"""Every fast estimator by name: ``get("maxpo")`` returns the callable.

A plain dict filled by the ``register`` decorator in each family module; duplicates are refused,
and an unknown name raises ``KeyError`` listing the valid ones.

Each entry names the rollout fields it consumes (``inputs``), so a trainer calls any estimator
with ``entry.fn(**{name: rollout[name] for name in entry.inputs})`` and no per-estimator code.
The vocabulary of input names (shapes for one call of B prompts × G samples × T tokens):

    rewards     [B, G] float: each sample's outcome reward (its return)
    k           int: the K of max@K / pass@K
    lengths     [B, G] int: response lengths in tokens
    token_ids   [B, G, T] int64: response token ids (right-padded)
    mask        [B, G, T] bool: valid response tokens
    logprobs    [B, G, T] float: rollout-time log-probs of the sampled tokens (detached)
    advantages  [B, G] float: a sequence-level estimator's output, for reweighters
    hidden      [B, G, T, D] float: last-layer hidden states at the response tokens
    texts       list[list[str]] ([B][G]): decoded responses
    offsets     [B, G, T, 2] int64: character span [start, end) of each token in its text
    prompt_ids  [B] int64: a stable id per prompt (for estimators with history)
    reward_parts    [B, G, R] float: each reward function's own (unweighted) score
    reward_weights  [R] float: the weight of each reward function (rewards = parts · weights)
    sum_pi_squared  [B, G, T] float: Σ_v π(v)² of the rollout policy at each response position

An estimator returns ``[B, G]`` (sequence level, broadcast to tokens) or ``[B, G, T]``, or an
object with an ``advantages`` attribute holding one of these (reweighters). A ``stateful``
entry's ``fn`` is a class: construct it once per run, call the instance, and checkpoint it
through its ``state_dict`` / ``load_state_dict``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Family = Literal["maxk", "group", "multi_reward", "token", "history"]
KDomain = Literal["k<=n", "k<=n-1", "k=n"]
"""The K an estimator accepts for a group of n = G samples: 1 ≤ K ≤ G, 1 ≤ K ≤ G − 1, or only
K = G (an estimator that takes no K argument but is defined at K = G)."""
K_DOMAIN_TEXT = {"k<=n": "1 ≤ K ≤ G", "k<=n-1": "1 ≤ K ≤ G−1", "k=n": "K = G"}
INPUTS = (
    "rewards",
    "k",
    "lengths",
    "token_ids",
    "mask",
    "logprobs",
    "advantages",
    "hidden",
    "texts",
    "offsets",
    "prompt_ids",
    "reward_parts",
    "reward_weights",
    "sum_pi_squared",
)
"""The rollout fields an estimator may consume (the table in this module's docstring)."""
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    """A registered estimator and how to call it.

    family "maxk": ``fn(rewards [B, G], k)``; family "group": ``fn(rewards [B, G])``, plus
    ``lengths [B, G]`` when ``needs_lengths``; family "multi_reward": sequence-level estimators of
    several rewards, ``fn(reward_parts [B, G, R], reward_weights [R], ...) -> [B, G]`` (each
    reward used on its own, not only their weighted sum); family "token": token-level
    estimators, each with its own documented inputs (``[B, G, T]`` tensors and a mask); family
    "history": stateful sequence-level estimators (a class; the instance takes its documented
    inputs, returns ``[B, G]`` and keeps history across calls, e.g. ``prompt_ids`` and
    ``rewards``).
    """

    name: str
    family: Family
    fn: Callable[..., Any]
    needs_k: bool
    needs_lengths: bool = False
    inputs: tuple[str, ...] = ()
    stateful: bool = False
    k_range: KDomain | None = None
    """Where K may lie (None: the estimator has no K)."""

    @property
    def k_domain(self) -> str | None:
        """The K domain as text, e.g. ``1 ≤ K ≤ G−1``; None when the estimator has no K."""
        return None if self.k_range is None else K_DOMAIN_TEXT[self.k_range]

    @property
    def spec(self) -> str:
        """The spec page that documents the estimator: ``spec/<family module>.md``."""
        return f"spec/{self.fn.__module__.rsplit('.', 1)[-1]}.md"


_REGISTRY: dict[str, Entry] = {}


def register(
    name: str,
    family: Family,
    *,
    needs_k: bool,
    needs_lengths: bool = False,
    inputs: tuple[str, ...] | None = None,
    stateful: bool = False,
    k_range: KDomain | None = None,
) -> Callable[[F], F]:
    """Register ``fn`` as ``name``. ``inputs`` defaults to what the family implies: rewards,
    then k if ``needs_k``, then lengths if ``needs_lengths`` (token estimators must list theirs).
    An estimator that takes K must say where K may lie (``k_range``)."""
    if needs_k and k_range is None:
        raise ValueError(f"estimator {name!r} takes K and must give its k_range")
    if inputs is None:
        if family in ("multi_reward", "token", "history"):
            raise ValueError(f"{family} estimator {name!r} must list its inputs")
        inputs = ("rewards",) + ("k",) * needs_k + ("lengths",) * needs_lengths
    unknown = [i for i in inputs if i not in INPUTS]
    if unknown:
        raise ValueError(f"estimator {name!r} names unknown inputs {unknown}; valid: {INPUTS}")

    def add(fn: F) -> F:
        if name in _REGISTRY:
            raise ValueError(f"estimator {name!r} is registered twice")
        _REGISTRY[name] = Entry(name, family, fn, needs_k, needs_lengths, inputs, stateful, k_range)
        return fn

    return add


FAMILIES = (
    "maxk",
    "group",
    "maxrl",
    "gdpo",
    "covariance",
    "ktae",
    "kae",
    "numca",
    "hista",
    "otb",
)
"""The family modules of ``advest.fast``; ``spec/<family>.md`` documents each."""


def _load() -> None:
    # Importing the family modules runs their @register decorators. The list lives here, not in
    # the test catalogue, so that the production path never loads the exact references.
    for family in FAMILIES:
        importlib.import_module(f"advest.fast.{family}")


def entry(name: str) -> Entry:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown estimator {name!r}; valid names: {', '.join(names())}") from None


def get(name: str) -> Callable[..., Any]:
    """The fast estimator registered as ``name``."""
    return entry(name).fn


def names() -> list[str]:
    _load()
    return sorted(_REGISTRY)
