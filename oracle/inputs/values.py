"""Reward values a trainer can hand an estimator, as hypothesis strategies: ties, near ties,
large offsets with tiny spreads, one outlier, pass/fail; and the values a mask says are no
sample (NaN, ±inf, huge, anything). Every drawn value is cast to the dtype under check and back,
so a property compares calls on values the dtype holds exactly."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st
from torch import Tensor

BASES = (0.0, 0.75, -3.0, 1000.0, 2.0**20)
"""Offsets of a group: none, a fraction, negative, 1e3 and about 1e6."""
SPREADS = (1.0, 0.125, 2.0**-10, 2.0**-20)
"""Steps between a group's rewards: from the usual to a near tie."""
GARBAGE = (math.nan, math.inf, -math.inf, 1e30, -7.0, 0.0)
"""What a masked row or padding position may hold: the mask says it is no sample."""


@st.composite
def group(draw: st.DrawFn, size: int, binary: bool) -> list[float]:
    """One group of ``size`` rewards: 0/1 where ``binary``; else base + spread·k with k in
    0..8 (ties when two k agree), and sometimes one outlier 2¹⁰ spreads above."""
    if binary:
        return draw(st.lists(st.sampled_from((0.0, 1.0)), min_size=size, max_size=size))
    base = draw(st.sampled_from(BASES))
    spread = draw(st.sampled_from(SPREADS))
    ks = draw(st.lists(st.integers(0, 8), min_size=size, max_size=size))
    values = [base + spread * k for k in ks]
    if size > 1 and draw(st.booleans()):
        values[draw(st.integers(0, size - 1))] += spread * 2**10
    return values


def exact(values: list[float], dtype: torch.dtype) -> Tensor:
    """``values`` as ``dtype`` holds them, in float64 (the truth every call is judged on)."""
    return torch.tensor(values, dtype=torch.float64).to(dtype).double()


def garbage() -> st.SearchStrategy[float]:
    """A value behind a mask: NaN, ±inf, a huge or an ordinary number."""
    return st.sampled_from(GARBAGE)


def shown(x: Tensor) -> str:
    """A tensor's values as Python literals a snippet can paste (nan and inf as floats)."""
    out = []
    for v in x.reshape(-1).tolist():
        if isinstance(v, float) and not math.isfinite(v):
            out.append(f"float('{v}')")
        else:
            out.append(repr(v))
    return "[" + ", ".join(out) + "]"


def tensor_literal(x: Tensor) -> str:
    """``torch.tensor([...])`` (reshaped to ``x``'s shape, in its dtype) that rebuilds ``x``."""
    dtype = str(x.dtype).removeprefix("torch.")
    flat = f"torch.tensor({shown(x)}, dtype=torch.{dtype})"
    return flat if x.dim() == 1 else f"{flat}.reshape({', '.join(map(str, x.shape))})"
