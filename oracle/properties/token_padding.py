"""The token oracle's layout and degenerate-input checks: the same responses right-padded, left-
padded, with holes in the mask, with extra padding columns and with garbage at padding must give
the same advantage at every valid token and 0 at padding; all-equal groups, empty responses
(all-padding rows) and a whole group of padding beside real ones. ``fields``: ``[B, G, T]``
tensors from ``token_trees.inputs``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..conventions.harness import OracleError
from ..conventions.tokens import TokenEstimator, cast
from ..inputs.token_trees import TREES, Layout, Seq, enumerate_groups, inputs
from .findings import Finding
from .token_checks import _excess, allowed

LAYOUTS: list[tuple[str, Layout, bool]] = [
    ("left padding", "left", False),
    ("holes in the mask", "holes", False),
    ("extra right padding", "wide", False),
    ("padding values ignored", "right", True),
]
"""(row, layout, garbage at padding): each compared with right padding, zeros at padding."""


def _compact(A: Tensor, mask: Tensor) -> Tensor:
    """``[B, G, T']`` -> ``[B, G, Tmax]``: each rollout's valid-token advantages, in order, from
    column 0 (0 beyond its length), Tmax the longest response."""
    order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)
    n = int(mask.sum(-1).max())
    packed = A.gather(-1, order)[..., :n]
    live = torch.arange(n) < mask.sum(-1, keepdim=True)
    return torch.where(live, packed, 0.0)


def _groups(G: int) -> tuple[list[list[Seq]], Tensor]:
    """Every group of G rollouts of the first tree: responses of unequal lengths."""
    groups, r, _, _ = enumerate_groups(TREES[0], G)
    return groups, r


def layouts(est: TokenEstimator, G: int, dtype: torch.dtype) -> list[Finding]:
    """One finding per ``LAYOUTS`` row: the same advantage at every valid token (compacted in
    order), and 0 at every padding position."""
    groups, r = _groups(G)
    base = cast(inputs(TREES[0], groups, r), dtype)
    A = est(base).double()
    want = _compact(A, base["mask"])
    leak = float(A.masked_fill(base["mask"], 0.0).abs().max())
    out = []
    for row, layout, garbage in LAYOUTS:
        fields = cast(inputs(TREES[0], groups, r, layout, garbage), dtype)
        try:
            got = est(fields).double()
        except (ValueError, TypeError) as error:
            out.append(Finding(row, "refused", f"{type(error).__name__}: {str(error)[:100]}"))
            continue
        mask = fields["mask"]
        leak = max(leak, float(got.masked_fill(mask, 0.0).abs().max()))
        allow = 2 * allowed(base["rewards"], A, dtype=dtype)
        excess = _excess((_compact(got, mask) - want).abs(), allow)
        verdict = "yes" if excess <= 1 else "no: valid tokens moved"
        out.append(
            Finding(row, verdict, f"valid tokens vs right padding: {excess:.2g} × allowance")
        )
    zero = "yes" if leak == 0 else f"no: up to {leak:.3g}"
    out.append(Finding("0 at padding", zero, f"max |A| at padding over every layout: {leak:.3g}"))
    return out


def all_equal(est: TokenEstimator, G: int, dtype: torch.dtype) -> Finding:
    """Groups whose rewards are all equal carry no signal: A = 0 at every token?"""
    groups, _ = _groups(G)
    r = torch.full((len(groups), G), 0.75, dtype=torch.float64)
    fields = cast(inputs(TREES[0], groups, r), dtype)
    try:
        A = est(fields).double()
    except (ValueError, TypeError) as error:
        return Finding("all-equal groups", "refused", f"{type(error).__name__}: {str(error)[:100]}")
    if not bool(A.isfinite().all()):
        return Finding("all-equal groups", "no: non-finite output", "rewards all 0.75")
    top = float(A.abs().max())
    verdict = "yes: A = 0" if top == 0 else f"no: max |A| = {top:.3g}"
    return Finding("all-equal groups", verdict, f"every group of {G} rollouts, rewards all 0.75")


def _call(est: TokenEstimator, fields: dict[str, Any]) -> Tensor | str:
    try:
        return est(fields).double()
    except OracleError:
        raise
    except Exception as error:  # a refusal is an answer here
        return f"refused: {type(error).__name__}: {str(error)[:100]}"


def padding_rows(est: TokenEstimator, G: int, dtype: torch.dtype) -> list[Finding]:
    """An empty response (a row of padding) in each group: finite, and 0 on its row? A whole
    group of padding beside real groups: the real groups unchanged?"""
    groups, r = _groups(G)
    groups, r = groups[:40], r[:40]
    empty = cast(inputs(TREES[0], [[(), *g[1:]] for g in groups], r), dtype)
    got = _call(est, empty)
    if isinstance(got, str):
        row = Finding("empty response", got, "rollout 0 of every group has no valid token")
    elif not bool(got.isfinite().all()):
        row = Finding("empty response", "no: non-finite output", "rollout 0 has no valid token")
    else:
        top = float(got[:, 0].abs().max())
        verdict = "yes: A = 0 on its row" if top == 0 else f"no: {top:.3g} on its row"
        row = Finding("empty response", verdict, "rollout 0 of every group has no valid token")
    base = cast(inputs(TREES[0], groups, r), dtype)
    padded = cast(inputs(TREES[0], [[()] * G, *groups], torch.cat([r[:1], r])), dtype)
    A, B = est(base).double(), _call(est, padded)
    if isinstance(B, str):
        return [row, Finding("all-padding group", B, "group 0 all padding, beside real groups")]
    excess = _excess((B[1:] - A).abs(), 2 * allowed(base["rewards"], A, dtype=dtype))
    finite = bool(B.isfinite().all())
    verdict = (
        "no: non-finite output"
        if not finite
        else "yes"
        if excess <= 1
        else "no: other groups moved"
    )
    return [
        row,
        Finding("all-padding group", verdict, f"the real groups moved {excess:.2g} × allowance"),
    ]
