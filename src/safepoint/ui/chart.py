"""A run's timeline as an SVG chart, drawn on the server: one polyline per measure, downsampled.

A run of 10,000 steps gives 10,000 points; the chart keeps at most ``WIDTH``
of them (the last of each bucket of steps, so the line ends on the head),
scaled into a fixed box. The template draws the polylines; no script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    points: str  # "x,y x,y ..." for <polyline points=...>
    last: float
    peak: float


def downsampled(steps: Sequence[int], width: int = WIDTH) -> list[int]:
    """Indexes into ``steps`` to draw: every one, or the last of each of ``width`` buckets."""
    if len(steps) <= width:
        return list(range(len(steps)))
    picked = [min(len(steps) - 1, ((i + 1) * len(steps)) // width - 1) for i in range(width)]
    return sorted(set(picked))


def line(name: str, steps: Sequence[int], values: Sequence[float]) -> Line:
    """``values`` (one per step) as a polyline across the chart's box."""
    indexes = downsampled(steps)
    if not indexes:
        return Line(name, "", 0.0, 0.0)
    first, last = steps[indexes[0]], steps[indexes[-1]]
    span = max(1, last - first)
    peak = max(values[i] for i in indexes) or 1.0
    points = " ".join(
        f"{(steps[i] - first) * WIDTH / span:.1f},{HEIGHT - values[i] * HEIGHT / peak:.1f}" for i in indexes
    )
    return Line(name, points, float(values[indexes[-1]]), float(peak))
