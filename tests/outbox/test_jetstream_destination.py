"""The NATS JetStream destination, against real servers: the system's NATS (a stream per test)
and, where a test must stop the server or the relay, a private `nats-server -js` and relays
as processes killed with SIGKILL."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, Event, HandlerContext, Inbox, WorkerOptions
from hookinbox._model import Message
from hookinbox._storage import Store
from hookinbox._storage._schema import outbox
from hookinbox.outbox import DeliveryError, JetStreamDestination
from hookinbox.sources import Stripe
from tests.apps import jetstream_shipping
from tests.processing.conftest import checkout
from tests.support.in_process import run_until_idle
from tests.support.jetstream import Stream, made_stream, private_server, unique_subject
from tests.support.server import free_port
from tests.support.signing import stripe_delivery
from tests.support.workers import WorkerProcess, wait_for

SECRET = "whsec_jetstream_tests"


@pytest.fixture
def stream(nats_url: str) -> Iterator[Stream]:
    with made_stream(nats_url) as stream:
        yield stream


def message(key: str, payload: object = None, attempts: int = 1) -> Message:
    return Message(
        row_id=1,
        destination="orders",
        key=key,
        payload={"key": key} if payload is None else payload,
        ordering_key=None,
        source=None,
        event_id=None,
        attempts=attempts,
        created_at=datetime.now(UTC),
    )


def test_a_message_is_stored_in_the_stream_under_its_key(stream: Stream) -> None:
    destination = JetStreamDestination("orders", url=stream.url, subject=stream.subject)
    payload = {"order": "o-1", "total": 12.5, "note": "crème brûlée"}
    destination.deliver(message("order-1", payload))
    destination.close()
    [stored] = stream.messages()
    assert stored.msg_id == "order-1"
    assert stored.payload == payload


def test_a_second_publish_of_a_key_is_dropped_by_the_stream(stream: Stream) -> None:
    destination = JetStreamDestination("orders", url=stream.url, subject=stream.subject)
    destination.deliver(message("k-1"))
    destination.deliver(message("k-1", attempts=2))  # the relay's retry: a duplicate PubAck
    destination.deliver(message("k-2"))

    async def on_a_loop() -> None:  # the async relay's path, its own connection
        await destination.adeliver(message("k-1", attempts=3))
        await destination.adeliver(message("k-3"))
        await destination.aclose()

    asyncio.run(on_a_loop())
    destination.close()
    assert stream.keys() == ["k-1", "k-2", "k-3"]


def test_without_a_stream_the_error_names_the_subject_and_the_message_waits(
    nats_url: str, tmp_path: Path
) -> None:
    subject = unique_subject()  # no stream takes it
    destination = JetStreamDestination("orders", url=nats_url, subject=subject, timeout=2)
    with pytest.raises(DeliveryError, match=f"no JetStream stream takes subject '{subject}'"):
        destination.deliver(message("lost"))
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}")
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(destination)
    send_orders(inbox, 1)
    run_until_idle(inbox, prune=False)
    [row] = rows(inbox)
    inbox.close()
    destination.close()
    # Retried, not failed: an operator creating the stream lets it through (docs/brokers.md).
    assert row["status"] == "pending" and row["attempts"] == 1
    assert f"no JetStream stream takes subject '{subject}'" in row["last_error"]


def test_an_unreachable_server_is_retried() -> None:
    url = f"nats://127.0.0.1:{free_port()}"  # nothing listens there
    destination = JetStreamDestination("orders", url=url, subject="orders.x", timeout=1)
    with pytest.raises(DeliveryError, match="cannot connect"):
        destination.deliver(message("k"))
    destination.close()


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"url": "http://127.0.0.1:4222"}, "url must be nats://"),
        ({"url": ""}, "url must be a NATS server URL"),
        ({"url": "nats://127.0.0.1:port"}, "is not a URL"),
        ({"subject": "orders.*"}, "without wildcards"),
        ({"subject": "orders..shipped"}, "without wildcards"),
        ({"subject": "orders shipped"}, "or spaces"),
        ({"subject": ""}, "subject must be a NATS subject"),
        ({"timeout": 0}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"headers": {"nats-msg-id": "x"}}, "Nats-Msg-Id is the message key"),
        ({"headers": {"X-Team": "a\r\nNats-Msg-Id: b"}}, "has a line break"),
    ],
)
def test_bad_arguments_are_refused_when_declared(
    arguments: dict[str, object], complaint: str
) -> None:
    given: dict[str, object] = {"url": "nats://127.0.0.1:4222", "subject": "orders.shipped"}
    with pytest.raises(ConfigurationError, match=complaint):
        JetStreamDestination("orders", **{**given, **arguments})  # type: ignore[arg-type]


# -- through a real relay ------------------------------------------------------------------


def send_orders(inbox: Inbox, count: int, *, ordering_key: str | None = None) -> None:
    @inbox.handler("stripe", "checkout.session.completed")
    def publish(event: Event, ctx: HandlerContext) -> None:
        order = event.payload["data"]["object"]["payment_intent"]
        ctx.outbox.send("orders", {"order": order}, key=order, ordering_key=ordering_key)

    for number in range(count):
        headers, body = stripe_delivery(checkout(number), SECRET)
        assert inbox.receive("stripe", headers, body).status_code == 200


def rows(inbox: Inbox) -> list[sa.RowMapping]:
    with inbox.store.engine.connect() as connection:
        return list(connection.execute(sa.select(outbox).order_by(outbox.c.id)).mappings())


def test_the_relay_publishes_each_message_once_in_order(db_url: str, stream: Stream) -> None:
    """On each database, and on each worker (the thread worker's `deliver`, the async
    worker's `adeliver`)."""
    inbox = Inbox(db_url)
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(JetStreamDestination("orders", url=stream.url, subject=stream.subject))
    send_orders(inbox, 5, ordering_key="customer-1")
    run_until_idle(inbox, WorkerOptions(handle_signals=False, relay_concurrency=4), prune=False)
    statuses = [row["status"] for row in rows(inbox)]
    inbox.close()
    assert statuses == ["delivered"] * 5
    assert stream.keys() == [f"pi_{number}" for number in range(5)]  # the order sent


# -- faults: the relay killed in the gap, the server killed mid-relay -------------------------


def queue_orders(db_url: str, count: int) -> list[str]:
    """Events processed with the relay off: `count` pending messages; their keys."""
    inbox = jetstream_shipping.build(db_url)
    for number in range(count):
        headers, body = stripe_delivery(checkout(number), jetstream_shipping.STRIPE_SECRET)
        assert inbox.receive("stripe", headers, body).status_code == 200
    run_until_idle(inbox, WorkerOptions(handle_signals=False), prune=False, relay=False)
    keys = [row["message_key"] for row in rows(inbox)]
    inbox.close()
    assert len(keys) == count
    return keys


def outbox_rows(db_url: str) -> list[sa.RowMapping]:
    store = Store(db_url)
    try:
        with store.engine.connect() as connection:
            return list(connection.execute(sa.select(outbox)).mappings())
    finally:
        store.dispose()


def delivered(db_url: str) -> int:
    return sum(row["status"] == "delivered" for row in outbox_rows(db_url))


def relay(db_url: str, env: dict[str, str], *args: str) -> WorkerProcess:
    return WorkerProcess(
        db_url,
        "--lease-seconds",
        "1",
        *args,
        env=env,
        command="relay",
        app="tests.apps.jetstream_shipping:inbox",
    )


@pytest.mark.slow
def test_a_relay_killed_between_the_puback_and_its_commit_doubles_nothing(
    nats_url: str, stream: Stream, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    keys = queue_orders(db_url, 10)
    env = {"NATS_URL": nats_url, "NATS_SUBJECT": stream.subject}
    for _ in range(3):  # each relay dies right after its first PubAck, before recording it
        killed = relay(db_url, {**env, "KILL_AFTER_PUBLISH": "1"}, "--relay-concurrency", "1")
        try:
            assert killed.wait(timeout=60) == -9, killed.describe()
        finally:
            killed.close()
    # Published and acked, never recorded: the gap the kills landed in.
    published = set(stream.keys())
    assert published and not any(row["status"] == "delivered" for row in outbox_rows(db_url)), (
        "a killed relay recorded a delivery"
    )
    survivor = relay(db_url, env)
    try:
        wait_for(
            lambda: delivered(db_url) == len(keys),
            timeout=60,
            what="every message delivered",
            describe=survivor.describe,
        )
        survivor.wait_ready()
        survivor.signal(15)
        assert survivor.wait(timeout=30) == 0, survivor.describe()
    finally:
        survivor.close()
    in_stream = Counter(stream.keys())
    assert set(in_stream) == set(keys)  # lost 0
    assert max(in_stream.values()) == 1  # doubled 0
    # The killed deliveries were published again, same key, and dropped by the stream.
    attempts = {row["message_key"]: row["attempts"] for row in outbox_rows(db_url)}
    assert all(attempts[key] >= 2 for key in published)
    assert sum(attempts.values()) >= len(keys) + 3  # one more attempt per kill


@pytest.mark.slow
def test_the_server_killed_and_restarted_mid_relay_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    count = 300
    keys = queue_orders(db_url, count)
    with private_server(tmp_path) as server, made_stream(server.url) as stream:
        worker = relay(db_url, {"NATS_URL": server.url, "NATS_SUBJECT": stream.subject})
        try:
            wait_for(
                lambda: delivered(db_url) >= count // 4,
                timeout=60,
                what="a quarter delivered",
                describe=worker.describe,
            )
            server.kill()  # mid-relay: publishes in flight are cut
            time.sleep(1.0)
            assert 0 < delivered(db_url) < count, "the kill did not land mid-relay"
            server.start()  # the same storage: the stream and its duplicate window survive
            wait_for(
                lambda: delivered(db_url) == count,
                timeout=90,
                what="every message delivered",
                describe=lambda: f"{delivered(db_url)} delivered; {worker.describe()}",
            )
        finally:
            worker.close()
        in_stream = Counter(stream.keys())
    assert set(in_stream) == set(keys)  # lost 0
    assert max(in_stream.values()) == 1  # doubled 0
    retried = [row for row in outbox_rows(db_url) if row["attempts"] > 1]
    assert retried, "no delivery was cut by the kill"
