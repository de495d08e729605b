"""The searched properties of a token-level estimator (``--family token``): its domain is every
batch of 1..3 groups of 1..3 responses of the first token tree, empty responses included (a row
with no valid token, a group with none, a batch with exactly one), in every layout (right, left,
holes, extra padding), with rewards of ``values.group`` and anything at padding in the float
fields (NaN, ±inf, huge): the mask says those positions are no token."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch
from hypothesis import strategies as st
from torch import Tensor

from ..conventions.harness import attempt
from ..conventions.tokens import FLOATS, TokenEstimator, cast
from ..inputs.token_trees import TREES, Layout, Seq, inputs
from ..inputs.values import garbage, group, shown, tensor_literal
from ..properties.findings import Failure
from ..properties.token_checks import allowed
from .database import register
from .engine import Searched, quiet

PADDED = tuple(f for f in FLOATS if f != "rewards")
"""The float fields that have padding positions (``[B, G, T]`` and ``hidden`` ``[B, G, T, D]``)."""


BY_LENGTH: dict[int, list[Seq]] = {
    n: [y for y, _ in TREES[0].responses if len(y) == n] or [()] for n in range(TREES[0].T + 1)
}
"""The first tree's responses by length; length 0 is the empty response (a row of padding)."""


Empty = Literal["any", "rows", "none"]


@register
@dataclass(frozen=True)
class Tokens:
    """One drawn input: B groups of G responses (token sequences, empty allowed), rewards
    ``[B, G]``, the layout, and the value at padding (None: 0)."""

    groups: tuple[tuple[Seq, ...], ...]
    rewards: Tensor
    layout: Layout
    fill: float | None


@st.composite
def token_batches(draw: st.DrawFn, g_lo: int, empty: Empty = "any") -> Tokens:
    """``empty``: where responses without a valid token may be ("any"; "rows": not a whole
    group of them; "none"), as far as the estimator accepts them (``properties``)."""
    G = draw(st.integers(g_lo, 3))
    # a response's length first (0: no valid token), so short and empty ones are drawn often
    shortest = 1 if empty == "none" else 0
    response = st.integers(shortest, TREES[0].T).flatmap(lambda n: st.sampled_from(BY_LENGTH[n]))
    groups = tuple(draw(st.lists(st.tuples(*[response] * G), min_size=1, max_size=3)))
    if empty == "rows":  # a group of empty responses only: give its first one a token
        groups = tuple((BY_LENGTH[1][0], *g[1:]) if all(not y for y in g) else g for g in groups)
    B = len(groups)
    values = [v for _ in range(B) for v in draw(group(G, False))]
    rewards = torch.tensor(values, dtype=torch.float64).reshape(B, G)
    layout = draw(st.sampled_from(get_args(Layout)))
    fill = draw(st.one_of(st.none(), garbage()))
    return Tokens(groups, rewards, layout, fill)


def fields_of(case: Tokens, fill: bool = True) -> dict[str, Any]:
    """The rollout fields of ``case`` (float64), padding holding ``case.fill`` where ``fill``."""
    groups = [list(g) for g in case.groups]
    fields = cast(inputs(TREES[0], groups, case.rewards, case.layout), torch.float64)
    if fill and case.fill is not None:
        pad = ~fields["mask"]
        for name in PADDED:
            if name in fields:
                where = pad if fields[name].dim() == pad.dim() else pad[..., None]
                fields[name] = fields[name].masked_fill(where, case.fill)
    return fields


def _call(est: TokenEstimator, fields: dict[str, Any]) -> Tensor | str:
    return attempt(lambda: est(fields).double())


def _snippet(case: Tokens) -> str:
    f = fields_of(case)
    fill = "" if case.fill is None else f" (padding of the float fields holds {case.fill!r})"
    return (
        f"rewards = {tensor_literal(f['rewards'])}; mask = {tensor_literal(f['mask'])}; "
        f"responses = {[list(map(list, g)) for g in case.groups]}, layout {case.layout!r}{fill}"
    )


def _finite(est: TokenEstimator) -> Callable[[Tokens], Failure | None]:
    def check(case: Tokens) -> Failure | None:
        f = fields_of(case)
        a = _call(est, f)
        if isinstance(a, str):
            return Failure("raises", "advantages for every mask, degenerate ones included", a)
        if not bool(a[f["mask"]].isfinite().all()):
            return Failure(
                "non-finite output",
                "finite advantages at valid tokens",
                f"at valid tokens: {shown(a[f['mask']])}",
            )
        return None

    return check


def _padding(est: TokenEstimator) -> Callable[[Tokens], Failure | None]:
    """0 at every padding position, and the valid tokens' advantages those of zeros at padding."""

    def check(case: Tokens) -> Failure | None:
        f = fields_of(case)
        a, clean = _call(est, f), _call(est, fields_of(case, fill=False))
        if isinstance(a, str) or isinstance(clean, str):
            return None  # the finite-output search reports it
        mask = f["mask"]
        if bool((a[~mask] != 0).any()):
            return Failure(
                "not 0 at padding",
                "A = 0 at every padding position",
                f"at padding: {shown(a[~mask])}",
            )
        if not bool(clean[mask].isfinite().all()):
            return None
        err = (a - clean).abs()[mask]
        bound = (2 * allowed(f["rewards"], clean, dtype=torch.float64)).expand_as(a)[mask]
        if bool((err <= bound).all()):  # NaN in err compares False: a leak
            return None
        return Failure(
            "a padding value reaches a valid token",
            f"the advantages with 0 at padding: {shown(clean[mask])}",
            shown(a[mask]),
        )

    return check


def properties(est: TokenEstimator, findings: Sequence[Any]) -> list[Searched[Tokens]]:
    """Finite output always; 0 at padding and padding values ignored where they held."""
    with quiet():
        g_lo = 1 if not isinstance(_call(est, fields_of(_one())), str) else 2
    refused = {f.prop for f in findings if f.verdict.startswith("refused")}
    # a degenerate mask the explicit rows found refused in words is outside the domain
    empty: Empty = (
        "none"
        if "empty response" in refused
        else ("rows" if "all-padding group" in refused else "any")
    )
    strategy = token_batches(g_lo, empty)
    words = (
        f"1..3 groups of {g_lo}..3 responses, empty ones included, every layout, NaN/inf at padding"
    )

    def item(prop: str, check: Callable[[Tokens], Failure | None]) -> Searched[Tokens]:
        return Searched(prop, strategy, check, _snippet, words)

    out = [item("finite output", _finite(est))]
    held = {f.verdict for f in findings if f.prop in ("0 at padding", "padding values ignored")}
    if held == {"yes"}:
        out.append(item("padding values ignored", _padding(est)))
    return out


def _one() -> Tokens:
    """A batch of one group of one response of length 1: the probe for G = 1."""
    y = next(y for y, _ in TREES[0].responses if len(y) == 1)
    return Tokens(((y,),), torch.tensor([[1.0]], dtype=torch.float64), "right", None)
