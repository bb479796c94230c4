"""The plan: reproducible from a seed, and what the configuration asks for, exactly."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hookinbox import ConfigurationError
from hookinbox.simulate import SimulationConfig, build_plan
from hookinbox.simulate._events import CHECKOUT, SUBSCRIPTION_UPDATED

NOW = 1_790_000_000.0


def config(**overrides: object) -> SimulationConfig:
    settings: dict[str, object] = {
        "provider": "stripe",
        "secret": "whsec_x",
        "target": "http://127.0.0.1:9/webhooks/stripe",
        "events": 1000,
    }
    return SimulationConfig(**(settings | overrides))  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", ["stripe", "shopify", "github", "standard"])
def test_the_same_seed_gives_the_same_plan(provider: str) -> None:
    secret = "whsec_c2VjcmV0" if provider == "standard" else "secret"
    settings = config(provider=provider, secret=secret, rate=100.0, burst_rate=0.01)
    first = build_plan(settings, seed=42, now=NOW)
    assert build_plan(settings, seed=42, now=NOW) == first
    other = build_plan(settings, seed=43, now=NOW)
    assert other != first
    assert {e.event_id for e in other.events}.isdisjoint(e.event_id for e in first.events)


def test_rates_become_exact_counts() -> None:
    plan = build_plan(
        config(events=1000, burst_rate=0.01, burst_size=4, lost_response_rate=0.02),
        seed=1,
        now=NOW,
    )
    deliveries = plan.deliveries
    assert plan.valid_count == 1000
    assert sum(d.kind in ("first", "burst") for d in deliveries) == 1000  # one each
    bursts = [d for d in deliveries if d.kind == "burst"]
    assert len(bursts) == 10 and all(d.copies == 4 for d in bursts)
    assert sum(d.lose_response for d in deliveries) == 20
    duplicated = Counter(d.event for d in deliveries if d.kind == "duplicate")
    assert len(duplicated) == 3  # 0.312% of 1000, rounded: seed 000's rate
    assert set(duplicated.values()) <= {1, 2}  # "arrived 2-3 times"
    kinds = Counter(d.kind for d in deliveries)
    assert (kinds["forged"], kinds["expired"], kinds["malformed"]) == (2, 2, 2)
    assert all(not plan.is_valid(d.event) for d in deliveries if d.kind in ("forged", "expired"))


def test_deliveries_fall_due_in_order_and_at_the_rate() -> None:
    plan = build_plan(config(events=200, rate=50.0, out_of_order_rate=0), seed=3, now=NOW)
    times = [d.at for d in plan.deliveries]
    assert times == sorted(times)
    firsts = [d.at for d in plan.deliveries if d.kind in ("first", "burst")]
    assert firsts[-1] == pytest.approx(199 / 50)


def test_out_of_order_chains_send_the_update_before_the_checkout() -> None:
    plan = build_plan(config(events=400, out_of_order_rate=1.0), seed=5, now=NOW)
    at = {d.event: d.at for d in plan.deliveries if d.kind in ("first", "burst")}
    chains: dict[int, list[int]] = {}
    for index, event in enumerate(plan.events[: plan.valid_count]):
        chains.setdefault(event.chain, []).append(index)
    reordered = 0
    for members in chains.values():
        updates = [i for i in members if plan.events[i].event_type == SUBSCRIPTION_UPDATED]
        if not updates:
            continue
        checkout = members[0]
        assert plan.events[checkout].event_type == CHECKOUT
        gap = at[checkout] - at[updates[0]]
        assert 0.05 <= gap <= 0.8
        reordered += 1
    assert reordered > 20


def test_stripe_chains_have_strictly_increasing_created_and_a_last_update() -> None:
    plan = build_plan(config(events=300), seed=9, now=NOW)
    chains: dict[int, list[dict[str, object]]] = {}
    for event in plan.events[: plan.valid_count]:
        payload = json.loads(event.body)
        assert payload["id"] == event.event_id and payload["id"].startswith("evt_")
        assert abs(payload["created"] - NOW) < 300  # "about now"
        chains.setdefault(event.chain, []).append(payload)
    for payloads in chains.values():
        created = [p["created"] for p in payloads[1:]]  # the subscription's events
        assert created == sorted(set(created))
        customers = {p["data"]["object"]["customer"] for p in payloads}  # type: ignore[index]
        assert len(customers) == 1


def test_expired_deliveries_only_where_a_timestamp_is_signed() -> None:
    for provider, secret in (("shopify", "s"), ("github", "s")):
        plan = build_plan(
            config(provider=provider, secret=secret, expired_rate=0.5), seed=1, now=NOW
        )
        assert not any(d.kind == "expired" for d in plan.deliveries)
    plan = build_plan(config(expired_rate=0.01), seed=1, now=NOW)
    expired = [d for d in plan.deliveries if d.kind == "expired"]
    assert len(expired) == 10 and all(600 <= d.age <= 3600 for d in expired)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"provider": "paypal"}, "unknown provider"),
        ({"target": "ftp://x/y"}, r"http\(s\) URL"),
        ({"duplicate_rate": 1.5}, "between 0 and 1"),
        ({"burst_size": 1}, "burst_size"),
        ({"provider": "standard", "secret": "not base64!"}, "whsec_<base64>"),
        ({"retry_compression": 0.5}, "retry_compression"),
    ],
)
def test_bad_settings_are_configuration_errors(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        config(**overrides)
