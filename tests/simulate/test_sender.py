"""The sender against test receivers: retries on the provider's schedule, lost responses that
reach the receiver, the duration bound, and giving up where the provider gives up."""

from __future__ import annotations

from collections import defaultdict

import httpx

from hookinbox.simulate import SimulationConfig, SimulationReport, simulate
from tests.simulate.conftest import Receivers

QUIET = {
    "duplicate_rate": 0,
    "burst_rate": 0,
    "lost_response_rate": 0,
    "forged_rate": 0,
    "expired_rate": 0,
    "malformed_rate": 0,
}


def run(
    receivers: Receivers, path: str, **settings: object
) -> tuple[SimulationReport, dict[str, list[tuple[float, int]]]]:
    """Simulate, then the receiver's log of this run's deliveries: event id -> [(at, status)]."""
    before = len(httpx.get(f"{receivers.base_url}/log").json())
    options: dict[str, object] = {
        "provider": "stripe",
        "secret": "whsec_test",
        "target": f"{receivers.base_url}{path}",
        "seed": 11,
    }
    config = SimulationConfig(**(options | QUIET | settings))  # type: ignore[arg-type]
    report = simulate(config, progress=False)
    deliveries: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for entry in httpx.get(f"{receivers.base_url}/log").json()[before:]:
        deliveries[entry["id"]].append((entry["at"], entry["status"]))
    return report, deliveries


def test_failed_attempts_are_retried_on_the_providers_schedule(receivers: Receivers) -> None:
    # Stripe: 5 s, then 5 min; compressed 1000x: 5 ms, then 300 ms.
    report, deliveries = run(receivers, "/flaky/2", events=20, seed=21)
    assert report.complete
    assert report.by_kind == {
        "first": {"503": 20},
        "retry": {"200": 20, "503": 20},
    }
    assert len(deliveries) == 20
    for attempts in deliveries.values():
        (t0, s0), (t1, s1), (t2, s2) = attempts
        assert (s0, s1, s2) == (503, 503, 200)
        # Never sooner than the schedule (the sender waits that long); the upper bounds only
        # tell the compressed steps from the uncompressed ones (5 s, 5 min), with room for a
        # loaded machine (one CI run saw the 5 ms step arrive after 306 ms).
        assert 0.005 <= t1 - t0 < 2.0
        assert 0.3 <= t2 - t1 < 3.0


def test_a_lost_response_reached_the_receiver_and_is_retried(receivers: Receivers) -> None:
    report, deliveries = run(receivers, "/flaky/0", events=100, lost_response_rate=1.0, seed=22)
    assert report.by_kind == {"first": {"lost": 100}, "retry": {"200": 100}}
    # The dropped delivery was received and answered: each event arrived twice.
    assert sorted(len(a) for a in deliveries.values()) == [2] * 100


def test_the_duration_bounds_the_run(receivers: Receivers) -> None:
    # Always 503: attempts at 0, 5 ms and 305 ms; the next (1.8 s later) is past the bound.
    report, deliveries = run(receivers, "/flaky/1000000", events=10, duration=1.0, seed=23)
    assert report.elapsed < 2
    assert report.not_sent == 10 and report.unacknowledged == 10
    assert not report.complete
    assert sorted(len(a) for a in deliveries.values()) == [3] * 10


def test_the_provider_gives_up_after_its_last_retry(receivers: Receivers) -> None:
    # Standard Webhooks (Svix): the first attempt and 7 retries, then no more.
    report, deliveries = run(
        receivers,
        "/flaky/1000000",
        provider="standard",
        secret="whsec_dGVzdA==",
        events=5,
        retry_compression=1e7,
        seed=24,
    )
    assert report.deliveries == 40 and report.unacknowledged == 5
    assert sorted(len(a) for a in deliveries.values()) == [8] * 5
