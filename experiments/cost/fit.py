"""Fit the growth of measured costs and compare it with each estimator's stated order.

Along one axis (G, K, B or T, the other sizes fixed) the fitted order is the Theil–Sen slope of
log time against log size, the median of the slopes between every two sizes, over the top
``SPAN``-fold of the sizes (at least one decade): a point disturbed by other load on the machine
moves a median of pairwise slopes little, and at the top of the range the work, not the fixed
cost of a call, dominates. The stated order gets the same slope, evaluated at the same sizes
(``spec.cost``), so ``G log G`` counts as about 1.2 over G = 64..1024, and a size the order does
not name as 0. A measured slope above the stated one by more than ``MARGIN`` exceeds it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from advest.spec import cost as orders

SPAN = 16
"""The fit reads the sizes within a factor 16 of an axis's largest (1.2 decades)."""
MARGIN = 0.4
"""How far a measured slope may lie above the stated one. The time per element grows by a constant
factor as the working set leaves a cache level, and a loaded machine disturbs single points: on
the committed CPU run no estimator lies more than about 0.2 above its stated slope. One power of
the size more lies about 0.7 above (the slow tier's planted O(G²) against a stated G log G)."""
MODELS: dict[str, Callable[[float], float]] = {
    "1": lambda x: 1.0,
    "X": lambda x: x,
    "X log X": lambda x: x * math.log2(max(x, 2.0)),
    "X²": lambda x: x * x,
    "X² log X": lambda x: x * x * math.log2(max(x, 2.0)),
    "X³": lambda x: x**3,
}
"""The candidate growths for ``best_model`` (X: the axis's size; log X as in ``spec.cost``)."""


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median over every two points of the slope of log y against log x."""
    pairs = [(i, j) for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[i] != xs[j]]
    if not pairs:
        raise ValueError("a slope needs two different sizes")
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-12)) for y in ys]
    return statistics.median((ly[j] - ly[i]) / (lx[j] - lx[i]) for i, j in pairs)


def fit_range(rows: list[dict[str, Any]], axis: str) -> list[dict[str, Any]]:
    """The rows within ``SPAN`` of the axis's largest size."""
    top = max(r["sizes"][axis] for r in rows)
    return [r for r in rows if r["sizes"][axis] * SPAN >= top]


def best_model(xs: Sequence[float], ys: Sequence[float], axis: str) -> str:
    """The candidate of ``MODELS`` closest to the points up to a constant factor (least squares
    of log y − log model), written in the axis's symbol."""

    def spread(model: Callable[[float], float]) -> float:
        r = [math.log(max(y, 1e-12)) - math.log(model(x)) for x, y in zip(xs, ys, strict=True)]
        mean = sum(r) / len(r)
        return sum((v - mean) ** 2 for v in r)

    name = min(MODELS, key=lambda m: spread(MODELS[m]))
    return name.replace("X", axis)


@dataclass(frozen=True)
class Fit:
    """One estimator along one axis: the fitted and stated slopes of time and of peak memory."""

    name: str
    axis: str
    time: float
    memory: float
    stated: float
    model: str
    decades: float

    @property
    def assessed(self) -> bool:
        """Whether the fitted sizes span a decade (the "tiny" scale only runs the code)."""
        return self.decades >= 1.0

    def exceeds(self) -> list[str]:
        """What grows faster than stated by more than ``MARGIN``: "time", "memory", both or
        neither. Memory is held to the time's order: a call cannot hold more than it touches."""
        if not self.assessed:
            return []
        return [
            m for m, v in (("time", self.time), ("memory", self.memory)) if v > self.stated + MARGIN
        ]


def fit(name: str, axis: str, rows: list[dict[str, Any]], cost: str) -> Fit:
    """Fit ``rows`` (``measure.measure_axis``) against the stated order ``cost``."""
    order, _ = orders.parse(cost)
    top = fit_range(rows, axis)
    xs = [float(r["sizes"][axis]) for r in top]
    times = [r["seconds"] for r in top]
    memory = [float(max(r["peak_bytes"], 1)) for r in top]
    stated = [order(r["sizes"]) for r in top]
    return Fit(
        name,
        axis,
        theil_sen(xs, times),
        theil_sen(xs, memory),
        theil_sen(xs, stated),
        best_model(xs, times, axis),
        math.log10(max(xs) / min(xs)),
    )


def fits(results: dict[str, dict[str, list[dict[str, Any]]]], costs: dict[str, str]) -> list[Fit]:
    """Every estimator and axis of ``results`` (one device's), against ``costs`` (name ->
    stated order, from the registry)."""
    return [
        fit(name, axis, rows, costs[name])
        for name, by_axis in results.items()
        for axis, rows in by_axis.items()
    ]


def exceeding(found: list[Fit]) -> list[str]:
    """One line per estimator, axis and measure that grows faster than stated."""
    return [
        f"{f.name}: {what} along {f.axis} grows as {f.axis}^{getattr(f, what):.2f}, stated "
        f"{f.axis}^{f.stated:.2f} (margin {MARGIN})"
        for f in found
        for what in f.exceeds()
    ]
