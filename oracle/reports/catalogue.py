"""The estimator catalogue: one row per estimator and per tested variant of its options,
derived from the registry (``fast/registry.py``, each entry the one declaration of its
estimator): the reference is the function of the same name in ``reference/<family>.py``, the
claims are the entry's ``spec.claims.Claims``. The tests iterate over it; nothing here is
written per estimator.

Rows call both implementations through one batch interface, so each property is written once:
``row.call_reference(batch, k, lengths)`` takes ``list[list[Fraction]]`` (``[B][G]``) and
``row.call_fast(tensor, k, lengths)`` takes ``[B, G]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from advest.fast import calling, registry
from advest.fast._checks import check_rewards
from advest.fast.registry import Entry, KDomain
from advest.reference._exact import to_fractions
from advest.spec.claims import DEFAULTS, Claims
from advest.spec.tolerances import Tolerance


@dataclass(frozen=True)
class Row:
    """One estimator (one variant of its keyword options) and the properties it claims."""

    name: str
    kind: registry.Kind
    reference: Callable[..., Any]
    fast: Callable[..., Tensor]
    k_domain: KDomain | None  # None: the estimator takes no K
    options: dict[str, Any] = field(default_factory=dict)
    needs_lengths: bool = False
    claims: Claims = DEFAULTS
    """The entry's (or the variant's) claims, as declared: ``row.centred`` reads
    ``row.claims.centred``, so no field of ``Claims`` is copied here."""

    def __getattr__(self, name: str) -> Any:
        # only for names a Row lacks: the claims' fields (min_n, centred, pg_scale, ...)
        if name.startswith("__") or name == "claims":
            raise AttributeError(name)
        return getattr(self.claims, name)

    @property
    def id(self) -> str:
        opts = ",".join(f"{key}={value}" for key, value in self.options.items())
        return f"{self.name}[{opts}]" if opts else self.name

    def k_values(self, n: int) -> list[int]:
        """Every valid K for a group of n (``[1]`` for estimators without K)."""
        if self.k_domain is None:
            return [1]
        top = n - registry.K_MAX_OFFSET[self.k_domain]  # the registry's one statement of it
        bottom = n if self.k_domain == "k=n" else 1
        return list(range(bottom, top + 1))

    def call_reference(
        self, batch: Sequence[Sequence[Fraction]], k: int, lengths: Sequence[Sequence[int]] | None
    ) -> list[list[Fraction]]:
        if self.batch_coupled:
            out: list[list[Fraction]] = self.reference(batch, **self.options)
            return out
        return [
            self._one(group, k, lengths[b] if lengths else None) for b, group in enumerate(batch)
        ]

    def _args(self, rewards: Any, k: int, lengths: Any) -> list[Any]:
        """The reference's positional arguments: the inputs its registry entry declares, in
        that order (a sequence estimator's rewards, then K and lengths where it reads them)."""
        given = {"rewards": rewards, "k": k, "lengths": lengths}
        return [given[name] for name in registry.entry(self.name).inputs]

    def _one(self, group: Sequence[Fraction], k: int, lengths: Sequence[int] | None) -> Any:
        return self.reference(*self._args(group, k, lengths), **self.options)

    def call_fast(self, rewards: Tensor, k: int, lengths: Tensor | None) -> Tensor:
        """The fast estimator on rewards ``[B, G]``, called as every caller calls it: through
        ``fast.calling`` on the inputs its registry entry declares. The plan calls the row's
        ``fast`` (the registered function, or a planted defect put in its place by a test)."""
        plan = replace(calling.plan(self.name, options=self.options, k=k), instance=self.fast)
        return plan.per_sample(self.source(rewards, lengths))

    def source(self, rewards: Tensor, lengths: Tensor | None) -> dict[str, Any]:
        """The rollout fields of rewards ``[B, G]`` (and ``lengths [B, G]``): a multi-reward
        estimator sees them as the one reward of ``reward_parts [B, G, 1]``, weight 1."""
        if self.kind == "multi_reward":
            parts = check_rewards(rewards).unsqueeze(-1)
            # lengths are read only by a peer's convention; 1 token each where none are given
            ones = torch.ones(rewards.shape, dtype=torch.int64, device=rewards.device)
            given = lengths if lengths is not None else ones
            return {"reward_parts": parts, "reward_weights": [1.0], "lengths": given}
        return {"rewards": rewards} | ({} if lengths is None else {"lengths": lengths})


def reference_of(entry: Entry) -> Callable[..., Any]:
    """The exact twin of ``entry``: the function of the same name in ``reference/<family>.py``."""
    module = importlib.import_module(f"advest.reference.{entry.family}")
    fn: Callable[..., Any] = getattr(module, entry.name)
    return fn


def one_reward_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A multi-reward reference on rewards ``[B][G]`` as the one reward of ``[B][G][1]`` parts
    (weight 1), so the shared property tests see rewards ``[B, G]``; several rewards and weights
    are tested per family (tests/core/estimators/test_gdpo.py)."""

    def call(batch: Sequence[Sequence[Any]], **options: Any) -> Any:
        groups = [to_fractions(group) for group in batch]
        return fn([[[x] for x in group] for group in groups], **options)

    return call


def _row(entry: Entry, options: dict[str, Any], claims: Claims) -> Row:
    reference = reference_of(entry)
    if entry.kind == "multi_reward":
        reference = one_reward_reference(reference)
        claims = replace(
            claims, batch_coupled=True
        )  # one reward: every group's output read together
    return Row(
        entry.name,
        entry.kind,
        reference,
        entry.fn,
        entry.k_range,
        dict(options),
        needs_lengths=entry.needs_lengths and entry.kind == "sequence",
        claims=claims,
    )


def _rows() -> list[Row]:
    out = []
    for entry in registry.entries():
        if entry.kind in ("sequence", "multi_reward"):
            out.append(_row(entry, {}, entry.claims))
            out.extend(_row(entry, v.options, v.claims) for v in entry.variants)
    return out


CATALOGUE: list[Row] = _rows()
"""Every sequence-level estimator variant under test. ``pg_scale`` rows are checked by exact
bandit enumeration."""


def rows(name: str) -> list[Row]:
    return [row for row in CATALOGUE if row.name == name]


@dataclass(frozen=True)
class TokenRow:
    """A token-level or history estimator: its inputs are ``[B, G, T]`` tensors and a mask
    (fast) or ragged per-response token lists for one scope (reference); tests for these are per
    family (``tests/core/estimators/test_covariance.py``, ``tests/core/estimators/test_kae.py``)."""

    name: str
    reference: Callable[..., Any]
    fast: Callable[..., Any]
    spec: str


def _token_rows(kind: registry.Kind) -> list[TokenRow]:
    return [
        TokenRow(e.name, reference_of(e), e.fn, e.spec.removeprefix("spec/"))
        for e in registry.entries()
        if e.kind == kind
    ]


TOKEN_CATALOGUE: list[TokenRow] = _token_rows("token")
"""Every token-level estimator under test."""

HISTORY_CATALOGUE: list[TokenRow] = _token_rows("history")
"""Every stateful sequence-level estimator (a class whose instance keeps history across calls)."""

EPISODE_NAMES: list[str] = [e.name for e in registry.entries() if e.kind == "episode"]
"""The multi-turn estimators: judged by the episode oracle (``oracle/properties/episodes.py``)
on episodes, against their entry's ``one_turn`` estimator on one-turn episodes."""

FAMILIES = registry.families()
"""Every family: one module of that name in reference/ and fast/, one page ``spec/<family>.md``."""


def tolerance_entry(name: str, dtype: torch.dtype) -> Tolerance:
    """The registry's tolerance of (estimator, dtype); a KeyError names what is missing."""
    try:
        return registry.entry(name).tolerance[dtype]
    except KeyError:
        raise KeyError(f"the registry entry of {name!r} has no tolerance for {dtype}") from None


def tolerance(name: str, dtype: torch.dtype) -> float:
    """The relative tolerance of (estimator, dtype); multiply by the entry's scale."""
    return tolerance_entry(name, dtype).rel
