"""The estimator catalogue: one row per estimator, naming its reference, its fast version, its
domain and the properties it claims. The tests iterate over it; adding an estimator adds a row,
and a meta-test fails when a registered name has no row.

Rows call both implementations through one batch interface, so each property is written once:
``row.call_reference(batch, k, lengths)`` takes ``list[list[Fraction]]`` (``[B][G]``) and
``row.call_fast(tensor, k, lengths)`` takes ``[B, G]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from torch import Tensor

import advest.fast.covariance
import advest.fast.gdpo
import advest.fast.group
import advest.fast.hista
import advest.fast.kae
import advest.fast.ktae
import advest.fast.maxk
import advest.fast.maxrl
import advest.fast.numca
import advest.fast.otb
import advest.reference.covariance
import advest.reference.gdpo
import advest.reference.group
import advest.reference.hista
import advest.reference.kae
import advest.reference.ktae
import advest.reference.maxk
import advest.reference.maxrl
import advest.reference.numca
import advest.reference.otb  # noqa: F401  (binds the submodules used as reference.*)
from advest import fast, reference
from advest.fast import registry
from advest.fast._checks import check_rewards
from advest.fast.registry import KDomain
from advest.reference._exact import to_fractions
from advest.spec.scales import _ZERO, PG_SCALE, Scale, _const, _k1_only, _k_over_n

FAMILIES = registry.FAMILIES
"""One module per family, the same name in reference/, fast/ and spec/ (``spec/<family>.md``)."""


@dataclass(frozen=True)
class Row:
    """One estimator (one variant of its keyword options) and the properties it claims."""

    name: str
    family: Literal["maxk", "group"]
    reference: Callable[..., Any]
    fast: Callable[..., Tensor]
    k_domain: KDomain | None  # None: the estimator takes no K
    options: dict[str, Any] = field(default_factory=dict)
    min_n: int = 1
    min_b: int = 1  # the fewest groups a batch needs (shrinkage across prompts needs 2)
    binary_only: bool = False
    nonnegative: bool = False  # refuses negative rewards (MaxRL divides by the mean reward)
    batch_coupled: bool = False  # the output of one group depends on the others (REINFORCE++)
    needs_lengths: bool = False
    # I14: r -> r + c moves the output by c * shift(N, K); None = not claimed.
    shift: Scale | None = _ZERO
    # P4: r -> a r (a > 0) scales the output by a**scale_power; None = not claimed.
    scale_power: int | None = 1
    centred: bool = False  # Σ_i A_i = 0 in every group
    # Unbiasedness: E[Σ_i A_i ∇log π(a_i)] = pg_scale(N, K) · ∇J exactly, J = max@K (K = 1 for
    # the group family: the mean reward); None = biased or not claimed.
    pg_scale: Scale | None = None
    exact_zero_on_flat: bool = False  # exact zeros when fewer than K samples lie below the max
    monotone: bool = True  # P2: non-decreasing along the sorted rewards
    # The reference is rational; False where a square root makes it exact only to 60 digits.
    rational: bool = True

    @property
    def id(self) -> str:
        opts = ",".join(f"{key}={value}" for key, value in self.options.items())
        return f"{self.name}[{opts}]" if opts else self.name

    def k_values(self, n: int) -> list[int]:
        """Every valid K for a group of n (``[1]`` for estimators without K)."""
        if self.k_domain is None:
            return [1]
        top = {"k<=n": n, "k<=n-1": n - 1, "k=n": n}[self.k_domain]
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
        """The positional arguments of either implementation, in the family's order."""
        args: list[Any] = [rewards]
        if self.k_domain is not None and self.k_domain != "k=n":
            args.append(k)
        if self.needs_lengths:
            args.append(lengths)
        return args

    def _one(self, group: Sequence[Fraction], k: int, lengths: Sequence[int] | None) -> Any:
        return self.reference(*self._args(group, k, lengths), **self.options)

    def call_fast(self, rewards: Tensor, k: int, lengths: Tensor | None) -> Tensor:
        return self.fast(*self._args(rewards, k, lengths), **self.options)


