"""The dtype-aware tolerance rule (``allowance``, stated in spec/oracle.md) and the test
batches the property checks run on (dyadic grids, cast to each dtype by ``_cast``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


USABLE = 0.25
"""A test batch is used in a dtype only if its relative allowance (``allowance / |A|``) is at
most this: beyond it (e.g. rewards 1000 + k/8 in bfloat16) the dtype cannot resolve the spread."""


COUPLED: ContextVar[bool] = ContextVar("COUPLED", default=False)
"""True while checking an estimator whose groups are coupled (one group's advantages depend on
the others', e.g. verl's batch whitening): ``allowance`` then gives every group the batch's
allowance, B·G terms and the batch's largest m/s and |A|, as each output carries the rounding of
sums over the whole batch. ``report.check`` sets it from the ``couples groups`` finding."""


@contextmanager
def coupled_allowance(flag: bool) -> Iterator[None]:
    """``COUPLED`` set to ``flag`` inside the block, and back to what it was after."""
    token = COUPLED.set(flag)
    try:
        yield
    finally:
        COUPLED.reset(token)


FLOAT64_FLOOR = 1e-12
"""The relative error every float64 output may carry whatever its rule gives: lgamma-based
weights and enumeration sums are not correctly rounded, and a batch statistic summed in another
order moves the last few digits."""


def relative_floor(dtype: torch.dtype) -> float:
    """``FLOAT64_FLOOR`` in float64, else 0 (the rule alone)."""
    return FLOAT64_FLOOR if dtype == torch.float64 else 0.0


def allowance(rewards: Tensor, *outs: Tensor, dtype: torch.dtype) -> Tensor:
    """``[B, 1]``: the error each output element of a group may carry in ``dtype``.

    e_g = G · u · (m_g / s_g) · a_g, with u the unit roundoff of ``dtype``, m_g = max |r| of the
    group, s_g = max r − min r (m_g when the group is constant), a_g = max |A| over ``outs``.
    A sum of G terms carries at most (G − 1)·u relative error in the worst case, plus one
    rounding of the output; dividing by the spread turns an error in the rewards' magnitude into
    one in the advantage's (offset rewards lose digits to the offset). float64 carries a floor
    of 1e-12 relative (lgamma-based weights and enumeration sums are not correctly rounded).
    While ``COUPLED`` is set, every group gets the batch's allowance (G → B·G, and the largest
    m/s and |A| of the batch).
    """
    G = rewards.shape[-1]
    u = torch.finfo(dtype).eps / 2
    r = rewards.to(torch.float64)
    m = r.abs().amax(-1, keepdim=True)
    s = r.amax(-1, keepdim=True) - r.amin(-1, keepdim=True)
    s = torch.where(s > 0, s, torch.where(m > 0, m, 1.0))
    a = torch.stack([o.to(torch.float64).abs().amax(-1, keepdim=True) for o in outs]).amax(0)
    ratio = m / s  # [B, 1]
    if COUPLED.get():  # each output carries the batch's sums: the batch's terms and extremes
        G, ratio, a = rewards.numel(), ratio.amax().expand_as(ratio), a.amax().expand_as(a)
    rel = G * u * ratio + relative_floor(dtype)
    return rel * a + torch.finfo(dtype).tiny


LENGTH_T = 5
"""Responses given to estimators that read lengths are 1..LENGTH_T tokens long."""


def sample_lengths(shape: torch.Size | tuple[int, ...]) -> Tensor:
    """``[B, G]`` int64 response lengths in 1..``LENGTH_T``, one per sample, the same for every
    call on the same shape (seeded by it): the checks compare calls on like inputs, and the
    permutation check permutes these with their samples (a length belongs to a response)."""
    B, G = shape
    gen = torch.Generator().manual_seed(7919 * B + G)
    return torch.randint(1, LENGTH_T + 1, (B, G), generator=gen)


def rule(dtype: torch.dtype) -> str:
    u = torch.finfo(dtype).eps / 2
    return f"G·u·(m/s)·|A| per element, u = {u:.2g} ({str(dtype).removeprefix('torch.')})"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _batches(g: int, binary: bool) -> list[tuple[str, Tensor]]:
    """Deterministic named test batches ``[32, g]`` in float64, on dyadic grids: each value, its
    shift by 0.75 and its scalings by 2 and 1/8 are exact in every dtype that holds the value, so
    the checks see only the estimator's own arithmetic error."""
    gen = torch.Generator().manual_seed(0)
    if binary:
        return [("binary", torch.randint(0, 2, (32, g), generator=gen).double())]
    normal = torch.randn(32, g, generator=gen, dtype=torch.float64).clamp(-3.9, 3.9)
    return [
        ("integers 0..3", torch.randint(0, 4, (32, g), generator=gen).double()),
        ("normal on a 1/32 grid", torch.round(normal * 32) / 32),
        ("offset 1000 + k/8", 1000 + torch.randint(0, 5, (32, g), generator=gen).double() / 8),
    ]


def _cast(
    batches: list[tuple[str, Tensor]], dtype: torch.dtype
) -> tuple[list[tuple[str, Tensor]], list[str]]:
    """The batches in ``dtype``, keeping the groups ``dtype`` holds exactly and whose relative
    allowance is at most ``USABLE``; and a note for each batch that lost groups."""
    kept, notes = [], []
    with coupled_allowance(False):  # which groups a dtype resolves is a property of each group
        cast = [(name, r, r.to(dtype)) for name, r in batches]
        allowed = [allowance(rd, torch.ones_like(rd), dtype=dtype)[:, 0] for _, _, rd in cast]
    for (name, r, rd), e in zip(cast, allowed, strict=True):
        ok = (rd.double() == r).all(-1) & (e <= USABLE)
        if not bool(ok.all()):
            notes.append(f"{name}: {int((~ok).sum())} of {len(ok)} groups")
        if bool(ok.any()):
            kept.append((name, rd[ok]))
    return kept, notes


def _excess(err: Tensor, allowed: Tensor) -> float:
    """max of err / allowed: ≤ 1 means within the allowance."""
    return float((err / allowed).max())


def _verdict(ratio: float) -> str:
    return "yes" if ratio <= 1 else "no"
