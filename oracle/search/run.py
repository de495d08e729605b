"""Which searches ``advest check`` runs for a sequence estimator (``searched``): the ``[B, G]``
properties on the estimator in the convention's own form, then the grouped rows' properties
where the convention has ids."""

from __future__ import annotations

import warnings

import torch

from ..conventions.harness import Estimator, Objective
from ..conventions.rows import RowCall
from ..inputs.tolerance import _dtype_name
from ..properties.findings import Finding
from . import plain, rows
from .engine import Budget, search


def searched(
    est: Estimator,
    row_call: RowCall,
    family: Objective,
    k: int,
    ns: list[int],
    dtype: torch.dtype,
    findings: list[Finding],
    coupled: bool,
    budget: Budget,
) -> list[Finding]:
    """The searched findings in ``dtype`` (each with ``searched`` set and, for a "no", its
    ``counterexample``), after the explicit ``findings`` they start from."""
    name = _dtype_name(dtype)
    own = [f for f in findings if f.dtype in (name, "")]
    out: list[Finding] = []
    with warnings.catch_warnings():  # a user's std of one sample warns: the search judges it
        warnings.simplefilter("ignore")
        binary = family == "maxrl" or _refuses_grid(est, max(ns), dtype)
        d = plain.domain(est, max(ns), dtype, binary, g_min=k if family == "maxk" else 1)
        if d is not None:
            where = f"plain/{family}/{name}"
            out += [search(p, budget, where) for p in plain.properties(est, d, own)]
        if row_call.takes_ids or row_call.ragged:
            rd = rows.domain(row_call, max(ns), dtype, own)
            where = f"rows/{family}/{name}"
            out += [search(p, budget, where) for p in rows.properties(row_call, rd, own, coupled)]
    for f in out:
        f.dtype = name
    return out


def _refuses_grid(est: Estimator, g: int, dtype: torch.dtype) -> bool:
    """Does ``est`` refuse rewards off {0, 1} (a pass/fail estimator)?"""
    probe = torch.tensor([[0.25 * (i % 4) for i in range(g)]] * 2, dtype=dtype)
    try:
        est(probe)
    except Exception:  # any refusal: searched on pass/fail rewards, as the explicit checks were
        return True
    return False