def _maxk(name: str, k_domain: KDomain, **claims: Any) -> Row:
    return Row(
        name, "maxk", getattr(reference.maxk, name), getattr(fast.maxk, name), k_domain, **claims
    )


def _group(name: str, **claims: Any) -> Row:
    return Row(
        name, "group", getattr(reference.group, name), getattr(fast.group, name), None, **claims
    )


def _maxrl(name: str, **claims: Any) -> Row:
    return Row(
        name,
        "group",
        getattr(reference.maxrl, name),
        getattr(fast.maxrl, name),
        None,
        nonnegative=True,
        shift=None,
        scale_power=0,
        **claims,
    )


def gdpo_one_reward_reference(batch: Sequence[Sequence[Any]], **options: Any) -> Any:
    """``reference.gdpo`` on rewards ``[B][G]`` as the one reward of ``[B][G][1]`` parts."""
    groups = [to_fractions(group) for group in batch]
    return reference.gdpo.gdpo([[[x] for x in group] for group in groups], **options)


def gdpo_one_reward_fast(rewards: Tensor, **options: Any) -> Tensor:
    """``fast.gdpo`` on rewards ``[B, G]`` as the one reward of ``[B, G, 1]`` parts."""
    return fast.gdpo.gdpo(check_rewards(rewards).unsqueeze(-1), **options)


def _gdpo(**claims: Any) -> Row:
    """GDPO with a single reward (R = 1, weight 1): the shared property tests see rewards
    ``[B, G]``; several rewards and weights are tested in tests/test_gdpo.py."""
    return Row(
        "gdpo",
        "group",
        gdpo_one_reward_reference,
        gdpo_one_reward_fast,
        None,
        batch_coupled=True,
        exact_zero_on_flat=True,
        centred=True,
        rational=False,
        **claims,
    )


_FLAT = {"exact_zero_on_flat": True, "centred": True}
_IRRATIONAL = {**_FLAT, "rational": False}

