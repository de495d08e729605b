"""Exact inputs and the few exact helpers every reference module shares."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from numbers import Rational

Number = int | float | Fraction


def to_fractions(rewards: Sequence[Number], name: str = "rewards") -> list[Fraction]:
    """Convert one group to exact rationals; floats are converted exactly (no rounding).

    Raises ``TypeError`` for non-numbers, ``ValueError`` for an empty group, a nested sequence or a
    non-finite value, naming the argument and the position.
    """
    if isinstance(rewards, str | bytes) or not isinstance(rewards, Sequence):
        raise TypeError(f"{name} must be a sequence of numbers (one group); got {type(rewards)}")
    if len(rewards) == 0:
        raise ValueError(f"{name} is an empty group; a group needs at least 1 sample")
    out = []
    for i, value in enumerate(rewards):
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            raise ValueError(f"{name} must be one flat group of numbers; {name}[{i}] is a sequence")
        if isinstance(value, bool) or not isinstance(value, int | float | Rational):
            raise TypeError(f"{name}[{i}] must be an int, float or Fraction; got {type(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} has a non-finite value in group 0 ({value} at sample {i})")
        out.append(Fraction(value))
    return out


def to_lengths(
    lengths: Sequence[Sequence[Number]], groups: Sequence[Sequence[object]], shape: str
) -> list[list[Fraction]]:
    """``lengths [B][G]`` as Fractions, each ≥ 1 and shaped like ``groups``; ``shape`` names the
    shape expected, for the error."""
    ells = [to_fractions(g, "lengths") for g in lengths]
    if [len(g) for g in ells] != [len(g) for g in groups]:
        raise ValueError(f"lengths must have the shape {shape}")
    for b, g in enumerate(ells):
        for i, length in enumerate(g):
            if length < 1:
                raise ValueError(f"lengths must be >= 1; group {b} has {length} at sample {i}")
    return ells


def check_k(k: int, n: int, name: str, *, k_max: int) -> None:
    """Raise ``ValueError`` unless ``k`` is an int with 1 <= k <= k_max (k_max: N or N−1)."""
    bound = "N" if k_max == n else "N-1"
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= k_max:
        raise ValueError(f"{name} needs 1 <= K <= {bound}; got K={k!r}, N={n}")


def comb(n: int, k: int) -> int:
    """C(n, k), and 0 whenever k < 0, n < 0 or k > n (spec/maxk.md, Conventions)."""
    if n < 0 or k < 0 or k > n:
        return 0
    return math.comb(n, k)


def mean(values: Sequence[Fraction]) -> Fraction:
    return sum(values, Fraction(0)) / len(values)


def sqrt(q: Fraction) -> Fraction:
    """Square root: exact when q is the square of a rational, else correct to about 60 digits.

    This is the one inexact step in the references of std-normalised estimators.
    """
    if q < 0:
        raise ValueError(f"sqrt of a negative number {q}")
    num, den = math.isqrt(q.numerator), math.isqrt(q.denominator)
    if num * num == q.numerator and den * den == q.denominator:
        return Fraction(num, den)
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(q.numerator).sqrt() / Decimal(q.denominator).sqrt())


def exp(x: Fraction) -> Fraction:
    """e^x correct to about 50 significant digits (the kernels of covariance, Hista and KAE)."""
    with localcontext() as ctx:
        ctx.prec = 50
        return Fraction((Decimal(x.numerator) / Decimal(x.denominator)).exp())


def std(values: Sequence[Fraction], ddof: int) -> Fraction:
    """sqrt(Σ(x − x̄)² / (n − ddof)), the two-pass definition."""
    centre = mean(values)
    return sqrt(sum(((x - centre) ** 2 for x in values), Fraction(0)) / (len(values) - ddof))


def public(namespace: dict[str, object]) -> list[str]:
    """A reference module's ``__all__``, from what it defines: every function and class of its
    own whose name does not start with "_" (its estimators and the exact building blocks it
    shares). Written ``__all__ = public(globals())`` as the module's last line."""
    module = namespace["__name__"]
    return sorted(
        name
        for name, value in namespace.items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and getattr(value, "__module__", None) == module
    )
