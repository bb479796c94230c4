"""Time charts as inline SVG with axes: no script, no library.

A chart is a value per time bucket, drawn as bars (counts) or a line (a ratio), with a value
axis (0, half and the top, labelled) and a time axis (UTC, labelled every few buckets), each
bar or point carrying a `<title>` with its bucket's time and value for a hover tooltip. The
geometry is computed here; the template only draws it (`_charts.html`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 560
HEIGHT = 180
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 10, 30


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time cut into buckets, and how its time axis is labelled."""

    name: str
    width: timedelta
    buckets: int
    label_every: int
    label_format: str

    def start(self, now: datetime) -> datetime:
        """The first bucket's start: whole buckets, the last one holding `now`."""
        seconds = self.width.total_seconds()
        last = datetime.fromtimestamp(now.timestamp() // seconds * seconds, now.tzinfo)
        return last - self.width * (self.buckets - 1)


WINDOWS = {
    "24h": Window("24 hours, per hour", timedelta(hours=1), 24, 6, "%H:%M"),
    "7d": Window("7 days, per 6 hours", timedelta(hours=6), 28, 4, "%a %d"),
}


@dataclass(frozen=True, slots=True)
class Mark:
    x: float
    y: float
    w: float
    h: float
    tip: str


@dataclass(frozen=True, slots=True)
class TimeChart:
    title: str
    width: int
    height: int
    left: int
    top: int
    plot_width: float
    plot_height: float
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    marks: list[Mark]
    """Bars (w > 0), or the line's points (w == 0)."""
    points: str
    """The line's `points` attribute ("" for a bar chart)."""
    peak: float
    total: float


def time_chart(
    title: str,
    start: datetime,
    window: Window,
    values: Sequence[float],
    *,
    line: bool = False,
    unit: Callable[[float], str] = lambda v: f"{v:.0f}",
    floor: float = 1.0,
) -> TimeChart:
    """`values[i]` is bucket i's value; `floor` keeps a flat zero from filling the chart."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    peak = max([floor, *values])
    if not line:  # counts: an even top, so that the middle tick is a whole number too
        peak = float(math.ceil(peak / 2) * 2)
    slot = plot_w / max(len(values), 1)
    marks: list[Mark] = []
    for index, value in enumerate(values):
        when = (start + window.width * index).strftime("%Y-%m-%d %H:%M UTC")
        height = value / peak * plot_h
        if line:
            x = LEFT + slot * (index + 0.5)
            marks.append(Mark(x, TOP + plot_h - height, 0, 0, f"{when}: {unit(value)}"))
        else:
            x = LEFT + slot * index + 1
            box = Mark(x, TOP + plot_h - height, max(slot - 2, 1), height, f"{when}: {unit(value)}")
            marks.append(box)
    points = " ".join(f"{m.x:.1f},{m.y:.1f}" for m in marks) if line else ""
    y_ticks = [
        (TOP + plot_h - fraction * plot_h, unit(peak * fraction)) for fraction in (0, 0.5, 1)
    ]
    x_ticks = [
        (LEFT + slot * index, (start + window.width * index).strftime(window.label_format))
        for index in range(0, len(values), window.label_every)
    ]
    return TimeChart(
        title, WIDTH, HEIGHT, LEFT, TOP, plot_w, plot_h, y_ticks, x_ticks, marks, points, peak,
        sum(values),
    )  # fmt: skip


def percent(value: float) -> str:
    return f"{value * 100:.1f}%"
