"""`/metrics`, parsed with prometheus_client's own parser, after a known sequence."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hookinbox import Inbox
from hookinbox._records import Beat
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout, subscription_update
from tests.support.asgi import ASGIClient
from tests.support.server import running_server
from tests.support.signing import stripe_delivery

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    yield inbox
    inbox.close()


def scrape(client: ASGIClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def test_counters_and_gauges_after_a_known_sequence(inbox: Inbox) -> None:
    client = ASGIClient(inbox.asgi())
    before = scrape(client)  # counters are per process: compare differences
    post = client.post

    headers, body = stripe_delivery(checkout(1), orders_app.STRIPE_SECRET)
    for _ in range(3):
        post("/webhooks/stripe", headers=headers, content=body)
    headers, body = stripe_delivery(
        subscription_update(2, payment="pi_9"), orders_app.STRIPE_SECRET
    )
    post("/webhooks/stripe", headers=headers, content=body)
    post("/webhooks/stripe", headers={"stripe-signature": "t=1,v1=00"}, content=body)
    post("/webhooks/nowhere", content=b"{}")
    other = checkout(1)
    other["data"]["object"]["note"] = "a different body under the same id"  # type: ignore[index]
    headers, body = stripe_delivery(other, orders_app.STRIPE_SECRET)
    post("/webhooks/stripe", headers=headers, content=body)
    inbox.process_due()  # evt_1 processed, evt_2 deferred (its order pi_9 never comes)

    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    completed = "checkout.session.completed"
    updated = "customer.subscription.updated"
    total = "hookinbox_deliveries_total"
    assert delta(total, source="stripe", type=completed, outcome="accepted") == 1
    assert delta(total, source="stripe", type=completed, outcome="duplicate") == 3
    assert delta(total, source="stripe", type=updated, outcome="accepted") == 1
    assert delta(total, source="stripe", type="", outcome="invalid_signature") == 1
    assert delta(total, source="unknown", type="", outcome="unknown_source") == 1
    assert delta("hookinbox_key_conflicts_total", source="stripe") == 1
    assert delta("hookinbox_ack_latency_seconds_count", source="stripe") == 6
    # Summed in memory and added as bucket counts and a sum (`_metrics._Tally`): each of the
    # six fell into some bucket, all of them under 30 s, and their seconds add up.
    latency = "hookinbox_ack_latency_seconds_bucket"
    assert delta(latency, source="stripe", le="30.0") == 6
    assert delta(latency, source="stripe", le="+Inf") == 6
    assert 0 < delta("hookinbox_ack_latency_seconds_sum", source="stripe") < 6 * 30
    attempts = "hookinbox_processing_attempts_total"
    assert delta(attempts, source="stripe", type=completed, outcome="processed") == 1
    assert delta(attempts, source="stripe", type=updated, outcome="deferred") == 1
    # Gauges come from the database, not from counters: absolute values.
    assert value(after, "hookinbox_store_up") == 1
    assert value(after, "hookinbox_events", status="deferred") == 1
    assert value(after, "hookinbox_events", status="pending") == 0
    assert value(after, "hookinbox_events", status="failed") == 0
    assert value(after, "hookinbox_oldest_deferred_age_seconds") >= 0
    assert value(after, "hookinbox_not_ready_deadline_events") == 0
    # 6 stored deliveries of 2 events: evt_1 x4 (3 duplicates), evt_2 x1 => 3 / 5.
    assert value(after, "hookinbox_duplicate_ratio", window="1h") == pytest.approx(3 / 5)


def test_the_gauges_report_an_unreachable_database() -> None:
    inbox = orders_app.build("postgresql://postgres@127.0.0.1:1/none")
    samples = scrape(ASGIClient(inbox.asgi()))
    assert value(samples, "hookinbox_store_up") == 0


async def _deliver_many(base_url: str, count: int) -> list[int]:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        statuses = []
        for number in range(count):
            headers, body = stripe_delivery(checkout(number), orders_app.STRIPE_SECRET)
            response = await client.post("/webhooks/stripe", headers=headers, content=body)
            statuses.append(response.status_code)
        return statuses


@pytest.mark.slow
def test_serve_sums_every_process_into_one_metrics_page(db_url: str) -> None:
    """Two HTTP processes and a worker process: whichever answers the scrape reports all."""
    orders_app.create_tables(db_url)
    with running_server("tests.apps.orders:inbox", db_url, workers=2) as base_url:
        assert asyncio.run(_deliver_many(base_url, 40)) == [200] * 40
        deadline = time.monotonic() + 30
        processed = 0.0
        while time.monotonic() < deadline:
            samples = parse(httpx.get(f"{base_url}/metrics", timeout=10).text)
            processed = value(
                samples, "hookinbox_processing_attempts_total", source="stripe",
                type="checkout.session.completed", outcome="processed",
            )  # fmt: skip
            if processed == 40:
                break
            time.sleep(0.2)
        assert processed == 40  # counted in the worker process, read by an HTTP process
        # Each process adds its delivery counts to the shared files at least once a second
        # (and at once when it answers the scrape itself): within 2 s, every scrape agrees.
        time.sleep(2)
        for _ in range(6):  # several scrapes land on both HTTP processes: all agree
            samples = parse(httpx.get(f"{base_url}/metrics", timeout=10).text)
            accepted = value(samples, "hookinbox_deliveries_total", source="stripe",
                             type="checkout.session.completed", outcome="accepted")  # fmt: skip
            assert accepted == 40


def test_the_grafana_dashboard_in_the_docs_queries_metrics_that_exist(inbox: Inbox) -> None:
    """docs/grafana/hookinbox.json: every metric its queries name is on `/metrics`."""
    dashboard = json.loads((ROOT / "docs" / "grafana" / "hookinbox.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bhookinbox_[a-z0-9_]+\b", target["expr"])
    }
    client = ASGIClient(inbox.asgi())
    headers, body = stripe_delivery(checkout(1), orders_app.STRIPE_SECRET)
    client.post("/webhooks/stripe", headers=headers, content=body)
    inbox.process_due()
    me = Beat("grafana", "worker", "web-1", pid=1, started_at=datetime.now(UTC))
    inbox.store.liveness.beat(me, now=datetime.now(UTC), alive_for=timedelta(seconds=30))
    response = client.get("/metrics")
    declared = set(re.findall(r"^# TYPE (\S+)", response.text, re.MULTILINE))
    served = {name for name, _ in parse(response.text)} | declared

    assert len(queried) >= 10
    assert sorted(queried - served) == []
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert len(titles) == len(set(titles)) and dashboard["uid"] == "hookinbox"
