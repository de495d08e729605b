"""Property checks, written once and run against both implementations of a catalogue row.

Each check raises ``AssertionError`` with the evidence when the property fails. ``impl`` is
"reference" (exact: the property must hold with equality) or a torch dtype (fast: within the
tolerance of ``spec.tolerances``). A test helper: only the tests use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import torch

from advest.oracle.reports.catalogue import Row
from advest.oracle.reports.catalogue import tolerance_entry as entry
from advest.spec.tolerances import ScaleRule, output_floor

Batch = list[list[Fraction]]
Impl = str | torch.dtype


def as_tensor(batch: Sequence[Sequence[Fraction]], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([[float(x) for x in group] for group in batch], dtype=dtype)


def rounded(batch: Sequence[Sequence[Fraction]], dtype: torch.dtype) -> Batch:
    """The batch as the fast path sees it: each value rounded to ``dtype``, then exact again."""
    return [[Fraction(float(v)) for v in row] for row in as_tensor(batch, dtype).double().tolist()]


def representable(batch: Sequence[Sequence[Fraction]], impl: Impl) -> bool:
    """The batch survives conversion to ``impl``'s dtype exactly (always true for the reference)."""
    return impl == "reference" or (isinstance(impl, torch.dtype) and rounded(batch, impl) == batch)


def evaluate(
    row: Row, impl: Impl, batch: Batch, k: int, lengths: list[list[int]] | None = None
) -> Batch:
    """Run one implementation on ``batch`` (``[B][G]``); the output as exact rationals."""
    if impl == "reference":
        return row.call_reference(batch, k, lengths)
    assert isinstance(impl, torch.dtype)
    length_t = None if lengths is None else torch.tensor(lengths)
    out = row.call_fast(as_tensor(batch, impl), k, length_t)
    assert out.dtype == impl, f"{row.id}: output dtype {out.dtype}, input {impl}"
    assert out.shape == (len(batch), len(batch[0])), f"{row.id}: output shape {tuple(out.shape)}"
    values = out.double()
    assert bool(torch.isfinite(values).all()), f"{row.id}: non-finite output {out}"
    return [[Fraction(v) for v in group] for group in values.tolist()]


def group_scales(
    rule: ScaleRule, batch: Sequence[Sequence[Fraction]], out: Sequence[Sequence[Fraction]]
) -> list[Fraction]:
    """The scale of each group under ``rule`` (spec/tolerances.py): never max|r|.

    "group": max(spread_b, max_i |A_bi|); "batch": max(spread of the batch, max |A|), the same
    for every group; "output": max_i |A_bi|.
    """

    def spread(values: Sequence[Fraction]) -> Fraction:
        return max(values) - min(values) if values else Fraction(0)

    def size(values: Sequence[Fraction]) -> Fraction:
        return max((abs(v) for v in values), default=Fraction(0))

    if rule == "batch":
        flat = [v for group in batch for v in group]
        whole = max(spread(flat), size([v for group in out for v in group]))
        return [whole] * len(batch)
    if rule == "output":
        return [size(a) for a in out]
    return [max(spread(r), size(a)) for r, a in zip(batch, out, strict=True)]


def bound(row: Row, impl: Impl, batch: Batch, exact: Batch) -> list[Fraction]:
    """The allowed absolute error per group: rel * scale for a fast dtype (spec/tolerances.py);
    for the reference 0, or 1e-50 * scale where its 60-digit square root is the one inexact
    step."""
    if impl == "reference":
        if row.rational:
            return [Fraction(0)] * len(batch)
        scales = group_scales(entry(row.name, torch.float64).scale, batch, exact)
        return [Fraction(1, 10**50) * s for s in scales]
    assert isinstance(impl, torch.dtype)
    tol = entry(row.name, impl)
    floor = Fraction(output_floor(impl))
    return [Fraction(tol.rel) * s + floor for s in group_scales(tol.scale, batch, exact)]


def _wider(a: list[Fraction], b: list[Fraction], factor: Fraction = Fraction(1)) -> list[Fraction]:
    return [factor * max(x, y) for x, y in zip(a, b, strict=True)]


def assert_close(
    row: Row, got: Batch, want: Batch, allowed: Fraction | Sequence[Fraction], what: str
) -> None:
    """|got − want| <= allowed everywhere; ``allowed`` is one bound or one per group."""
    per_group = [allowed] * len(want) if isinstance(allowed, Fraction) else list(allowed)
    for b, (g_row, w_row) in enumerate(zip(got, want, strict=True)):
        for i, (g, w) in enumerate(zip(g_row, w_row, strict=True)):
            if abs(g - w) > per_group[b]:
                raise AssertionError(
                    f"{row.id} {what}: group {b} sample {i}: got {float(g)!r}, want {float(w)!r} "
                    f"(|error| {float(abs(g - w)):.3g} > {float(per_group[b]):.3g})"
                )


