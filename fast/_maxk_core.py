"""The machinery of ``fast.maxk`` (spec/maxk.md §Algorithm, spec/maxk_paths.md §Counting
path): the two paths (one sort per group, by chunks of groups on CPU, or counts of few levels),
the group shift, the cached weight coefficients, and the evaluation of one linear form of
``spec.maxk_weights.FORMS``.
``fast/maxk.py`` holds the registered estimators, each a few lines over these.

Notation: ``rewards: [B, G]`` (B prompts, G samples each), comparator size K.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from advest.spec.maxk_weights import FORMS, form_rows

from . import _levels, _scratch
from ._checks import check_k, check_rewards
from ._weights import WEIGHT_NAMES, weights
from .registry import _REGISTRY, Entry


def _entry(name: str) -> Entry:
    # at call time the estimator is registered (its module's decorators ran on import)
    return _REGISTRY[name]


MAX_LEVELS = 8
"""``auto`` takes the counting path when every group of the call has at most
``min(MAX_LEVELS, G // 8)`` distinct rewards (spec/maxk_paths.md §Counting path). Each level costs
about four passes over ``[B, G]`` and the path has a fixed cost in small ops; one sort costs
about as much as 15–25 passes at G = 64 on CPU, but only a few at G = 8, where sorting wins."""


def max_levels(G: int) -> int:
    """The most distinct rewards per group for which ``auto`` counts instead of sorting."""
    return min(MAX_LEVELS, G // 8)


def path_for(rewards: Tensor) -> Literal["sorted", "counts"]:
    """The path the max@K estimators take on ``rewards: [B, G]``: counts when every group has at
    most ``max_levels(G)`` distinct rewards, else the sort."""
    return "sorted" if _find_levels(rewards) is None else "counts"


class _Groups(NamedTuple):
    """The groups as S ascending slots: S = G sorted positions, or L distinct levels."""

    x: Tensor  # [R, S] float64: slot value minus the group maximum (all <= 0)
    shift: Tensor  # [R, 1] float64: the group maximum
    k: int
    n: int  # G
    perm: Tensor | None  # sorted path: [R, G] int64, sorted position -> original index
    levels: _levels.Levels | None  # counting path
    # sorted path: [R, G] in the output dtype, the sorted rewards, free once x is computed; the
    # output is staged here before it is scattered back (no buffer of its own).
    staging: Tensor | None = None


class Out(NamedTuple):
    """What an estimator makes of its form: ``(values + add)·mul`` per slot. ``values: [R, S]``
    float64 is the body's own result (fresh, or a scratch buffer of the chunk), written over in
    place; ``add``, ``mul``: per group (``[R, 1]`` or a number)."""

    values: Tensor
    add: Tensor | float | None = None
    mul: Tensor | float | None = None


CHUNK_ELEMENTS = 2**18
"""On CPU the sorted path runs over chunks of at least this many rewards (whole groups; at least
2^16 per torch thread, so that each element-wise operation still gives every thread two of
torch's grains; at most ``_scratch.MAX_ELEMENTS``). Each chunk's intermediates are written into
this thread's scratch buffers (``fast._scratch``), so that a call allocates nothing at the
batch's size but its output, whatever the chunk size; the size only trades held memory (about
50 bytes per reward of a chunk: 12.5 MiB at 2^18) against per-chunk overhead, about 20 operator
calls, each a few µs and, with several threads, a parallel region that waits for every thread.
At [4096, 64] float32 on one thread, chunks of 2^12 rewards took 1.5–2.5× a ``torch.sort`` of the
tensor and 2^16 to 2^20 all about 0.85–1.0×; on two threads of a loaded 2-core machine, two
chunks of 2^17 took 1.1–1.75× where one chunk took 1.03–1.5×. On other devices the whole batch
is one chunk (their caching allocators keep buffers)."""


def chunk_rows(B: int, G: int, device: torch.device) -> int:
    """Rows per chunk of the sorted path (>= 1): the whole batch where no scratch buffer is
    kept (other devices, a call traced by torch.compile, whose graph would unroll the chunks)."""
    if device.type != "cpu" or torch.compiler.is_compiling():
        return max(B, 1)
    elements = max(CHUNK_ELEMENTS, 2**16 * torch.get_num_threads())
    return max(1, min(elements, _scratch.MAX_ELEMENTS) // G)


def estimate(
    rewards: Tensor, k: object, name: str, body: Callable[[_Groups], Out], *, min_n: int = 1
) -> Tensor:
    """Check ``rewards: [B, G]`` and ``k`` for estimator ``name``, take the counting or the
    sorted path, and return ``[B, G]`` in the rewards' dtype and original order. ``body`` maps
    the groups of one chunk of rows to their values: every per-group quantity it uses (shift,
    flat groups, group sums) is computed from its own rows, so chunks are independent."""
    nonnegative = _check(rewards)
    B, G = rewards.shape
    kk = check_k(k, G, name, k_max=_entry(name).k_max(G))  # the domain its registry entry declares
    if rewards.shape[1] < min_n:
        raise ValueError(f"{name} needs N >= {min_n}; got K={kk}, N={G}")
    levels = _find_levels(rewards)
    if levels is not None:
        x = levels.values.to(torch.float64)  # [B, L]
        shift = x[:, -1:]
        counted = _Groups(x - shift, shift, kk, G, None, levels)
        return _expand(body(counted), counted, rewards)
    out = torch.empty(rewards.shape, dtype=rewards.dtype, device=rewards.device)
    step = chunk_rows(B, G, rewards.device)
    for start in range(0, B, step):
        g = _sorted_groups(rewards[start : start + step], kk, G, nonnegative)
        _write_sorted(body(g), g, out[start : start + step])
    return out


def _check(rewards: Tensor) -> bool:
    """``check_rewards``, and whether every reward is >= 0 (what ``_sort`` needs to know)."""
    check_rewards(rewards)
    return not rewards.numel() or bool(rewards.amin() >= 0)


def _buffer(name: str, like: Tensor, dtype: torch.dtype) -> Tensor:
    """A scratch buffer of ``like``'s [R, G] shape (``fast._scratch``: overwritten per chunk)."""
    return _scratch.buffer(name, (like.shape[0], like.shape[1]), dtype, like.device)


def _sorted_groups(rewards: Tensor, k: int, G: int, nonnegative: bool) -> _Groups:
    """``rewards: [R, G]`` sorted, shifted by each group's maximum, in float64."""
    rs, perm = _sort(rewards, nonnegative)
    shift = rs[:, -1:].to(torch.float64)  # [R, 1]
    # widened (exactly) into the buffer, then shifted in place: a float64 result of a float32
    # operand would cast the operand into a temporary on CPU first
    x = _buffer("x", rs, torch.float64).copy_(rs).sub_(shift)
    return _Groups(x, shift, k, G, perm, None, rs)


def _find_levels(rewards: Tensor) -> _levels.Levels | None:
    """The levels of every group when the counting path is taken, else None (sort). The tests
    force either path by replacing this one function (tests/maxk_paths.py)."""
    limit = max_levels(rewards.shape[1])
    if limit < 2:
        return None
    # auto: general rewards fail on the first group at the cost of one tiny call, before any pass
    # over the whole batch (a first group with few levels and a later one with many only wastes
    # the passes; the result is the same either way).
    if rewards.shape[0] > 1 and torch.unique(rewards[0]).numel() > limit:
        return None
    return _levels.find(rewards, limit)


_KEY_DTYPES = {16: torch.int16, 32: torch.int32, 64: torch.int64}


def _sort(rewards: Tensor, nonnegative: bool) -> tuple[Tensor, Tensor]:
    """Each group of ``rewards: [R, G]`` sorted ascending, ``([R, G] values, [R, G] int64
    perm)``, both scratch buffers.

    Sorts integer keys with the float order: the CPU sort compares integers about 1.4× faster
    than floats, whose comparator must place NaN. Non-negative floats already order as their bit
    patterns (−0.0 is the smallest key and ties +0.0); otherwise the magnitude bits of negatives
    are flipped, an involution, so the sorted keys map straight back to the values (no gather).
    The order within a tie is immaterial (tied samples have the same exact value at any of their
    positions), so the sort need not be stable.
    """
    bits = torch.finfo(rewards.dtype).bits
    key = rewards.view(_KEY_DTYPES[bits])
    out = (_buffer("sorted", key, key.dtype), _buffer("perm", key, torch.int64))
    if nonnegative:
        torch.sort(key, dim=-1, out=out)
        return out[0].view(rewards.dtype), out[1]
    flipped = _flip(key, bits, into=_buffer("flipped", key, key.dtype))
    torch.sort(flipped, dim=-1, out=out)
    return _flip(out[0], bits, into=flipped).view(rewards.dtype), out[1]  # the keys are spent


def _flip(bits: Tensor, width: int, *, into: Tensor) -> Tensor:
    """The order-preserving map between IEEE bit patterns and signed integers (its own
    inverse), written into ``into`` (which must not overlap ``bits``)."""
    torch.bitwise_right_shift(bits, width - 1, out=into)
    return into.bitwise_and_((1 << (width - 1)) - 1).bitwise_xor_(bits)


def _write_sorted(o: Out, g: _Groups, dest: Tensor) -> None:
    """``(values + add)·mul`` of the sorted slots into ``dest: [R, G]`` (output rows), in the
    original order: computed in float64 in place, then cast once into the staging buffer (a
    float64 product written straight into a float32 ``out`` would pass through a temporary)."""
    assert g.perm is not None and g.staging is not None
    if o.add is not None:
        o.values.add_(o.add)
    if o.mul is not None:
        o.values.mul_(o.mul)
    dest.scatter_(-1, g.perm, g.staging.copy_(o.values))


def _expand(o: Out, g: _Groups, like: Tensor) -> Tensor:
    """The counting path's ``(values + add)·mul``, ``values: [B, L]`` per level, as ``[B, G]``
    per sample, cast like ``like`` (the last operation writes the output dtype directly)."""
    assert g.levels is not None
    values = o.values if o.add is None else o.values + o.add
    out = torch.empty(values.shape, dtype=like.dtype, device=like.device)
    if o.mul is None:
        out.copy_(values)
    else:
        torch.mul(values, o.mul, out=out)
    return _levels.expand(out, g.levels, g.n)


def _sample_sum(values: Tensor, g: _Groups) -> Tensor:
    """``[B, S]`` → ``[B, 1]``: the sum over the group's samples (a level counts its samples)."""
    if g.levels is None:
        return values.sum(dim=-1, keepdim=True)
    end = g.levels.end
    count = torch.diff(end, dim=-1, prepend=torch.zeros_like(end[:, :1]))  # [B, L]
    return (values * count).sum(dim=-1, keepdim=True)


def _sample_sum_of_squares(values: Tensor, g: _Groups) -> Tensor:
    """``_sample_sum(values * values, g)``, the squares written into a scratch buffer."""
    return _sample_sum(torch.mul(values, values, out=_buffer("spare", values, values.dtype)), g)


def _max_abs(values: Tensor) -> Tensor:
    """``[R, S]`` → ``[R, 1]``: max |values| per row, |values| written into a scratch buffer (one
    reduction: over a short row, such as G = 8, a reduction costs several element-wise passes)."""
    return torch.abs(values, out=_buffer("spare", values, values.dtype)).amax(dim=-1, keepdim=True)


class _Coefs(NamedTuple):
    """One form of ``spec.maxk_weights.FORMS`` as float64 tables over positions q = 1..G."""

    diag: Tensor  # [G]: own − below
    step: Tensor  # [G]: below − above
    above: Tensor  # [G]
    has_above: bool  # False: the Σ above·x term is identically 0 and skipped
    # The counting path's table, column j = 0..G: (diag_j (0 at j = 0), Σ_{q<=j} step_q,
    # Σ_{q<=j} above_q): one gather at the levels' block ends gives all three.
    at_end: Tensor  # [3, G + 1]


@functools.lru_cache(maxsize=512)
def _coefficients_cached(form: str, G: int, K: int, device: torch.device) -> _Coefs:
    """The form's weights by log-gamma (see fast._weights), combined once per (G, K) by the
    shared ``spec.maxk_weights.form_rows`` (the proofs combine the same table the same way)."""
    table = weights(G, K, device)._asdict()
    diag, step, above = form_rows(FORMS[form], G, K, lambda w: table[WEIGHT_NAMES[w]], float)
    at_end = torch.stack([diag, step.cumsum(0), above.cumsum(0)])  # [3, G]
    at_end = torch.cat([torch.zeros_like(at_end[:, :1]), at_end], dim=1)  # [3, G + 1]
    return _Coefs(diag, step, above, bool(FORMS[form][2]), at_end)


@torch.compiler.disable  # type: ignore[untyped-decorator]
def _coefficients(form: str, G: int, K: int, device: torch.device) -> _Coefs:
    return _coefficients_cached(form, G, K, device)


def _evaluate(g: _Groups, form: str) -> Tensor:
    """The form at every slot, ``[B, S]``:

        sorted position p:  (own − below)_p x_p + Σ_{q<=p} (below − above)_q x_q + Σ_q above_q x_q;
        level l (samples at positions s_l + 1..e_l):  the same at p = e_l, where the sums over a
        level's block are one difference of the cumulated tables times the level's value.

    Tied samples get the same value at any position of their block (the definitions are
    permutation-invariant), so the level's last position stands for all of them. The running
    sums stay within a small multiple of max|x| (x <= 0 after the shift; the weights are
    probabilities: Σ_{q<p} γ_q = α_p <= 1, β and μhi each total 1, Σ_{q<p} μlo_q <= 1 for p < G,
    and the top position, which carries the large μlo_G, has x = 0), so rounding costs a few
    ulps of G·max|x| at worst, far inside the 1e-9 contract.
    """
    c = _coefficients(form, g.n, g.k, g.x.device)
    x = g.x
    if g.levels is None:  # spec.maxk_weights.evaluate, the evaluation the proofs check
        return _evaluate_sorted(c, x)
    end = g.levels.end  # [B, L]
    table = c.at_end[:, torch.cat([torch.zeros_like(end[:, :1]), end], dim=1)]  # [3, B, L + 1]
    # A level's block sums: the cumulated tables at its end minus at the previous level's end.
    out: Tensor = table[0, :, 1:] * x + torch.cumsum(
        (table[1, :, 1:] - table[1, :, :-1]) * x, dim=-1
    )
    if c.has_above:
        out = out + ((table[2, :, 1:] - table[2, :, :-1]) * x).sum(dim=-1, keepdim=True)
    return out


def _evaluate_sorted(c: _Coefs, x: Tensor) -> Tensor:
    """``spec.maxk_weights.evaluate(c.diag, c.step, c.above, x, cumsum)`` for ``x: [R, G]``,
    the one evaluation the proofs check, computed in the same order with the same roundings
    (equal to it bit for bit but for the sign of a zero, tests/core/estimators/test_maxk_paths.py)
    into scratch buffers instead of four fresh [R, G] temporaries; a form without an ``above``
    term skips adding its zero column."""
    running = torch.mul(x, c.step, out=_buffer("running", x, torch.float64)).cumsum_(dim=-1)
    out = torch.mul(x, c.diag, out=_buffer("form", x, torch.float64)).add_(running)
    if c.has_above:
        out.add_(x @ c.above[:, None])
    return out


def _k1_shift(g: _Groups) -> Tensor | None:
    """EI and b move with a reward shift only at K = 1 (max(∅) = 0 makes EI = r there)."""
    return g.shift if g.k == 1 else None


def _keep(g: _Groups) -> Tensor:
    """``[B, 1]`` float64: 0 where fewer than K samples lie strictly below the group max (Δ ≡ 0
    there), else 1; multiplying by it writes exact zeros (a [B, G] ``torch.where`` costs ~20×
    more on CPU). Decided on the rewards: on a sorted row the K-th smallest equals the max; on
    levels, the samples below the max are those up to the last level below it."""
    if g.levels is None:
        below = g.x[:, g.k - 1 : g.k] < 0
    else:
        below_max = torch.where(g.x < 0, g.levels.end, 0).amax(dim=-1, keepdim=True)
        below = below_max >= g.k
    return below.to(torch.float64)
