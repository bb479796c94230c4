"""The RabbitMQ destination against the real broker: confirms, persistence, message_id, routing.

Fault tests (SIGKILL between publish and commit, a broker killed mid-relay) run relays as real
processes (`hookinbox relay` on tests/apps/rabbit_shipping.py) and count by `message_id`, as a
consumer must (docs/brokers.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._model import Message
from hookinbox._storage import Store
from hookinbox._storage._schema import outbox
from hookinbox.outbox import DeliveryError, RabbitMQDestination, Undeliverable
from hookinbox.sources import Stripe
from tests.apps import rabbit_shipping
from tests.outbox.rabbitmq import Proxy, declare, delete, drain, private_node, unique_queue
from tests.outbox.test_relay_processes import queue_messages as queue_shipping_messages
from tests.processing.conftest import checkout
from tests.support.in_process import run_until_idle
from tests.support.signing import stripe_delivery
from tests.support.workers import Workers, wait_for

SECRET = "whsec_rabbitmq_tests"


@pytest.fixture
def queue(rabbitmq_url: str) -> Iterator[str]:
    name = unique_queue()
    declare(rabbitmq_url, name)
    yield name
    delete(rabbitmq_url, name)


def message(key: str, payload: object = None, attempts: int = 1) -> Message:
    return Message(
        row_id=1, destination="bus", key=key, payload=payload, ordering_key=None, source="stripe",
        event_id="evt_1", attempts=attempts, created_at=datetime.now(UTC),
    )  # fmt: skip


def test_a_confirmed_message_is_persistent_json_with_its_key_as_message_id(
    rabbitmq_url: str, queue: str
) -> None:
    destination = RabbitMQDestination("bus", rabbitmq_url, routing_key=queue, timeout=5)
    destination.deliver(message("stripe:evt_1:bus:0", {"order": "pi_1", "name": "Zoë"}))
    connection = destination._sync.connection if destination._sync else None
    destination.deliver(message("stripe:evt_2:bus:0", {"order": "pi_2"}))
    # One connection, kept: not one per message.
    assert destination._sync is not None and destination._sync.connection is connection
    destination.close()
    got = drain(rabbitmq_url, queue)
    assert [m.message_id for m in got] == ["stripe:evt_1:bus:0", "stripe:evt_2:bus:0"]
    first = got[0]
    assert first.delivery_mode == 2  # persistent
    assert first.content_type == "application/json"
    assert json.loads(first.body) == {"order": "pi_1", "name": "Zoë"}


def test_adeliver_publishes_on_the_running_loop(rabbitmq_url: str, queue: str) -> None:
    destination = RabbitMQDestination("bus", rabbitmq_url, routing_key=queue, headers={"x": "1"})

    async def send() -> None:
        await destination.adeliver(message("k:async", [1, 2]))
        await destination.aclose()

    asyncio.run(send())
    (got,) = drain(rabbitmq_url, queue)
    assert (got.message_id, json.loads(got.body), got.headers) == ("k:async", [1, 2], {"x": "1"})


def test_an_unroutable_message_is_undeliverable(rabbitmq_url: str) -> None:
    destination = RabbitMQDestination("bus", rabbitmq_url, routing_key=unique_queue())
    with pytest.raises(Undeliverable, match="to no queue"):
        destination.deliver(message("k:nowhere"))
    destination.close()


def test_a_nack_is_retried(rabbitmq_url: str) -> None:
    """A full queue that rejects publishes (x-overflow reject-publish) makes the broker nack."""
    name = unique_queue()
    declare(rabbitmq_url, name, {"x-max-length": 1, "x-overflow": "reject-publish"})
    destination = RabbitMQDestination("bus", rabbitmq_url, routing_key=name)
    try:
        destination.deliver(message("k:1"))
        with pytest.raises(DeliveryError, match="nacked") as caught:
            destination.deliver(message("k:2"))
        assert not isinstance(caught.value, Undeliverable)
        assert [m.message_id for m in drain(rabbitmq_url, name)] == ["k:1"]
        destination.deliver(message("k:2"))  # room again: the retry goes through
        assert [m.message_id for m in drain(rabbitmq_url, name)] == ["k:2"]
    finally:
        destination.close()
        delete(rabbitmq_url, name)


def test_a_missing_exchange_is_retried_and_named(rabbitmq_url: str) -> None:
    destination = RabbitMQDestination("bus", rabbitmq_url, exchange="no-such-exchange-here")
    with pytest.raises(DeliveryError, match="no-such-exchange-here"):
        destination.deliver(message("k:1"))
    destination.close()


def test_a_lost_connection_is_retried_and_the_next_delivery_reconnects(
    rabbitmq_url: str, queue: str
) -> None:
    parts = urlsplit(rabbitmq_url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5672))
    url = parts._replace(netloc=f"{parts.username}:{parts.password}@127.0.0.1:{proxy.port}")
    destination = RabbitMQDestination("bus", urlunsplit(url), routing_key=queue, timeout=5)
    try:
        destination.deliver(message("k:1"))
        first = destination._sync.connection if destination._sync else None
        assert proxy.cut() == 2  # the relay's one connection, both ways
        for _ in range(100):  # the client sees the reset; a delivery then may fail once
            if first is None or first.is_closed:
                break
            time.sleep(0.02)
        try:
            destination.deliver(message("k:2"))
        except DeliveryError:  # a lost connection: retried by the relay, as here
            destination.deliver(message("k:2"))
        assert destination._sync is not None and destination._sync.connection is not first
    finally:
        destination.close()
        proxy.close()
    assert [m.message_id for m in drain(rabbitmq_url, queue)] == ["k:1", "k:2"]


def test_a_broker_that_does_not_answer_times_out_and_is_retried() -> None:
    proxy = Proxy(("127.0.0.1", 9), silent=True)  # accepts, never speaks AMQP
    url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
    destination = RabbitMQDestination("bus", url, routing_key="q", timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(DeliveryError, match=r"within 0.5 s"):
            destination.deliver(message("k:1"))
    finally:
        destination.close()
        proxy.close()
    assert time.monotonic() - started < 5


def test_an_unreachable_broker_is_retried() -> None:
    destination = RabbitMQDestination("bus", "amqp://guest:guest@127.0.0.1:9/", routing_key="q")
    with pytest.raises(DeliveryError):
        destination.deliver(message("k:1"))
    destination.close()


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"url": "http://127.0.0.1:5672/", "routing_key": "q"}, "amqp://"),
        ({"url": "amqp://", "routing_key": "q"}, "no host"),
        ({"url": "amqp://h:99999/", "routing_key": "q"}, "not a URL"),
        ({"url": "amqp://h/"}, "needs a routing_key"),
        ({"url": "amqp://h/", "routing_key": "q" * 256}, "255 bytes"),
        ({"url": "amqp://h/", "routing_key": "q", "timeout": float("nan")}, "timeout"),
    ],
)
def test_bad_configuration_is_refused_at_construction(
    arguments: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        RabbitMQDestination("bus", **arguments)  # type: ignore[arg-type]


# -- through the relay -------------------------------------------------------------------


def outbox_rows(inbox: Inbox) -> list[sa.RowMapping]:
    with inbox.store.engine.connect() as connection:
        return list(connection.execute(sa.select(outbox).order_by(outbox.c.id)).mappings())


def relay_inbox(db_url: str, url: str, routing_key: str) -> Inbox:
    inbox = Inbox(db_url, outbox_retry=RetryPolicy(max_attempts=3))
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(RabbitMQDestination("bus", url, routing_key=routing_key, timeout=5))
    return inbox


def receive(inbox: Inbox, number: int) -> None:
    headers, body = stripe_delivery(checkout(number), SECRET)
    assert inbox.receive("stripe", headers, body).status_code == 200


def test_the_relay_publishes_in_order_per_key_and_fails_the_unroutable(
    db_url: str, rabbitmq_url: str, queue: str
) -> None:
    inbox = relay_inbox(db_url, rabbitmq_url, queue)
    inbox.add_destination(RabbitMQDestination("lost", rabbitmq_url, routing_key=unique_queue()))

    @inbox.handler("stripe", "checkout.session.completed")
    def ship(event: Event, ctx: HandlerContext) -> None:
        for step in range(5):
            for order in ("a", "b"):
                ctx.outbox.send("bus", {"order": order, "step": step}, ordering_key=order)
        ctx.outbox.send("lost", {"to": "nowhere"})

    receive(inbox, 1)
    run_until_idle(inbox, prune=False)
    statuses = Counter((row["destination"], row["status"]) for row in outbox_rows(inbox))
    assert statuses == {("bus", "delivered"): 10, ("lost", "failed"): 1}
    (lost,) = [row for row in outbox_rows(inbox) if row["destination"] == "lost"]
    assert "to no queue" in lost["last_error"]
    inbox.close()
    got = [json.loads(m.body) for m in drain(rabbitmq_url, queue)]
    for order in ("a", "b"):
        assert [p["step"] for p in got if p["order"] == order] == [0, 1, 2, 3, 4]


# -- faults: real processes, real SIGKILL ------------------------------------------------

MESSAGES = 60


def queue_messages(db_url: str, count: int) -> list[str]:
    return queue_shipping_messages(db_url, "", count, rabbit_shipping.build(db_url))


def delivered(store: Store) -> int:
    with store.engine.connect() as connection:
        query = sa.select(sa.func.count()).where(outbox.c.status == "delivered")
        return int(connection.execute(query).scalar_one())


def relays(db_url: str, env: dict[str, str], concurrency: int = 4) -> Workers:
    return Workers(
        db_url, "--lease-seconds", "1", "--relay-concurrency", str(concurrency), env=env,
        command="relay", app="tests.apps.rabbit_shipping:inbox",
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("driver", ["sync"], indirect=True)
def test_a_relay_killed_after_the_confirm_publishes_again_and_ids_dedupe(
    db_url: str, rabbitmq_url: str, queue: str, tmp_path: Path
) -> None:
    keys = queue_messages(db_url, MESSAGES)
    held = sorted(keys)[MESSAGES // 2]
    hold_file = tmp_path / "published"
    env = {
        "RABBIT_URL": rabbitmq_url, "RABBIT_QUEUE": queue,
        "RABBIT_HOLD_KEY": held, "RABBIT_HOLD_FILE": str(hold_file),
    }  # fmt: skip
    store = Store(db_url)
    # One delivery at a time: the held one is the only message published and not recorded.
    with relays(db_url, env, concurrency=1) as running:
        running.start(1)
        wait_for(hold_file.exists, timeout=60, what="the held publish", describe=running.describe)
        # Published and confirmed by the broker; the outbox row still says `delivering`.
        (victim,) = running.live
        victim.kill()  # SIGKILL
        running.retire(victim)
        running.start(1)
        wait_for(
            lambda: delivered(store) == MESSAGES,
            timeout=60,
            what="every message delivered",
            describe=running.describe,
        )
        assert set(running.terminate_all(timeout=30).values()) == {0}
    store.dispose()
    ids = Counter(m.message_id for m in drain(rabbitmq_url, queue))
    assert set(ids) == set(keys)  # lost 0
    assert ids[held] == 2  # the broker got it twice: the relay could not know it had sent it
    assert {key for key, n in ids.items() if n > 1} == {held}  # by message_id, doubled 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("driver", ["sync"], indirect=True)
def test_a_broker_killed_mid_relay_loses_nothing(db_url: str) -> None:
    """A private node (never the system's), SIGKILLed while the relay publishes, restarted on
    its data: every message is in the queue, each once by message_id."""
    if os.geteuid() != 0:
        pytest.skip("a private RabbitMQ node is started as the rabbitmq user: needs root")
    keys = queue_messages(db_url, MESSAGES * 6)
    store = Store(db_url)
    with private_node() as node:
        queue = unique_queue()
        declare(node.url, queue)
        env = {"RABBIT_URL": node.url, "RABBIT_QUEUE": queue}
        with relays(db_url, env) as running:
            running.start(1)
            wait_for(lambda: delivered(store) >= 20, timeout=60, what="the relay under way")
            node.stop(signal.SIGKILL)
            cut_at = delivered(store)
            node.start()
            wait_for(
                lambda: delivered(store) == len(keys),
                timeout=90,
                what="every message delivered after the restart",
                describe=running.describe,
            )
            assert set(running.terminate_all(timeout=30).values()) == {0}
        ids = Counter(m.message_id for m in drain(node.url, queue))
    with store.engine.connect() as connection:
        query = sa.select(sa.func.count()).where(outbox.c.attempts > 1)
        retried = connection.execute(query).scalar_one()
    store.dispose()
    assert cut_at < len(keys)  # the broker died with messages still to send
    assert set(ids) == set(keys)  # lost 0: each confirmed message survived the kill
    assert retried >= 1  # the cut failed deliveries, which the relay retried


def test_a_traced_send_carries_its_traceparent(db_url: str, rabbitmq_url: str, queue: str) -> None:
    """The relay's `send` span is current in the relay's thread, not on the destination's loop:
    the header is made where the span is."""
    from tests.support.otel import recording

    inbox = relay_inbox(db_url, rabbitmq_url, queue)

    @inbox.handler("stripe", "checkout.session.completed")
    def ship(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("bus", {"order": 1})

    with recording() as exported:
        receive(inbox, 1)
        run_until_idle(inbox, prune=False)
    inbox.close()
    (send,) = [span for span in exported.get_finished_spans() if span.name == "send bus"]
    assert send.attributes and send.attributes["hookinbox.outcome"] == "delivered"
    (got,) = drain(rabbitmq_url, queue)
    context = send.context
    assert context is not None
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-"  # then the trace flags
    assert str(got.headers["traceparent"]).startswith(expected)
