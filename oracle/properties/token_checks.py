"""The token oracle's property checks, one function per property, each returning a ``Finding``:
unbiasedness by exact enumeration of every group of G rollouts of the token trees, which of its
own rollout's tokens an advantage reads, centring, shift / scale / permutation, accuracy in a
low-precision dtype, and agreement with a sequence estimator when no token discriminates.
Padding and degenerate groups are ``token_padding``. Every ``fields`` is ``token_trees.inputs``'s
(``[B, G, T]`` tensors); every comparison is within ``allowed``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from advest.fast import calling

from ..conventions.tokens import TokenEstimator, cast
from ..inputs.token_trees import EOS, TREES, Seq, Tree, enumerate_groups, inputs
from ..inputs.tolerance import _verdict, allowance
from .findings import Finding
from .unbiased import _simplest


def allowed(rewards: Tensor, *outs: Tensor, dtype: torch.dtype) -> Tensor:
    """``[B, 1, 1]``: the error each advantage of a group may carry, the sequence rule of
    spec/oracle.md (G·u·(m/s)·|A|, m/s from the rewards' magnitude over their spread) with the
    group's G·T advantages as its terms (a token advantage may sum over the group's tokens).
    m/s is taken as at least 1: a token advantage also reads inputs other than the rewards (log
    π, Σπ², a critic's values), so G·T·u·|A| is allowed even where the rewards are constant."""
    B, G, T = outs[0].shape
    flat = [o.reshape(B, G * T) for o in outs]
    a = torch.stack([o.to(torch.float64).abs().amax(-1, keepdim=True) for o in flat]).amax(0)
    floor = G * T * torch.finfo(dtype).eps / 2 * a  # [B, 1]
    return torch.maximum(T * allowance(rewards, *flat, dtype=dtype), floor)[..., None]


def _excess(err: Tensor, bound: Tensor) -> float:
    return float((err / bound).max()) if err.numel() else 0.0


def unbiasedness(est: TokenEstimator, G: int, dtype: torch.dtype) -> Finding:
    """E[Σ_i Σ_t A_{i,t} ∇log π(y_{i,t}|y_{i,<t})] = c·∇J over every group of G rollouts of
    every tree, with one c for all trees? The bound propagates each advantage's allowance
    through the enumeration; a bias is called only beyond it (as ``oracle.properties.unbiased``)."""
    ratios, residuals, deltas = [], [], []
    for tree in TREES:
        groups, r, prob, index = enumerate_groups(tree, G)
        fields = cast(inputs(tree, groups, r), dtype)
        A = est(fields).double()  # [B, G, T]
        if not bool(A[fields["mask"]].isfinite().all()):
            return Finding("unbiased", "no: NaN or inf in the advantages", f"G={G}")
        S = tree.scores()[index]  # [B, G, T, C]
        got = torch.einsum("b,bgt,bgtc->c", prob, A, S)
        err = allowed(fields["rewards"], A, dtype=dtype).expand_as(A)
        bound = torch.einsum("b,bgt,bgtc->c", prob, err, S.abs())
        grad = torch.tensor([float(g) for g in tree.gradient()], dtype=torch.float64)
        norm = float(grad.norm())
        c = float(got @ grad) / norm**2
        ratios.append(c)
        residuals.append(float((got - c * grad).norm()) / norm)
        deltas.append(float(bound.norm()) / norm + 1e-12)
    data = {"c": ratios, "residual": residuals, "bound": deltas, "G": G}
    where = f"exact enumeration of every group of {G} rollouts of {len(TREES)} token trees"
    biased = any(res > d for res, d in zip(residuals, deltas, strict=True)) or any(
        abs(ci - cj) > di + dj
        for ci, di in zip(ratios, deltas, strict=True)
        for cj, dj in zip(ratios, deltas, strict=True)
    )
    shown = [f"{x:.4g}" for x in ratios]
    if biased:
        evidence = f"E[ĝ] vs c·∇J: c = {shown}, off-direction residual up to {max(residuals):.2e}"
        return Finding("unbiased", "no", f"{evidence}; {where}", data=data)
    if min(abs(c) for c in ratios) <= max(deltas):
        return Finding("unbiased", "inconclusive", f"c ≈ 0; {where}", data=data)
    shown_c = _simplest(ratios[0], max(deltas) + 1e-9 * abs(ratios[0]))
    return Finding(
        "unbiased", f"yes, E[ĝ] = {shown_c}·∇J", f"{where}, bound {max(deltas):.1e}", data=data
    )


def _probe_groups(tree: Tree, G: int, count: int = 48) -> tuple[list[list[Seq]], Tensor]:
    """A fixed, spread-out sample of ``count`` groups whose rollout 0 has two tokens or more."""
    groups, r, _, _ = enumerate_groups(tree, G)
    keep = [b for b, g in enumerate(groups) if len(g[0]) >= 2]
    step = max(1, len(keep) // count)
    chosen = keep[::step][:count]
    return [groups[b] for b in chosen], r[chosen]


def _variants(y: Seq, T: int) -> list[tuple[int, Seq]]:
    """(u, y'): y with its token u replaced by every other token (EOS ends it there; a symbol
    replacing EOS is followed by EOS when room is left)."""
    out = []
    for u in range(len(y)):
        for v in range(EOS + 1):
            if v == y[u]:
                continue
            if v == EOS:
                out.append((u, (*y[:u], EOS)))
            elif y[u] == EOS:
                out.append((u, (*y[:u], v, EOS)[:T]))
            else:
                out.append((u, (*y[:u], v, *y[u + 1 :])))
    return out


def reads_own_tokens(est: TokenEstimator, G: int, dtype: torch.dtype) -> Finding:
    """Perturbation analysis: change token u of rollout 0 (every other token, EOS included, so
    lengths change too), hold every reward and every other rollout fixed, and see which A_{0,t}
    move: ``data["pairs"]`` holds (t, u) for A_t moved when the tokens from u on changed (u
    alone for a swap of symbols; u and what follows when EOS moves). A baseline may read the
    prefix y_<t and other rollouts; one that moves with u ≥ t reads its own action (u = t) or
    later tokens (u > t)."""
    tree = TREES[-1]
    base_groups, r = _probe_groups(tree, G)
    pairs: set[tuple[int, int]] = set()
    example, biggest = "", 0.0
    for b, group in enumerate(base_groups):
        variants = _variants(group[0], tree.T)
        groups = [group] + [[y2, *group[1:]] for _, y2 in variants]
        rewards = r[b : b + 1].expand(len(groups), G)
        fields = cast(inputs(tree, groups, rewards), dtype)
        whole = est(fields).double()  # [1 + V', G, T]
        A = whole[:, 0]  # [1 + V', T]: rollout 0's advantages
        tol = allowed(fields["rewards"], whole, dtype=dtype)[:, 0]  # [1 + V', 1]
        for j, (u, y2) in enumerate(variants, 1):
            for t in range(min(u + 1, len(y2))):
                moved = abs(float(A[j, t] - A[0, t]))
                if moved > float(tol[0, 0] + tol[j, 0]):
                    pairs.add((t, u))
                    if moved > biggest:  # the clearest example, not the first
                        biggest = moved
                        example = (
                            f"rollout {group[0]} → {y2}, rewards held: A_0,{t} "
                            f"{float(A[0, t]):.4g} → {float(A[j, t]):.4g}"
                        )
    data = {"pairs": sorted(pairs)}
    if not pairs:
        return Finding(
            "reads its own tokens", "prefix only", "no A_t moved with a token u ≥ t", data=data
        )
    later = sorted(p for p in pairs if p[1] > p[0])
    own = sorted(p for p in pairs if p[1] == p[0])
    parts = ([f"later tokens (t, u) = {later}"] if later else []) + (
        [f"its own token at t = {[t for t, _ in own]}"] if own else []
    )
    verdict = "later tokens" if later else "its own token"
    return Finding(
        "reads its own tokens", verdict, "; ".join(parts) + f"; e.g. {example}", data=data
    )


def probe_fields(G: int, dtype: torch.dtype) -> dict[str, Any]:
    """The groups the identity checks run on: every group of G rollouts of the first tree,
    rewards on a 1/4 grid (exact in every dtype, and after a shift by 0.75 or scaling by 2, 1/8)."""
    tree = TREES[0]
    groups, r, _, _ = enumerate_groups(tree, G)
    return cast(inputs(tree, groups, r), dtype)


def centred(est: TokenEstimator, fields: dict[str, Any], dtype: torch.dtype) -> Finding:
    """Σ_i (mean of A_{i,t} over rollout i's valid tokens) = 0 in every group?"""
    A = est(fields).double()
    mask = fields["mask"]
    per = (A * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # [B, G]
    excess = _excess(
        per.sum(-1, keepdim=True).abs()[..., None], allowed(fields["rewards"], A, dtype=dtype)
    )
    return Finding(
        "centred", _verdict(excess), f"|Σ_i mean_t A_i,t| up to {excess:.2g} × allowance"
    )


def _moved(A: Tensor, B: Tensor, rewards: Tensor, mask: Tensor, dtype: torch.dtype) -> float:
    tol = allowed(rewards, A, B, dtype=dtype)
    return _excess(((A.double() - B.double()) * mask).abs(), 2 * tol)


def shift_scale(est: TokenEstimator, fields: dict[str, Any], dtype: torch.dtype) -> list[Finding]:
    """A(r + 0.75) = A(r)? A(a·r) = a·A(r) (equivariant) or A(r) (invariant) for a = 2, 1/8?"""
    A, mask, r = est(fields), fields["mask"], fields["rewards"]
    shifted = _moved(A, est({**fields, "rewards": r + 0.75}), r, mask, dtype)
    errs = {1: 0.0, 0: 0.0}
    for a in (2.0, 0.125):
        scaled = est({**fields, "rewards": r * a})
        for d in errs:
            errs[d] = max(errs[d], _moved(scaled, A * a**d, r, mask, dtype))
    scale = "yes (A(a r) = a A(r))" if errs[1] <= 1 else "invariant" if errs[0] <= 1 else "no"
    return [
        Finding(
            "shift invariant",
            _verdict(shifted),
            f"max |A(r + 0.75) − A(r)| = {shifted:.2g} × allowance",
        ),
        Finding(
            "scale equivariant",
            scale,
            f"× allowance: degree 1 {errs[1]:.2g}, degree 0 {errs[0]:.2g}",
        ),
    ]


def permuted(fields: dict[str, Any], perm: Tensor) -> dict[str, Any]:
    """``fields`` with each group's rollouts reordered by ``perm`` (every field moves along)."""
    out = {
        k: (v[:, perm] if isinstance(v, Tensor) and v.dim() >= 2 else v) for k, v in fields.items()
    }
    out["texts"] = [[row[int(j)] for j in perm] for row in fields["texts"]]
    return out


def permutation(est: TokenEstimator, fields: dict[str, Any], dtype: torch.dtype) -> Finding:
    """A(rollouts permuted) = A permuted, each rollout taking all its fields along?"""
    G = fields["mask"].shape[1]
    perm = torch.roll(torch.arange(G), 1)
    A, B = est(fields), est(permuted(fields, perm))
    excess = _moved(A[:, perm], B, fields["rewards"], fields["mask"][:, perm], dtype)
    return Finding(
        "permutation equivariant", _verdict(excess), f"max error {excess:.2g} × allowance"
    )


def accuracy(est: TokenEstimator, fields: dict[str, Any], dtype: torch.dtype) -> Finding:
    """The estimator on ``dtype`` inputs against itself on the same values in float64."""
    name = f"accurate in {str(dtype).removeprefix('torch.')}"
    low = cast(fields, dtype)
    A, ref = est(low).double(), est(cast(low, torch.float64)).double()
    mask = fields["mask"]
    if not bool(A[mask].isfinite().all()):
        return Finding(name, "no: non-finite output", "NaN or inf at a valid token")
    excess = _excess(((A - ref) * mask).abs(), allowed(low["rewards"], A, ref, dtype=dtype))
    return Finding(name, _verdict(excess), f"max |A − A_float64| = {excess:.2g} × allowance")


def extends(est: TokenEstimator, sequence: str, G: int, dtype: torch.dtype) -> Finding:
    """When no token discriminates (every rollout of a group holds the same response, rewards
    varied), is A_{i,t} the sequence estimator ``sequence``'s A_i at every valid token?"""
    tree = TREES[-1]
    ys = [y for y, _ in tree.responses if len(y) >= 2]
    gen = torch.Generator().manual_seed(G)
    r = torch.round(torch.randn(len(ys), G, generator=gen, dtype=torch.float64) * 8) / 8
    fields = cast(inputs(tree, [[y] * G for y in ys], r), dtype)
    A = est(fields)
    plan = calling.plan(sequence)
    want = calling.value(plan.output({"rewards": fields["rewards"]}))[..., None] * fields["mask"]
    excess = _moved(A, want, fields["rewards"], fields["mask"], dtype)
    verdict = f"yes: equals {sequence}" if excess <= 1 else f"no: differs from {sequence}"
    return Finding(
        f"extends {sequence}", verdict, f"max |A − {sequence}| = {excess:.2g} × allowance"
    )
