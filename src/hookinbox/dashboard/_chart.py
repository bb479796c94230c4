"""The duplicate ratio's time series as an inline SVG polyline: no script, no library."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hookinbox._storage import DuplicateRatio

WIDTH = 480
HEIGHT = 120


@dataclass(frozen=True, slots=True)
class Chart:
    points: str
    """The polyline's `points` attribute, in a WIDTH x HEIGHT box."""
    peak: float
    """The ratio at the top of the box (at least 1%, so a flat zero is not drawn as full)."""
    first: datetime | None
    deliveries: int


def duplicate_chart(series: list[tuple[datetime, DuplicateRatio]]) -> Chart:
    ratios = [ratio.ratio for _, ratio in series]
    peak = max([0.01, *ratios])
    step = WIDTH / max(len(series) - 1, 1)
    points = " ".join(
        f"{index * step:.1f},{HEIGHT - value / peak * HEIGHT:.1f}"
        for index, value in enumerate(ratios)
    )
    total = sum(ratio.deliveries for _, ratio in series)
    return Chart(points, peak, series[0][0] if series else None, total)