CATALOGUE: list[Row] = [
    _maxk("ei", "k<=n", shift=_k1_only(_const(1)), pg_scale=PG_SCALE["ei"]),
    _maxk("l2o_baseline", "k<=n-1", shift=_k1_only(_const(1)), monotone=False),
    _maxk("maxpo", "k<=n-1", pg_scale=PG_SCALE["maxpo"], **_FLAT),
    _maxk("canonical", "k<=n-1", pg_scale=PG_SCALE["canonical"], **_FLAT),
    _maxk("ei_l1o", "k<=n", min_n=2, centred=True),
    _maxk("pkpo_s", "k<=n", shift=_k_over_n, pg_scale=PG_SCALE["pkpo_s"]),
    _maxk(
        "pkpo_sloo",
        "k<=n-1",
        shift=lambda n, k: Fraction(-k, n * (n - 1)),
        pg_scale=PG_SCALE["pkpo_sloo"],
    ),
    _maxk(
        "pkpo_sloo_minus_one",
        "k<=n",
        shift=_k1_only(_k_over_n),
        pg_scale=PG_SCALE["pkpo_sloo_minus_one"],
    ),
    _maxk(
        "tang_passk",
        "k=n",
        shift=lambda n, k: Fraction(int(n == 1)),
        pg_scale=PG_SCALE["tang_passk"],
    ),
    _maxk(
        "chen_passk",
        "k<=n-1",
        options={"normalize": False},
        binary_only=True,
        shift=None,
        scale_power=None,
        pg_scale=lambda n, k: Fraction(n - k, k),
        **_FLAT,
    ),
    _maxk("chen_passk", "k<=n-1", binary_only=True, shift=None, scale_power=None, **_IRRATIONAL),
    _maxk(
        "chen_passk",
        "k<=n-1",
        options={"convention": "passk_training@00474d7"},
        binary_only=True,
        shift=None,
        scale_power=None,
        **_IRRATIONAL,
    ),
    _maxk("bagirov_transform", "k<=n", shift=_k_over_n, pg_scale=PG_SCALE["bagirov_transform"]),
    _maxk("bagirov_centered", "k<=n-1", pg_scale=PG_SCALE["bagirov_centered"], **_FLAT),
    _maxk("bagirov_zscore", "k<=n-1", scale_power=0, **_IRRATIONAL),
    _maxk("bagirov_zscore", "k<=n-1", options={"ddof": 0}, scale_power=0, **_IRRATIONAL),
    _group("grpo", scale_power=None, **_IRRATIONAL),
    _group("grpo", options={"ddof": 0}, scale_power=None, **_IRRATIONAL),
    # verl's G = 1 group gives r/(1 + ε): not zero, not centred, not shift-invariant at G = 1
    _group(
        "grpo", options={"convention": "verl-0.9.1"}, shift=None, scale_power=None, rational=False
    ),
    _group("grpo_batch_std", batch_coupled=True, scale_power=None, **_IRRATIONAL),
    _group(
        "grpo_batch_std", options={"eps": 0.0}, batch_coupled=True, scale_power=0, **_IRRATIONAL
    ),
    _group("dr_grpo", pg_scale=PG_SCALE["dr_grpo"], **_FLAT),
    _group("rloo", min_n=2, pg_scale=PG_SCALE["rloo"], **_FLAT),
    _group("reinforce_pp", batch_coupled=True, scale_power=None, **_IRRATIONAL),
    _group(
        "reinforce_pp", options={"ddof": 0}, batch_coupled=True, scale_power=None, **_IRRATIONAL
    ),
    _group("opo", needs_lengths=True, exact_zero_on_flat=True),
    _group("james_stein", min_n=2, min_b=2, batch_coupled=True, scale_power=None),
    _group("ebpo", min_b=2, batch_coupled=True, scale_power=None, rational=False),
    _group(
        "ebpo", options={"eps": 0.0}, min_b=2, batch_coupled=True, scale_power=0, rational=False
    ),
    # MaxRL targets Σ_k (1/k)·∇pass@k, not a max@K or the mean reward: no pg_scale here; its
    # exact expectations are checked in tests/test_maxrl.py.
    _maxrl("maxrl", **_FLAT),
    _maxrl("maxrl_unbiased"),
    _maxrl("maxrl_unbiased", options={"baseline": False}),
    # GDPO: shift-invariant per group; ε in both standard deviations breaks exact scale
    # invariance, which ε = 0 restores (the output is dimensionless).
    _gdpo(scale_power=None),
    _gdpo(options={"ddof": 0}, scale_power=None),
    _gdpo(options={"eps": 0.0}, scale_power=0),
]
"""Every estimator variant under test. ``pg_scale`` rows are checked by exact bandit enumeration."""


def rows(name: str) -> list[Row]:
    return [row for row in CATALOGUE if row.name == name]


@dataclass(frozen=True)
class TokenRow:
    """A token-level estimator: its inputs are ``[B, G, T]`` tensors and a mask (fast) or ragged
    per-response token lists for one scope (reference); tests for these are per family
    (``tests/test_covariance.py``)."""

    name: str
    reference: Callable[..., Any]
    fast: Callable[..., Any]
    spec: str


TOKEN_CATALOGUE: list[TokenRow] = [
    TokenRow(
        "covariance_weights",
        reference.covariance.covariance_weights,
        fast.covariance.covariance_weights,
        "covariance.md",
    ),
    TokenRow("ktae", reference.ktae.ktae, fast.ktae.ktae, "ktae.md"),
    TokenRow("numca", reference.numca.numca, fast.numca.numca, "numca.md"),
    TokenRow("hista", reference.hista.hista, fast.hista.hista, "hista.md"),
    TokenRow(
        "optimal_token_baseline",
        reference.otb.optimal_token_baseline,
        fast.otb.optimal_token_baseline,
        "otb.md",
    ),
]
"""Every token-level estimator under test."""

HISTORY_CATALOGUE: list[TokenRow] = [
    TokenRow("kae", reference.kae.kae, fast.kae.kae, "kae.md"),
]
"""Every stateful sequence-level estimator (registry family "history": a class whose instance
keeps history across calls), with the same fields as a token row; tests are per family
(``tests/test_kae.py``)."""
