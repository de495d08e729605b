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
    turn_rewards    [B, G, K] float: each episode's reward per turn (multi-turn episodes)
    turn_ids        [B, G, T] int64: the turn of each response token, −1 for observation tokens

The entry is the one declaration of an estimator: its name, its family (the module that holds
it, ``fast/<family>.py``, with its twin ``reference/<family>.py`` and its page
``spec/<family>.md``), how it is called (``kind`` and ``inputs``), where K may lie, its claims
(``spec.claims.Claims``: its scale relative to the unbiased gradient, centring, shift and scale
behaviour), its tolerance class against the exact reference, the order of its cost
(``spec.cost``) and the variants of its options that are tested. The test catalogue, the
tolerances, the scales, the list of families, the docs, the cost-growth table and the mutation
map are derived from it (``oracle/reports/catalogue.py``,
``tests/core/oracle/test_catalogue.py``).

An estimator returns ``[B, G]`` (sequence level, broadcast to tokens) or ``[B, G, T]``, or an
object with an ``advantages`` attribute holding one of these (reweighters). A ``stateful``
entry's ``fn`` is a class: construct it once per run, call the instance, and checkpoint it
through its ``state_dict`` / ``load_state_dict``.

Under data parallelism (N processes, each holding some of a batch's groups) a group-local
estimator needs nothing; an entry whose ``collective`` is true (a batch statistic or a history)
takes ``group=`` (a ``torch.distributed`` process group) and then equals one process holding the
whole batch (``fast._ranks``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from advest.spec import cost as orders
from advest.spec.claims import DEFAULTS, Claims, Variant
from advest.spec.scales import Scale
from advest.spec.tolerances import Tolerances

Kind = Literal["sequence", "multi_reward", "token", "history", "episode"]
"""How an estimator is called: "sequence": ``fn(rewards [B, G], k?, lengths?) -> [B, G]``;
"multi_reward": each reward's own score (``reward_parts [B, G, R]``, ``reward_weights [R]``) ->
``[B, G]``; "token": ``[B, G, T]`` inputs and a mask -> ``[B, G, T]`` (or an object with
``advantages``); "history": a class whose instance keeps history across calls; "episode":
multi-turn episodes, ``turn_rewards [B, G, K]`` and ``turn_ids [B, G, T]`` -> ``[B, G, T]``."""
KDomain = Literal["k<=n", "k<=n-1", "k=n"]
"""The K an estimator accepts for a group of n = G samples: 1 ≤ K ≤ G, 1 ≤ K ≤ G − 1, or only
K = G (an estimator that takes no K argument but is defined at K = G)."""
K_DOMAIN_TEXT = {"k<=n": "1 ≤ K ≤ G", "k<=n-1": "1 ≤ K ≤ G−1", "k=n": "K = G"}
K_MAX_OFFSET = {"k<=n": 0, "k<=n-1": 1, "k=n": 0}
"""K ≤ G − offset: the one place the domain's upper end is written as a number."""
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
    "turn_rewards",
    "turn_ids",
)
"""The rollout fields an estimator may consume (the table in this module's docstring)."""
COST_BY_KIND: dict[Kind, str] = {
    "sequence": "B·G",
    "multi_reward": "B·G·R",
    "token": "B·G·T",
    "history": "B·G",
    "episode": "B·G·T",
}
"""The stated cost of an estimator that states none: one pass over its inputs (an episode's
turns are at most its tokens). An estimator that sorts, pairs samples or keeps history states
its own (``register(cost=...)``)."""
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    """A registered estimator: its one declaration (see the module docstring)."""

    name: str
    kind: Kind
    fn: Callable[..., Any]
    inputs: tuple[str, ...]
    tolerance: Tolerances
    """float64 and float32 tolerances of fast against the exact reference
    (``spec.tolerances.pair``)."""
    claims: Claims = DEFAULTS
    """What the default options claim; ``claims.pg_scale`` is the scale relative to the unbiased
    gradient (None: biased or not claimed)."""
    variants: tuple[Variant, ...] = ()
    """Other option settings under test, each with its own claims."""
    stateful: bool = False
    k_range: KDomain | None = None
    """Where K may lie (None: the estimator has no K)."""
    extends: str | None = None
    """A token-level estimator: the registered sequence estimator it reduces to when no token
    discriminates (the token oracle's ``extends`` row)."""
    one_turn: str | None = None
    """An episode estimator: the registered sequence estimator it equals on one-turn episodes
    (the episode oracle's "one turn" row)."""
    cost: str = ""
    """The order of the time of one call in the sizes of its inputs (``spec.cost``), e.g.
    ``B·G log G``; its spec page's Cost table repeats it, and docs/cost.md measures it. Empty only
    for an unregistered function's entry (``calling.plan_for``)."""

    @property
    def family(self) -> str:
        """The family: the module that holds the estimator, in fast/, reference/ and spec/."""
        return self.fn.__module__.rsplit(".", 1)[-1]

    @property
    def spec(self) -> str:
        """The spec page that documents the estimator and its claims: ``spec/<family>.md``."""
        return f"spec/{self.family}.md"

    @property
    def needs_k(self) -> bool:
        return "k" in self.inputs

    @property
    def needs_lengths(self) -> bool:
        return "lengths" in self.inputs

    @property
    def scale(self) -> Scale | None:
        """pg_scale(N, K) of the default options (``Claims.pg_scale``)."""
        return self.claims.pg_scale

    @property
    def k_domain(self) -> str | None:
        """The K domain as text, e.g. ``1 ≤ K ≤ G−1``; None when the estimator has no K."""
        return None if self.k_range is None else K_DOMAIN_TEXT[self.k_range]

    @property
    def collective(self) -> bool:
        """Whether a call on one rank's share of a batch needs a collective to give the
        advantages of one process holding the whole batch: the estimator keeps a history
        (``stateful``: one history for every rank) or its statistics span the batch
        (``claims.batch_coupled``, in its default options or any variant). Derived from those
        declarations, never declared apart; such an estimator takes ``group`` (a process
        group, ``fast._ranks``), and a group-local one is never handed one (``calling.Plan``)."""
        coupled = self.claims.batch_coupled or any(v.claims.batch_coupled for v in self.variants)
        return self.stateful or coupled

    def k_max(self, n: int) -> int:
        """The largest K for a group of ``n`` (``n`` without K)."""
        return n - (K_MAX_OFFSET[self.k_range] if self.k_range else 0)


_REGISTRY: dict[str, Entry] = {}


def register(
    name: str | None = None,
    kind: Kind = "sequence",
    *,
    tolerance: Tolerances,
    claims: Claims = DEFAULTS,
    variants: tuple[Variant, ...] = (),
    inputs: tuple[str, ...] | None = None,
    stateful: bool = False,
    k_range: KDomain | None = None,
    extends: str | None = None,
    one_turn: str | None = None,
    cost: str | None = None,
) -> Callable[[F], F]:
    """Register ``fn`` as ``name`` (by default the function's own name, so that the name is
    written once, in its ``def``): the estimator's one declaration. ``inputs`` defaults, for a
    "sequence" estimator, to rewards, then k when ``k_range`` lets K vary; other kinds list
    theirs. ``cost`` (the order of one call's time, ``spec.cost``) defaults to
    ``COST_BY_KIND[kind]``."""

    def add(fn: F) -> F:
        label: str = name or str(getattr(fn, "__name__", ""))
        declared = inputs
        if declared is None:
            if kind != "sequence":
                raise ValueError(f"{kind} estimator {label!r} must list its inputs")
            declared = ("rewards",) + ("k",) * (k_range in ("k<=n", "k<=n-1"))
        unknown = [i for i in declared if i not in INPUTS]
        if unknown:
            raise ValueError(f"estimator {label!r} names unknown inputs {unknown}; valid: {INPUTS}")
        if ("k" in declared) != (k_range in ("k<=n", "k<=n-1")):
            raise ValueError(f"estimator {label!r}: takes K exactly when its k_range lets K vary")
        if label in _REGISTRY:
            raise ValueError(f"estimator {label!r} is registered twice")
        stated = COST_BY_KIND[kind] if cost is None else cost
        try:
            orders.parse(stated)
        except ValueError as error:
            raise ValueError(f"estimator {label!r}: cost {stated!r}: {error}") from None
        _REGISTRY[label] = Entry(
            label,
            kind,
            fn,
            declared,
            tolerance,
            claims,
            variants,
            stateful,
            k_range,
            extends,
            one_turn,
            stated,
        )
        return fn

    return add


def defined_in(module: str) -> list[str]:
    """The names registered by ``module`` so far: a family module's ``__all__``, written as
    ``__all__ = registry.defined_in(__name__)`` after its registrations."""
    return sorted(n for n, e in _REGISTRY.items() if getattr(e.fn, "__module__", None) == module)


def modules() -> list[str]:
    """The public modules of ``advest.fast``, every one imported by ``_load``: a family module
    registers estimators there, the others (this registry, ``calling``, ``flat``, ...) register
    none and so name no family (``families``). Nothing lists which is which."""
    import advest.fast

    found = pkgutil.iter_modules(advest.fast.__path__)
    return sorted(m.name for m in found if not m.name.startswith("_"))


_LOADED: list[str] = []
"""The family modules imported so far: discovery lists the package's folder once per process,
not on every ``entry`` lookup (the catalogue resolves a plan on every call)."""


def _load() -> None:
    # Importing the family modules runs their @register decorators. The list is discovered, not
    # written down, so a new family module needs no edit here; the production path never loads
    # the exact references or the test catalogue.
    if _LOADED:
        return
    found = modules()
    for module in found:
        importlib.import_module(f"advest.fast.{module}")
    _LOADED.extend(found)


def families() -> list[str]:
    """Every family that holds a registered estimator (``spec/<family>.md`` documents each)."""
    _load()
    return sorted({e.family for e in _REGISTRY.values()})


def entry(name: str) -> Entry:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown estimator {name!r}; valid names: {', '.join(names())}") from None


def entries() -> list[Entry]:
    """Every registered estimator, by name."""
    _load()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def get(name: str) -> Callable[..., Any]:
    """The fast estimator registered as ``name``."""
    return entry(name).fn


def names() -> list[str]:
    _load()
    return sorted(_REGISTRY)
