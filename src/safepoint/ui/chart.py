"""Charts as SVG drawn on the server: a run's timeline (one polyline per measure, downsampled) and
the cost page's bars (one per bucket of runs).

A run of 10,000 steps gives 10,000 points; the chart keeps at most ``WIDTH``
of them (the last of each bucket of steps, so the line ends on the head),
scaled into a fixed box. The templates draw the polylines and rectangles; no
script. A chart with nothing to draw says so in its caption (``caption``)
rather than drawing a flat line against a made-up peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from safepoint.readable import number

WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    points: str  # "x,y x,y ..." for <polyline points=...>
    last: float
    peak: float

    @property
    def empty(self) -> bool:
        """Nothing to draw: no steps, or every value zero."""
        return not self.points or self.peak == 0

    @property
    def caption(self) -> str:
        if self.empty:
            return f"{self.name}: none recorded"
        return f"{self.name}: {number(self.last)} (peak {number(self.peak)})"


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
    peak = max(values[i] for i in indexes)
    if peak <= 0:  # nothing counted: no line against a made-up scale, the caption says so
        return Line(name, "", float(values[indexes[-1]]), 0.0)
    points = " ".join(
        f"{(steps[i] - first) * WIDTH / span:.1f},{HEIGHT - values[i] * HEIGHT / peak:.1f}" for i in indexes
    )
    return Line(name, points, float(values[indexes[-1]]), float(peak))


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str  # "<bucket>: <value>", the bar's tooltip (SVG <title>, escaped by the template)


@dataclass(frozen=True, slots=True)
class Bars:
    name: str
    bars: list[Bar]
    peak: float
    first: str  # the first and last bucket's names, under the chart
    last: str

    @property
    def empty(self) -> bool:
        return not self.bars or self.peak <= 0

    @property
    def caption(self) -> str:
        if self.empty:
            return f"{self.name}: none recorded"
        return f"{self.name} (peak {number(self.peak)})"


def bars(name: str, keys: Sequence[str], values: Sequence[float]) -> Bars:
    """One bar per bucket, oldest on the left, scaled to the highest; the last ``WIDTH`` buckets at most."""
    keys, values = keys[-WIDTH:], values[-WIDTH:]
    peak = max(values, default=0.0)
    if not keys or peak <= 0:
        return Bars(name, [], 0.0, keys[0] if keys else "", keys[-1] if keys else "")
    slot = WIDTH / len(keys)
    gap = min(2.0, slot / 5)
    drawn = [
        Bar(
            i * slot + gap / 2,
            HEIGHT - max(v, 0) * HEIGHT / peak,
            slot - gap,
            max(v, 0) * HEIGHT / peak,
            f"{k}: {number(v)}",
        )
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    return Bars(name, drawn, float(peak), keys[0], keys[-1])
