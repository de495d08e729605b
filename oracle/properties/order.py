"""``order_preserving``: within a group, a sample with a higher reward never gets a lower
advantage. No other property sees a sign flip that keeps the output centred-or-not, finite and
equivariant alike in the buggy and the fixed form (TRL #5026: dividing by a negative group
mean). Not yet part of ``check``'s report: adding a row changes every generated verdict page
(docs/peer_verdicts.md is regenerated in verl's environment), so it runs where it is asked for
(scripts/bug_gallery.py)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..conventions.harness import Estimator
from ..inputs.tolerance import allowance
from .findings import Finding


def order_preserving(
    est: Estimator, batches: list[tuple[str, Tensor]], dtype: torch.dtype
) -> Finding:
    """For every group and every pair r_i > r_j (beyond the allowance): A_i ≥ A_j − allowance."""
    worst, where = 0.0, ""
    for label, r in batches:
        a = est(r).double()
        # [B, 1, 1]; floored so that an all-zero output (no spread to err on) divides safely
        tol = allowance(r, a, dtype=dtype).double().clamp(min=1e-300).unsqueeze(-1)
        rd = r.double()
        higher = rd.unsqueeze(-1) > rd.unsqueeze(-2)  # [B, G, G]: r_i > r_j (dyadic, exact)
        drop = torch.where(higher, a.unsqueeze(-2) - a.unsqueeze(-1), torch.zeros_like(tol))
        excess = float((drop / tol).max())
        if excess > 1 and excess > worst:
            worst, where = excess, label
    if worst > 1:
        return Finding(
            "order preserving",
            "no: a higher reward gets a lower advantage",
            f"on {where}: A_j − A_i up to {worst:.2g} × allowance where r_i > r_j",
            data={"excess": worst},
        )
    return Finding("order preserving", "yes", "higher reward, advantage at least as high")
