"""The one way to call a registered estimator: resolve it once (``plan``), then call the plan on
whatever holds its inputs.

Every caller goes through here: advest's trainer (on its ``Rollout``), the verl and TRL adapters
(on the tensors their trainers hand over), the experiments and the demo. No caller looks at an
estimator's name: each registry entry declares the inputs it consumes (``registry.INPUTS``), and
``Plan`` fetches exactly those, fills ``k`` from the plan, ``lengths`` from ``mask`` when the
source has no lengths, and the ``advantages`` a reweighter reweights from its base estimator.

A source is a mapping (``{"rewards": r}``) or any object with the input names as attributes
(``training.rollout.Rollout``). Notation: ``B`` prompts, ``G`` samples, ``T`` response tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from . import registry


@dataclass(frozen=True)
class Plan:
    """An estimator resolved once: its registry ``entry``, the ``base`` entry a reweighter (an
    estimator that reads ``advantages``) reweights, the callable ``instance`` (``entry.fn``, or
    for a stateful entry the run's own instance, which keeps its state), the keyword
    ``options`` of a stateless one, the ``k`` of a max@K one, and the input ``fields`` the two
    consume."""

    entry: registry.Entry
    base: registry.Entry | None
    instance: Any
    options: dict[str, Any] = field(default_factory=dict)
    fields: frozenset[str] = frozenset()
    k: int | None = None
    group: Any = None
    """The process group whose ranks each hold a share of the batch (``over``), or None."""

    @property
    def collective(self) -> bool:
        """Whether the estimator (or its base) needs a collective under data parallelism
        (``registry.Entry.collective``)."""
        return self.entry.collective or (self.base is not None and self.base.collective)

    def over(self, group: Any) -> Plan:
        """The plan for a batch sharded over the ranks of ``group`` (a ``torch.distributed``
        process group; None: one process): the estimators that need a collective get it, the
        others are called exactly as on one process and pay for none."""
        return replace(self, group=group if self.collective else None)

    def needs(self, name: str) -> bool:
        """Whether the estimator (or its base) consumes the input ``name``."""
        return name in self.fields

    def output(self, source: Any, base: Tensor | None = None) -> Any:
        """The estimator's own output on ``source`` (``[B, G]``, ``[B, G, T]`` or an object
        with ``advantages``). A reweighter's ``base`` advantages ``[B, G]`` come from the base
        estimator unless given."""
        if self.base is not None and base is None:
            base = value(self._call(self.base, self.base.fn, source, {}, None))
        return self._call(self.entry, self.instance, source, self.options, base)

    def per_sample(self, source: Any) -> Tensor:
        """``[B, G]`` advantages of a sequence-level estimator (or a reweighter's)."""
        return value(self.output(source))

    def advantages(self, source: Any) -> Tensor:
        """``[B, G, T]`` float32 advantages, a sequence-level output broadcast over the
        response, zero where ``source``'s ``mask [B, G, T]`` is False."""
        out = value(self.output(source))
        mask: Tensor = _get(source, "mask")
        B, G, T = mask.shape
        if out.shape == (B, G):
            out = out.unsqueeze(-1).expand(B, G, T)
        if out.shape != (B, G, T):
            raise ValueError(
                f"estimator output has shape {tuple(out.shape)}; want [B, G] or [B, G, T]"
            )
        return (out * mask).to(torch.float32)

    def fresh(self) -> Plan:
        """The same plan with a deep copy of a stateful instance (an evaluation that must not
        touch a run's history); a stateless plan is returned as is."""
        import copy

        if not self.entry.stateful:
            return self
        return replace(self, instance=copy.deepcopy(self.instance))

    def _call(
        self,
        entry: registry.Entry,
        fn: Any,
        source: Any,
        options: dict[str, Any],
        base: Tensor | None,
    ) -> Any:
        args: dict[str, Any] = {}
        for name in entry.inputs:
            if name == "k":
                args[name] = self.k
            elif name == "advantages":
                args[name] = base
            elif name == "lengths" and not _has(source, "lengths"):
                args[name] = _get(source, "mask").sum(-1)
            else:
                args[name] = _get(source, name)
        if self.group is not None and entry.collective:
            args["group"] = self.group
        return fn(**args, **options)


def plan(
    estimator: str,
    base_estimator: str = "grpo",
    options: dict[str, Any] | None = None,
    *,
    k: int | None = None,
) -> Plan:
    """Resolve ``estimator`` (and ``base_estimator``, used when it reads ``advantages``), with
    its ``k`` when it takes one, and construct a stateful one with ``options``. Raises
    ``KeyError`` for an unknown name and whatever the constructor raises for bad options."""
    options = dict(options or {})
    entry = registry.entry(estimator)
    base_entry = registry.entry(base_estimator)  # named in the settings: must exist either way
    base = base_entry if "advantages" in entry.inputs else None
    fields = frozenset(entry.inputs) | frozenset(base.inputs if base is not None else ())
    k = k if "k" in fields else None
    if entry.stateful:
        return Plan(entry, base, entry.fn(**options), {}, fields, k)
    return Plan(entry, base, entry.fn, options, fields, k)


def plan_for(
    fn: Any,
    name: str,
    kind: registry.Kind,
    inputs: tuple[str, ...],
    options: dict[str, Any] | None = None,
    base_estimator: str = "grpo",
) -> Plan:
    """A plan for an unregistered function (a user's estimator under the oracle), called with
    the ``inputs`` its signature names as a registered one of that ``kind`` would be: its entry
    is made here and never enters the registry (it has no claims and no tolerance)."""
    entry = registry.Entry(name, kind, fn, inputs, tolerance={})
    base = registry.entry(base_estimator) if "advantages" in inputs else None
    fields = frozenset(inputs) | frozenset(base.inputs if base is not None else ())
    return Plan(entry, base, fn, dict(options or {}), fields)


def value(out: Any) -> Tensor:
    """An estimator's advantages: the output itself, or its ``advantages`` (reweighters)."""
    result: Tensor = out.advantages if hasattr(out, "advantages") else out
    return result


def _has(source: Any, name: str) -> bool:
    if isinstance(source, Mapping):
        return name in source
    return getattr(source, name, None) is not None


def _get(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        if name not in source:
            raise KeyError(f"the estimator needs {name!r}; the caller gave {sorted(source)}")
        return source[name]
    return getattr(source, name)
