"""bench/_backlog.py's verdict says what bench/README.md says "bounded" means."""

from __future__ import annotations

from typing import Any

import pytest
from bench._backlog import Sample, backlog_report


def run(backlogs: list[int], *, offered_rate: float = 100.0) -> dict[str, Any]:
    """A 40-s run sampled every second from t=0 to t=40, `backlogs` the 41 counts, events
    stored at `offered_rate` from the start."""
    assert len(backlogs) == 41
    samples = [
        Sample(at=float(t), backlog=b, stored=int(offered_rate * t)) for t, b in enumerate(backlogs)
    ]
    return backlog_report(samples, began=0.0, finished=40.0, offered_rate=offered_rate)


def test_a_backlog_that_levels_off_before_the_last_third_is_bounded() -> None:
    report = run([min(t * 100, 1500) for t in range(41)])  # flat at 1500 from t=15
    assert report["bounded"] is True
    assert report["backlog"] == {"25%": 1000, "50%": 1500, "75%": 1500, "100%": 1500}
    assert report["backlog_max"] == 1500 and report["backlog_two_thirds"] == 1500


def test_a_backlog_growing_in_the_last_third_by_more_than_two_seconds_of_load_is_not() -> None:
    report = run([t * 50 for t in range(41)])  # half of the offered 100/s left undone
    assert report["bounded"] is False
    assert report["bounded_limit"] == 1350  # the backlog at t=27, nearest two thirds of 40 s
    assert report["last_third_growth_per_second"] == pytest.approx(650 / (40 / 3))
    assert report["accepted_rate"] == 100 and report["processed_rate"] == 50


def test_growth_within_two_seconds_of_the_offered_load_counts_as_keeping_up() -> None:
    jitter = [0] * 28 + [10 * k for k in range(1, 13)] + [150]  # 150 <= 2 s x 100/s
    assert run(jitter)["bounded"] is True
    assert run([0] * 40 + [201])["bounded"] is False
