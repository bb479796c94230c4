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
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._model import Message
from hookinbox._storage import Store
from hookinbox._storage._schema import outbox
from hookinbox.outbox import DeliveryError, RabbitMQDestination, Undeliverable
from hookinbox.sources import Stripe
from tests.apps import rabbit_shipping
from tests.outbox.rabbitmq import declare, delete, drain, private_node, unique_queue
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