def assert_matches_reference(
    row: Row, dtype: torch.dtype, batch: Batch, k: int, lengths: list[list[int]] | None = None
) -> None:
    """fast(dtype) == exact reference on the dtype-rounded inputs, within tolerance."""
    exact_in = rounded(batch, dtype)
    want = evaluate(row, "reference", exact_in, k, lengths)
    got = evaluate(row, dtype, exact_in, k, lengths)
    assert_close(row, got, want, bound(row, dtype, exact_in, want), f"fast {dtype} vs reference")


def _pair(
    row: Row, impl: Impl, batch: Batch, other: Batch, k: int, lengths: list[list[int]] | None
) -> tuple[Batch, Batch, list[Fraction]]:
    """Outputs on two related inputs, with twice the error allowed for the larger of the two."""
    out, out_other = evaluate(row, impl, batch, k, lengths), evaluate(row, impl, other, k, lengths)
    allowed = _wider(bound(row, impl, batch, out), bound(row, impl, other, out_other), Fraction(2))
    return out, out_other, allowed


def assert_shift(
    row: Row, impl: Impl, batch: Batch, k: int, c: Fraction, lengths: list[list[int]] | None = None
) -> None:
    """I14: r -> r + c moves every output by c * shift(N, K)."""
    assert row.shift is not None
    n = len(batch[0])
    moved = [[x + c for x in group] for group in batch]
    out, out_moved, allowed = _pair(row, impl, batch, moved, k, lengths)
    want = [[x + c * row.shift(n, k) for x in group] for group in out]
    assert_close(row, out_moved, want, allowed, f"shift by {c}")


def assert_scaling(
    row: Row, impl: Impl, batch: Batch, k: int, a: Fraction, lengths: list[list[int]] | None = None
) -> None:
    """P4: r -> a r (a > 0) multiplies every output by a**scale_power."""
    assert row.scale_power is not None and a > 0
    scaled = [[a * x for x in group] for group in batch]
    out, out_scaled, allowed = _pair(row, impl, batch, scaled, k, lengths)
    want = [[a**row.scale_power * x for x in group] for group in out]
    assert_close(row, out_scaled, want, [x * max(Fraction(1), a) for x in allowed], f"scaling {a}")


def assert_permutation_equivariant(
    row: Row, impl: Impl, batch: Batch, k: int, perm: list[int], lengths: list[list[int]] | None
) -> None:
    """P1: permuting the samples of every group permutes the outputs the same way."""
    shuffled = [[group[j] for j in perm] for group in batch]
    shuffled_len = None if lengths is None else [[group[j] for j in perm] for group in lengths]
    out = evaluate(row, impl, batch, k, lengths)
    out_shuffled = evaluate(row, impl, shuffled, k, shuffled_len)
    want = [[group[j] for j in perm] for group in out]
    allowed = _wider(
        bound(row, impl, batch, out), bound(row, impl, shuffled, out_shuffled), Fraction(2)
    )
    assert_close(row, out_shuffled, want, allowed, "permutation")


def assert_centred(row: Row, impl: Impl, batch: Batch, k: int) -> None:
    """Σ_i A_i = 0 in every group."""
    out = evaluate(row, impl, batch, k)
    allowed = [x * len(batch[0]) for x in bound(row, impl, batch, out)]
    for b, group in enumerate(out):
        if abs(sum(group, Fraction(0))) > allowed[b]:
            raise AssertionError(f"{row.id}: group {b} sums to {float(sum(group))!r}, not 0")


def assert_ties_and_monotone(
    row: Row, impl: Impl, batch: Batch, k: int, lengths: list[list[int]] | None = None
) -> None:
    """P3: tied rewards get equal outputs; P2 (if claimed): outputs follow the reward order."""
    out = evaluate(row, impl, batch, k, lengths)
    allowed = [2 * x for x in bound(row, impl, batch, out)]
    for b, (r, a) in enumerate(zip(batch, out, strict=True)):
        for i in range(len(r)):
            for j in range(len(r)):
                if lengths is not None and lengths[b][i] != lengths[b][j]:
                    continue
                if r[i] == r[j] and abs(a[i] - a[j]) > allowed[b]:
                    raise AssertionError(f"{row.id}: tied samples {i}, {j} of group {b}: {a}")
                if row.monotone and r[i] < r[j] and a[i] > a[j] + allowed[b]:
                    raise AssertionError(f"{row.id}: group {b}: r[{i}] < r[{j}] but A falls: {a}")


def is_flat(group: Sequence[Fraction], k: int) -> bool:
    """spec/maxk.md §3.1: Δ ≡ 0 iff fewer than K samples lie strictly below the maximum."""
    top = max(group)
    return sum(1 for x in group if x < top) < k


def assert_exact_zero_on_flat(row: Row, impl: Impl, batch: Batch, k: int) -> None:
    """Degenerate groups give exact zeros (fast included: no rounding noise, no NaN)."""
    lengths = [[1] * len(group) for group in batch] if row.needs_lengths else None
    out = evaluate(row, impl, batch, k, lengths)
    for b, (group, a) in enumerate(zip(batch, out, strict=True)):
        if is_flat(group, k if row.k_domain is not None else 1) and any(x != 0 for x in a):
            raise AssertionError(f"{row.id}: flat group {b} {group} gave {a}, not exact zeros")
